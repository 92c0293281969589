"""A real MCP resource server for the oauth tests: MCP's own server behind a JWT check bound to its audience.

    python tests/oauth/resource_server.py PORT ISSUER

- `POST /mcp`: stateless Streamable HTTP MCP (tools `echo`, and `whoami`, which answers the token's `sub`:
  whose grant the call came with); every request needs
  `Authorization: Bearer <JWT>` signed by ISSUER's JWKS with `iss` = ISSUER, `aud` = this server's
  `/mcp` URL (RFC 8707 audience binding) and `exp` in the future, else 401 with an RFC 9728
  `WWW-Authenticate` challenge.
- `GET /.well-known/oauth-protected-resource/mcp`: RFC 9728 metadata naming ISSUER.
- `POST /_control/reject-next`: the next authenticated MCP request gets a 401 anyway (a token revoked
  mid-session, as far as the client can tell).
- `POST /_control/reject-subject?sub=S`: from now on tokens of subject S get a 401 (as a resource server that
  learned the user's grant was revoked).
- `GET /_control/stats`: `{"ok": n, "unauthorized": n, "tokens": distinct tokens accepted,
  "whoami": {subject: calls answered}}`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
import time
from collections import Counter
from typing import Any
from urllib.parse import parse_qs

import httpx2
import uvicorn
from authlib.jose import JsonWebKey, JsonWebToken
from authlib.jose.errors import JoseError
from mcp.server.mcpserver import Context, MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send

PORT = int(sys.argv[1])
ISSUER = sys.argv[2]
BASE = f"http://127.0.0.1:{PORT}"
RESOURCE = f"{BASE}/mcp"
PRM_URL = f"{BASE}/.well-known/oauth-protected-resource/mcp"

mcp = MCPServer("oauth-test-resource")


@mcp.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


CALLS: Counter[str] = Counter()


@mcp.tool()
def whoami(ctx: Context) -> str:
    """The subject (`sub`) of the access token this call came with (the gate verified the token)."""
    token = (ctx.headers or {})["authorization"][7:]
    body = token.split(".")[1]
    subject = str(json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))["sub"])
    CALLS[subject] += 1
    return subject


class BearerGate:
    """Pure ASGI middleware: metadata and control routes, then the audience-bound JWT check."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.jwt = JsonWebToken(["RS256"])
        self.keys: Any = None
        self.reject_next = False
        self.stats: dict[str, Any] = {"ok": 0, "unauthorized": 0}
        self.tokens: set[str] = set()
        self.rejected: set[str] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
            meta = {
                "resource": RESOURCE,
                "authorization_servers": [ISSUER],
                "scopes_supported": ["mcp:tools"],
                "bearer_methods_supported": ["header"],
            }
            await _json(send, 200, meta)
            return
        if path == "/_control/reject-next":
            self.reject_next = True
            await _json(send, 200, {"ok": True})
            return
        if path == "/_control/reject-subject":
            self.rejected.update(parse_qs(scope["query_string"].decode()).get("sub", []))
            await _json(send, 200, {"ok": True})
            return
        if path == "/_control/stats":
            await _json(send, 200, {**self.stats, "tokens": len(self.tokens), "whoami": dict(CALLS)})
            return
        headers = dict(scope["headers"])
        value = headers.get(b"authorization", b"").decode()
        token = value[7:] if value[:7].lower() == "bearer " else ""
        if not token or not await self.valid(token) or self.reject_next:
            self.reject_next = False
            self.stats["unauthorized"] += 1
            challenge = f'Bearer error="invalid_token", scope="mcp:tools", resource_metadata="{PRM_URL}"'
            await _json(send, 401, {"error": "invalid_token"}, [(b"www-authenticate", challenge.encode())])
            return
        self.stats["ok"] += 1
        self.tokens.add(hashlib.sha256(token.encode()).hexdigest())
        await self.app(scope, receive, send)

    async def valid(self, token: str) -> bool:
        if self.keys is None:
            async with httpx2.AsyncClient() as client:
                self.keys = JsonWebKey.import_key_set((await client.get(f"{ISSUER}/jwks")).json())
        try:
            claims = self.jwt.decode(
                token,
                self.keys,
                claims_options={"iss": {"essential": True, "value": ISSUER}, "aud": {"essential": True}},
            )
            claims.validate(now=int(time.time()), leeway=0)
        except (JoseError, ValueError):
            return False
        if str(claims.get("sub")) in self.rejected:
            return False
        audience = claims.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        return RESOURCE in audiences


async def _json(send: Send, status: int, body: object, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    payload = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": payload})


app = BearerGate(mcp.streamable_http_app(stateless_http=True, json_response=True))

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning", lifespan="on")
