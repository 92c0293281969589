"""A real MCP resource server for the oauth tests: MCP's own server behind a JWT check bound to its audience.

    python tests/oauth/resource_server.py PORT ISSUER [dpop-required]

- `POST /mcp`: stateless Streamable HTTP MCP (tools `echo`, `whoami`); every request needs
  `Authorization: Bearer <JWT>` signed by ISSUER's JWKS with `iss` = ISSUER, `aud` = this server's
  `/mcp` URL (RFC 8707 audience binding) and `exp` in the future, else 401 with an RFC 9728
  `WWW-Authenticate` challenge.
- `GET /.well-known/oauth-protected-resource/mcp`: RFC 9728 metadata naming ISSUER.
- A DPoP-bound token (RFC 9449: `cnf.jkt`) must come as `Authorization: DPoP` with a proof signed by
  that key for this request (`htm`, `htu`, `iat`, a `jti` not seen before, `ath`); without one it is
  refused (401 `WWW-Authenticate: DPoP error="invalid_token"`). The proof is checked with joserfc.
- `dpop-required`: its metadata says `dpop_bound_access_tokens_required` (RFC 9728 §2) and an unbound token
  is refused (401 `WWW-Authenticate: DPoP error="invalid_token"`); without it, both kinds are taken.
- `POST /_control/dpop-nonce?mode=once|always|off`: `once` demands the server's current nonce in every
  proof (401 `use_dpop_nonce` with a `DPoP-Nonce` when it is missing or stale); `always` demands a new
  one on every request (a nonce loop, for the client's refusal).
- `POST /_control/reject-next`: the next authenticated MCP request gets a 401 anyway (a token revoked
  mid-session, as far as the client can tell).
- `POST /_control/reject-subject?sub=S`: from now on tokens of subject S get a 401 (as a resource server that
  learned the user's grant was revoked).
- `POST /_control/describe?sub=S&text=T`: from now on the `echo` tool that subject S lists is described as T
  (an upstream whose listing depends on who lists it).
- `POST /_control/require-scope?scope=S`: from now on a token whose `scope` claim lacks S gets a 403
  `WWW-Authenticate: Bearer error="insufficient_scope", scope="S"` (RFC 6750 §3.1; the MCP spec's step-up).
- `GET /_control/stats`: `{"ok": n, "unauthorized": n, "tokens": distinct tokens accepted, "digests": their
  SHA-256, "subjects": {sub: requests}, "dpop": requests with a valid proof, "nonce_demands": n,
  "whoami": {subject: whoami calls answered}}`.
- tool `whoami` answers the `sub` of the token that called it.
"""

from __future__ import annotations

import base64
import contextvars
import hashlib
import json
import secrets
import sys
import time
from collections import Counter
from typing import Any
from urllib.parse import parse_qs

import httpx2
import uvicorn
from authlib.jose import JsonWebKey, JsonWebToken
from authlib.jose.errors import JoseError
from joserfc import jwt as jose_jwt
from joserfc.errors import JoseError as JoserfcError
from joserfc.jwk import ECKey, OKPKey
from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send

PORT = int(sys.argv[1])
ISSUER = sys.argv[2]
DPOP_REQUIRED = sys.argv[3:] == ["dpop-required"]
BASE = f"http://127.0.0.1:{PORT}"
RESOURCE = f"{BASE}/mcp"
PRM_URL = f"{BASE}/.well-known/oauth-protected-resource/mcp"

mcp = MCPServer("oauth-test-resource")
SUBJECT: contextvars.ContextVar[str] = contextvars.ContextVar("subject", default="?")
CALLS: Counter[str] = Counter()


@mcp.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@mcp.tool()
def whoami() -> str:
    """The `sub` of the access token this call came with."""
    CALLS[SUBJECT.get()] += 1
    return SUBJECT.get()


