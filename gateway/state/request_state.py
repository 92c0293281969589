"""Sealed `requestState`: how a 2026-07-28 peer's retry finds its way back to the same upstream call.

MCP 2026-07-28 (SEP-2322) has a server answer `tools/call` with an `InputRequiredResult`, whose
`requestState` the client echoes, untouched, on the retry that carries its answers. `/v1/mcp/tools`
is stateless and may run as several replicas, so the gateway keeps nothing per call: it seals what
the retry needs into the `requestState` it hands the peer, with authenticated encryption
(AES-256-GCM, `cryptography`), under a key every replica of the deployment shares
(`state_key.py`: a key the deployment gives every replica, never kept in Redis; for one process,
`<state root>/request-state.key`, 0600). What is sealed:

- the principal the auth chain admitted, the gateway tool and the connection it forwards to: a
  state is honoured only for the same principal calling the same tool;
- the upstream's own `requestState` (opaque to the gateway and to the peer), or the id of a call
  this replica holds open (`pending`, the bridged pairings);
- an expiry (`REQUEST_STATE_TTL_S` after sealing) and a random id. A state is good for one retry:
  its id is claimed on use (`UsedStates`: in memory, or Redis `SET NX` with `--state-url`), so a
  replayed state is refused like a forged one.

A handshake peer's `Mcp-Session-Id` is sealed the same way (`seal_session`). Its DELETE ends it for
good: `end_session` claims the digest of the id in the same used-state store (so every replica sharing
the Redis sees it), until the id would have expired anyway; `live_session` is then false, and every
request that carries it is answered 404, as the Streamable HTTP transport says of an ended session.

Each refusal is a JSON-RPC INVALID_PARAMS error whose message says which check failed
(`RequestStateRefused`), never what the state held.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as mt
from cachetools import LRUCache
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from mcp.shared.exceptions import MCPError

from ..errors import GatewayError
from .used_states import MemoryUsedStates, RedisUsedStates, UsedStates

__all__ = [
    "PEER_SESSION_TTL_S",
    "REQUEST_STATE_TTL_S",
    "SIGN_IN_TTL_S",
    "MemoryUsedStates",
    "RedisUsedStates",
    "RequestStateRefused",
    "RequestStates",
    "SealedState",
    "SealedTask",
    "UsedStates",
    "canonical_b64decode",
]

REQUEST_STATE_TTL_S = 600.0
"""How long a peer has to answer and retry (docs/http-api.md)."""
PEER_SESSION_TTL_S = 7 * 24 * 3600.0
"""How long a handshake peer's sealed `Mcp-Session-Id` vouches for its capabilities (`mcp/peers/sessions.py`)."""

_PREFIX = "agent-sdk.rs1."
_SESSION_PREFIX = "agent-sdk.ps1."
_BARE_SESSION_PREFIX = "agent-sdk.ps0."
"""A session whose peer declared neither elicitation nor sampling: `open_session` refuses it on its prefix
alone, so its `tools/call`s cost no decryption (`gateway/mcp/peers/sessions.py`)."""
_TASK_PREFIX = "agent-sdk.task1."


@dataclass(frozen=True, slots=True)
class SealedTask:
    """What a sealed task id holds (`RequestStates.task_facts`)."""

    connection: str
    upstream_id: str
    owner: str
    """The replica whose pooled upstream session runs the task (`metrics.replica_id()`); "" in older ids."""
    created_at: str
    ttl: int | None


_LOGIN_PREFIX = "agent-sdk.login1."
_SIGN_IN_PREFIX = "agent-sdk.signin1."
_BROWSER_PREFIX = "agent-sdk.browser1."
SIGN_IN_TTL_S = 600.0
"""Seconds a principal's sign-in link (`seal_sign_in`) may be opened in."""
_AAD = b"agent-sdk requestState v1"


class RequestStateRefused(MCPError, GatewayError):
    """A `requestState` the gateway will not honour; the message names the check that failed."""

    def __init__(self, reason: str) -> None:
        super().__init__(code=mt.INVALID_PARAMS, message=f"requestState refused: {reason}")
        self.reason = reason


