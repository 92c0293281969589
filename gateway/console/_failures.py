"""`GET /v1/failures`: the last warnings and errors this process logged (`_recent.RecentRecords`),
newest first, each with its request id. Operators only: the messages name sessions and connections
of every principal.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..auth.roles import require_operator
from ..errors import ApiError
from ..http.json_answers import error_response
from ._services import console_of

__all__ = ["failure_routes"]


async def failures(request: Request) -> Response:
    try:
        require_operator(request)
    except ApiError as exc:
        return error_response(exc)
    return JSONResponse({"ok": True, "failures": console_of(request).failures.newest_first()})


def failure_routes() -> list[Route]:
    return [Route("/v1/failures", failures, methods=["GET"])]
