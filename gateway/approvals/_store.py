"""Held calls waiting for an operator: in this process, or in Redis for every replica (`--state-url`).

A call's `hold` waits (bounded) for `decide`, which may come through any replica: in Redis one Lua script
decides a pending approval and wakes its holder in the same step (a list its holder `BLPOP`s), so an
approval and the deadline, or two operators, can never both win. A decided approval is kept for an hour so
that a late or second answer gets a sentence saying how it went, not "not found".
"""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio

from ._pending import ApprovalDecided, ApprovalNotFound, Decision, PendingApproval, State, decided_sentence

__all__ = ["Approvals", "MemoryApprovals", "RedisApprovals", "new_approval_id", "not_found"]

_REMEMBER_S = 3600.0
_REMEMBERED = 1000
_PREFIX = "agent-sdk:approval:"
_INDEX = "agent-sdk:approvals"


def not_found(approval_id: str) -> str:
    return f"no call waits for approval {approval_id[:40]!r}; list the waiting ones with agent-sdk approvals list"


def new_approval_id() -> str:
    return f"apr_{uuid.uuid4().hex[:16]}"


class Approvals(Protocol):
    """Where held calls wait. `hold` returns the `Decision` (a `timeout` one past `wait_s` seconds)."""

    ended: State

    async def hold(self, pending: PendingApproval, wait_s: float) -> Decision: ...  # pragma: no cover

    async def pending(self) -> list[PendingApproval]: ...  # pragma: no cover

    async def get(self, approval_id: str) -> PendingApproval | None:
        """The held call `approval_id` (None: no such call, or no longer held)."""
        ...  # pragma: no cover

    async def decide(self, approval_id: str, approve: bool, by: str) -> PendingApproval:
        """Raises `ApprovalNotFound` (no such call) and `ApprovalDecided` (already decided, or gone)."""
        ...  # pragma: no cover


@dataclass(slots=True)
class _Held:
    pending: PendingApproval
    answered: anyio.Event = field(default_factory=anyio.Event)
    decision: Decision | None = None


class MemoryApprovals:
    """One process's held calls."""

    ended: State = "gone"
    """How a hold cut short ends: `gone` (its caller went away), `abandoned` once the gateway stops."""

    def __init__(self) -> None:
        self._held: dict[str, _Held] = {}
        self._decided: OrderedDict[str, Decision] = OrderedDict()

    def _remember(self, approval_id: str, decision: Decision) -> None:
        self._decided[approval_id] = decision
        while len(self._decided) > _REMEMBERED:
            self._decided.popitem(last=False)

    async def hold(self, pending: PendingApproval, wait_s: float) -> Decision:
        held = self._held[pending.id] = _Held(pending)
        try:
            with anyio.move_on_after(wait_s):
                await held.answered.wait()
        finally:
            del self._held[pending.id]
            if held.decision is None:  # no answer in time, or the caller went away (cancelled)
                held.decision = Decision("timeout" if time.time() >= pending.expires_at - 0.05 else self.ended)
            self._remember(pending.id, held.decision)
        return held.decision

    async def pending(self) -> list[PendingApproval]:
        return sorted((h.pending for h in self._held.values()), key=lambda p: p.requested_at)

    async def get(self, approval_id: str) -> PendingApproval | None:
        held = self._held.get(approval_id)
        return held.pending if held is not None else None

    async def decide(self, approval_id: str, approve: bool, by: str) -> PendingApproval:
        held = self._held.get(approval_id)
        if held is None or held.decision is not None:
            done = held.decision if held is not None else self._decided.get(approval_id)
            if done is None:
                raise ApprovalNotFound(not_found(approval_id))
            raise ApprovalDecided(decided_sentence(approval_id, done.state, done.by))
        held.decision = Decision("approved" if approve else "denied", by)
        held.answered.set()
        return held.pending


