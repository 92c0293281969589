"""`FileSessionStore`: sessions as files under the state root, for one process; survives a restart.

    <state-root>/sessions/<id>.json       the record (owner, title, current token, running/last turn); mode 0600
    <state-root>/traces/<id>.ndjson       the event log, one JSON object a line, append-only
    <state-root>/session-index.ndjson     the per-principal index and the token map (`_index.py`); mode 0600

Records are replaced atomically (write a temporary file, then rename), then their index entry is
appended. Opening reads the index and lists the records folder; it reads a record only when the
index is wrong about it (or missing), and the records of turns that were running. Records are read
on first use and kept in a bounded cache; event logs likewise. A line cut short by a crash is dropped
when its log is first read, so appends after a restart start on a clean line. A record that says a
turn was running when the process stopped is closed as `interrupted` on open.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import anyio
from cachetools import LRUCache

from oauth._shared import printable

from ..http._asgi import loads_stored
from ._index import SessionIndex, stamp_of, token_digest
from ._records import SessionRecord, closing_events, interrupted_outcome, with_index

__all__ = ["FileSessionStore"]

logger = logging.getLogger("agent_sdk.sessions")

_CACHED_LOGS = 256
_CACHED_RECORDS = 1024


class FileSessionStore:
    """Synchronous file I/O, each call small (one record or one line), behind the async `SessionStore` protocol."""

    shared = False

    def __init__(self, root: Path) -> None:
        self.root = root
        self._records = root / "sessions"
        self._traces = root / "traces"
        self._index = SessionIndex(root / "session-index.ndjson")
        """Per principal: (created ms, id), oldest first (a listing page is a slice, not a scan); token digests."""
        self._cache: LRUCache[str, SessionRecord] = LRUCache(maxsize=_CACHED_RECORDS)
        """Records read or written lately; every change is saved at once, so one can drop out at any time."""
        self._retired: dict[str, str] = {}
        """Token digests a follow-up rotated away (this process's lifetime), so a stale one is told from a wrong one."""
        self._logs: LRUCache[str, list[dict[str, Any]]] = LRUCache(maxsize=_CACHED_LOGS)
        self._changed: dict[str, anyio.Event] = {}

    async def open(self) -> None:
        """Create the folders (mode 0700) and load the index, reading only the records it is wrong about and
        those of turns cut off by a crash. Raises `OSError` for an unwritable state root."""
        for folder in (self.root, self._records, self._traces):
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._index.load(self._records, self._read)
        for sid in self._index.running():  # cut off by a crash or a kill: close it, as the stream's reader expects
            record = self._record(sid)
            if record is not None and record.turn is not None:
                outcome = interrupted_outcome("server_restarted")
                turn_id = record.turn
                record.turn = None
                record.last_turn = {"turnId": turn_id, **outcome}
                self._append(record.id, closing_events(record.id, turn_id, outcome))
                self.save(record)

    async def aclose(self) -> None:
        self._index.close()

    # -- records ---------------------------------------------------------------------------------

    async def create(self, record: SessionRecord) -> None:
        self.save(record)
        self._logs[record.id] = []

    async def load(self, session_id: str) -> SessionRecord | None:
        record = self._record(session_id)
        if record is None:
            return None
        record.event_count = len(self._log(session_id))
        return _copy(record)

    async def find_token(self, token: str) -> tuple[str, bool] | None:
        digest = token_digest(token)
        sid = self._index.by_token(digest)
        if sid is not None and (record := self._record(sid)) is not None:
            if token_digest(record.continuation_token) == digest:  # the index led here; the record decides
                return sid, True
        if (sid := self._retired.get(digest)) is not None:
            return sid, False
        return None

    async def rotate(self, session_id: str, expected: str | None, new: str) -> bool:
        record = self._known(session_id)
        old = token_digest(record.continuation_token)
        if expected is not None and token_digest(expected) != old:
            return False
        self._retired[old] = session_id
        record.continuation_token = new
        self.save(record)
        return True

    async def page(
        self, principal: str, before: tuple[int, str] | None, limit: int
    ) -> tuple[list[SessionRecord], tuple[int, str] | None]:
        owned = self._index.owned(principal)
        end = len(owned) if before is None else bisect.bisect_left(owned, before)
        keys = owned[max(0, end - limit) : end][::-1]
        loaded = [await self.load(sid) for _, sid in keys]
        records = [r for r in loaded if r is not None and r.owner == principal]
        return records, (keys[-1] if keys and end - limit > 0 else None)

    async def count(self) -> int:
        return len(self._index.entries)

    async def owners(self, limit: int) -> dict[str, int]:
        return self._index.owners(limit)

    # -- events ----------------------------------------------------------------------------------

    async def append(self, session_id: str, events: Sequence[dict[str, Any]], holder: str | None = None) -> bool:
        self._append(session_id, events)
        return True

    async def read(self, session_id: str, start: int, *, block_s: float = 0.0, limit: int = 0) -> list[dict[str, Any]]:
        log = self._log(session_id)
        if start >= len(log) and block_s > 0:
            changed = self._changed.setdefault(session_id, anyio.Event())
            with anyio.move_on_after(block_s):
                await changed.wait()
            log = self._log(session_id)
        out = log[start : start + limit] if limit else log[start:]
        return list(out)

    # -- turns: one process owns them all, so a lease never lapses --------------------------------------

    async def begin_turn(
        self, session_id: str, turn_id: str, holder: str, lease_s: float, events: Sequence[dict[str, Any]]
    ) -> bool:
        record = self._known(session_id)
        if record.turn is not None:
            return False
        record.turn = turn_id
        self.save(record)
        self._append(session_id, events)
        return True

    async def renew(self, session_id: str, holder: str, lease_s: float) -> bool:
        return True

    async def end_turn(
        self, session_id: str, holder: str, last_turn: dict[str, Any], events: Sequence[dict[str, Any]]
    ) -> bool:
        record = self._known(session_id)
        self._append(session_id, events)
        record.turn = None
        record.last_turn = last_turn
        self.save(record)
        return True

    async def lapsed(self) -> list[tuple[str, str]]:
        return []

    async def reap(
        self, session_id: str, turn_id: str, last_turn: dict[str, Any], events: Sequence[dict[str, Any]]
    ) -> bool:
        return False

    async def request_cancel(self, session_id: str, turn_id: str) -> None:
        return None

    async def cancellations(self) -> AsyncIterator[tuple[str, str]]:
        await anyio.sleep_forever()
        yield ("", "")  # pragma: no cover - never reached

    # -- files -------------------------------------------------------------------------------------

    def save(self, record: SessionRecord) -> None:
        """Replace the record's file atomically, then append its index entry."""
        path = self._records / f"{record.id}.json"
        tmp = path.with_suffix(".json.tmp")
        data = asdict(record)
        data.pop("event_count", None)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
            fh.flush()
            stamp = stamp_of(os.fstat(fh.fileno()))  # a rename keeps inode, mtime and size
        os.replace(tmp, path)
        self._cache[record.id] = record
        self._index.put(record.id, record, stamp)

    def _record(self, session_id: str) -> SessionRecord | None:
        """The live record (cached, else read); None for a session the index does not hold."""
        record = self._cache.get(session_id)
        if record is None and session_id in self._index.entries:
            record = self._read(session_id)
            if record is not None:
                self._cache[session_id] = record
        return record

    def _known(self, session_id: str) -> SessionRecord:
        record = self._record(session_id)
        if record is None:
            raise KeyError(session_id)
        return record

    def _append(self, session_id: str, events: Sequence[dict[str, Any]]) -> None:
        log = self._log(session_id)
        lines: list[str] = []
        for event in events:
            indexed = with_index(event, len(log))
            log.append(indexed)
            lines.append(json.dumps(indexed, separators=(",", ":"), default=str) + "\n")
        try:
            fd = os.open(self._traces / f"{session_id}.ndjson", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            with os.fdopen(fd, "a", encoding="utf-8") as fh:
                fh.write("".join(lines))
        except OSError as exc:  # a full disk must not kill the turn; the events stay in memory
            logger.error("could not persist an event of session %s: %s", session_id, type(exc).__name__)
        changed = self._changed.pop(session_id, None)
        if changed is not None:
            changed.set()

    def _log(self, session_id: str) -> list[dict[str, Any]]:
        log = self._logs.get(session_id)
        if log is None:
            log = self._logs[session_id] = self._load_events(session_id)
        return log

    def _read(self, session_id: str) -> SessionRecord | None:
        """One stored record; an unreadable one is logged and is None."""
        try:
            with open(self._records / f"{session_id}.json", "rb") as fh:
                record = SessionRecord(**loads_stored(fh.read()))
        except (OSError, ValueError, TypeError):
            logger.warning("skipping unreadable session record %s.json", session_id)
            return None
        if record.id != session_id:
            logger.warning("skipping session record %s.json: it holds session %s", session_id, printable(record.id, 64))
            return None
        return record

    def _load_events(self, session_id: str) -> list[dict[str, Any]]:
        path = self._traces / f"{session_id}.ndjson"
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return []
        cut = data.rfind(b"\n") + 1
        if cut != len(data):  # a line cut short by a crash: drop it so the next append starts clean
            with contextlib.suppress(OSError), open(path, "r+b") as fh:
                fh.truncate(cut)
        events: list[dict[str, Any]] = []
        for raw in data[:cut].splitlines():
            try:
                event = loads_stored(raw)
            except ValueError:
                continue
            if isinstance(event, dict):
                events.append(event)
        return events


def _copy(record: SessionRecord) -> SessionRecord:
    data = asdict(record)
    return SessionRecord(**data)