@dataclass(frozen=True, slots=True)
class SealedState:
    """What a `requestState` the gateway sealed holds."""

    principal: str
    tool: str
    connection: str | None
    upstream: str | None = None
    """The upstream's own `requestState` (a 2026-07-28 upstream)."""
    pending: str | None = None
    """A held upstream call's id (the bridged pairings; the replica that holds it answers)."""


class RequestStates:
    """Seals and opens `requestState`s with the deployment's key (module docstring)."""

    def __init__(
        self,
        key: bytes,
        used: UsedStates | None = None,
        *,
        ttl_s: float = REQUEST_STATE_TTL_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if len(key) != 32:
            raise ValueError("a requestState key is 32 bytes")
        self._aead = AESGCM(key)
        self._used = used if used is not None else MemoryUsedStates(clock)
        self._ttl = ttl_s
        self._clock = clock
        self._opened: LRUCache[object, dict[str, Any]] = LRUCache(maxsize=4096)
        """Sealed `Mcp-Session-Id`s already opened, with their payload (the checks on it still run each time)."""

    @classmethod
    def for_one_process(cls) -> RequestStates:
        """A sealer whose key lives and dies with this process (`serve --stdio`: one peer, one process)."""
        return cls(os.urandom(32))

    def __repr__(self) -> str:
        return "RequestStates(key=***)"

    def seal(self, state: SealedState) -> str:
        """`state` as an opaque, authenticated, expiring `requestState` string."""
        payload = {
            "p": state.principal,
            "t": state.tool,
            "c": state.connection,
            "u": state.upstream,
            "h": state.pending,
            "e": self._clock() + self._ttl,
            "j": secrets.token_hex(16),
        }
        return self._sealed(_PREFIX, payload)

    def seal_session(self, principal: str, capabilities: Mapping[str, Any]) -> str:
        """A handshake peer's `Mcp-Session-Id`: its principal and capabilities, sealed (`mcp/peers/sessions.py`)."""
        return self._sealed(
            _SESSION_PREFIX if capabilities else _BARE_SESSION_PREFIX,
            {"p": principal, "c": dict(capabilities), "e": self._clock() + PEER_SESSION_TTL_S},
        )

    def open_session(self, token: object, principal: str) -> dict[str, Any]:
        """The capabilities sealed in a peer's `Mcp-Session-Id`; {} for one this deployment did not seal for
        `principal`, that expired, or that declares none (the peer is then treated as one that cannot answer)."""
        if not isinstance(token, str) or not token.startswith(_SESSION_PREFIX):
            return {}  # every `tools/call` of a peer that declared neither feature: no decryption, no exception
        payload = self._session(token, principal, _SESSION_PREFIX)
        capabilities = payload.get("c") if payload is not None else None
        return dict(capabilities) if isinstance(capabilities, dict) else {}

    def holds_session(self, token: object, principal: str) -> bool:
        """Whether `token` is an `Mcp-Session-Id` this deployment sealed for `principal`, not expired
        (whatever the peer declared): the key of its GET stream and subscriptions (`gateway/mcp/peers/streams.py`)."""
        return self._session(token, principal, _session_prefix(token)) is not None

    async def live_session(self, token: str, principal: str) -> bool:
        """`holds_session`, and its DELETE has not ended it (on any replica sharing the used-state store).
        Raises `StateUnavailable` when that store cannot be read."""
        return self.holds_session(token, principal) and not await self._used.used(_ended(token))

    async def end_session(self, token: str, principal: str) -> bool:
        """End `token` for good (its DELETE): False when it is not a live session of `principal`. Raises
        `StateUnavailable` when the used-state store cannot be written."""
        payload = self._session(token, principal, _session_prefix(token))
        return payload is not None and await self._used.claim(_ended(token), float(payload["e"]))

    def _session(self, token: object, principal: str, prefix: str) -> dict[str, Any] | None:
        payload = self._opened.get(token) if isinstance(token, str) else None
        if payload is None:
            try:
                payload = self._decrypt(token, prefix)
            except RequestStateRefused:
                return None
            self._opened[token] = payload  # a peer sends its id on every request: opened once (about 20 us)
        expires = payload.get("e")
        if payload.get("p") != principal or not isinstance(expires, int | float) or expires < self._clock():
            return None
        return payload

    def seal_task(
        self,
        connection: str,
        upstream_id: str,
        principal: str,
        *,
        owner: str = "",
        created_at: str = "",
        ttl: Any = None,
    ) -> str:
        """The task id a peer holds for an upstream task (`gateway/mcp/tasks.py`): the connection, the upstream's own
        task id, the principal who started it, and the replica whose upstream session runs it (`owner`, with
        the task's `created_at` and `ttl`: what `gateway/mcp/task_owners.py` needs to answer for a task whose session is
        gone), sealed. No expiry: the upstream's task TTL decides."""
        return self._sealed(
            _TASK_PREFIX, {"c": connection, "t": upstream_id, "p": principal, "o": owner, "a": created_at, "l": ttl}
        )

    def open_task(self, token: object, principal: str) -> tuple[str, str] | None:
        """The connection and upstream task id sealed in `token` for `principal`; None for a token this
        deployment did not seal as a task id, or sealed for another principal."""
        task = self.task_facts(token, principal)
        return None if task is None else (task.connection, task.upstream_id)

    def task_facts(self, token: object, principal: str) -> SealedTask | None:
        """Everything `seal_task` sealed in `token` for `principal`; None as for `open_task`."""
        try:
            payload = self._decrypt(token, _TASK_PREFIX)
        except RequestStateRefused:
            return None
        connection, upstream_id = payload.get("c"), payload.get("t")
        if payload.get("p") != principal or not isinstance(connection, str) or not isinstance(upstream_id, str):
            return None
        owner, created_at, ttl = payload.get("o"), payload.get("a"), payload.get("l")
        return SealedTask(
            connection,
            upstream_id,
            owner if isinstance(owner, str) else "",
            created_at if isinstance(created_at, str) else "",
            ttl if isinstance(ttl, int) else None,
        )

    def seal_login(self, login: Mapping[str, Any]) -> str:
        """A pending console login (`LoginStart.to_json`: its PKCE verifier, any client secret), sealed for
        Redis (`gateway/state/pending_logins.py`); Redis's own expiry bounds its life."""
        return self._sealed(_LOGIN_PREFIX, login)

    def open_login(self, token: object) -> dict[str, Any] | None:
        """What `seal_login` sealed; None for anything this deployment did not seal as a pending login."""
        try:
            return self._decrypt(token, _LOGIN_PREFIX)
        except RequestStateRefused:
            return None

    def seal_sign_in(self, connection: str, principal: str) -> str:
        """The ticket of a principal's sign-in link for its own grant of `connection` (`sign_in.py`): sealed,
        expiring after `SIGN_IN_TTL_S`, good once."""
        payload = {"c": connection, "p": principal, "e": self._clock() + SIGN_IN_TTL_S, "j": secrets.token_hex(16)}
        return self._sealed(_SIGN_IN_PREFIX, payload)

    async def open_sign_in(self, token: object, principal: str) -> str:
        """The connection a sign-in ticket is for, when `principal` opens it; claimed, so it opens once.

        Raises `RequestStateRefused` naming the check that failed: forged or altered, expired, issued to
        another principal (not claimed then: its own principal can still use it), or already used."""
        payload = self._decrypt(token, _SIGN_IN_PREFIX)
        connection, expires = payload.get("c"), payload.get("e")
        if not isinstance(connection, str) or not isinstance(expires, int | float):
            raise RequestStateRefused("it was not issued by this gateway, or it was altered")
        if expires < self._clock():
            raise RequestStateRefused("it has expired: retry the call to get a new sign-in link")
        if payload.get("p") != principal:
            raise RequestStateRefused("it was issued to another principal: each sign-in link is its caller's own")
        if not await self._used.claim("signin:" + str(payload.get("j")), float(expires)):
            raise RequestStateRefused(
                "it was already used (each sign-in link opens once): retry the call for a new one"
            )
        return connection

    def seal_browser(self, access_token: str, expires: float) -> str:
        """A browser session's cookie (`gateway/auth/browser_sessions.py`): the person's access token for this
        gateway, sealed until `expires` (the token's own expiry), so every replica of the deployment opens it."""
        return self._sealed(_BROWSER_PREFIX, {"t": access_token, "e": expires})

    def open_browser(self, cookie: object) -> str | None:
        """The access token a browser session's cookie holds; None for a cookie this deployment did not seal,
        or one past its expiry."""
        try:
            payload = self._decrypt(cookie, _BROWSER_PREFIX)
        except RequestStateRefused:
            return None
        token, expires = payload.get("t"), payload.get("e")
        if not isinstance(token, str) or not isinstance(expires, int | float) or expires <= self._clock():
            return None
        return token

    def _sealed(self, prefix: str, payload: Mapping[str, Any]) -> str:
        nonce = os.urandom(12)
        # The prefix is authenticated too: a peer session id cannot pass as a requestState, nor the reverse.
        sealed = self._aead.encrypt(nonce, json.dumps(payload, separators=(",", ":")).encode(), _AAD + prefix.encode())
        return prefix + base64.urlsafe_b64encode(nonce + sealed).decode().rstrip("=")

    async def open(self, token: object, principal: str, tool: str) -> SealedState:
        """The state sealed in `token`, for `principal` calling `tool`; claimed, so it opens once.

        Raises `RequestStateRefused` naming the check that failed: not sealed by this deployment (forged
        or altered), expired, another principal's, another tool's, or already used."""
        payload = self._decrypt(token)
        if not isinstance(payload.get("e"), int | float) or payload["e"] < self._clock():
            raise RequestStateRefused(
                "it has expired: answer within the time allowed and retry the original call without it"
            )
        if payload.get("p") != principal:
            raise RequestStateRefused("it was issued to another principal")
        if payload.get("t") != tool:
            raise RequestStateRefused(f"it was issued for another tool, not {tool[:64]!r}")
        if not await self._used.claim(str(payload.get("j")), float(payload["e"])):
            raise RequestStateRefused(
                "it was already used (each requestState answers once): retry with the latest one the gateway sent"
            )
        return SealedState(
            principal=principal,
            tool=tool,
            connection=_text(payload.get("c")),
            upstream=_text(payload.get("u")),
            pending=_text(payload.get("h")),
        )

    def _decrypt(self, token: object, prefix: str = _PREFIX) -> dict[str, Any]:
        forged = RequestStateRefused("it was not issued by this gateway, or it was altered")
        if not isinstance(token, str) or not token.startswith(prefix) or len(token) > 64 * 1024:
            raise forged
        try:
            raw = canonical_b64decode(token[len(prefix) :])
            plain = self._aead.decrypt(raw[:12], raw[12:], _AAD + prefix.encode())
            payload = json.loads(plain)
        except (binascii.Error, ValueError, InvalidTag):
            raise forged from None
        if not isinstance(payload, dict):
            raise forged
        return payload


def _session_prefix(token: object) -> str:
    """The prefix a sealed `Mcp-Session-Id` carries: one that declared elicitation or sampling, or a bare one."""
    return _SESSION_PREFIX if isinstance(token, str) and token.startswith(_SESSION_PREFIX) else _BARE_SESSION_PREFIX


def _ended(token: str) -> str:
    """The used-state id that marks `token` (an `Mcp-Session-Id`) ended: its digest, never the id itself."""
    return "session:" + hashlib.sha256(token.encode()).hexdigest()


def canonical_b64decode(body: str) -> bytes:
    """The bytes `body` holds as the unpadded base64url `_sealed` writes, and only then: another alphabet,
    padding, a stray character or spare bits set (several texts for one token, so string-keyed state would
    see several sessions) raise `ValueError`."""
    raw = base64.b64decode(body + "=" * (-len(body) % 4), altchars=b"-_", validate=True)
    if base64.urlsafe_b64encode(raw).rstrip(b"=") != body.encode():
        raise ValueError("not the canonical form")
    return raw


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
