"""Auth chains and request guards as pure ASGI middleware (in the manner of Uvicorn's `proxy_headers.py`).

`AuthChain` admits a request, or answers it itself, and records the admitted `Principal` in
`scope["state"]["principal"]`; routes derive ownership from it, never from the body.

- loopback-strict (default): only direct loopback peers. Any proxy-forwarding header
  (`Forwarded`, `X-Forwarded-*`, `X-Real-IP`) is 401: behind a proxy every caller would look
  like loopback.
- bearer (`--bearer-token`, repeatable): `Authorization: Bearer <token>`, compared in constant
  time; each token is its own principal.
- anonymous (`--allow-anonymous`): everyone is the one principal `anonymous` (demo only).

In every mode a server bound to loopback also checks `Host` (421) and `Origin` (403), the
defence against DNS rebinding (MCP spec, Streamable HTTP transport, "Security Warning"). A
server bound elsewhere only requires an `Origin` to match its `Host`.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import ipaddress
import json
import logging
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import SecretStr
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["AuthChain", "BodyLimit", "Principal", "send_error"]

logger = logging.getLogger("agent_sdk.auth")

_FORWARDING_HEADERS = (b"forwarded", b"x-real-ip")
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True, slots=True)
class Principal:
    """Who the auth chain admitted. `id` is stable for one credential and is what owns sessions."""

    id: str
    kind: Literal["loopback", "bearer", "anonymous"]


_ANONYMOUS = Principal("anonymous", "anonymous")
_LOOPBACK = Principal("loopback", "loopback")


def _is_mcp_path(scope: Scope) -> bool:
    path: str = scope.get("path", "")
    return path == "/v1/mcp" or path.startswith("/v1/mcp/")


async def send_error(
    scope: Scope, send: Send, status: int, code: str, message: str, headers: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    """Answer with our JSON error shape, or a JSON-RPC error (id null) on the MCP endpoints."""
    if _is_mcp_path(scope):
        body: dict[str, Any] = {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32001 if status in (401, 403) else -32600, "message": message, "data": {"error": code}},
        }
    else:
        body = {"ok": False, "error": code, "message": message}
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None


def _host_name(value: str) -> str:
    """`127.0.0.1:3000` -> `127.0.0.1`; `[::1]:3000` -> `::1`."""
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


@functools.lru_cache(maxsize=256)  # one Host per client in practice; the cache is bounded whatever is sent
def _is_loopback_name(name: str) -> bool:
    name = name.lower().rstrip(".")
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@functools.lru_cache(maxsize=256)
def _is_loopback_address(address: str) -> bool:
    """Whether the peer address is a loopback IP (names do not count here: it is the socket's address)."""
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode()).digest()