# KEYS: the approval's hash, its answer list, the index. ARGV: the new state, who, the id, the hash's TTL (ms).
# Returns {'ok'}, {'missing'}, or {state, by} of the decision already made.
_DECIDE = """
local s = redis.call('HGET', KEYS[1], 'state')
if not s then return {'missing'} end
if s ~= 'pending' then return {s, redis.call('HGET', KEYS[1], 'by') or ''} end
redis.call('HSET', KEYS[1], 'state', ARGV[1], 'by', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('ZREM', KEYS[3], ARGV[3])
redis.call('LPUSH', KEYS[2], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return {'ok'}
"""


class RedisApprovals:
    """Held calls shared by the replicas. The holder waits in `BLPOP`s shorter than the client's socket
    timeout, so a Redis that goes away ends the wait as a denial (fail closed), never a hang."""

    ended: State = "gone"
    """How a hold cut short ends: `gone` (its caller went away), `abandoned` once the gateway stops."""

    def __init__(self, redis: Any) -> None:
        self.redis = redis
        self._decide = redis.register_script(_DECIDE)

    async def _settle(self, approval_id: str, state: State, by: str) -> list[str]:
        keys = [_PREFIX + approval_id, _PREFIX + approval_id + ":answer", _INDEX]
        return await self._decide(keys=keys, args=[state, by, approval_id, int(_REMEMBER_S * 1000)])

    async def hold(self, pending: PendingApproval, wait_s: float) -> Decision:
        from redis.exceptions import RedisError

        key = _PREFIX + pending.id
        ttl_ms = int((wait_s + _REMEMBER_S) * 1000)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping={"state": "pending", "p": pending.dumps()})
            pipe.pexpire(key, ttl_ms)
            pipe.zadd(_INDEX, {pending.id: pending.expires_at})
            await pipe.execute()
        deadline = time.monotonic() + wait_s
        answered = ended = False
        settled = ["ok"]
        try:
            while (left := deadline - time.monotonic()) > 0:
                if await self.redis.blpop([key + ":answer"], timeout=max(0.01, min(left, 2.0))) is not None:
                    answered = True
                    break
            ended = True
        except RedisError:
            ended = True
        finally:
            if not answered:  # the deadline, Redis gone, or the caller gone: settle it unless an answer won
                with anyio.CancelScope(shield=True), anyio.move_on_after(3):
                    try:
                        settled = await self._settle(pending.id, "timeout" if ended else self.ended, "")
                    except RedisError:
                        pass
        if answered:
            try:
                state, by = await self.redis.hmget(key, ["state", "by"])
            except RedisError:
                return Decision("timeout")
            return Decision(state if state in ("approved", "denied") else "timeout", by or None)
        if settled[0] in ("ok", "missing"):
            return Decision("timeout")
        return Decision(settled[0], settled[1] or None)  # pyright: ignore[reportArgumentType]

    async def pending(self) -> list[PendingApproval]:
        ids = await self.redis.zrangebyscore(_INDEX, time.time(), "+inf")
        if not ids:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for approval_id in ids:
                pipe.hmget(_PREFIX + approval_id, ["state", "p"])
            rows = await pipe.execute()
        found = [PendingApproval.loads(p) for state, p in rows if state == "pending" and p]
        return sorted(found, key=lambda p: p.requested_at)

    async def get(self, approval_id: str) -> PendingApproval | None:
        raw = await self.redis.hget(_PREFIX + approval_id, "p")
        return PendingApproval.loads(raw) if raw is not None else None

    async def decide(self, approval_id: str, approve: bool, by: str) -> PendingApproval:
        raw = await self.redis.hget(_PREFIX + approval_id, "p")
        settled = await self._settle(approval_id, "approved" if approve else "denied", by)
        if settled[0] == "missing" or raw is None:
            raise ApprovalNotFound(not_found(approval_id))
        if settled[0] != "ok":
            raise ApprovalDecided(decided_sentence(approval_id, settled[0], settled[1] or None))
        return PendingApproval.loads(raw)
