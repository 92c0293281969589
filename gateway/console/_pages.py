"""`GET /` and `GET /console/{file}`: the console's page, script and style, served from the package.

No CDN, no build step, no inline script: the Content-Security-Policy below allows scripts, styles
and requests from this server's own origin only (`img-src data:` for a tool's image results).
"""

from __future__ import annotations

import html
from collections.abc import Awaitable, Callable
from importlib.resources import files

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from oauth._shared import printable

__all__ = ["CSP", "SHELL_PATHS", "page", "page_routes"]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_TYPES = {
    "index.html": "text/html; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}
SHELL_PATHS = ("/", *(f"/console/{name}" for name in _TYPES if name != "index.html"))
"""The page shell: static code with no data in it (the data routes sit behind the auth chain)."""


def _headers(media: str) -> dict[str, str]:
    return {
        "content-type": media,
        "content-security-policy": CSP,
        "x-content-type-options": "nosniff",
        "referrer-policy": "no-referrer",
        "cache-control": "no-cache",
    }


_PAGE = (
    '<!doctype html><html lang="en"><meta charset="utf-8"><title>agent-sdk login</title>'
    '<link rel="stylesheet" href="/console/console.css"><main class="callback">'
    '<h1>{title}</h1><p id="login-result">{message}</p><p><a href="/">Back to the console</a></p></main></html>'
)


def page(status: int, title: str, message: str) -> Response:
    body = _PAGE.format(title=html.escape(title), message=html.escape(message))
    headers = {"content-security-policy": CSP, "cache-control": "no-store", "referrer-policy": "no-referrer"}
    return Response(body, status_code=status, media_type="text/html", headers=headers)


def _not_an_operator(request: Request) -> Response | None:
    """On an OAuth gateway, the page a signed-in person who is not an operator gets instead of the console."""
    principal = getattr(request.state, "principal", None)
    if principal is None or principal.kind != "oauth" or principal.is_operator or principal.oauth is None:
        return None
    settings = request.state.runtime.settings
    grants = [f"--operator-claim {c}" for c in settings.operator_claims]
    grants += [f"--operator-scope {s}" for s in settings.operator_scopes]
    how = f"those this gateway names with {' or '.join(grants)}" if grants else "those with an --operator-token"
    return page(
        403,
        "Not an operator",
        f"You are signed in as {printable(principal.display, 120)}, who is not an operator of this "
        f"gateway. The console acts on the gateway, so it is for operators: {how}. Ask whoever runs the gateway "
        "to add you; your agent's tools keep working with your own sign-in."
        + (" An operator with an --operator-token opens /?operator-token instead." if settings.operator_tokens else ""),
    )


def page_routes() -> list[Route]:
    """The shell's routes; each file is read once, here."""
    static = files("gateway.console").joinpath("static")
    bodies = {name: static.joinpath(name).read_bytes() for name in _TYPES}

    def serve(name: str) -> Callable[[Request], Awaitable[Response]]:
        body, headers = bodies[name], _headers(_TYPES[name])

        async def endpoint(_request: Request) -> Response:
            return Response(body, headers=headers)

        return endpoint

    shell = serve("index.html")

    async def index(request: Request) -> Response:
        refusal = _not_an_operator(request)
        return refusal if refusal is not None else await shell(request)

    return [
        Route("/", index, methods=["GET"]),
        *(Route(f"/console/{name}", serve(name), methods=["GET"]) for name in _TYPES if name != "index.html"),
    ]
