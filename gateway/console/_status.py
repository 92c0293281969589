"""`GET /v1/connections` (each connection's transport, state with its cause, tools, OAuth status) and
`POST /v1/connections/{name}/restart` (operators only). The console reads the first; scripts can too.

States: `ready` (a session is open), `opening`, `not_opened` (lazy: never used yet), `needs_login`
(an `oauth=True` connection without usable tokens), `failing` (the last open or operation failed;
`cause` is the sentence), `paused` (restarts paused after a crash loop). `drift`: for a connection
`mcp.lock` pins, each way its listing differs from the lock, with the diff (docs/connections.md).
Listing uses the pool's listing cache, so a poll costs no upstream round trip while the listing is
fresh; a connection whose last open failed is not retried by looking (a real use or a restart retries it).
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as mt
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from connections import ConnectionDefinition, ConnectionsError, ConnectionUnauthorized, UnknownConnection
from connections.serving import PinGuard, definition_diff
from oauth import OAuthError, StoreKey, grant_status
from oauth._shared import printable

from ..auth.roles import is_operator, require_operator
from ..errors import ApiError, InvalidRequest
from ..http.json_answers import error_response
from ..policy import connection_target, named_tool_target, require, tools_shown
from ..runtime import principal_of, runtime_of
from ._services import ConsoleServices, console_of, record_action

__all__ = ["status_routes"]

_LIST_WAIT = 10.0
"""Seconds one status request waits for a listing; a connection still opening then shows `opening`."""


class ConnectionNotFound(ApiError):
    status = 404
    code = "unknown_connection"


async def _oauth_status(
    services: ConsoleServices, defn: ConnectionDefinition, viewer: str, asked: str | None
) -> dict[str, Any] | None:
    """The connection's grant; for `grants="per_principal"`, how many principals signed in (never who) and
    the state of `viewer`'s own grant, or of principal `asked` (an operator looking at one principal)."""
    if defn.oauth is None or defn.url is None:
        return None
    out: dict[str, Any] = {"store": services.store.name, "loggedIn": False, "expiresIn": None, "refreshToken": False}
    principal = ""
    if defn.grants == "per_principal":
        principal = asked if asked is not None else viewer
        out["grants"] = "per_principal"
        out["principal"] = "asked" if asked is not None else "you"
        try:
            keys = await services.store.keys()
        except OAuthError as exc:
            out["error"] = printable(str(exc))
            return out
        out["principals"] = sum(1 for k in keys if k.connection == defn.name and k.resource == defn.url and k.principal)
    try:
        grant = await services.store.load(StoreKey(defn.name, defn.url, principal))
    except OAuthError as exc:
        out["error"] = printable(str(exc))
        return out
    if grant is not None:
        status = grant_status(grant)
        out.update(
            loggedIn=status.has_access_token,
            expiresIn=None if status.expires_in is None else int(status.expires_in),
            refreshToken=status.has_refresh_token,
            issuer=printable(status.issuer),
        )
    return out