class BearerGate:
    """Pure ASGI middleware: metadata and control routes, then the audience-bound JWT check."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.jwt = JsonWebToken(["RS256"])
        self.keys: Any = None
        self.reject_next = False
        self.stats: dict[str, Any] = {"ok": 0, "unauthorized": 0, "subjects": {}, "dpop": 0, "nonce_demands": 0}
        self.tokens: set[str] = set()
        self.jtis: set[str] = set()
        self.rejected: set[str] = set()
        self.described: dict[str, str] = {}
        self.nonce_mode = "off"
        self.required_scope: str | None = None
        self.nonce = secrets.token_urlsafe(12)

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
                **({"dpop_bound_access_tokens_required": True} if DPOP_REQUIRED else {}),
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
        if path == "/_control/describe":
            query = parse_qs(scope["query_string"].decode())
            self.described[query["sub"][0]] = query["text"][0]
            await _json(send, 200, {"ok": True})
            return
        if path == "/_control/stats":
            stats = {**self.stats, "tokens": len(self.tokens), "digests": sorted(self.tokens), "whoami": dict(CALLS)}
            await _json(send, 200, stats)
            return
        if path == "/_control/require-scope":
            self.required_scope = parse_qs(scope["query_string"].decode()).get("scope", [None])[0]
            await _json(send, 200, {"ok": True})
            return
        if path == "/_control/dpop-nonce":
            self.nonce_mode = parse_qs(scope["query_string"].decode()).get("mode", ["off"])[0]
            await _json(send, 200, {"ok": True})
            return
        headers = dict(scope["headers"])
        value = headers.get(b"authorization", b"").decode()
        scheme, _, token = value.partition(" ")
        scheme = scheme.lower()
        claims = await self.valid(token) if scheme in ("bearer", "dpop") and token else None
        proof = headers.get(b"dpop", b"").decode()
        refusal = self.bound(claims, scheme, token, proof, scope["method"]) if claims else None
        if refusal == "use_dpop_nonce":
            self.stats["nonce_demands"] += 1
            self.nonce = secrets.token_urlsafe(12)
            challenge = 'DPoP error="use_dpop_nonce", error_description="send the server nonce", algs="ES256"'
            extra = [(b"www-authenticate", challenge.encode()), (b"dpop-nonce", self.nonce.encode())]
            await _json(send, 401, {"error": "use_dpop_nonce"}, extra)
            return
        if claims is not None and str(claims.get("sub")) in self.rejected:
            claims = None
        if claims is None or refusal is not None or self.reject_next:
            self.reject_next = False
            self.stats["unauthorized"] += 1
            if refusal is not None:
                challenge = f'DPoP error="invalid_token", error_description="{refusal}", algs="ES256"'
            elif DPOP_REQUIRED:
                challenge = f'DPoP error="invalid_token", resource_metadata="{PRM_URL}", algs="ES256"'
            else:
                challenge = f'Bearer error="invalid_token", scope="mcp:tools", resource_metadata="{PRM_URL}"'
            await _json(send, 401, {"error": "invalid_token"}, [(b"www-authenticate", challenge.encode())])
            return
        held = str(claims.get("scope") or "").split()
        if self.required_scope is not None and self.required_scope not in held:
            self.stats["insufficient_scope"] = self.stats.get("insufficient_scope", 0) + 1
            challenge = (
                f'Bearer error="insufficient_scope", scope="{self.required_scope}", resource_metadata="{PRM_URL}", '
                'error_description="this call needs another scope"'
            )
            await _json(send, 403, {"error": "insufficient_scope"}, [(b"www-authenticate", challenge.encode())])
            return
        self.stats["ok"] += 1
        subject = str(claims.get("sub"))
        self.stats["subjects"][subject] = self.stats["subjects"].get(subject, 0) + 1
        self.tokens.add(hashlib.sha256(token.encode()).hexdigest())
        SUBJECT.set(subject)
        described = self.described.get(subject)
        await self.app(scope, receive, send if described is None else _describing(send, described))

    def bound(self, claims: Any, scheme: str, token: str, proof: str, method: str) -> str | None:
        """RFC 9449 §7: None when the token may be used as presented, else why not (or "use_dpop_nonce")."""
        cnf = claims.get("cnf") if isinstance(claims.get("cnf"), dict) else {}
        jkt = cnf.get("jkt")
        if jkt is None and DPOP_REQUIRED:
            return "this resource takes DPoP-bound tokens only"
        if jkt is None:
            return "the token is not DPoP-bound: send it as Bearer" if scheme == "dpop" else None
        if scheme != "dpop" or not proof:
            return "the token is DPoP-bound: send it as Authorization DPoP with a DPoP proof"
        try:
            header = json.loads(base64.urlsafe_b64decode(proof.split(".")[0] + "==="))
            key = (ECKey if header["jwk"]["kty"] == "EC" else OKPKey).import_key(header["jwk"])
            if header.get("typ") != "dpop+jwt" or header.get("alg") not in ("ES256", "EdDSA", "Ed25519"):
                return "the proof is not a dpop+jwt"
            payload = jose_jwt.decode(proof, key, algorithms=[header["alg"]]).claims
        except (JoserfcError, ValueError, KeyError, TypeError):
            return "the proof is not a valid signed JWT"
        if key.thumbprint() != jkt:
            return "the proof is signed by another key than the token is bound to"
        ath = base64.urlsafe_b64encode(hashlib.sha256(token.encode()).digest()).rstrip(b"=").decode()
        if payload.get("htm") != method or payload.get("htu") != RESOURCE or payload.get("ath") != ath:
            return "the proof is for another request or token"
        if abs(time.time() - float(payload.get("iat", 0))) > 300 or payload.get("jti") in self.jtis:
            return "the proof is stale or replayed"
        if self.nonce_mode == "always" or (self.nonce_mode == "once" and payload.get("nonce") != self.nonce):
            return "use_dpop_nonce"
        self.jtis.add(str(payload.get("jti")))
        self.stats["dpop"] += 1
        return None

    async def valid(self, token: str) -> Any:
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
            return None
        audience = claims.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        return claims if RESOURCE in audiences else None


def _describing(send: Send, text: str) -> Send:
    """`send` with the `echo` tool of a `tools/list` answer (one JSON body) described as `text`."""
    start: dict[str, Any] = {}
    chunks: list[bytes] = []

    async def rewritten(message: Any) -> None:
        if message["type"] == "http.response.start":
            start.update(message)
            return
        chunks.append(message.get("body", b""))
        if message.get("more_body"):
            return
        body = b"".join(chunks)
        try:
            answer = json.loads(body)
            for tool in answer["result"]["tools"]:
                if tool["name"] == "echo":
                    tool["description"] = text
            body = json.dumps(answer).encode()
        except (ValueError, KeyError, TypeError):
            pass
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return rewritten


async def _json(send: Send, status: int, body: object, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    payload = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": payload})


app = BearerGate(mcp.streamable_http_app(stateless_http=True, json_response=True))

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning", lifespan="on")
