"""What an operator reads besides the failures: `GET /v1/log` (the recent log lines and the operator
actions this process recorded, newest first) and `GET /v1/principals` (who holds sessions, and how
many). Operators only: both name every principal's connections and sessions.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..auth.roles import require_operator
from ..errors import ApiError
from ..http.json_answers import error_response
from ..runtime import runtime_of
from ._services import console_of

__all__ = ["operator_view_routes"]

PRINCIPALS_SHOWN = 100
"""At most this many principals in one answer (`more: true` past it)."""


async def recent_log(request: Request) -> Response:
    try:
        require_operator(request)
    except ApiError as exc:
        return error_response(exc)
    services = console_of(request)
    return JSONResponse({"ok": True, "log": services.log.newest_first(), "actions": services.actions.newest_first()})


async def principals(request: Request) -> Response:
    try:
        require_operator(request)
        owners = await runtime_of(request).sessions.store.owners(PRINCIPALS_SHOWN + 1)
    except ApiError as exc:
        return error_response(exc)
    shown = sorted(owners.items())[:PRINCIPALS_SHOWN]
    return JSONResponse(
        {
            "ok": True,
            "principals": [{"principal": p, "sessions": n} for p, n in shown],
            "more": len(owners) > PRINCIPALS_SHOWN,
        }
    )


def operator_view_routes() -> list[Route]:
    return [
        Route("/v1/log", recent_log, methods=["GET"]),
        Route("/v1/principals", principals, methods=["GET"]),
    ]
