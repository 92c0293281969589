"""An MCP server protected by the `mcp` Python SDK's own server-side auth: Bearer tokens only.

    python tests/oauth/sdk_bearer_server.py PORT ISSUER

`MCPServer(token_verifier=..., auth=AuthSettings(...))`: the SDK's `BearerAuthBackend` reads
`Authorization: Bearer <token>` and nothing else (a DPoP-bound token sent as `Authorization: DPoP` is a
401 `WWW-Authenticate: Bearer error="invalid_token"`), its RFC 9728 metadata at
`/.well-known/oauth-protected-resource/mcp` names ISSUER and says nothing of DPoP. The verifier checks
ISSUER's JWTs (joserfc: signature, `iss`, `aud` = this server's `/mcp`, `exp`), as an MCP server written
with the SDK would. Tool `whoami` answers the token's `sub`; `GET /_control/stats` answers
`{"whoami": {sub: calls}, "schemes": {scheme: requests}}`.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

import httpx2
import uvicorn
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send

PORT = int(sys.argv[1])
ISSUER = sys.argv[2]
RESOURCE = f"http://127.0.0.1:{PORT}/mcp"
CALLS: Counter[str] = Counter()
SCHEMES: Counter[str] = Counter()


class JwtVerifier:
    """The SDK's `TokenVerifier` protocol over ISSUER's JWKS."""

    def __init__(self) -> None:
        self.keys: KeySet | None = None

    async def verify_token(self, token: str) -> AccessToken | None:
        if self.keys is None:
            async with httpx2.AsyncClient() as client:
                self.keys = KeySet.import_key_set((await client.get(f"{ISSUER}/jwks")).json())
        try:
            claims: dict[str, Any] = jwt.decode(token, self.keys, algorithms=["RS256"]).claims
            jwt.JWTClaimsRegistry(iss={"essential": True, "value": ISSUER}, exp={"essential": True}).validate(claims)
        except (JoseError, ValueError):
            return None
        audience = claims.get("aud")
        if RESOURCE not in (audience if isinstance(audience, list) else [audience]):
            return None
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id", "")),
            scopes=str(claims.get("scope", "")).split(),
            expires_at=int(claims["exp"]),
            resource=RESOURCE,
            subject=str(claims.get("sub")),
        )


mcp = MCPServer(
    "sdk-bearer-resource",
    token_verifier=JwtVerifier(),
    auth=AuthSettings(issuer_url=ISSUER, resource_server_url=RESOURCE, required_scopes=["mcp:tools"]),  # pyright: ignore[reportArgumentType]
)


@mcp.tool()
def whoami() -> str:
    """The `sub` of the access token this call came with."""
    token = get_access_token()
    subject = token.subject if token is not None and token.subject else "?"
    CALLS[subject] += 1
    return subject


class Stats:
    """Counts the Authorization scheme of every request; answers `/_control/stats`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/_control/stats":
            body = httpx2.Response(200, json={"whoami": dict(CALLS), "schemes": dict(SCHEMES)}).content
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        if scope["type"] == "http" and scope["path"] == "/mcp":
            value = dict(scope["headers"]).get(b"authorization", b"").decode()
            SCHEMES[value.partition(" ")[0].lower() or "none"] += 1
        await self.app(scope, receive, send)


app = Stats(mcp.streamable_http_app(stateless_http=True, json_response=True))

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning", lifespan="on")
