"""Who may use the console's actions, and the same-origin rule its routes add to the auth chain.

The auth chain (`auth_chain.py`) admits the request and names its principal first. The console adds:

- an `Origin`, when a browser sends one, must be this server's own origin (`http://<Host>`): a page on
  another loopback port is a different origin and gets 403 `forbidden_origin`;
- an action (a POST) must be `Content-Type: application/json`, so a plain HTML form on another site
  cannot send one without a CORS preflight (415 `unsupported_media_type` otherwise);
- an action needs an operator: a principal the chain admitted as `loopback` or `bearer`. An
  `--allow-anonymous` principal may look, never act (403 `operator_required`).
"""

from __future__ import annotations

from starlette.requests import Request

from ..errors import ApiError
from ..runtime import principal_of

__all__ = ["NotOperator", "OriginRefused", "UnsupportedMediaType", "check_action", "check_origin", "is_operator"]


class OriginRefused(ApiError):
    status = 403
    code = "forbidden_origin"


class NotOperator(ApiError):
    status = 403
    code = "operator_required"


class UnsupportedMediaType(ApiError):
    status = 415
    code = "unsupported_media_type"


def is_operator(request: Request) -> bool:
    """Loopback and bearer principals are operators (docs/console.md); anonymous is not."""
    return principal_of(request).kind in ("loopback", "bearer")


def check_origin(request: Request) -> None:
    """Raises `OriginRefused` when a sent `Origin` is not this server's own origin."""
    origin = request.headers.get("origin")
    if origin is None:
        return
    host = request.headers.get("host", "")
    if origin.lower() not in (f"http://{host}".lower(), f"https://{host}".lower()):
        raise OriginRefused("the console's routes answer only to pages of this server's own origin")


def check_action(request: Request) -> None:
    """Raises `OriginRefused`, `UnsupportedMediaType` or `NotOperator` for a console action (a POST)."""
    check_origin(request)
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        raise UnsupportedMediaType("send the action with Content-Type: application/json")
    if not is_operator(request):
        raise NotOperator("only an operator (a loopback or bearer principal) may act from the console")
