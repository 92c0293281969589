"""One caller's identity on an `auth` connection: the headers its callback returned, their digest, and the
`httpx2.Auth` that puts them on the wire.

The digest is what the identity pool (`connections/pool/_identity_pool.py`) keys clients by and the only thing a log
line or a metric may show of an identity: a keyed BLAKE2b of the headers (names lowercased, sorted),
under a key drawn at random for this process, so a digest in a log cannot be checked against a guessed
token offline, and two processes never print the same digest for the same headers.

`IdentityAuth` adds an identity's headers to every request a client's SDK transport sends;
`HeadersPerCall` gives the same headers to each request of the fast wire as the call's own headers
(running an `httpx2.Auth` there would build an `httpx2.Request` and `Response` per call). A
handshake-era upstream session is opened and used by one identity only (fixed headers). A 2026-07-28
client has no upstream session to bind, so one client serves every identity of a connection
(`share()`): the headers then come from the calling task (`speak_as(headers)`, a context variable), and
a request sent with none set is refused, never sent with the static headers alone.
"""

from __future__ import annotations

import contextvars
import hashlib
import secrets
from collections.abc import AsyncGenerator, Awaitable, Mapping
from typing import Any

import httpx2

__all__ = [
    "HeadersPerCall",
    "IdentityAuth",
    "NoIdentity",
    "SessionHeaders",
    "acting_for",
    "acting_principal",
    "identity_digest",
    "principal_partition",
    "speak_as",
    "speaking_as",
    "stop_speaking",
]

_KEY = secrets.token_bytes(32)
"""This process's digest key: digests are comparable within one gateway process only."""

DIGEST_CHARS = 16
"""Hex characters of a digest: 64 bits, shown whole in logs."""

_CURRENT: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar(
    "agent_sdk_identity_headers", default=None
)
_PRINCIPAL: contextvars.ContextVar[str | None] = contextvars.ContextVar("agent_sdk_acting_principal", default=None)


def identity_digest(headers: Mapping[str, str]) -> str:
    """The digest of `headers` (names compared case-insensitively, order ignored): the identity's key."""
    h = hashlib.blake2b(key=_KEY, digest_size=DIGEST_CHARS // 2)
    for name, value in sorted((k.lower(), v) for k, v in headers.items()):
        h.update(name.encode("utf-8", "surrogateescape"))
        h.update(b"\x00")
        h.update(value.encode("utf-8", "surrogateescape"))
        h.update(b"\x01")
    return h.hexdigest()


class SessionHeaders(dict[str, str]):
    """The headers one session's `auth` callback returned this turn, with the session's id and their digest.

    A plain `dict` to everything that reads headers; the identity pool reads `session_id` to know which
    session holds which client (a rotated credential retires the old client, a session's end closes its own).
    """

    session_id: str | None
    digest: str
    principal: str | None
    """A principal's partition (`principal_partition`): whose upstream session, and whose own grant."""

    def __init__(self, headers: Mapping[str, str], session_id: str | None = None) -> None:
        super().__init__(headers)
        self.session_id = session_id
        self.digest = identity_digest(headers)
        self.principal = None

    def __repr__(self) -> str:
        # Header values are credentials: names and the digest only.
        return f"SessionHeaders(names={sorted(self)}, digest={self.digest!r})"


def principal_partition(principal_id: str) -> SessionHeaders:
    """The identity an `upstream_sessions="per_principal"` connection keeps `principal_id`'s upstream session
    under: no headers at all (the connection's own static headers and OAuth still apply), a digest of the
    principal's id (never a token: the gateway's principal ids are already digests or names)."""
    partition = SessionHeaders({})
    partition.digest = identity_digest({"\x00principal": principal_id})
    partition.principal = principal_id
    return partition


class acting_for:
    """`with acting_for(principal_id):` calls made inside the block (in this task and the tasks it starts) are
    `principal_id`'s: a `per_principal` connection serves them from that principal's own upstream session.
    A class rather than a `@contextmanager` generator: every gateway call enters one (half the cost)."""

    __slots__ = ("_principal_id", "_token")

    def __init__(self, principal_id: str) -> None:
        self._principal_id = principal_id

    def __enter__(self) -> None:
        self._token = _PRINCIPAL.set(self._principal_id)

    def __exit__(self, *_exc: object) -> None:
        _PRINCIPAL.reset(self._token)


def acting_principal() -> str | None:
    """The principal `acting_for` set for this task, or None (no gateway surface is calling)."""
    return _PRINCIPAL.get()


class NoIdentity(httpx2.HTTPError):
    """A shared client was asked to send a request outside any identity's call: refused, never sent bare."""


def speak_as(headers: Mapping[str, str]) -> contextvars.Token[Mapping[str, str] | None]:
    """Until `stop_speaking(token)`, requests of a shared client sent from this task carry `headers`."""
    return _CURRENT.set(headers)


def stop_speaking(token: contextvars.Token[Mapping[str, str] | None]) -> None:
    _CURRENT.reset(token)


def speaking_as() -> Mapping[str, str] | None:
    """The headers `speak_as` set for this task, or None."""
    return _CURRENT.get()


class IdentityAuth(httpx2.Auth):
    """Puts one identity's headers on every request (`fixed`), or, once `share()`d, the calling task's."""

    def __init__(self, headers: Mapping[str, str]) -> None:
        self._fixed: Mapping[str, str] | None = dict(headers)

    @property
    def shared(self) -> bool:
        return self._fixed is None

    def share(self) -> None:
        """Serve every identity from now on: each request carries the headers its caller set with `speak_as`."""
        self._fixed = None

    def headers(self) -> Mapping[str, str]:
        """The headers a request sent now carries. Raises `NoIdentity` for a shared client outside `speak_as`."""
        headers = self._fixed if self._fixed is not None else _CURRENT.get()
        if headers is None:
            raise NoIdentity("a shared client's request carries no identity: refused rather than sent without one")
        return headers

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        for name, value in self.headers().items():
            request.headers[name] = value
        yield request

    def __repr__(self) -> str:
        return f"IdentityAuth(shared={self.shared})"


class HeadersPerCall:
    """A session dispatcher (the fast wire's) whose every request carries `auth`'s headers as its own.

    Only the fast wire's dispatcher is wrapped: were it to hand the session back to the SDK's (after a
    redirect), the SDK transport runs `IdentityAuth` on each request instead."""

    def __init__(self, inner: Any, auth: IdentityAuth) -> None:
        self._inner = inner
        self._auth = auth

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> Awaitable[dict[str, Any]]:
        return self._inner.send_raw_request(method, params, self._with_headers(opts), **kwargs)

    def answer(self, method: str, params: Mapping[str, Any] | None, opts: Mapping[str, Any]) -> Awaitable[Any]:
        """`Wire.answer` (`client/_wire.py`) of the fast wire, with the identity's headers."""
        return self._inner.answer(method, params, self._with_headers(opts))

    def _with_headers(self, opts: Mapping[str, Any] | None) -> dict[str, Any]:
        given = opts or {}
        out = dict(given)
        out["headers"] = {**(given.get("headers") or {}), **self._auth.headers()}
        return out
