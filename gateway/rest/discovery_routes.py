"""`GET /v1/health` and `GET /v1/ready` (no auth) and `GET /v1/info` (the `info --json` document plus
runtime facts, never a secret).

A connection that advertises resources or prompts its server was found not to declare (once a listing has
asked it) carries a `warnings` entry in `/v1/info`, as `agent-sdk info` says it.

`/v1/health` is liveness: the process answers. `/v1/ready` is readiness, for a load balancer or an
orchestrator: 200 once the state store answers and every `--warm` start has finished, else 503
with each cause (codes and counts only: it answers anyone, so it names no connection and no URL).
"""

from __future__ import annotations

from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ..errors import StateUnavailable
from ..info import add_undeclared, project_info
from ..policy import named_tool_target, tools_shown
from ..runtime import Runtime, principal_of, runtime_of

__all__ = ["discovery_routes"]


async def health(_request: Request) -> JSONResponse:
    return JSONResponse({"ok": True})


_READY_WAIT_S = 2.0
"""How long readiness waits for the state store before calling it unreachable."""


async def ready(request: Request) -> JSONResponse:
    runtime = runtime_of(request)
    causes: list[dict[str, str]] = []
    store = "unreachable"
    with anyio.move_on_after(_READY_WAIT_S):
        store = "ok" if await _session_count(runtime) is not None else "unreachable"
    if store != "ok":
        causes.append({"code": "state_unavailable", "message": "the state store does not answer"})
    warming = runtime.host.mcp.warm_progress() if runtime.host is not None else None
    warm: dict[str, int] | None = None
    if warming is not None:
        warm = {"total": warming.total, "ready": warming.ready, "failed": len(warming.failed)}
        if not warming.done:
            causes.append(
                {
                    "code": "warming",
                    "message": f"--warm: {warming.finished} of {warming.total} connection starts finished",
                }
            )
    body = {"ok": not causes, "state": store, "warm": warm, "causes": causes}
    return JSONResponse(body, status_code=200 if not causes else 503)


async def info(request: Request) -> JSONResponse:
    runtime = runtime_of(request)
    doc = project_info(runtime.project)
    _hide_tools(request, doc)
    settings = runtime.settings
    doc["runtime"] = {
        "version": "0.1.0",
        "runner": runtime.runner.name,
        "auth": settings.auth_mode,
        "bearerTokens": len(settings.bearer_tokens),
        "operatorTokens": len(settings.operator_tokens),  # counts only, never a token
        "startedAt": runtime.started_at,
        "sessions": await _session_count(runtime),
        "state": "files" if settings.state_url is None else "redis",
        "maxBodyBytes": settings.max_body_bytes,
        "maxWaitMs": settings.max_wait_ms,
        "connections": {
            "idleTimeoutS": settings.idle_timeout_s,
            "headerTimeoutS": settings.header_timeout_s,
            "bodyTimeoutS": settings.body_timeout_s,
            "maxHeaderBytes": settings.max_header_bytes,
            "maxConnections": settings.max_connections,
            "trustedProxies": len(settings.trusted_proxies),
        },
        "endpoints": {
            "mcp": "/v1/mcp",
            "mcpTools": "/v1/mcp/tools",
            "tools": "/v1/tools",
            "sessions": "/v1/sessions",
            "accountBridge": "/v1/account/{connection}/mcp",
            "metrics": "/v1/metrics",
            "console": "/",
            "connections": "/v1/connections",
            "failures": "/v1/failures",
        },
    }
    if runtime.offerings is not None:  # what the listings so far found undeclared (issue 34 item 12)
        add_undeclared(doc, runtime.offerings.known_undeclared())
    accounts = getattr(request.state, "accounts", None)
    if accounts is not None:
        accounts.annotate_info(doc)
    return JSONResponse(doc)


def _hide_tools(request: Request, doc: dict[str, Any]) -> None:
    """Drop from `doc` the authored and extension tools the policy hides from the caller (`tools_shown`: an
    operator sees every one), from the tool list and from each extension's names."""
    tools = doc["tools"]
    targets = [
        named_tool_target(t["name"], None, {"readOnlyHint": True} if t["effect"] == "read" else None) for t in tools
    ]
    shown = tools_shown(runtime_of(request).policy, principal_of(request), targets, operators_see_all=True)
    hidden = {t["name"] for t, ok in zip(tools, shown, strict=True) if not ok}
    if not hidden:
        return
    doc["tools"] = [t for t in tools if t["name"] not in hidden]
    for extension in doc["extensions"]:
        extension["tools"] = [name for name in extension["tools"] if name not in hidden]


async def _session_count(runtime: Runtime) -> int | None:
    """How many sessions the store holds; None while a shared store is unreachable (info still answers)."""
    try:
        return await runtime.sessions.store.count()
    except StateUnavailable:
        return None


def discovery_routes() -> list[Route]:
    return [
        Route("/v1/health", health, methods=["GET"]),
        Route("/v1/ready", ready, methods=["GET"]),
        Route("/v1/info", info, methods=["GET"]),
    ]
