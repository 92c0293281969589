"""`GET /` and `GET /console/{file}`: the console's page, script and style, served from the package.

No CDN, no build step, no inline script: the Content-Security-Policy below allows scripts, styles
and requests from this server's own origin only (`img-src data:` for a tool's image results).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib.resources import files

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

__all__ = ["CSP", "SHELL_PATHS", "page_routes"]

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


def page_routes() -> list[Route]:
    """The shell's routes; each file is read once, here."""
    static = files("gateway.console").joinpath("static")
    bodies = {name: static.joinpath(name).read_bytes() for name in _TYPES}

    def serve(name: str) -> Callable[[Request], Awaitable[Response]]:
        body, headers = bodies[name], _headers(_TYPES[name])

        async def endpoint(_request: Request) -> Response:
            return Response(body, headers=headers)

        return endpoint

    return [
        Route("/", serve("index.html"), methods=["GET"]),
        *(Route(f"/console/{name}", serve(name), methods=["GET"]) for name in _TYPES if name != "index.html"),
    ]
