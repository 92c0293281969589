"""Gateway test helpers: `agent-sdk serve` as a real subprocess on a loopback port, projects made on disk,
and the "everything" reference server as an upstream we did not write."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2
import pytest

from tests.conftest import free_port
from tests.oauth.peers import AuthServer, ResourceServer, oidc_provider, resource_server
from tests.peers import node_bin
from tests.processes import running, wait_for_port

if TYPE_CHECKING:
    from .oauth_peers import Issuer

HERE = Path(__file__).resolve().parent
BASIC = HERE / "projects" / "basic"
ROOT = HERE.parent.parent


@dataclass
class Served:
    """One `agent-sdk serve` process."""

    proc: subprocess.Popen[bytes]
    url: str
    port: int
    state_root: Path
    log: Path
    headers: dict[str, str] = field(default_factory=dict[str, str])
    """Sent on every request of `client()` (e.g. the operator's bearer token on a hub)."""

    def stop(self, sig: int = signal.SIGINT) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def client(self, headers: dict[str, str] | None = None, **kwargs: object) -> httpx2.Client:
        """A client of this server; `headers` go on top of `self.headers`."""
        merged = {**self.headers, **(headers or {})}
        return httpx2.Client(base_url=self.url, timeout=30.0, headers=merged, **kwargs)  # type: ignore[arg-type]


def serve(
    project: Path,
    state_root: Path,
    *flags: str,
    env: dict[str, str] | None = None,
    port: int | None = None,
    launcher: Sequence[str] | None = None,
) -> Served:
    """Start `agent-sdk serve` and wait until it answers `/v1/health`; `launcher` runs it instead of this
    interpreter (e.g. `opentelemetry-instrument agent-sdk`, as an operator turns tracing on)."""
    port = port or free_port()
    log = state_root.parent / f"serve-{port}.log"
    state_root.mkdir(parents=True, exist_ok=True)
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SDK_") or k == "AGENT_SDK_PEERS"}
    full_env = {**inherited, "PYTHONPATH": str(ROOT), **(env or {})}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                *(launcher or (sys.executable, "-c", "from gateway.cli import entrypoint; entrypoint()")),
                "serve",
                "--dir",
                str(project),
                "--port",
                str(port),
                "--state-root",
                str(state_root),
                *flags,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=full_env,
        )
    served = Served(proc, f"http://127.0.0.1:{port}", port, state_root, log)
    try:
        wait_for_port(port, proc, "agent-sdk serve")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx2.get(f"{served.url}/v1/health", timeout=2).status_code == 200:
                    return served
            except httpx2.HTTPError:
                pass
            time.sleep(0.05)
    except BaseException:
        served.stop()
        raise
    served.stop()
    pytest.fail(f"agent-sdk serve did not become healthy:\n{served.log_text()}")


def make_project(root: Path, connections: dict[str, str] | None = None, *, tools: bool = True) -> Path:
    """A project folder: the basic authored tools plus `connections` (name -> definition file body)."""
    if tools:
        shutil.copytree(BASIC / "agent" / "tools", root / "agent" / "tools", dirs_exist_ok=True)
    for name, body in (connections or {}).items():
        folder = root / "agent" / "mcp-connections"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.py").write_text(body)
    return root


def url_connection(url: str, *, advertise: bool = True, protocol: str = "auto") -> str:
    return (
        "from connections import define_connection\n\n"
        f"connection = define_connection(url={url!r}, advertise_tools={advertise!r}, protocol={protocol!r})\n"
    )


@dataclass
class Upstream:
    url: str
    proc: subprocess.Popen[bytes]


@contextmanager
def everything_upstream() -> Iterator[Upstream]:
    """The MCP reference server "everything" over Streamable HTTP (endpoint /mcp), stopped afterwards."""
    port = free_port()
    cmd = [str(node_bin("mcp-server-everything")), "streamableHttp"]
    with running(cmd, port=port, env={"PORT": str(port)}, what="mcp-server-everything") as proc:
        yield Upstream(f"http://127.0.0.1:{port}/mcp", proc)


@pytest.fixture(scope="session")
def everything() -> Iterator[Upstream]:
    with everything_upstream() as upstream:
        yield upstream


@pytest.fixture(scope="module")
def auth_server(request: pytest.FixtureRequest) -> Iterator[AuthServer]:
    """oidc-provider for this module; its access tokens live the module's `ACCESS_TOKEN_TTL` (else an hour)."""
    with oidc_provider(getattr(request.module, "ACCESS_TOKEN_TTL", 3600)) as server:
        yield server


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Issuer]:
    """An oidc-provider that issues JWT access tokens for the gateway's resource (`oauth_peers.issuer`), per module."""
    from .oauth_peers import issuer  # oauth_peers imports this module

    with issuer(tmp_path_factory.mktemp("idp")) as found:
        yield found


@pytest.fixture(scope="module")
def resource(auth_server: AuthServer) -> Iterator[ResourceServer]:
    """The audience-checking MCP server behind `auth_server`."""
    with resource_server(auth_server.issuer) as server:
        yield server


def assert_clean(body: str, secrets: Sequence[str] = ()) -> None:
    """No traceback and no secret in a response body or a log."""
    assert "Traceback" not in body
    assert 'File "' not in body
    for secret in secrets:
        assert secret not in body


@contextmanager
def serving(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    connections: dict[str, str],
    *flags: str,
    env: dict[str, str] | None = None,
    launcher: Sequence[str] | None = None,
) -> Iterator[Served]:
    """`agent-sdk serve` on a fresh project with `connections`; stopped afterwards, its log checked clean."""
    root = tmp_path_factory.mktemp(name)
    served = serve(make_project(root / "project", connections), root / "state", *flags, env=env, launcher=launcher)
    try:
        yield served
    finally:
        served.stop()
    assert_clean(served.log_text())


def sent_as(how: str, tool: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A call of `tool` made `direct`ly, or through discovery mode's `call_tool` (docs/discovery.md): the name and
    arguments a peer sends."""
    return (tool, arguments) if how == "direct" else ("call_tool", {"name": tool, "arguments": arguments})
