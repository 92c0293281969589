"""Who may act on the gateway: the operator routes' one check.

The auth chain decides each principal's role (`auth_chain.Principal.role`: an `--operator-token`, or the
local user under loopback-strict, or an OAuth token with `--operator-scope` / `--operator-claim`, is an
operator; a `--bearer-token`, anonymous and other OAuth tokens are peers). An operator
route (restart, logins, `/v1/failures`, `/v1/metrics`) calls `require_operator` first; a peer gets 403
`operator_required` with a sentence saying which credential would do (docs/http-api.md, "Roles").
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
    """Whether the chain admitted this request as an operator."""
    return principal_of(request).is_operator


def require_operator(request: Request) -> None:
    """Raises `NotOperator` (403) unless the chain admitted an operator."""
    if is_operator(request):
        return
    settings = getattr(getattr(request.state, "runtime", None), "settings", None)
    if settings is not None and (settings.operator_scopes or settings.operator_claims):
        how = "Sign in with a token carrying the operator scope or claim (--operator-scope, --operator-claim)."
    elif settings is not None and not settings.operator_tokens:
        oauth = ", or an OAuth scope or claim (--operator-scope, --operator-claim)" if settings.oauth_issuers else ""
        how = f"This gateway has none: start serve with --operator-token (or AGENT_SDK_OPERATOR_TOKEN){oauth}."
    else:
        how = "Send one of the tokens serve was given with --operator-token."
    raise NotOperator(
        "this route acts on the gateway and needs an operator credential; a peer credential (--bearer-token, "
        f"or anonymous) calls tools and uses sessions only. {how}"
    )
