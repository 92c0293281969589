"""The gateway's account surface (docs/accounts.md): the hub API and the local bridge.

- **Hub** (`serve --hub`): `GET /v1/hub/connectors` lists the calling account's linked connectors
  (the project's `linkable=True` connections its API key may use); `POST
  /v1/hub/connectors/{name}/mcp` is a stateless Streamable HTTP MCP endpoint that forwards
  `tools/list` and `tools/call` to this gateway's own pooled client for that connection, with
  this gateway's credentials (stored OAuth tokens, static headers). API-key bearer auth; an
  unknown connector, or one the key may not use, is 404 (existence is not revealed).
- **Bridge**: `POST /v1/account/{connection}/mcp` forwards MCP to an account connection for
  processes on this host, with a per-boot secret (`Authorization: Bearer`), handed to stdio
  children that opt in (`bridge=True`) as `AGENT_SDK_BRIDGE_URL` / `AGENT_SDK_BRIDGE_SECRET`.
  Loopback peers only, with a loopback `Host` and no foreign `Origin`.

Neither runs the CLI auth chain: `AccountGate` sends their paths around it (hub peers come from
other machines; the bridge has its own secret). Both reuse `McpEndpoint` (POST only, JSON-RPC
envelope check) with session managers of their own (`hub`, `bridge`).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import mcp_types as mt
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from connections import ConnectionDefinition, ConnectionsError, Project, UnknownTool
from connections.serving import remember_secret
from oauth._shared import Secret

from ..http._asgi import forwarding_header, header, is_loopback_address, json_error, send_json_error, send_rpc_error
from ..http.proxies import PROXIED_BY
from ..mcp.endpoints import McpEndpoint, session_manager
from ..settings import ServeSettings
from .hub_keys import HubKey, HubKeyError, HubKeys

__all__ = [
    "BRIDGE_SECRET_ENV",
    "BRIDGE_URL_ENV",
    "AccountGate",
    "AccountServices",
    "BridgeSecret",
    "account_managers",
    "account_routes",
    "linkable_connections",
]

BRIDGE_URL_ENV = "AGENT_SDK_BRIDGE_URL"
BRIDGE_SECRET_ENV = "AGENT_SDK_BRIDGE_SECRET"
_VERSION = "0.1.0"


def linkable_connections(project: Project) -> dict[str, ConnectionDefinition]:
    """What a hub offers: `linkable=True` connections that reach an upstream themselves (not accounts)."""
    return {
        name: d
        for name, d in sorted(project.connections.items())
        if d.linkable and d.kind != "account" and d.auth is None
    }


@dataclass(frozen=True, slots=True)
class BridgeSecret:
    """The bridge's per-boot secret and the URL children reach it on. `repr` never shows the secret."""

    secret: Secret
    url: str

    @classmethod
    def create(cls, settings: ServeSettings) -> BridgeSecret:
        """A fresh random secret (`secrets.token_urlsafe(32)`) for this boot."""
        host = settings.host
        if host in ("0.0.0.0", "", "*"):
            host = "127.0.0.1"
        elif host in ("::", "[::]", "::1"):
            host = "[::1]"
        secret = secrets.token_urlsafe(32)
        remember_secret(secret)  # masked in every message and log line of this process
        return cls(Secret(secret), f"http://{host}:{settings.port}/v1/account")

    def child_env(self) -> dict[str, str]:
        """What a `bridge=True` stdio child gets: the bridge's base URL and the secret."""
        return {BRIDGE_URL_ENV: self.url, BRIDGE_SECRET_ENV: self.secret.reveal()}

    def admits(self, presented: str) -> bool:
        """Constant-time comparison of SHA-256 digests (equal lengths, no early exit)."""
        want = hashlib.sha256(self.secret.reveal().encode()).digest()
        return hmac.compare_digest(hashlib.sha256(presented.encode()).digest(), want)


