"""`/v1/session*` and `/v1/sessions`: create, follow up, stop, read and follow a session's events.

Every route reads the session store; when it cannot be reached (Redis down) the answer is 503
`state_unavailable` with a sentence, and the next request after it returns works.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..errors import ApiError, InvalidRequest, StateUnavailable
from ..http.json_answers import error_response, read_object, string_field
from ..policy import require
from ..runtime import principal_of, runtime_of
from ..sessions import LiveSession
from ..sessions._records import decode_cursor, encode_cursor

__all__ = ["session_routes"]

_MAX_MESSAGE = 200_000
_PAGE_DEFAULT = 50
_PAGE_MAX = 200


def _handle(live: LiveSession) -> dict[str, object]:
    out: dict[str, object] = {
        "ok": True,
        "sessionId": live.id,
        "continuationToken": live.record.continuation_token,
        "traceUrl": f"/v1/session/{live.id}/events",
    }
    if live.record.turn is not None:
        out["turnId"] = live.record.turn
    return out


async def create_session(request: Request) -> JSONResponse:
    runtime = runtime_of(request)
    try:
        body = await read_object(request)
        message = string_field(body, "message", required=True, max_len=_MAX_MESSAGE)
        title = string_field(body, "title", max_len=200)
        purpose = string_field(body, "purpose") or "live"
        if purpose not in ("live", "eval"):
            raise InvalidRequest("field 'purpose' must be 'live' or 'eval'")
        assert message is not None
        caller = principal_of(request)
        require(runtime.policy, caller, "session/turn")
        live = await runtime.sessions.create(caller.id, message, title=title, purpose=purpose, caller=caller)
    except ApiError as exc:
        return error_response(exc)
    return JSONResponse(_handle(live))


async def follow_up(request: Request) -> JSONResponse:
    runtime = runtime_of(request)
    try:
        require(runtime.policy, principal_of(request), "session/turn")
        live = await runtime.sessions.get(request.path_params["session_id"], principal_of(request).id)
        body = await read_object(request)
        message = string_field(body, "message", required=True, max_len=_MAX_MESSAGE)
        token = body.get("continuationToken")
        if token is None:
            raise InvalidRequest("field 'continuationToken' is required for a follow-up")
        assert message is not None
        token = token if isinstance(token, str) else repr(token)
        live = await runtime.sessions.follow_up(live, message, token, caller=principal_of(request))
    except ApiError as exc:
        return error_response(exc)
    return JSONResponse(_handle(live))


async def stop_session(request: Request) -> JSONResponse:
    runtime = runtime_of(request)
    try:
        require(runtime.policy, principal_of(request), "session/turn")
        live = await runtime.sessions.get(request.path_params["session_id"], principal_of(request).id)
        stopped = await runtime.sessions.stop(live)
    except ApiError as exc:
        return error_response(exc)
    return JSONResponse({"ok": True, "sessionId": live.id, "stopped": stopped})


async def get_session(request: Request) -> JSONResponse:
    runtime = runtime_of(request)
    try:
        require(runtime.policy, principal_of(request), "session/read")
        live = await runtime.sessions.get(request.path_params["session_id"], principal_of(request).id)
    except ApiError as exc:
        return error_response(exc)
    return JSONResponse({"ok": True, **live.snapshot()})


async def session_events(request: Request) -> Response:
    runtime = runtime_of(request)
    try:
        require(runtime.policy, principal_of(request), "session/read")
        live = await runtime.sessions.get(request.path_params["session_id"], principal_of(request).id)
        fmt = request.query_params.get("format", "ndjson")
        if fmt not in ("ndjson", "json"):
            raise InvalidRequest("format must be 'ndjson' or 'json'")
        events = await runtime.sessions.events(live)
    except ApiError as exc:
        return error_response(exc)
    if fmt == "json":
        return JSONResponse({"ok": True, "sessionId": live.id, "events": events})
    body = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events)
    return Response(body, media_type="application/x-ndjson")


async def stream_session(request: Request) -> Response:
    runtime = runtime_of(request)
    try:
        require(runtime.policy, principal_of(request), "session/read")
        live = await runtime.sessions.get(request.path_params["session_id"], principal_of(request).id)
        raw = request.query_params.get("startIndex", "0")
        if not raw.isdigit():
            raise InvalidRequest("startIndex must be a non-negative integer")
        start = int(raw)
    except ApiError as exc:
        return error_response(exc)

    async def lines() -> AsyncIterator[bytes]:
        try:
            async for event in runtime.sessions.follow(live, start):
                yield (json.dumps(event, separators=(",", ":")) + "\n").encode()
        except StateUnavailable:
            return  # the stream ends; the reader reconnects with startIndex = the next index it needs

    return StreamingResponse(lines(), media_type="application/x-ndjson", headers={"cache-control": "no-store"})


async def list_sessions(request: Request) -> JSONResponse:
    runtime = runtime_of(request)
    try:
        raw_limit = request.query_params.get("limit", str(_PAGE_DEFAULT))
        if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= _PAGE_MAX:
            raise InvalidRequest(f"limit must be an integer from 1 to {_PAGE_MAX}")
        before = None
        if (cursor := request.query_params.get("cursor")) is not None:
            before = decode_cursor(cursor)
            if before is None:
                raise InvalidRequest("cursor is not one this server gave out; pass nextCursor from the last page")
        require(runtime.policy, principal_of(request), "session/read")
        page, nxt = await runtime.sessions.page(principal_of(request).id, before, int(raw_limit))
    except ApiError as exc:
        return error_response(exc)
    cursor = None if nxt is None else encode_cursor(nxt)
    return JSONResponse({"ok": True, "sessions": [s.snapshot() for s in page], "nextCursor": cursor})


def session_routes() -> list[Route]:
    return [
        Route("/v1/session", create_session, methods=["POST"]),
        Route("/v1/session/{session_id}", follow_up, methods=["POST"]),
        Route("/v1/session/{session_id}", get_session, methods=["GET"]),
        Route("/v1/session/{session_id}/stop", stop_session, methods=["POST"]),
        Route("/v1/session/{session_id}/events", session_events, methods=["GET"]),
        Route("/v1/session/{session_id}/stream", stream_session, methods=["GET"]),
        Route("/v1/sessions", list_sessions, methods=["GET"]),
    ]
