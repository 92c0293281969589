"""`GET /v1/health` (no auth) and `GET /v1/info` (the `info --json` document plus runtime facts, never a secret)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from .errors import StateUnavailable
from .info import project_info
from .runtime import Runtime, runtime_of

__all__ = ["discovery_routes"]


async def health(_request: Request) -> JSONResponse:
    return JSONResponse({"ok": True})


async def info(request: Request) -> JSONResponse:
    runtime = runtime_of(request)
    doc = project_info(runtime.project)
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
    accounts = getattr(request.state, "accounts", None)
    if accounts is not None:
        accounts.annotate_info(doc)
    return JSONResponse(doc)


async def _session_count(runtime: Runtime) -> int | None:
    """How many sessions the store holds; None while a shared store is unreachable (info still answers)."""
    try:
        return await runtime.sessions.store.count()
    except StateUnavailable:
        return None


def discovery_routes() -> list[Route]:
    return [Route("/v1/health", health, methods=["GET"]), Route("/v1/info", info, methods=["GET"])]
