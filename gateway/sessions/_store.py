"""`FileSessionStore`: sessions as files under the state root, for one process; survives a restart.

    <state-root>/sessions/<id>.json     the record (owner, title, current token, running/last turn); mode 0600
    <state-root>/traces/<id>.ndjson     the event log, one JSON object a line, append-only

Records are replaced atomically (write a temporary file, then rename). Opening reads the records
only: event logs are read on demand and kept in a bounded cache. A line cut short by a crash is
dropped when its log is first read, so appends after a restart start on a clean line. A record
that says a turn was running when the process stopped is closed as `interrupted` on open.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import json
import logging
import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import anyio
from cachetools import LRUCache

from .._asgi import loads_stored
from ._records import SESSION_ID, SessionRecord, closing_events, created_ms, interrupted_outcome, with_index

__all__ = ["FileSessionStore"]

logger = logging.getLogger("agent_sdk.sessions")

_CACHED_LOGS = 256


class FileSessionStore:
    """Synchronous file I/O, each call small (one record or one line), behind the async `SessionStore` protocol."""

    shared = False

    def __init__(self, root: Path) -> None:
        self.root = root
        self._records = root / "sessions"
        self._traces = root / "traces"
        self._by_id: dict[str, SessionRecord] = {}
        self._tokens: dict[str, str] = {}
        self._retired: dict[str, str] = {}
        """Token digests a follow-up rotated away (this process's lifetime), so a stale one is told from a wrong one."""
        self._owned: dict[str, list[tuple[int, str]]] = {}
        """Per principal: (created ms, id), oldest first; a listing page is a slice, not a scan."""
        self._logs: LRUCache[str, list[dict[str, Any]]] = LRUCache(maxsize=_CACHED_LOGS)
        self._changed: dict[str, anyio.Event] = {}

    async def open(self) -> None:
        """Create the folders (mode 0700) and read every record. Raises `OSError` for an unwritable state root."""
        for folder in (self.root, self._records, self._traces):
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        for record in self._load_records():
            self._index(record)
            if record.turn is not None:  # cut off by a crash or a kill: close it, as the stream's reader expects
                outcome = interrupted_outcome("server_restarted")
                turn_id = record.turn
                record.turn = None
                record.last_turn = {"turnId": turn_id, **outcome}
                self._append(record.id, closing_events(record.id, turn_id, outcome))
                self.save(record)

    async def aclose(self) -> None:
        return None

    # -- records ---------------------------------------------------------------------------------

    async def create(self, record: SessionRecord) -> None:
        self.save(record)
        self._index(record)
        self._logs[record.id] = []

    async def load(self, session_id: str) -> SessionRecord | None:
        record = self._by_id.get(session_id)
        if record is None:
            return None
        record.event_count = len(self._log(session_id))
        return _copy(record)

    async def find_token(self, token: str) -> tuple[str, bool] | None:
        digest = _digest(token)
        if (sid := self._tokens.get(digest)) is not None:
            return sid, True
        if (sid := self._retired.get(digest)) is not None:
            return sid, False
        return None

    async def rotate(self, session_id: str, expected: str | None, new: str) -> bool:
        record = self._by_id[session_id]
        if expected is not None and _digest(expected) != _digest(record.continuation_token):
            return False
        old = _digest(record.continuation_token)
        self._tokens.pop(old, None)
        self._retired[old] = session_id
        record.continuation_token = new
        self._tokens[_digest(new)] = session_id
        self.save(record)
        return True

    async def page(
        self, principal: str, before: tuple[int, str] | None, limit: int
    ) -> tuple[list[SessionRecord], tuple[int, str] | None]:
        owned = self._owned.get(principal, [])
        end = len(owned) if before is None else bisect.bisect_left(owned, before)
        keys = owned[max(0, end - limit) : end][::-1]
        records = [r for sid in (k[1] for k in keys) if (r := await self.load(sid)) is not None]
        return records, (keys[-1] if keys and end - limit > 0 else None)

    async def count(self) -> int:
        return len(self._by_id)

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
        record = self._by_id[session_id]
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
        record = self._by_id[session_id]
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
        path = self._records / f"{record.id}.json"
        tmp = path.with_suffix(".json.tmp")
        data = asdict(record)
        data.pop("event_count", None)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.replace(tmp, path)

    def _index(self, record: SessionRecord) -> None:
        self._by_id[record.id] = record
        self._tokens[_digest(record.continuation_token)] = record.id
        bisect.insort(self._owned.setdefault(record.owner, []), (created_ms(record), record.id))

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

    def _load_records(self) -> list[SessionRecord]:
        """Every stored record; unreadable ones are logged and skipped."""
        out: list[SessionRecord] = []
        for path in sorted(self._records.glob("ses_*.json")):
            if not SESSION_ID.fullmatch(path.stem):
                continue
            try:
                record = SessionRecord(**loads_stored(path.read_bytes()))
            except (OSError, ValueError, TypeError):
                logger.warning("skipping unreadable session record %s", path.name)
                continue
            out.append(record)
        return out

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
                events.append(event)  # pyright: ignore[reportUnknownArgumentType]
        return events


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _copy(record: SessionRecord) -> SessionRecord:
    data = asdict(record)
    return SessionRecord(**data)
