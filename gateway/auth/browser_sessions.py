"""Browser sessions on an OAuth gateway (`serve --oauth-issuer`): a person signs in with the IdP in a browser.

A browser cannot send `Authorization`, so on an OAuth gateway the pages a person opens (the console `/`, a
per-user sign-in link) sign the person in with the same issuer the peers' tokens come from, and the auth
chain then admits the browser by a cookie:

1. a `GET` of a page (`PAGE_PATHS`) with neither `Authorization` nor a session cookie is sent (302) to
   `START_PATH?next=<the page>` (public), which starts an authorization-code + PKCE login at the issuer
   for this gateway's own resource (`gateway/console/_browser.py`, reusing `oauth.start_login`);
2. the issuer's redirect comes back to the console's callback (`/v1/oauth/callback`, any replica), which
   exchanges the code and sets `COOKIE`: the access token sealed with the deployment's key
   (`RequestStates.seal_browser`, AES-256-GCM), HttpOnly, SameSite=Lax, Secure when the gateway's URL is
   https, path `/`, expiring with the token; then the browser goes back to `next`;
3. every request that has no `Authorization` but the cookie is admitted as if it had sent the sealed token
   as `Bearer` (`browser_token`): the same checks (issuer, signature, expiry, audience, scopes), the same
   principal (`oauth:<digest of issuer and subject>`) and the same operator grant as a peer's token. Any
   replica with the deployment's key opens it; nothing is kept per session.

`/?operator-token` serves the console's shell without a sign-in, for an operator with a static `--operator-token`:
the page asks for it and sends it on every data route.

A cross-site page cannot use the cookie to act: SameSite=Lax keeps it off cross-site POSTs, and the request
guard refuses a foreign `Origin` and a non-JSON body (`chain.RequestGuard`).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any
from urllib.parse import quote

from starlette.requests import cookie_parser
from starlette.types import Scope, Send

from ..http._asgi import header

__all__ = [
    "COOKIE",
    "PAGE_PATHS",
    "SIGN_IN_PATH",
    "SIGN_OUT_PATH",
    "START_PATH",
    "TOKEN_PAGE",
    "browser_token",
    "safe_next",
    "to_sign_in",
    "token_page",
    "wants_page",
]

COOKIE = "agent-sdk-session"
START_PATH = "/v1/oauth/browser"
SIGN_OUT_PATH = "/v1/oauth/browser/sign-out"
"""`POST`: forget this browser's session (public: clearing a cookie needs no credential)."""
SIGN_IN_PATH = "/v1/oauth/sign-in"
"""A per-user sign-in link (`gateway/mcp/sign_in.py`)."""
PAGE_PATHS = frozenset({"/", SIGN_IN_PATH})
"""The pages a person opens in a browser: without a credential they lead to the IdP, not to a JSON 401."""


def browser_token(scope: Scope) -> str | None:
    """The access token sealed in the request's session cookie; None without one, or for one this deployment
    did not seal, or that expired (the lifespan's sealer, `runtime.request_states`, opens it)."""
    cookies = header(scope, b"cookie")
    if not cookies or COOKIE not in cookies:
        return None
    runtime = (scope.get("state") or {}).get("runtime")
    if runtime is None:
        return None
    return runtime.request_states.open_browser(cookie_parser(cookies).get(COOKIE))


TOKEN_PAGE = b"operator-token"
"""`/?operator-token`: the console's shell without the IdP, for an operator who holds a static `--operator-token`
(the page asks for it and sends it as `Bearer` on every data route, as on a bearer-token gateway)."""


def wants_page(scope: Scope) -> bool:
    """Whether this is a browser's `GET` of a page that should sign the person in rather than answer 401."""
    return scope.get("method") in ("GET", "HEAD") and scope.get("path") in PAGE_PATHS


def token_page(scope: Scope) -> bool:
    """Whether this is `GET /?operator-token`: the shell (static code, no data) served without a credential."""
    return (
        scope.get("method") in ("GET", "HEAD") and scope.get("path") == "/" and scope.get("query_string") == TOKEN_PAGE
    )


def safe_next(value: str | None) -> str:
    """Where to send the browser after its sign-in: a path on this gateway only (never `//host` or a URL)."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    return value


def to_sign_in(scope: Scope, send: Send) -> Awaitable[None]:
    """302 to the browser sign-in, coming back to this very page (path and query)."""
    page = scope.get("path", "/")
    query: bytes = scope.get("query_string", b"")
    if query:
        page += "?" + query.decode("latin-1")
    location = f"{START_PATH}?next={quote(page, safe='')}"
    return _redirect(send, location)


async def _redirect(send: Send, location: str) -> None:
    headers: list[tuple[bytes, bytes]] = [
        (b"location", location.encode("latin-1")),
        (b"cache-control", b"no-store"),
        (b"content-length", b"0"),
    ]
    start: dict[str, Any] = {"type": "http.response.start", "status": 302, "headers": headers}
    await send(start)
    await send({"type": "http.response.body", "body": b""})
