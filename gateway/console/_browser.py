"""The browser sign-in of an OAuth gateway: the gateway as an OIDC client of its own `--oauth-issuer`.

`GET /v1/oauth/browser?next=/page` (public; `gateway/auth/browser_sessions.py` sends a browser here) starts an
authorization-code + PKCE login at the first `--oauth-issuer` for the gateway's own resource
(`settings.resource_url()`, RFC 8707), with `oauth.start_login`: the issuer's metadata, the client, PKCE S256,
`state`, the pending login every replica can finish and the cookie binding it to this browser (`_binding.py`).
The redirect URI is `<resource URL>/v1/oauth/callback`, the console's callback, which hands a browser login to
`finish_browser`: the code is exchanged, the access token sealed into the session cookie, and the browser sent
back to `next` (a path on this gateway only).

The client: with `--oidc-client-id` (and, for a confidential client, its secret in `AGENT_SDK_OIDC_CLIENT_SECRET`,
never a flag) the one registered at the IdP with that redirect URI; else one registered dynamically (RFC 7591) on
the first sign-in and kept for the next (`_clients.py`). Scopes asked for: `openid`, `--oauth-scope` (those
required everywhere) and `--operator-scope`, so an operator's session carries what makes an operator;
`--operator-claim` needs the IdP to put the claim in its access tokens.
"""

from __future__ import annotations

import os
import time

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from oauth import LoginStart, OAuthConfig, OAuthError, finish_login, start_login
from oauth._shared import printable

from ..auth.browser_sessions import COOKIE, SIGN_OUT_PATH, START_PATH, safe_next
from ..errors import StateUnavailable
from ..runtime import runtime_of
from ..settings import ServeSettings
from ._binding import CALLBACK_PATH, bind_browser
from ._pages import page
from ._services import console_of

__all__ = ["BROWSER_LOGIN", "browser_routes", "finish_browser"]

BROWSER_LOGIN = "agent-sdk:browser"
"""The `StoreKey.connection` of a browser sign-in's pending login (no connection has a colon in its name)."""
OIDC_SECRET_ENV = "AGENT_SDK_OIDC_CLIENT_SECRET"
"""The secret of `--oidc-client-id`, when the IdP made it a confidential client (never a flag: `ps` shows flags)."""


def _config(settings: ServeSettings) -> OAuthConfig:
    everywhere = (s for s in settings.oauth_scopes if "=" not in s)
    # `openid`: a sign-in of the person (OpenID Connect), beside what the gateway's routes need.
    scopes = tuple(dict.fromkeys(["openid", *everywhere, *settings.operator_scopes]))
    client_id = settings.oidc_client_id
    return OAuthConfig(
        scopes=scopes,
        client_id=client_id,
        client_secret_env=OIDC_SECRET_ENV if client_id and os.environ.get(OIDC_SECRET_ENV) else None,
        client_name="agent-sdk console",
        dpop=False,  # a session's token travels in a cookie, never with a DPoP proof (RFC 9449 §5: Bearer)
    )


async def start_route(request: Request) -> Response:
    """`GET /v1/oauth/browser?next=PATH`: send the browser to the IdP (module docstring)."""
    settings = runtime_of(request).settings
    if not settings.oauth_issuers:
        return page(404, "No browser sign-in", "This gateway has no --oauth-issuer; browser sign-in is off.")
    services = console_of(request)
    resource = settings.resource_url()
    redirect_uri = resource + CALLBACK_PATH
    try:
        started = await start_login(
            BROWSER_LOGIN,
            resource,
            _config(settings),
            services.browser_clients,
            redirect_uri=redirect_uri,
            http=services.http,
            authorization_server=settings.oauth_issuers[0],
        )
        await services.pending.remember(started)
    except OAuthError as exc:
        return page(
            502, "Sign-in failed", f"The sign-in at the identity provider cannot start: {printable(str(exc), 400)}"
        )
    except StateUnavailable as exc:
        return page(503, "Sign-in not started", str(exc))
    answer = RedirectResponse(started.authorization_url, status_code=302, headers={"cache-control": "no-store"})
    bind_browser(
        answer, services, started.authorization_url, redirect_uri, then=safe_next(request.query_params.get("next"))
    )
    return answer


async def finish_browser(request: Request, pending: LoginStart, params: dict[str, str], then: str) -> Response:
    """The callback of a browser sign-in: exchange the code, set the session cookie, go back to `then`."""
    services = console_of(request)
    try:
        grant = await finish_login(pending, params, services.browser_clients, http=services.http)
    except OAuthError as exc:
        return page(400, "Sign-in failed", f"The identity provider's answer was refused: {printable(str(exc), 400)}")
    tokens = grant.tokens
    if tokens is None:
        return page(502, "Sign-in failed", "The identity provider answered no access token; sign in again.")
    expires = tokens.expires_at if tokens.expires_at is not None else time.time() + 3600
    answer = RedirectResponse(safe_next(then), status_code=302, headers={"cache-control": "no-store"})
    answer.set_cookie(
        COOKIE,
        services.sealer.seal_browser(tokens.access_token.reveal(), expires),
        max_age=max(0, int(expires - time.time())),
        path="/",
        secure=pending.redirect_uri.startswith("https:"),
        httponly=True,
        samesite="lax",  # sent on top-level navigations (a sign-in link from a chat), never on cross-site POSTs
    )
    return answer


async def sign_out_route(request: Request) -> Response:
    """`POST /v1/oauth/browser/sign-out`: the session cookie is dropped; the IdP's own session is the IdP's."""
    answer = JSONResponse({"ok": True, "signedOut": COOKIE in request.cookies})
    answer.delete_cookie(COOKIE, path="/", secure=request.url.scheme == "https", httponly=True, samesite="lax")
    return answer


def browser_routes() -> list[Route]:
    return [Route(START_PATH, start_route, methods=["GET"]), Route(SIGN_OUT_PATH, sign_out_route, methods=["POST"])]
