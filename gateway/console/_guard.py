"""Who may act from the console.

The request guard (`auth_chain.RequestGuard`) already refuses a foreign `Origin` (403) and a body
that is not JSON (415) on every route, and the auth chain admits the request and names its
principal. The console adds one rule: an action (restart, login, a tool run through `/v1/tools`)
needs an operator, a principal the chain admitted as `loopback` or `bearer`. An `--allow-anonymous`
principal may look, never act (403 `operator_required`).
"""

from __future__ import annotations

from starlette.requests import Request

from ..errors import ApiError
from ..runtime import principal_of

__all__ = ["NotOperator", "is_operator", "require_operator"]


class NotOperator(ApiError):
    status = 403
    code = "operator_required"


def is_operator(request: Request) -> bool:
    """Loopback and bearer principals are operators (docs/console.md); anonymous is not."""
    return principal_of(request).kind in ("loopback", "bearer")


def require_operator(request: Request) -> None:
    """Raises `NotOperator` unless the chain admitted an operator."""
    if not is_operator(request):
        raise NotOperator("only an operator (a loopback or bearer principal) may act from the console")
