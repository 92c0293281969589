"""`RedisSessionStore`: sessions shared by every replica through Redis (`agent-sdk serve --state-url`).

Keys (prefix `agent-sdk:`): the session hash `s:<id>` and its event stream `s:<id>:ev` (layout in
`_redis_scripts.py`), `tok:<sha256>` / `rtok:<sha256>` from a current / rotated-away continuation
token to its session (tokens are never key names), `p:<principal>` a sorted set of the principal's
sessions by creation time (the listing index), `running` the leases, `count` the number of
sessions, and the pub/sub channel `cancel` that carries "cancel turn T of session S" to its owner.

Every Redis failure becomes `StateUnavailable` (503 `state_unavailable`): callers fail with a
sentence and the next request, once Redis answers again, works with no restart.

A value this store did not write (a bad restore, a hand edit, another program on the database) is
treated as the file store treats a damaged file: a record that cannot be read is skipped (the session
is not found, listings leave it out), an event that cannot be read keeps its place in the log as
`event.unreadable` (so every later index stays where readers expect it), a session count that is not
a number is unknown (`/v1/info` shows null, new sessions are still made). Each is logged once, naming
its Redis key, never its value.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Sequence
from typing import Any, TypeVar

import anyio

from ..errors import StateUnavailable
from ..http._asgi import loads_stored
from ..state._redis import redis_client, safe_url
from . import _redis_scripts as lua
from ._records import SessionRecord, created_ms, unreadable_event

__all__ = ["RedisSessionStore"]

logger = logging.getLogger("agent_sdk.sessions")

_T = TypeVar("_T")
_RETIRED_S = 30 * 24 * 3600
"""How long a rotated-away token is remembered, so that it answers 409 stale rather than 404."""
_BLOCK_CAP_S = 10.0
_WARNED_CAP = 1024
"""Damaged keys remembered so each is logged once, not at every read."""


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _pairs(events: Sequence[dict[str, Any]]) -> list[str]:
    """Each event as the JSON before and after its index, which the script assigns."""
    out: list[str] = []
    for event in events:
        rest = {k: v for k, v in event.items() if k != "type"}
        out.append('{"type":' + json.dumps(event["type"]) + ',"index":')
        out.append("," + json.dumps(rest, separators=(",", ":"), default=str)[1:])
    return out


class RedisSessionStore:
    """See the module docstring. Use one per process (`async with` or `open`/`aclose`)."""

    shared = True

    def __init__(self, url: str, *, prefix: str = "agent-sdk:", patience_s: float = 10.0) -> None:
        self.url = url
        self.patience_s = patience_s
        """How long a running turn's writes wait out a Redis outage before the turn gives up."""
        self.name = safe_url(url)
        self._p = prefix
        self._client: Any = None
        self._blocking: Any = None
        self._scripts: dict[str, Any] = {}
        self._warned: set[str] = set()

    def __repr__(self) -> str:
        return f"RedisSessionStore({self.name!r})"

    async def open(self) -> None:
        self._client = redis_client(self.url)
        self._blocking = redis_client(self.url, socket_timeout=_BLOCK_CAP_S + 5)
        for name in ("APPEND", "BEGIN", "END", "LAPSED", "REAP", "RENEW", "ROTATE"):
            self._scripts[name] = self._client.register_script(getattr(lua, name))

    async def aclose(self) -> None:
        for client in (self._client, self._blocking):
            if client is not None:
                await client.aclose()

    async def _do(self, awaitable: Awaitable[_T]) -> _T:
        import redis.exceptions

        try:
            return await awaitable
        except redis.exceptions.RedisError as exc:
            logger.debug("the shared state store at %s failed a request: %s: %s", self.name, type(exc).__name__, exc)
            raise StateUnavailable(
                f"the shared state store (Redis at {self.name}) is unavailable ({type(exc).__name__}); retry shortly"
            ) from None

    def _h(self, sid: str) -> str:
        return f"{self._p}s:{sid}"

    def _ev(self, sid: str) -> str:
        return f"{self._p}s:{sid}:ev"

    @property
    def _running(self) -> str:
        return f"{self._p}running"

    def _damaged(self, key: str, what: str) -> None:
        """Log, once per key, that `key` holds a value this store did not write (never the value)."""
        if key in self._warned:
            return
        if len(self._warned) >= _WARNED_CAP:
            self._warned.clear()
        self._warned.add(key)
        logger.warning("the Redis key %s at %s %s", key, self.name, what)

    # -- records ---------------------------------------------------------------------------------

    async def create(self, record: SessionRecord) -> None:
        digest = _digest(record.continuation_token)
        pipe = self._client.pipeline(transaction=True)
        pipe.hset(
            self._h(record.id),
            mapping={
                "rec": json.dumps(record.identity()),
                "token": record.continuation_token,
                "tokh": digest,
                "turn": "",
                "holder": "",
                "last": "",
                "n": 0,
            },
        )
        pipe.set(f"{self._p}tok:{digest}", record.id)
        pipe.zadd(f"{self._p}p:{record.owner}", {record.id: created_ms(record)})
        pipe.incr(f"{self._p}count")
        # A count that is not a number fails its INCR alone (EXEC runs the rest): the session is made regardless.
        *made, counted = await self._do(pipe.execute(raise_on_error=False))
        if any(isinstance(result, Exception) for result in made):
            raise StateUnavailable(f"the shared state store (Redis at {self.name}) refused a write; retry shortly")
        if isinstance(counted, Exception):
            self._damaged(f"{self._p}count", "is not a number: the session count is unknown until it is set right")

    async def load(self, session_id: str) -> SessionRecord | None:
        return self._record(session_id, await self._do(self._client.hgetall(self._h(session_id))))

    def _record(self, session_id: str, raw: dict[str, str] | None) -> SessionRecord | None:
        """The session's record; None for none, and for one this store did not write (logged once, skipped)."""
        if not raw or "rec" not in raw:
            return None
        try:
            identity = loads_stored(raw["rec"])
            last = loads_stored(raw["last"]) if raw.get("last") else None
            if not isinstance(identity, dict) or not (last is None or isinstance(last, dict)):
                raise TypeError("not an object")
            if not _sound(identity, session_id):
                raise TypeError("not the shape of a record")
            record = SessionRecord(
                **identity,
                continuation_token=raw.get("token", ""),
                turn=raw.get("turn") or None,
                last_turn=last,
                event_count=int(raw.get("n") or 0),
            )
        except (ValueError, TypeError):
            record = None
        if record is None or record.event_count < 0:
            self._damaged(self._h(session_id), "does not hold a session record this gateway wrote; skipping it")
            return None
        return record

    async def find_token(self, token: str) -> tuple[str, bool] | None:
        digest = _digest(token)
        current, retired = await self._do(self._client.mget(f"{self._p}tok:{digest}", f"{self._p}rtok:{digest}"))
        if current is not None:
            return current, True
        if retired is not None:
            return retired, False
        return None

    async def rotate(self, session_id: str, expected: str | None, new: str) -> bool:
        args = ["" if expected is None else _digest(expected), new, _digest(new), session_id, self._p, _RETIRED_S]
        done = await self._do(self._scripts["ROTATE"](keys=[self._h(session_id)], args=args))
        return int(done) == 1

    async def page(
        self, principal: str, before: tuple[int, str] | None, limit: int
    ) -> tuple[list[SessionRecord], tuple[int, str] | None]:
        key = f"{self._p}p:{principal}"
        high: int | str = "+inf" if before is None else before[0]
        keys: list[tuple[int, str]] = []
        offset = 0
        while len(keys) <= limit:
            batch = await self._do(
                self._client.zrevrangebyscore(key, high, "-inf", start=offset, num=limit + 16, withscores=True)
            )
            for sid, score in batch:
                item = (int(score), sid)
                if before is None or item < before:
                    keys.append(item)
            if len(batch) < limit + 16:
                break
            offset += len(batch)
        pipe = self._client.pipeline(transaction=False)
        for _, sid in keys[:limit]:
            pipe.hgetall(self._h(sid))
        found = zip(keys[:limit], await self._do(pipe.execute()), strict=True)
        records = [r for (_, sid), raw in found if (r := self._record(sid, raw)) is not None and r.owner == principal]
        return records, (keys[limit - 1] if len(keys) > limit else None)

    async def count(self) -> int | None:
        raw = await self._do(self._client.get(f"{self._p}count"))
        try:
            return int(raw or 0)
        except ValueError:
            self._damaged(f"{self._p}count", "is not a number: the session count is unknown until it is set right")
            return None

    async def owners(self, limit: int) -> dict[str, int]:
        """One `SCAN` over the per-principal sets (stopping at `limit`), then their sizes in one round trip."""
        prefix = f"{self._p}p:"

        async def scan() -> dict[str, int]:
            keys: list[str] = []
            async for key in self._client.scan_iter(match=f"{prefix}*", count=500):
                keys.append(key.decode() if isinstance(key, bytes) else str(key))
                if len(keys) >= limit:
                    break
            keys.sort()
            pipe = self._client.pipeline(transaction=False)
            for key in keys:
                pipe.zcard(key)
            sizes = await pipe.execute() if keys else []
            return {key[len(prefix) :]: int(n) for key, n in zip(keys, sizes, strict=True) if n}

        return await self._do(scan())

    # -- events ----------------------------------------------------------------------------------

    async def append(self, session_id: str, events: Sequence[dict[str, Any]], holder: str | None = None) -> bool:
        keys = [self._h(session_id), self._ev(session_id)]
        args = [holder or "", secrets.token_hex(8), *_pairs(events)]
        if holder is None:  # a request's write: fail fast, the caller answers 503
            return int(await self._do(self._scripts["APPEND"](keys=keys, args=args))) >= 0
        return int(await self._patient(self._scripts["APPEND"], keys, args)) >= 0

    async def read(self, session_id: str, start: int, *, block_s: float = 0.0, limit: int = 0) -> list[dict[str, Any]]:
        stream = self._ev(session_id)
        if block_s > 0:  # XREAD answers at once when there are entries past `start`, else waits: one round trip
            ms = max(1, int(min(block_s, _BLOCK_CAP_S) * 1000))
            found = await self._do(self._blocking.xread({stream: f"0-{start}"}, count=limit or None, block=ms))
            entries = found[0][1] if found else []
        else:
            entries = await self._do(self._client.xrange(stream, f"0-{start + 1}", "+", count=limit or None))
        ours = [(entry, fields) for entry, fields in entries if entry.startswith("0-")]
        if len(ours) < len(entries):  # an entry added with another id (`XADD *`) has no place in the log: left out
            self._damaged(stream, "holds an entry this gateway did not add (its id is not 0-N); leaving it out")
            if not ours and block_s > 0:
                await anyio.sleep(min(block_s, 1.0))  # XREAD answers at once for it: no busy loop for a follower
        return [self._event(session_id, entry, fields) for entry, fields in ours]

    def _event(self, session_id: str, entry: str, fields: dict[str, str]) -> dict[str, Any]:
        """The event stored at stream entry `entry` (`0-<index + 1>`); one this store did not write keeps its
        place as `event.unreadable`, so every later index stays the same for every reader."""
        index = int(entry.partition("-")[2]) - 1
        try:
            event = loads_stored(fields.get("e", ""))
        except ValueError:
            event = None
        if isinstance(event, dict) and _sound_event(event, index):
            return event
        self._damaged(
            self._ev(session_id), f"holds an event this gateway did not write (index {index}); marking it unreadable"
        )
        return unreadable_event(session_id, index)

    # -- turns -----------------------------------------------------------------------------------

    async def begin_turn(
        self, session_id: str, turn_id: str, holder: str, lease_s: float, events: Sequence[dict[str, Any]]
    ) -> bool:
        keys = [self._h(session_id), self._ev(session_id), self._running]
        args = [session_id, turn_id, holder, int(lease_s * 1000), *_pairs(events)]
        return int(await self._do(self._scripts["BEGIN"](keys=keys, args=args))) == 1

    async def renew(self, session_id: str, holder: str, lease_s: float) -> bool:
        keys = [self._h(session_id), self._running]
        return (
            int(await self._do(self._scripts["RENEW"](keys=keys, args=[session_id, holder, int(lease_s * 1000)]))) == 1
        )

    async def end_turn(
        self, session_id: str, holder: str, last_turn: dict[str, Any], events: Sequence[dict[str, Any]]
    ) -> bool:
        keys = [self._h(session_id), self._ev(session_id), self._running]
        args = [session_id, holder, json.dumps(last_turn, default=str), secrets.token_hex(8), *_pairs(events)]
        return int(await self._patient(self._scripts["END"], keys, args)) == 1

    async def _patient(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        """Run a turn's write, retrying through a Redis outage of up to `patience_s` with the same operation
        id (so a write that landed but whose reply was lost is not made twice). Raises `StateUnavailable` after."""
        deadline = anyio.current_time() + self.patience_s
        while True:
            try:
                return await self._do(script(keys=keys, args=args))
            except StateUnavailable:
                if anyio.current_time() >= deadline:
                    raise
                await anyio.sleep(0.25)

    async def lapsed(self) -> list[tuple[str, str]]:
        flat = await self._do(self._scripts["LAPSED"](keys=[self._running], args=[self._p]))
        return [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]

    async def reap(
        self, session_id: str, turn_id: str, last_turn: dict[str, Any], events: Sequence[dict[str, Any]]
    ) -> bool:
        keys = [self._h(session_id), self._ev(session_id), self._running]
        args = [session_id, turn_id, json.dumps(last_turn, default=str), *_pairs(events)]
        return int(await self._do(self._scripts["REAP"](keys=keys, args=args))) == 1

    async def request_cancel(self, session_id: str, turn_id: str) -> None:
        await self._do(self._client.publish(f"{self._p}cancel", f"{session_id} {turn_id}"))

    async def cancellations(self) -> AsyncIterator[tuple[str, str]]:
        """Cancel requests, resubscribing after Redis comes back (a lost request is re-sent by its sender)."""
        import redis.exceptions

        lost = False
        while True:
            pubsub = self._client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(f"{self._p}cancel")
                if lost:
                    logger.info("the cancel channel at %s is back", self.name)
                    lost = False
                while True:
                    message = await pubsub.get_message(timeout=1.0)
                    if message is not None and isinstance(message.get("data"), str):
                        sid, _, turn = message["data"].partition(" ")
                        yield sid, turn
            except redis.exceptions.RedisError as exc:
                if not lost:  # once per outage, not once per retry
                    logger.warning("lost the cancel channel at %s (%s); resubscribing", self.name, type(exc).__name__)
                    lost = True
                await anyio.sleep(0.5)
            except Exception:  # boundary: the client's own failure must not end the listener (nor the app)
                logger.exception("the cancel channel at %s failed; resubscribing", self.name)
                lost = True
                await anyio.sleep(0.5)
            finally:
                with anyio.CancelScope(shield=True):
                    try:
                        await pubsub.aclose()
                    except redis.exceptions.RedisError:
                        pass


def _sound(identity: dict[str, Any], session_id: str) -> bool:
    """Whether a record's identity has the shape `create` gives one (the session routes rely on it)."""
    texts = (identity.get("owner"), identity.get("created_at"), identity.get("channel_id", "http"))
    title = identity.get("title")
    return (
        identity.get("id") == session_id
        and all(isinstance(t, str) for t in texts)
        and (title is None or isinstance(title, str))
        and identity.get("mode", "chat") in ("chat", "task")
        and identity.get("purpose", "live") in ("live", "eval")
    )


def _sound_event(event: dict[str, Any], index: int) -> bool:
    return (
        isinstance(event.get("type"), str) and event.get("index") == index and isinstance(event.get("data", {}), dict)
    )
