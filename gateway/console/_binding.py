"""The binding of a started login to the browser that started it (RFC 6749 §10.12), shared by every login that
comes back to `CALLBACK_PATH` (the console's login, a per-user sign-in, a browser's sign-in to the gateway).

The start's answer sets a cookie (HttpOnly, SameSite=Lax, path the callback, one per login, named by a digest of
its `state`) holding the login's `state`, and the page to go back to, sealed with the deployment's key; the
callback refuses a redirect that does not bring it back (`same_browser`).
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import parse_qsl, urlsplit

from starlette.requests import Request
from starlette.responses import Response

from ..state.pending_logins import LOGIN_TTL
from ._services import ConsoleServices

__all__ = ["CALLBACK_PATH", "bind_browser", "cookie_name", "redirect_uri_of", "same_browser"]

CALLBACK_PATH = "/v1/oauth/callback"


def redirect_uri_of(request: Request) -> str:
    """The callback at the origin the browser sees: its `Origin` (the request guard checked it is this
    server's own; behind a TLS proxy it says `https`, which the socket cannot), else scheme and `Host`."""
    origin = request.headers.get("origin")
    if origin:
        return f"{origin.rstrip('/')}{CALLBACK_PATH}"
    return f"{request.url.scheme}://{request.headers.get('host', '')}{CALLBACK_PATH}"


def bind_browser(
    answer: Response, services: ConsoleServices, authorization_url: str, redirect_uri: str, *, then: str = ""
) -> None:
    """Set the cookie that only the browser which started this login brings back to the callback (module
    docstring), on `answer`; `then`: the page a browser sign-in goes back to (`_browser.py`)."""
    state = dict(parse_qsl(urlsplit(authorization_url).query)).get("state", "")
    answer.set_cookie(
        cookie_name(state),
        services.sealer.seal_login({"browser": state, "then": then}),
        max_age=int(LOGIN_TTL),
        path=CALLBACK_PATH,
        secure=redirect_uri.startswith("https:"),
        httponly=True,
        samesite="lax",  # sent on the authorization server's redirect back (a top-level GET)
    )


def cookie_name(state: str) -> str:
    """One cookie per started login, named by a digest of its `state` (a browser may start several)."""
    return "agent-sdk-login-" + hashlib.sha256(state.encode()).hexdigest()[:16]


def same_browser(request: Request, services: ConsoleServices, state: str) -> str | None:
    """The page to go back to when this redirect brings back the cookie the login's start set (module
    docstring); None when it does not."""
    opened = services.sealer.open_login(request.cookies.get(cookie_name(state)))
    bound = opened.get("browser") if opened is not None else None
    if not (isinstance(bound, str) and bool(state) and hmac.compare_digest(bound.encode(), state.encode())):
        return None
    assert opened is not None
    then = opened.get("then")
    return then if isinstance(then, str) else ""
