"""The real parties of the caller-credential tests (docs/oauth.md "Token exchange", "ID-JAG"):

- an enterprise IdP (oidc-provider with the token-exchange grant registered, `exchange_provider.mjs`) that
  signs the people in (`person_token`) and is the gateway's `--oauth-issuer`;
- an upstream's own authorization server (a second oidc-provider, with the JWT bearer grant redeeming the
  IdP's ID-JAGs);
- two audience-checking MCP resource servers (`tests/oauth/resource_server.py`, tool `whoami` answering the
  token's `sub`): `direct` trusts the IdP's tokens, `behind` trusts only its own authorization server's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import httpx2

from tests.conftest import free_port
from tests.oauth.peers import AuthServer, ResourceServer, exchange_provider, resource_server

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
SECRETS = {
    "GATEWAY_IDP_SECRET": "gateway-idp-secret-0123456789",
    "GATEWAY_MISDIRECTED_SECRET": "gateway-misdirected-0123456789",
    "GATEWAY_UPSTREAM_SECRET": "gateway-upstream-secret-0123456789",
}
ELSEWHERE = "http://127.0.0.1:9/another-authorization-server"
UNTRUSTED_CLIENT = "an untrusted client"
"""The IdP refuses to exchange tokens issued to a client registered with this `client_name` (invalid_grant)."""


@dataclass(frozen=True)
class World:
    idp: AuthServer
    upstream_as: AuthServer
    direct: ResourceServer
    behind: ResourceServer
    gateway_ports: tuple[int, ...]

    def gateway_resource(self, index: int) -> str:
        return f"http://127.0.0.1:{self.gateway_ports[index]}/v1/mcp/tools"


@contextmanager
def caller_world(gateways: int = 2) -> Iterator[World]:
    idp_port, as_port, direct_port, behind_port = (free_port() for _ in range(4))
    gateway_ports = tuple(free_port() for _ in range(gateways))
    idp_url, as_url = f"http://127.0.0.1:{idp_port}", f"http://127.0.0.1:{as_port}"
    direct, behind = f"http://127.0.0.1:{direct_port}/mcp", f"http://127.0.0.1:{behind_port}/mcp"
    peers = [f"http://127.0.0.1:{port}/v1/mcp/tools" for port in gateway_ports]
    idp_config: dict[str, Any] = {
        "clients": [
            {"client_id": "gateway", "client_secret": SECRETS["GATEWAY_IDP_SECRET"]},
            {"client_id": "gateway-misdirected", "client_secret": SECRETS["GATEWAY_MISDIRECTED_SECRET"]},
        ],
        # The people's tokens for the gateways, and exchanged ones for `direct` only (`behind` is not its).
        "resources": {**dict.fromkeys(peers, "mcp:tools"), direct: "mcp:tools"},
        "subjectAudiences": peers,
        "refuseSubjects": ["mallory"],
        "refuseClientNames": [UNTRUSTED_CLIENT],
        "idJagAudiences": [as_url],
        "idJagClients": {"gateway": "gateway-at-upstream", "gateway-misdirected": "gateway-at-upstream"},
        "misdirect": {"gateway-misdirected": ELSEWHERE},
    }
    as_config: dict[str, Any] = {
        "clients": [{"client_id": "gateway-at-upstream", "client_secret": SECRETS["GATEWAY_UPSTREAM_SECRET"]}],
        "resources": {behind: "mcp:tools"},
        "trustIdp": idp_url,
    }
    with ExitStack() as stack:
        idp = stack.enter_context(exchange_provider(idp_config, port=idp_port))
        upstream_as = stack.enter_context(exchange_provider(as_config, port=as_port))
        direct_server = stack.enter_context(resource_server(idp_url, port=direct_port))
        behind_server = stack.enter_context(resource_server(as_url, port=behind_port))
        yield World(idp, upstream_as, direct_server, behind_server, gateway_ports)


def caller_connection(url: str, **config: str) -> str:
    """A definition file: `url`, advertised, with `OAuthConfig(**config)`."""
    fields = ", ".join(f"{key}={value!r}" for key, value in config.items())
    return (
        "from connections import define_connection\n"
        "from oauth import OAuthConfig\n\n"
        f"connection = define_connection(url={url!r}, advertise_tools=True, oauth=OAuthConfig({fields}))\n"
    )


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def call(gateway_url: str, token: str, tool: str, *, version: str = "2025-11-25") -> dict[str, Any]:
    """One `tools/call` on the gateway's `/v1/mcp/tools` as the holder of `token`: the JSON-RPC answer."""
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": version,
    }
    params: dict[str, Any] = {"name": tool, "arguments": {}}
    if version >= "2026":  # the stateless generation: the envelope travels in every request's `_meta`
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        headers.update({"Mcp-Method": "tools/call", "Mcp-Name": tool})
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    answer = httpx2.post(f"{gateway_url}/v1/mcp/tools", json=body, headers=headers, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json()


def text_of(answer: dict[str, Any]) -> str:
    result = answer["result"]
    assert not result.get("isError"), result
    return result["content"][0]["text"]