async def _one(request: Request, defn: ConnectionDefinition) -> dict[str, Any]:
    runtime = runtime_of(request)
    services = console_of(request)
    host = runtime.host.mcp
    out: dict[str, Any] = {
        "name": defn.name,
        "transport": defn.kind,
        "advertised": defn.advertise_tools,
        "hostOnly": defn.host_only,
        "tools": None,
        "cause": None,
    }
    asked = request.query_params.get("principal") if is_operator(request) else None
    oauth = await _oauth_status(services, defn, principal_of(request).id, asked)
    out["oauth"] = oauth
    error: Exception | None = None
    before = host.status(defn.name)
    # Look without hammering: list an open connection (from the cache) or one never tried; one whose
    # last open failed (or that is paused) keeps its verdict until a real use or a restart retries it.
    if (
        defn.auth is None
        and defn.grants != "per_principal"
        and (before.state == "open" or (before.state == "idle" and before.last_error is None))
    ):
        with anyio.move_on_after(_LIST_WAIT):
            try:
                listed = await host.list_tools(defn.name, use_cache=True)
                tools = _shown(request, defn.name, listed)
                out["tools"] = [
                    {"name": t.name, "description": printable(t.description or "", 500), "inputSchema": t.input_schema}
                    for t in tools
                ]
                drift = _drift(runtime.builder.pins, defn, listed)
                if drift is not None and len(tools) < len(listed):  # of the tools shown only
                    names = {t.name for t in tools}
                    drift = [d for d in drift if d["tool"] is None or d["tool"] in names]
                out["drift"] = drift
            except ConnectionsError as exc:
                error = exc
    status = host.status(defn.name)
    out.update(opens=status.opens, failures=status.failures, pid=status.pid, protocolVersion=status.protocol_version)
    if status.state == "paused":
        state = "paused"
    elif defn.grants == "per_principal":  # each principal's own: the shared pool never opens it
        state = "ready" if oauth is not None and oauth["loggedIn"] else "needs_login"
    elif (
        isinstance(error, ConnectionUnauthorized)
        or status.state == "needs_login"
        or (oauth is not None and not oauth["loggedIn"])
    ):
        state = "needs_login"
    elif error is not None:
        state = "failing"
    elif status.state == "open":
        state = "ready"
    elif status.state in ("opening", "queued"):  # queued: a stdio child waiting for a start slot
        state = "opening"
    elif status.last_error is not None:
        state = "failing"
    else:
        state = "not_opened"
    cause = str(error) if error is not None else status.last_error
    if defn.auth is not None and cause is None:
        cause = "per-session auth: listed for each turn with that session's headers"
    out["state"] = state
    out["cause"] = printable(cause, 500) if cause else None
    out["optional"] = defn.optional
    if defn.optional and state == "failing":  # `/v1/mcp/tools` lists the others without it, and logs it
        out["leftOut"] = True
    return out


def _shown(request: Request, connection: str, tools: list[mt.Tool]) -> list[mt.Tool]:
    """The tools of `connection` the policy shows the caller (`tools_shown`: all to an operator); its drift is
    told of these only, so a hidden tool is named nowhere in the answer."""
    targets = [
        named_tool_target(
            t.name,
            connection,
            t.annotations.model_dump(mode="json", by_alias=True, exclude_none=True) if t.annotations else None,
        )
        for t in tools
    ]
    shown = tools_shown(runtime_of(request).policy, principal_of(request), targets, operators_see_all=True)
    return [t for t, ok in zip(tools, shown, strict=True) if ok]


def _drift(pins: PinGuard | None, defn: ConnectionDefinition, tools: list[Any]) -> list[dict[str, Any]] | None:
    """How the listing differs from `mcp.lock` (None when the connection is not pinned): each change's
    sentence and its unified diff, the characters that do not show escaped (the guard's verdict, memoised)."""
    if pins is None or not pins.pins(defn):
        return None
    verdict = pins.verdict(defn, tools)
    if verdict.broken is not None:
        return [{"tool": None, "change": "lock_broken", "heldBack": True, "sentence": verdict.broken, "diff": ""}]
    return [
        {
            "tool": d.name,
            "change": d.change,
            "heldBack": d.held_back,
            "sentence": printable(d.sentence(), 500),
            "diff": definition_diff(d),
        }
        for d in verdict.drifts
    ]


async def connections_status(request: Request) -> Response:
    project = runtime_of(request).project
    names = sorted(project.connections)
    results: dict[str, dict[str, Any]] = {}

    async def fill(name: str) -> None:
        results[name] = await _one(request, project.connections[name])

    async with anyio.create_task_group() as tg:
        for name in names:
            tg.start_soon(fill, name)
    principal = principal_of(request)
    return JSONResponse(
        {
            "ok": True,
            "principal": principal.kind,
            "operator": is_operator(request),
            "connections": [results[n] for n in names],
        }
    )


async def restart(request: Request) -> Response:
    name = request.path_params["name"]
    try:
        require_operator(request)
        require(runtime_of(request).policy, principal_of(request), "console/restart", connection_target(name))
        host = runtime_of(request).host.mcp
        try:
            host.restart(name)
        except UnknownConnection:
            raise ConnectionNotFound(f"no connection named {printable(name, 64)!r}") from None
        except ValueError as exc:
            raise InvalidRequest(str(exc)) from None
    except ApiError as exc:
        return error_response(exc)
    record_action(request, "restart", name, "session closed; the next use opens it anew")
    return JSONResponse({"ok": True, "connection": name, "restarted": True})


def status_routes() -> list[Route]:
    return [
        Route("/v1/connections", connections_status, methods=["GET"]),
        Route("/v1/connections/{name}/restart", restart, methods=["POST"]),
    ]
