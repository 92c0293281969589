"""The browser login: an operator logs the gateway in to an `oauth=True` connection from the console.

`POST /v1/connections/{name}/logout` (operators only) forgets the grant (`oauth.logout`: RFC 7009
revocation where offered, then deleted from the serving store) and restarts the connection.

`POST /v1/connections/{name}/login` (operators only) runs discovery, picks or registers the client
with this server's own callback as its exact redirect URI (`<origin>/v1/oauth/callback`), and answers
the authorization URL (PKCE S256, `state`, RFC 8707 `resource`). The page sends the browser there;
the authorization server sends it back to `GET /v1/oauth/callback` (on any replica: the started
login waits in `gateway/state/pending_logins.py`'s store), which checks `state` (one use, `LOGIN_TTL`), `iss`
(RFC 9207), exchanges the code with the verifier, stores the grant in the store `serve` reads, and
restarts the connection so its next use opens with the new token.

Only an operator starts a login (`roles.require_operator`), and only the browser that started it finishes
it: the start's answer sets a cookie (HttpOnly, SameSite=Lax, path the callback, one per login) holding
the login's `state` sealed with the deployment's key, and the callback refuses a redirect that does not
bring it back (RFC 6749 §10.12: bind `state` to the user-agent). So whoever else holds the authorization
URL (a peer it leaked to) cannot sign in with an upstream account of their own and have the callback
store that grant as the gateway's.

Discovery, registration, the redirect checks and the code exchange are `oauth`'s own two-step login
(`start_login`, `finish_login`: the CLI login runs the same pieces); only the redirect target
differs: this route instead of a loopback listener.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from connections import ConnectionDefinition, UnknownConnection
from connections.serving import remember_secret
from oauth import OAuthConfig, OAuthError, StoreKey, finish_login, logout, start_login
from oauth._shared import printable

from ..auth.roles import require_operator
from ..errors import ApiError, InvalidRequest, StateUnavailable
from ..http.json_answers import error_response
from ..policy import connection_target, require
from ..runtime import principal_of, runtime_of
from ._binding import CALLBACK_PATH, bind_browser, cookie_name, redirect_uri_of, same_browser
from ._browser import BROWSER_LOGIN, finish_browser
from ._pages import page
from ._services import ConsoleServices, console_of, record_action, signed_in
from ._status import ConnectionNotFound

__all__ = ["login_routes"]


class LoginFailed(ApiError):
    status = 502
    code = "login_failed"


def _oauth_definition(defn: ConnectionDefinition | None, name: str) -> ConnectionDefinition:
    if defn is None:
        raise ConnectionNotFound(f"no connection named {printable(name, 64)!r}")
    if defn.oauth is None or defn.url is None:
        raise InvalidRequest(f"connection {name!r} must be define_connection(url=..., oauth=True) to log in or out")
    return defn


async def begin_route(request: Request) -> Response:
    name = request.path_params["name"]
    try:
        require_operator(request)
        runtime = runtime_of(request)
        require(runtime.policy, principal_of(request), "console/login", connection_target(name))
        defn = _oauth_definition(runtime.project.connections.get(name), name)
        assert defn.oauth is not None and defn.url is not None
        services = console_of(request)
        redirect_uri = redirect_uri_of(request)
        try:
            authorization_url = await _begin(services, name, defn.url, defn.oauth, redirect_uri)
        except OAuthError as exc:
            raise LoginFailed(printable(str(exc), 500)) from None
    except ApiError as exc:
        return error_response(exc)
    record_action(request, "login", name, "started; the browser goes to the authorization server")
    answer = JSONResponse({"ok": True, "connection": name, "authorizationUrl": authorization_url})
    bind_browser(answer, services, authorization_url, redirect_uri)
    return answer


async def logout_route(request: Request) -> Response:
    """`POST /v1/connections/{name}/logout` (operators only): revoke the grant where the server supports RFC
    7009, delete it from the serving store, and restart the connection (its next use needs a login).
    `?principal=ID` on a `grants="per_principal"` connection: that principal's own grant only."""
    name = request.path_params["name"]
    principal = request.query_params.get("principal", "")
    try:
        require_operator(request)
        runtime = runtime_of(request)
        require(runtime.policy, principal_of(request), "console/logout", connection_target(name))
        defn = _oauth_definition(runtime.project.connections.get(name), name)
        if principal and defn.grants != "per_principal":
            raise InvalidRequest(
                f"connection {name!r} has one grant for the gateway; ?principal= is for per-user grants"
            )
        services = console_of(request)
        try:
            result = await logout(services.store, StoreKey(name, defn.url or "", principal), http=services.http)
        except OAuthError as exc:
            raise LoginFailed(printable(str(exc), 500)) from None
    except ApiError as exc:
        return error_response(exc)
    if services.forget_tokens is not None:
        services.forget_tokens(name, principal or None)
    if not principal:
        try:
            runtime.host.mcp.restart(name)
        except (UnknownConnection, ValueError):
            pass
    revoked = "revoked at the server" if result.revoked_at_server else "not revoked at the server"
    whose = "a principal's own grant" if principal else "grant"
    record_action(request, "logout", name, f"{whose} deleted, {revoked}" if result.deleted else "nothing was stored")
    return JSONResponse(
        {
            "ok": True,
            "connection": name,
            "deleted": result.deleted,
            "revokedAtServer": result.revoked_at_server,
            "revocationError": printable(result.revocation_error, 300) if result.revocation_error else None,
        }
    )


