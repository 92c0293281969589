"""`SessionIndex`: the file store's per-principal listing index and token map, kept so a restart reads one file.

    <state-root>/session-index.ndjson     one JSON array a line; mode 0600

The first line names the format; every other line is one record's index entry as it was last saved:
`[id, owner, created ms, sha256 of the current token, running (0/1), inode, mtime ns, size]`. A save
appends the entry after its record was replaced (the last line for an id wins), and the file is
rewritten whole (a temporary file, then a rename) when superseded lines outnumber the live ones.

A restart reads this file and lists the records folder (names and `stat`, no contents); it trusts an
entry only when its record file is still the one the entry describes (same inode, mtime and size: a
record is replaced by a rename, so every save gives it a new inode). Anything else is read from the
record itself: a record written just before a crash cut off its entry, a record the index has never
seen, a missing or unreadable index (then every record is read, as before the index existed). An
entry whose record is gone is dropped. So a stale index costs reading the records it is wrong about,
and is never believed.

One process owns a state root and every write is synchronous (no `await` between replacing a record
and appending its entry), so the event loop serializes writers: no other lock is needed.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_core import from_json

from oauth._shared import write_private

from ._records import SESSION_ID, SessionRecord, created_ms

__all__ = ["IndexEntry", "SessionIndex", "token_digest"]

logger = logging.getLogger("agent_sdk.sessions")

_HEADER = '["agent-sdk session index",1]\n'
_ENTRY_TYPES = (str, str, int, str, int, int, int, int)
_SLACK = 1000
"""Superseded lines tolerated beyond the live ones before the file is rewritten."""


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(slots=True)
class IndexEntry:
    owner: str
    created: int
    token: str
    """sha256 of the current continuation token."""
    running: bool
    stamp: tuple[int, int, int]
    """(inode, mtime ns, size) of the record file this entry was taken from."""

    def line(self, session_id: str) -> str:
        row = [session_id, self.owner, self.created, self.token, int(self.running), *self.stamp]
        return json.dumps(row, separators=(",", ":")) + "\n"


def entry_of(record: SessionRecord, stamp: tuple[int, int, int]) -> IndexEntry:
    return IndexEntry(
        record.owner, created_ms(record), token_digest(record.continuation_token), record.turn is not None, stamp
    )


def stamp_of(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class SessionIndex:
    """The entries, the per-principal lists (oldest first) and the token map, with the journal behind them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[str, IndexEntry] = {}
        self._owned: dict[str, list[tuple[int, str]]] = {}
        self._tokens: dict[str, str] = {}
        self._lines = 0
        self._torn = False
        self._fh: int | None = None

    # -- queries ---------------------------------------------------------------------------------

    def owned(self, principal: str) -> list[tuple[int, str]]:
        """(created ms, id) of `principal`'s sessions, oldest first (do not modify)."""
        return self._owned.get(principal, [])

    def owners(self, limit: int) -> dict[str, int]:
        """Session counts of the first `limit` principals, by name."""
        return {p: len(self._owned[p]) for p in sorted(self._owned)[:limit] if self._owned[p]}

    def by_token(self, digest: str) -> str | None:
        return self._tokens.get(digest)

    def running(self) -> list[str]:
        return [sid for sid, entry in self.entries.items() if entry.running]

    # -- start-up --------------------------------------------------------------------------------

    def load(self, records: Path, read: Callable[[str], SessionRecord | None]) -> int:
        """Build the index from the journal, checked against the records folder; `read` loads one record
        (None when unreadable). Returns how many records had to be read. Raises `OSError` when the
        journal cannot be written."""
        # Tens of thousands of new objects and no cycle among them: the collections they would
        # trigger walk the whole process's heap and cost as much as the building itself.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._load(records, read)
        finally:
            if collecting:
                gc.enable()

    def _load(self, records: Path, read: Callable[[str], SessionRecord | None]) -> int:
        journal = self._read_journal()
        fresh = journal is None
        known = journal or {}
        repaired = 0
        with os.scandir(records) as found:
            names = (e for e in found if e.name.endswith(".json"))
            listing = [(e.name[:-5], e) for e in names if SESSION_ID.fullmatch(e.name[:-5])]
        for sid, dirent in listing:
            try:
                stamp = stamp_of(dirent.stat())
            except OSError:
                continue
            entry = known.get(sid)
            if entry is None or entry.stamp != stamp:
                repaired += 1
                record = read(sid)
                if record is None:
                    continue
                entry = entry_of(record, stamp)
            self._add(sid, entry)
        for owned in self._owned.values():
            owned.sort()
        dropped = sum(1 for sid in known if sid not in self.entries)
        if fresh or self._torn or repaired or dropped or self._lines > 2 * len(self.entries) + _SLACK:
            if not fresh and (repaired or dropped):
                logger.info("session index: %d records read again, %d entries dropped", repaired, dropped)
            self.compact()
        else:
            self._open_for_append()
        return repaired

    def _read_journal(self) -> dict[str, IndexEntry] | None:
        """The last entry of each id, or None when there is no usable journal (missing, unreadable, another format)."""
        try:
            with open(self.path, "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            logger.warning("cannot read the session index (%s); reading every record", type(exc).__name__)
            return None
        self._torn = not data.endswith(b"\n")  # a line cut short: rewrite, so the next append starts clean
        if not data.startswith(_HEADER.encode()):
            logger.warning("the session index is not in a format this version reads; reading every record")
            return None
        lines = data[len(_HEADER) :].splitlines()
        self._lines = len(lines)
        try:  # one parse for the whole file (no line can hold a newline: JSON escapes them)
            rows: list[Any] = from_json(b"[" + b",".join(lines) + b"]")
        except ValueError:  # a line cut short by a crash: parse line by line, its record is read instead
            rows = [row for line in lines if (row := _parse(line)) is not None]
        out: dict[str, IndexEntry] = {}
        for row in rows:
            if _is_entry(row):
                sid, owner, created, token, running, ino, mtime, size = row
                out[sid] = IndexEntry(owner, created, token, bool(running), (ino, mtime, size))
        return out

    # -- changes ---------------------------------------------------------------------------------

    def put(self, session_id: str, record: SessionRecord, stamp: tuple[int, int, int]) -> None:
        """Record `session_id`'s new entry (after its record file was replaced) in memory and in the journal."""
        old = self.entries.get(session_id)
        entry = entry_of(record, stamp)
        if old is not None:
            if self._tokens.get(old.token) == session_id:
                del self._tokens[old.token]
            self.entries[session_id] = entry
            self._tokens[entry.token] = session_id
        else:
            self._add(session_id, entry, keep_sorted=True)
        self._append(entry.line(session_id))

    def _add(self, session_id: str, entry: IndexEntry, *, keep_sorted: bool = False) -> None:
        self.entries[session_id] = entry
        self._tokens[entry.token] = session_id
        owned = self._owned.setdefault(entry.owner, [])
        if keep_sorted:
            bisect.insort(owned, (entry.created, session_id))
        else:
            owned.append((entry.created, session_id))

    def _append(self, line: str) -> None:
        if self._fh is None:
            return
        try:
            os.write(self._fh, line.encode())
        except OSError as exc:  # the record is saved; the next start reads it again (its stamp will not match)
            logger.error("could not write the session index: %s", type(exc).__name__)
            return
        self._lines += 1
        if self._lines > 2 * len(self.entries) + _SLACK:
            try:
                self.compact()
            except OSError as exc:  # the lines appended so far still hold; try again at the next start
                logger.error("could not rewrite the session index: %s", type(exc).__name__)
                with contextlib.suppress(OSError):
                    self._open_for_append()

    def compact(self) -> None:
        """Rewrite the journal with one line per session (atomically). Raises `OSError` when it cannot."""
        self.close()
        write_private(self.path, "".join([_HEADER, *_lines(self.entries.items())]).encode())
        self._lines = len(self.entries)
        self._open_for_append()

    def _open_for_append(self) -> None:
        self._fh = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def close(self) -> None:
        if self._fh is not None:
            with contextlib.suppress(OSError):
                os.close(self._fh)
            self._fh = None


def _parse(line: bytes) -> Any:
    try:
        return from_json(line)
    except ValueError:
        return None


def _is_entry(row: Any) -> bool:
    """`[id, owner, created, token, running, ino, mtime, size]` with those types (an entry that is not is ignored,
    and its record read)."""
    if type(row) is not list or len(row) != 8:
        return False
    types = tuple(map(type, row))
    return types == _ENTRY_TYPES


def _lines(entries: Iterable[tuple[str, IndexEntry]]) -> Iterable[str]:
    return (entry.line(sid) for sid, entry in entries)
