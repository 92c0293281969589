"""Start the oauth tests' real peers: oidc-provider (npm) and the audience-checking MCP resource server."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2

from tests.conftest import free_port
from tests.peers import ROOT, node22, node_module
from tests.processes import running

HERE = Path(__file__).resolve().parent


@contextmanager
def _running(
    cmd: list[str], port: int, what: str, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    with running(cmd, port=port, cwd=ROOT, what=what, env=env) as proc:
        yield proc


@dataclass(frozen=True)
class AuthServer:
    """A running oidc-provider."""

    issuer: str

    def stats(self) -> dict[str, Any]:
        """Counters from the provider's events: grants by type, errors by code, codes issued."""
        return httpx2.get(f"{self.issuer}/_stats").json()


@dataclass(frozen=True)
class ResourceServer:
    """A running MCP resource server that accepts only JWTs for its own audience."""

    base: str

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    def reject_next(self) -> None:
        httpx2.post(f"{self.base}/_control/reject-next")

    def require_scope(self, scope: str | None) -> None:
        """From now on a token without `scope` gets 403 insufficient_scope naming it (a step-up challenge);
        None: no scope is required beyond a valid token again."""
        httpx2.post(f"{self.base}/_control/require-scope", params={"scope": scope} if scope else {})

    def stats(self) -> dict[str, Any]:
        return httpx2.get(f"{self.base}/_control/stats").json()


@contextmanager
def oidc_provider(
    access_token_ttl: int,
    *,
    port: int = 0,
    key_file: Path | None = None,
    groups: dict[str, list[str]] | None = None,
    clients: list[dict[str, Any]] | None = None,
    dpop_bound_clients: bool = False,
) -> Iterator[AuthServer]:
    """oidc-provider with PKCE required, DCR, RFC 8707 JWT access tokens and refresh-token rotation.

    `port` and `key_file` let a test restart it as the same server that forgot every registration; `groups`:
    a `groups` claim in the access tokens of those accounts; `clients`: more static clients (oidc-provider's
    client metadata); `dpop_bound_clients`: every client it registers gets `dpop_bound_access_tokens` (no
    token without a DPoP proof)."""
    port = port or free_port()
    package = node_module("oidc-provider", "package.json").parent
    cmd = [str(node22()), str(HERE / "oidc_provider.mjs"), str(port), str(access_token_ttl), str(package)]
    if key_file is not None:
        cmd.append(str(key_file))
    with _running(
        cmd,
        port,
        "oidc-provider",
        {
            "OIDC_GROUPS": json.dumps(groups or {}),
            "OIDC_CLIENTS": json.dumps(clients or []),
            "OIDC_DPOP_BOUND_CLIENTS": "1" if dpop_bound_clients else "",
        },
    ):
        yield AuthServer(f"http://127.0.0.1:{port}")


@contextmanager
def exchange_provider(config: dict[str, Any], *, port: int = 0) -> Iterator[AuthServer]:
    """oidc-provider with the token-exchange and JWT-bearer grants registered (`exchange_provider.mjs`, which
    says what `config` holds): an enterprise IdP or an upstream's authorization server."""
    port = port or free_port()
    package = node_module("oidc-provider", "package.json").parent
    cmd = [str(node22()), str(HERE / "exchange_provider.mjs"), str(port), str(package), json.dumps(config)]
    with _running(cmd, port, "oidc-provider (exchange grants)"):
        yield AuthServer(f"http://127.0.0.1:{port}")


@contextmanager
def resource_server(issuer: str, *, port: int = 0, dpop_required: bool = False) -> Iterator[ResourceServer]:
    """The MCP resource server in its own process, trusting `issuer` (taking DPoP-bound tokens only, and saying
    so in its RFC 9728 metadata, with `dpop_required`)."""
    port = port or free_port()
    cmd = [sys.executable, "-W", "ignore", str(HERE / "resource_server.py"), str(port), issuer]
    cmd += ["dpop-required"] if dpop_required else []
    with _running(cmd, port, "the MCP resource server"):
        yield ResourceServer(f"http://127.0.0.1:{port}")


@contextmanager
def bad_server() -> Iterator[str]:
    """`bad_server.py` (misbehaving authorization servers); yields its base URL."""
    port = free_port()
    cmd = [sys.executable, "-W", "ignore", str(HERE / "bad_server.py"), str(port)]
    with _running(cmd, port, "the misbehaving authorization server"):
        yield f"http://127.0.0.1:{port}"


@contextmanager
def sdk_bearer_server(issuer: str, *, port: int = 0) -> Iterator[ResourceServer]:
    """`sdk_bearer_server.py`: an MCP server behind the `mcp` SDK's own Bearer-only auth, trusting `issuer`."""
    port = port or free_port()
    cmd = [sys.executable, "-W", "ignore", str(HERE / "sdk_bearer_server.py"), str(port), issuer]
    with _running(cmd, port, "the MCP SDK's Bearer-only server"):
        yield ResourceServer(f"http://127.0.0.1:{port}")
