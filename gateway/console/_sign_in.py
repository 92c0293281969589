"""`GET /v1/oauth/sign-in?ticket=...`: a principal opens the sign-in link the gateway answered it with.

The route sits behind the auth chain like every peer route, so the request names who opens the link (on an
OAuth gateway a browser is signed in with the IdP first, `gateway/auth/browser_sessions.py`, and a peer's own
MCP token fits too); the
ticket (`RequestStates.seal_sign_in`) names whom it was issued to and which connection. Another principal
is refused (403) and the link stays good for its owner; a forged, expired or used ticket is refused (400).
Otherwise the login starts as the console's does (`_login.py`: discovery, the client, PKCE, `state`, the
browser-binding cookie, the pending login every replica can finish), for that principal's own grant
(`oauth.StoreKey(connection, url, principal)`), and the browser is sent on to the authorization server.
Its redirect comes back to `/v1/oauth/callback`, on any replica.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from oauth import OAuthError, start_login
from oauth._shared import printable

from ..errors import StateUnavailable
from ..mcp.sign_in import SIGN_IN_PATH
from ..runtime import principal_of, runtime_of
from ..state.request_state import RequestStateRefused
from ._binding import bind_browser, redirect_uri_of
from ._pages import page
from ._services import console_of

__all__ = ["sign_in_routes"]


async def sign_in_route(request: Request) -> Response:
    services = console_of(request)
    principal = principal_of(request).id
    try:
        connection = await services.sealer.open_sign_in(request.query_params.get("ticket"), principal)
    except RequestStateRefused as exc:
        if "another principal" in exc.reason:
            return page(
                403,
                "Sign-in refused",
                "This sign-in link was issued to someone else: each link belongs to the person whose agent "
                "received it. Call the tool again from your own agent to get your own link.",
            )
        return page(400, "Sign-in refused", f"This sign-in link cannot be used: {exc.reason}.")
    defn = runtime_of(request).project.connections.get(connection)
    if defn is None or defn.grants != "per_principal" or defn.oauth is None or defn.url is None:
        return page(400, "Sign-in refused", f"Connection {printable(connection, 64)!r} takes no per-user sign-in.")
    redirect_uri = redirect_uri_of(request)
    try:
        started = await start_login(
            connection,
            defn.url,
            defn.oauth,
            services.store,
            redirect_uri=redirect_uri,
            http=services.http,
            principal=principal,
        )
        await services.pending.remember(started)
    except OAuthError as exc:
        return page(502, "Sign-in failed", printable(str(exc), 500))
    except StateUnavailable as exc:
        return page(503, "Sign-in not started", str(exc))
    answer = RedirectResponse(started.authorization_url, status_code=302, headers={"cache-control": "no-store"})
    bind_browser(answer, services, started.authorization_url, redirect_uri)
    return answer


def sign_in_routes() -> list[Route]:
    return [Route(SIGN_IN_PATH, sign_in_route, methods=["GET"])]
