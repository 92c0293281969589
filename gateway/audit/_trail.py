"""`AuditTrail`: records handed over without waiting, written in batches by one task (docs/audit.md).

A call puts its record on a bounded queue (`write`, never awaits) and goes on; the writer task takes
what arrives within `flush_s` (`FLUSH_S`) of a batch's first record, up to a batch, and gives it to every sink
(one file append, one Redis pipeline per batch: a record a call would cost a thread hop and a
locked open-append-close per call). A full queue drops the record, counts it
(`agent_sdk_audit_dropped_records`) and says so in the log (once, then at most once a minute); with
`required` (`--audit-required`) a call is refused before it runs while the queue has no room.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ._record import AuditRecord
from ._sinks import Sink

__all__ = ["AuditTrail"]

logger = logging.getLogger("gateway.audit")

BATCH = 256
"""At most this many records go to the sinks in one write."""
FLUSH_S = 0.05
"""A batch is written this long after its first record arrived (or once it holds `BATCH`)."""
_DROP_LOG_EVERY_S = 60.0


class AuditTrail:
    """The trail of one gateway process. Use as `async with AuditTrail.running(...)`; `write` before
    that (or after) drops the record as a full queue would."""

    def __init__(
        self,
        sinks: Sequence[Sink],
        *,
        capacity: int = 10_000,
        required: bool = False,
        digest_key: bytes | None = None,
        flush_s: float = FLUSH_S,
    ) -> None:
        self.sinks = list(sinks)
        self.capacity = capacity
        self.flush_s = flush_s
        self.required = required
        self.digest_key = digest_key
        """`--audit-argument-digest`: the HMAC key of each record's `argumentsDigest` (None: no digest)."""
        self.dropped = 0
        self._send: MemoryObjectSendStream[AuditRecord] | None = None
        self._receive: MemoryObjectReceiveStream[AuditRecord] | None = None
        self._dropped_logged_at = -_DROP_LOG_EVERY_S
        self._dropped_since_log = 0
        self.drop_counter: object | None = None
        """A prometheus `Counter` (or anything with `inc()`) counting dropped records; set by the app."""

    @classmethod
    @asynccontextmanager
    async def running(
        cls,
        sinks: Sequence[Sink],
        *,
        capacity: int = 10_000,
        required: bool = False,
        digest_key: bytes | None = None,
        flush_s: float = FLUSH_S,
    ) -> AsyncGenerator[AuditTrail]:
        """The trail with its writer task; on exit the queued records are written (bounded wait) first."""
        trail = cls(sinks, capacity=capacity, required=required, digest_key=digest_key, flush_s=flush_s)
        send, receive = anyio.create_memory_object_stream[AuditRecord](capacity)
        trail._send, trail._receive = send, receive
        done = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(trail._drain, receive, done)
            try:
                yield trail
            finally:
                trail._send = None
                send.close()  # the writer ends once the queue is empty
                with anyio.move_on_after(10, shield=True):
                    await done.wait()
                tg.cancel_scope.cancel()

    def has_room(self) -> bool:
        """Whether a record written now would be kept (the queue is open and not full)."""
        send = self._send
        return send is not None and send.statistics().current_buffer_used < self.capacity

    def write(self, record: AuditRecord) -> None:
        """Queue `record` for the sinks without waiting; a full (or closed) queue drops it, counted."""
        send = self._send
        if send is not None:
            try:
                send.send_nowait(record)
                return
            except (anyio.WouldBlock, anyio.ClosedResourceError):
                pass
        self._drop()

    def _drop(self) -> None:
        self.dropped += 1
        self._dropped_since_log += 1
        counter = self.drop_counter
        if counter is not None:
            counter.inc()  # pyright: ignore[reportAttributeAccessIssue]
        now = time.monotonic()
        if now - self._dropped_logged_at >= _DROP_LOG_EVERY_S:
            logger.warning(
                "the audit queue is full (%d records): %d record(s) dropped%s",
                self.capacity,
                self._dropped_since_log,
                "; calls are refused until it has room (--audit-required)" if self.required else "",
            )
            self._dropped_logged_at = now
            self._dropped_since_log = 0

    async def _drain(self, receive: MemoryObjectReceiveStream[AuditRecord], done: anyio.Event) -> None:
        try:
            await self._batches(receive)
        finally:
            done.set()

    async def _batches(self, receive: MemoryObjectReceiveStream[AuditRecord]) -> None:
        async with receive:
            async for first in receive:
                batch = [first]
                # One wake-up per batch: the records of the next `flush_s` queue up without waking this task
                # (no wait while a full batch is already queued: the trail keeps up with any call rate).
                if receive.statistics().current_buffer_used < BATCH - 1:
                    await anyio.sleep(self.flush_s)
                while len(batch) < BATCH:
                    try:
                        batch.append(receive.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                lines = [r.line() for r in batch]
                for sink in self.sinks:
                    try:
                        await sink.write(batch, lines)
                    except Exception:  # boundary: a sink's own bug must not end the trail
                        logger.exception("the audit sink %s failed", sink.name)
