"""`GET /v1/audit`: the newest audit records, filtered (operators only; the console's audit panel).

With `--state-url` it reads the shared Redis stream (every replica's calls), else this gateway's file."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..auth.roles import require_operator
from ..errors import ApiError, InvalidRequest, StateUnavailable
from ..http.json_answers import error_response
from ..runtime import runtime_of
from ._reading import AuditQuery, read_file_records, read_stream_records
from ._sinks import audit_folder

__all__ = ["audit_routes", "query_of"]

MAX_SHOWN = 500


def query_of(params: dict[str, str]) -> AuditQuery:
    """The query a request's parameters ask for. Raises `InvalidRequest` naming a bad one."""
    raw = params.get("limit", "50")
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_SHOWN:
        raise InvalidRequest(f"limit must be a whole number from 1 to {MAX_SHOWN}")
    since = params.get("since")
    try:
        since = AuditQuery.check_since(since) if since else None
    except ValueError as exc:
        raise InvalidRequest(str(exc)) from None
    return AuditQuery(
        limit=int(raw),
        principal=params.get("principal") or None,
        target=params.get("tool") or None,
        outcome=params.get("outcome") or None,
        surface=params.get("surface") or None,
        since=since,
        who=params.get("who") or None,
    )


async def audit(request: Request) -> Response:
    try:
        require_operator(request)
        query = query_of(dict(request.query_params))
        runtime = runtime_of(request)
        redis = runtime.guard.stream_reader if runtime.guard is not None else None
        if redis is not None:
            try:
                records = await read_stream_records(redis, query)
            except Exception:  # boundary: redis-py's errors
                raise StateUnavailable("the audit stream in Redis cannot be read now; retry once it answers") from None
            source = "redis"
        else:
            records = read_file_records(audit_folder(runtime.settings.state_root), query)
            source = "file"
    except ApiError as exc:
        return error_response(exc)
    return JSONResponse({"ok": True, "source": source, "records": records})


def audit_routes() -> list[Route]:
    return [Route("/v1/audit", audit, methods=["GET"])]