@dataclass(slots=True)
class AccountServices:
    """What the hub and bridge routes need, made in the app's lifespan (`request.state.accounts`)."""

    project: Project
    host: Any
    """`host.mcp`-like: `list_tools(name, use_cache=)`, `call_tool(name, tool, args)` on the shared pool."""
    bridge: BridgeSecret | None
    keys: HubKeys | None
    """Set when this gateway serves as a hub."""
    pool: Any = None
    linkable: dict[str, ConnectionDefinition] = field(init=False)

    def __post_init__(self) -> None:
        self.linkable = linkable_connections(self.project)

    def resolved(self, name: str) -> list[str] | None:
        """The hub connectors account connection `name` resolved to last (None before its first use)."""
        getter = getattr(self.pool, "account_connectors", None)
        found = getter(name) if getter is not None else None
        return list(found) if found is not None else None

    def annotate_info(self, doc: dict[str, Any]) -> None:
        """Add each account connection's resolved `connectors`, and the hub's linkable names, to /v1/info."""
        for entry in doc.get("connections", []):
            if entry.get("kind") == "account":
                entry["connectors"] = self.resolved(entry["name"])
        if self.keys is not None:
            doc["hub"] = {"linkable": sorted(self.linkable), "connectors": "/v1/hub/connectors"}


def _services(scope: Scope) -> AccountServices:
    return scope["state"]["accounts"]


def _bearer(scope: Scope) -> str | None:
    scheme, _, presented = (header(scope, b"authorization") or "").partition(" ")
    presented = presented.strip()
    return presented if scheme.lower() == "bearer" and presented else None


def _refuse(
    send: Send, status: int, code: str, message: str, *, rpc: bool, headers: Iterable[tuple[bytes, bytes]] = ()
) -> Awaitable[None]:
    if rpc:
        data = {"error": code}
        return send_rpc_error(send, status, -32001 if status in (401, 403) else -32600, message, data, headers)
    return send_json_error(send, status, code, message, headers)


_CHALLENGE = [(b"www-authenticate", b'Bearer realm="agent-sdk-hub"')]


def _hub_key(scope: Scope, services: AccountServices) -> HubKey | None:
    presented = _bearer(scope)
    if presented is None or services.keys is None:
        return None
    try:
        return services.keys.authenticate(presented)
    except HubKeyError:
        return None  # a damaged key file admits no one (the operator sees it in `hub keys list`)


# -- the MCP servers behind both endpoints ------------------------------------------------------------


def _target(ctx: ServerRequestContext[Any, Any]) -> tuple[AccountServices, str]:
    request: Any = ctx.request
    state = request.scope["state"]
    return state["accounts"], state["account_target"]


def _mcp_error(exc: ConnectionsError) -> MCPError:
    return MCPError(mt.INTERNAL_ERROR, str(exc)[:500], data={"error": exc.code})


def forwarding_server(name: str) -> Server[Any]:
    """A lowlevel MCP server whose `tools/list` and `tools/call` go to the pooled connection the
    endpoint put in `scope["state"]["account_target"]` (a hub connector, or an account connection)."""

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], _params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        services, target = _target(ctx)
        try:
            tools = await services.host.list_tools(target, use_cache=True)
        except ConnectionsError as exc:
            raise _mcp_error(exc) from None
        return mt.ListToolsResult(tools=tools)

    async def call(ctx: ServerRequestContext[Any, Any], params: mt.CallToolRequestParams) -> mt.CallToolResult:
        services, target = _target(ctx)
        try:
            return await services.host.call_tool(target, params.name, dict(params.arguments or {}))
        except UnknownTool:
            raise MCPError(mt.INVALID_PARAMS, f"Unknown tool: {params.name[:64]}") from None
        except ConnectionsError as exc:
            raise _mcp_error(exc) from None

    return Server(name, version=_VERSION, on_list_tools=list_tools, on_call_tool=call)


def account_managers(settings: ServeSettings) -> dict[str, StreamableHTTPSessionManager]:
    """The session managers of the hub endpoint (with `--hub`) and the bridge."""
    managers = {"bridge": session_manager(forwarding_server("agent-sdk-account-bridge"), settings.max_body_bytes)}
    if settings.hub:
        managers["hub"] = session_manager(forwarding_server("agent-sdk-hub"), settings.max_body_bytes)
    return managers


# -- endpoints ---------------------------------------------------------------------------------------------


