"""Small helpers every JSON route shares: reading a body, answering an `ApiError`."""

from __future__ import annotations

from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse

from ..errors import ApiError, InvalidRequest
from ._asgi import JsonRefused, json_error, loads_bounded

__all__ = ["error_response", "read_object", "string_field"]


def error_response(exc: ApiError) -> JSONResponse:
    """The refusal's JSON body (with the request's id: `_asgi.json_error`), status and headers; a 503 (the
    state store is away: retry shortly) says when to retry with `Retry-After` (RFC 9110 §10.2.3)."""
    headers = exc.headers()
    if exc.status == 503 and not (headers and "Retry-After" in headers):
        headers = {**(headers or {}), "Retry-After": "1"}
    return JSONResponse(json_error(exc.code, exc.message, **exc.extra), status_code=exc.status, headers=headers)


async def read_object(request: Request, *, optional: bool = False) -> dict[str, Any]:
    """The body as a JSON object, read by the bounded reader (`_asgi.loads_bounded`: depth cap, no
    unpaired surrogates). Raises `InvalidRequest` for anything else (an empty body is `{}` if optional)."""
    try:
        raw = await request.body()
    except ClientDisconnect:  # the body did not arrive (its timeout closed the connection): nobody to answer
        raise InvalidRequest("the client went away before its body arrived") from None
    if not raw.strip() and optional:
        return {}
    try:
        value = loads_bounded(raw)
    except JsonRefused as exc:
        raise InvalidRequest(str(exc)) from None
    if not isinstance(value, dict):
        raise InvalidRequest("the body must be a JSON object")
    return value


def string_field(body: dict[str, Any], name: str, *, required: bool = False, max_len: int = 1_000_000) -> str | None:
    """`body[name]` when it is a string. Raises `InvalidRequest` naming the field otherwise."""
    value = body.get(name)
    if value is None:
        if required:
            raise InvalidRequest(f"field {name!r} is required")
        return None
    if not isinstance(value, str):
        raise InvalidRequest(f"field {name!r} must be a string")
    if required and not value.strip():
        raise InvalidRequest(f"field {name!r} must not be empty")
    if len(value) > max_len:
        raise InvalidRequest(f"field {name!r} is longer than {max_len} characters")
    return value