async def _begin(services: ConsoleServices, name: str, url: str, config: OAuthConfig, redirect_uri: str) -> str:
    """Discovery, the client, and a remembered pending login; the authorization URL to send the browser to.

    Raises `OAuthError` (discovery, PKCE support, registration, a store error)."""
    started = await start_login(name, url, config, services.store, redirect_uri=redirect_uri, http=services.http)
    await services.pending.remember(started)
    return started.authorization_url


async def callback(request: Request) -> Response:
    params = dict(request.query_params)
    for value in (params.get("code"), params.get("state")):
        if value:
            # The one redaction rule masks them from now on: the access log line of this very request
            # (`--access-log`) is written after this handler ran.
            remember_secret(value)
    services = console_of(request)
    state = params.get("state", "")
    unmatched = page(
        400,
        "Login not completed",
        "This redirect matches no login started from the console in this browser (it expired, was used "
        "already, or was started elsewhere); start the login again from the console.",
    )
    then = same_browser(request, services, state)
    if then is None:
        return unmatched  # checked first: a stranger's redirect does not use up the operator's login
    answer = await _finish(request, services, state, params, unmatched, then)
    if answer.status_code != 503:  # the login is over, whatever the outcome (503: the store is away, retry)
        answer.delete_cookie(cookie_name(state), path=CALLBACK_PATH)
    return answer


async def _finish(
    request: Request, services: ConsoleServices, state: str, params: dict[str, str], unmatched: Response, then: str
) -> Response:
    try:
        pending = await services.pending.take(state)
    except StateUnavailable as exc:
        return page(503, "Login not completed", str(exc))
    if pending is None:
        return unmatched
    if pending.key.connection == BROWSER_LOGIN:  # a person signing in to the gateway itself
        return await finish_browser(request, pending, params, then)
    try:
        await finish_login(pending, params, services.store, http=services.http)
    except OAuthError as exc:
        return page(400, "Login failed", printable(str(exc), 500))
    name = pending.key.connection
    if services.forget_tokens is not None:  # the grant its auth holds in memory is the old one (a step-up's scopes)
        services.forget_tokens(name, pending.key.principal or None)
    if pending.key.principal:  # a principal's own grant (sign_in.py): that principal's next call uses it
        signed_in(name)
        return page(200, "Signed in", f"Signed in to {name}; go back to your agent.")
    try:
        runtime_of(request).host.mcp.restart(name)
    except (UnknownConnection, ValueError):
        pass
    record_action(request, "login", name, f"finished; tokens stored in {services.store.name}", who="callback")
    return page(200, "Logged in", f"Connection {name} is logged in; tokens are stored in {services.store.name}.")


def login_routes() -> list[Route]:
    return [
        Route("/v1/connections/{name}/login", begin_route, methods=["POST"]),
        Route("/v1/connections/{name}/logout", logout_route, methods=["POST"]),
        Route(CALLBACK_PATH, callback, methods=["GET"]),
    ]
