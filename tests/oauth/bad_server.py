"""Misbehaving authorization servers for the bad-input tests, each behind its own path prefix.

    python tests/oauth/bad_server.py PORT

For MODE in `nos256`, `garbage-metadata`, `garbage-token`, a resource at `/MODE/mcp` answers 401 with
a challenge pointing at its protected-resource metadata, which names the authorization server
`http://127.0.0.1:PORT/MODE`:
- `nos256`: metadata without `code_challenge_methods_supported`;
- `garbage-metadata`: the metadata URLs answer an HTML page with status 200;
- `garbage-token`: good metadata, an authorize endpoint that redirects straight back with a code,
  and a token endpoint that answers HTML with status 200;
- `evil-error`: good metadata, an authorize endpoint that redirects back with `error` and an
  `error_description` full of terminal escape sequences and a right-to-left override;
- `evil-token`: a token endpoint whose `error` and (long) `error_description` carry escape sequences;
- `evil-issuer`: metadata whose `issuer` carries escape sequences (and so is not the issuer asked);
- `plain-as`: resource metadata naming a plain-http authorization server that is not loopback;
- `plain-prm`: a challenge pointing at plain-http resource metadata on another (non-loopback) origin;
- `plain-token`: metadata whose token endpoint is plain http on a non-loopback name.
`GET /_hits` answers how many requests each path received.
"""

from __future__ import annotations

import sys
from collections import Counter
from urllib.parse import urlencode

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

PORT = int(sys.argv[1])
BASE = f"http://127.0.0.1:{PORT}"
EVIL = "\x1b[2J\x1b]0;owned\x07\u202eevil\x1b[31m"
HITS: Counter[str] = Counter()


async def hits(request: Request) -> Response:
    return JSONResponse(dict(HITS))


async def resource(request: Request) -> Response:
    mode = request.path_params["mode"]
    HITS[request.url.path] += 1
    prm = f"{BASE}/.well-known/oauth-protected-resource/{mode}/mcp"
    if mode == "plain-prm":
        prm = "http://metadata.example.test/.well-known/oauth-protected-resource/plain-prm/mcp"
    return JSONResponse({"error": "invalid_token"}, 401, {"WWW-Authenticate": f'Bearer resource_metadata="{prm}"'})


async def resource_metadata(request: Request) -> Response:
    HITS[request.url.path] += 1
    mode = request.path_params["mode"]
    server = "http://as.example.test/plain-as" if mode == "plain-as" else f"{BASE}/{mode}"
    return JSONResponse({"resource": f"{BASE}/{mode}/mcp", "authorization_servers": [server]})


async def server_metadata(request: Request) -> Response:
    HITS[request.url.path] += 1
    mode = request.path_params["mode"]
    if mode == "garbage-metadata":
        return HTMLResponse("<html><body>Welcome to our portal</body></html>")
    issuer = f"{BASE}/{mode}"
    meta: dict[str, object] = {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/authorize",
        "token_endpoint": f"{issuer}/token",
        "registration_endpoint": f"{issuer}/register",
        "response_types_supported": ["code"],
    }
    if mode != "nos256":
        meta["code_challenge_methods_supported"] = ["S256"]
    if mode == "evil-issuer":
        meta["issuer"] = f"{issuer}{EVIL}"
    if mode == "plain-token":
        meta["token_endpoint"] = "http://token.example.test/plain-token/token"
    return JSONResponse(meta)


async def register(request: Request) -> Response:
    HITS[request.url.path] += 1
    body = await request.json()
    return JSONResponse({"client_id": "bad-client", "redirect_uris": body["redirect_uris"]}, 201)


async def authorize(request: Request) -> Response:
    HITS[request.url.path] += 1
    query = request.query_params
    answer = {"code": "c0de", "state": query["state"]}
    if request.path_params["mode"] == "evil-error":
        answer = {"error": f"server_error{EVIL}", "error_description": f"try again{EVIL}", "state": query["state"]}
    target = f"{query['redirect_uri']}?{urlencode(answer)}"
    return RedirectResponse(target, 302)


async def token(request: Request) -> Response:
    HITS[request.url.path] += 1
    if request.path_params["mode"] == "evil-token":
        return JSONResponse({"error": f"invalid_request{EVIL}", "error_description": f"{EVIL}x" * 50}, 400)
    return HTMLResponse("<html><body>502 upstream hiccup</body></html>")


app = Starlette(
    routes=[
        Route("/_hits", hits),
        Route("/{mode}/mcp", resource, methods=["GET", "POST"]),
        Route("/.well-known/oauth-protected-resource/{mode}/mcp", resource_metadata),
        Route("/.well-known/oauth-authorization-server/{mode}", server_metadata),
        Route("/.well-known/openid-configuration/{mode}", server_metadata),
        Route("/{mode}/.well-known/openid-configuration", server_metadata),
        Route("/{mode}/register", register, methods=["POST"]),
        Route("/{mode}/authorize", authorize),
        Route("/{mode}/token", token, methods=["POST"]),
    ]
)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")