class _Forwarding:
    """POST-only MCP endpoint that admits the request itself, then hands it to `McpEndpoint(key)`."""

    def __init__(self, key: Literal["hub", "bridge"]) -> None:
        self.key = key
        self.inner = McpEndpoint(key)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method") != "POST":
            await _refuse(
                send, 405, "method_not_allowed", "this stateless MCP endpoint takes POST only", rpc=True,
                headers=[(b"allow", b"POST")],
            )  # fmt: skip
            return
        services = _services(scope)
        if services.host is None:  # a custom broker without a host registry: nothing to forward to
            await _refuse(send, 404, "not_found", "this gateway has no host registry to forward to", rpc=True)
            return
        target = await (self._hub(scope, send, services) if self.key == "hub" else self._bridge(scope, send, services))
        if target is None:
            return
        scope["state"]["account_target"] = target
        await self.inner(scope, receive, send)

    async def _hub(self, scope: Scope, send: Send, services: AccountServices) -> str | None:
        if services.keys is None:
            await _refuse(send, 404, "not_found", "this gateway does not serve as a hub", rpc=True)
            return None
        record = _hub_key(scope, services)
        if record is None:
            await _refuse(send, 401, "unauthorized", "send a valid hub API key", rpc=True, headers=_CHALLENGE)
            return None
        name: str = scope.get("path_params", {}).get("name", "")
        if name not in services.linkable or not record.allows(name):
            await _refuse(send, 404, "unknown_connector", "no such connector for this account", rpc=True)
            return None
        return name

    async def _bridge(self, scope: Scope, send: Send, services: AccountServices) -> str | None:
        client = scope.get("client")
        loopback = client is not None and is_loopback_address(client[0])
        if not loopback or forwarding_header(scope) is not None or PROXIED_BY in (scope.get("extensions") or {}):
            await _refuse(send, 403, "forbidden", "the account bridge admits direct loopback peers only", rpc=True)
            return None
        presented = _bearer(scope)
        if services.bridge is None or presented is None or not services.bridge.admits(presented):
            await _refuse(
                send, 401, "unauthorized", f"send Authorization: Bearer ${BRIDGE_SECRET_ENV}", rpc=True,
                headers=[(b"www-authenticate", b'Bearer realm="agent-sdk-bridge"')],
            )  # fmt: skip
            return None
        name: str = scope.get("path_params", {}).get("connection", "")
        defn = services.project.connections.get(name)
        if defn is None or defn.kind != "account":
            await _refuse(send, 404, "unknown_connection", "no account connection by that name", rpc=True)
            return None
        return name


async def hub_connectors(request: Request) -> Response:
    """`GET /v1/hub/connectors`: the calling account's connectors."""
    services = _services(request.scope)
    if services.keys is None:
        return JSONResponse(json_error("not_found", "this gateway does not serve as a hub"), status_code=404)
    record = _hub_key(request.scope, services)
    if record is None:
        return JSONResponse(
            json_error("unauthorized", "send a valid hub API key"),
            status_code=401,
            headers={"WWW-Authenticate": 'Bearer realm="agent-sdk-hub"'},
        )
    connectors = [
        {
            "name": name,
            "kind": defn.kind,
            "mcp": f"/v1/hub/connectors/{name}/mcp",
            **({"description": defn.description} if defn.description else {}),
        }
        for name, defn in services.linkable.items()
        if record.allows(name)
    ]
    return JSONResponse({"ok": True, "account": record.account, "connectors": connectors})


def account_routes() -> list[BaseRoute]:
    """The hub's two routes and the bridge's; `AccountGate` keeps the CLI auth chain off them."""
    return [
        Route("/v1/hub/connectors", hub_connectors, methods=["GET"]),
        Route("/v1/hub/connectors/{name}/mcp", _Forwarding("hub")),
        Route("/v1/account/{connection}/mcp", _Forwarding("bridge")),
    ]


class AccountGate:
    """Pure ASGI: the hub's paths (with `--hub`) go to `direct`, the bridge's to `bridge` (the
    loopback Host guard, then `direct`), everything else to `chained` (the auth chain). The routes
    behind `direct` authenticate each request themselves; the request guard in front of this gate
    has already checked the Host's form and the Origin."""

    def __init__(self, chained: ASGIApp, direct: ASGIApp, *, hub: bool, bridge: ASGIApp | None = None) -> None:
        self.chained = chained
        self.direct = direct
        self.bridge = bridge or direct
        self.hub = hub

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # A plain function handing back the app's coroutine (no frame of its own per resume): the
        # request guard in front of it is the outermost app, with the `async def` servers look for.
        if scope["type"] == "http":
            path = str(scope.get("path", ""))
            if path.startswith("/v1/account/"):
                return self.bridge(scope, receive, send)
            if self.hub and path.startswith("/v1/hub/"):
                return self.direct(scope, receive, send)
        return self.chained(scope, receive, send)