class AuthChain:
    """Admit or refuse each HTTP request before `app` sees it; `public_paths` skip the chain."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        mode: Literal["loopback-strict", "bearer", "anonymous"],
        bearer_tokens: Iterable[SecretStr] = (),
        loopback_bound: bool = True,
        public_paths: Iterable[str] = (),
    ) -> None:
        self.app = app
        self.mode = mode
        # Keep only digests: the chain compares digests, so the tokens never sit here in clear.
        self._tokens = [
            (_digest(t.get_secret_value()), _digest(t.get_secret_value()).hex()[:12]) for t in bearer_tokens
        ]
        if mode == "bearer" and not self._tokens:
            raise ValueError("bearer mode needs at least one token")
        self.loopback_bound = loopback_bound
        self.public_paths = frozenset(public_paths)

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Decides synchronously and hands back the coroutine to await (the app's, or the refusal's):
        # no frame of its own for every resume of the request to pass through. (Only inner layers
        # can: servers tell an ASGI 3 app from an ASGI 2 one by an `async def __call__`, so the
        # outermost app, `AccountGate`, keeps one.)
        if scope["type"] != "http":
            return self.app(scope, receive, send)
        refusal = self._check_origin(scope)
        if refusal is not None:
            status, code, message = refusal
            logger.warning("refused %s %s: %s", scope.get("method"), scope.get("path"), code)
            return send_error(scope, send, status, code, message)
        if scope.get("path") in self.public_paths:
            return self.app(scope, receive, send)
        principal, refusal = self._admit(scope)
        if principal is None:
            assert refusal is not None
            status, code, message = refusal
            logger.warning("refused %s %s: %s", scope.get("method"), scope.get("path"), code)
            extra = [(b"www-authenticate", b'Bearer realm="agent-sdk"')] if self.mode == "bearer" else []
            return send_error(scope, send, status, code, message, extra)
        state: dict[str, Any] = scope.setdefault("state", {})
        state["principal"] = principal
        return self.app(scope, receive, send)

    def _check_origin(self, scope: Scope) -> tuple[int, str, str] | None:
        host = _header(scope, b"host")
        origin = _header(scope, b"origin")
        if self.loopback_bound:
            if host is None or not _is_loopback_name(_host_name(host)):
                return 421, "misdirected_request", "this server answers only to a loopback Host (DNS rebinding guard)"
            if origin is not None:
                parts = urlsplit(origin)
                if parts.scheme not in ("http", "https") or not _is_loopback_name(parts.hostname or ""):
                    return 403, "forbidden_origin", "requests from a non-loopback Origin are refused"
        elif origin is not None:
            parts = urlsplit(origin)
            if host is None or parts.netloc.lower() != host.lower():
                return 403, "forbidden_origin", "a cross-origin request is refused"
        return None

    def _admit(self, scope: Scope) -> tuple[Principal | None, tuple[int, str, str] | None]:
        if self.mode == "anonymous":
            return _ANONYMOUS, None
        if self.mode == "bearer":
            return self._admit_bearer(scope)
        for key, _value in scope.get("headers", []):
            if key in _FORWARDING_HEADERS or key.startswith(b"x-forwarded-"):
                return None, (401, "unauthorized", "proxy-forwarded requests are refused in loopback-strict mode")
        client = scope.get("client")
        direct = client is not None and _is_loopback_address(client[0])
        if not direct:
            return None, (401, "unauthorized", "only direct loopback peers are admitted; use --bearer-token")
        return _LOOPBACK, None

    def _admit_bearer(self, scope: Scope) -> tuple[Principal | None, tuple[int, str, str] | None]:
        value = _header(scope, b"authorization") or ""
        scheme, _, presented = value.partition(" ")
        if scheme.lower() != "bearer" or not presented.strip():
            return None, (401, "unauthorized", "send Authorization: Bearer <token>")
        presented_digest = _digest(presented.strip())
        matched: str | None = None
        # Compare against every token, without an early exit, so timing says nothing about which.
        for digest, fingerprint in self._tokens:
            if hmac.compare_digest(presented_digest, digest):
                matched = fingerprint
        if matched is None:
            return None, (401, "unauthorized", "the bearer token is not valid")
        return Principal(f"bearer:{matched}", "bearer"), None


class BodyLimit:
    """413 for a body over `max_bytes`: at once when `Content-Length` says so (nothing is read; a
    declared length within the cap bounds the body, since the server frames it by that length),
    otherwise as soon as the streamed body passes the cap (at most `max_bytes` are buffered)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Like `AuthChain`: a plain function handing back the coroutine to await.
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS", "DELETE"):
            return self.app(scope, receive, send)
        declared = _header(scope, b"content-length")
        if declared is None:
            return self._counted(scope, receive, send)
        try:
            size = int(declared)
        except ValueError:
            return send_error(scope, send, 400, "invalid_request", "Content-Length is not a number")
        if size > self.max_bytes:
            return send_error(scope, send, 413, "payload_too_large", f"the body is over {self.max_bytes} bytes")
        # The server reads exactly the declared length as the body (HTTP/1.1 framing): nothing to count.
        return self.app(scope, receive, send)

    async def _counted(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A body without a declared length: buffered up to the cap, then replayed to the app."""
        buffered = bytearray()
        pending: list[Message] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                pending.append(message)
                break
            buffered.extend(message.get("body", b""))
            if len(buffered) > self.max_bytes:
                await send_error(scope, send, 413, "payload_too_large", f"the body is over {self.max_bytes} bytes")
                return
            if not message.get("more_body", False):
                break
        replay: list[Message] = [{"type": "http.request", "body": bytes(buffered), "more_body": False}, *pending]

        async def replayed() -> Message:
            if replay:
                return replay.pop(0)
            return await receive()

        await self.app(scope, replayed, send)
