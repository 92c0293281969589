"""Reading the trail back, newest first: from the Redis stream (every replica's) or from the files under
one state root. What `agent-sdk audit tail|search` and the console's `GET /v1/audit` show."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ._sinks import AUDIT_STREAM

__all__ = ["AuditQuery", "read_file_records", "read_stream_records"]

_BLOCK = 64 * 1024
_STREAM_PAGE = 500
_STREAM_SCAN = 20_000
"""A search reads at most this many of the stream's newest entries."""


@dataclass(frozen=True, slots=True)
class AuditQuery:
    """Which records to show: every given field must match (`since` is an ISO time, compared as text; `who` a
    person's display name, OAuth subject or principal id, without regard to case)."""

    limit: int = 50
    principal: str | None = None
    target: str | None = None
    outcome: str | None = None
    surface: str | None = None
    since: str | None = None
    who: str | None = None

    def matches(self, record: dict[str, Any]) -> bool:
        for key in ("principal", "target", "outcome", "surface"):
            wanted = getattr(self, key)
            if wanted is not None and record.get(key) != wanted:
                return False
        if self.who is not None:
            wanted = self.who.casefold()
            if not any(isinstance(v, str) and v.casefold() == wanted for v in _people(record)):
                return False
        return self.since is None or str(record.get("time", "")) >= self.since

    @staticmethod
    def check_since(value: str) -> str:
        """`value` as an ISO 8601 UTC time text the records compare with. Raises `ValueError` with a sentence."""
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(
                f"since must be an ISO 8601 time such as 2026-12-01T10:00:00Z, got {value[:40]!r}"
            ) from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _people(record: dict[str, Any]) -> tuple[object, ...]:
    return record.get("name"), record.get("subject"), record.get("principal")


def _lines_backwards(path: Path) -> Iterator[bytes]:
    """The lines of `path`, last first, read in blocks from the end (a tail costs what it shows)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        end = os.fstat(fd).st_size
        rest = b""
        while end > 0:
            start = max(0, end - _BLOCK)
            chunk = os.pread(fd, end - start, start) + rest
            end = start
            lines = chunk.split(b"\n")
            rest = lines[0]
            for line in reversed(lines[1:]):
                if line.strip():
                    yield line
        if rest.strip():
            yield rest
    finally:
        os.close(fd)


def read_file_records(folder: Path, query: AuditQuery) -> list[dict[str, Any]]:
    """The newest records under `folder` (`audit.jsonl`, then its rotated files) that match `query`.
    A line that is not a JSON object (a torn write) is skipped."""
    found: list[dict[str, Any]] = []
    files = [folder / "audit.jsonl"]
    files += sorted(folder.glob("audit.jsonl.*"), key=lambda p: int(p.suffix[1:]) if p.suffix[1:].isdigit() else 0)
    for path in files:
        for line in _lines_backwards(path):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and query.matches(record):
                found.append(record)
                if len(found) >= query.limit:
                    return found
    return found


async def read_stream_records(redis: Any, query: AuditQuery) -> list[dict[str, Any]]:
    """The newest records of the shared stream that match `query` (at most `_STREAM_SCAN` entries read).
    Raises redis' errors (the caller says the store cannot be reached)."""
    found: list[dict[str, Any]] = []
    last = "+"
    scanned = 0
    while scanned < _STREAM_SCAN:
        entries = await redis.xrevrange(AUDIT_STREAM, max=last, min="-", count=_STREAM_PAGE)
        if last != "+":
            entries = entries[1:]  # the page starts with the entry the last one ended on
        if not entries:
            break
        for entry_id, fields in entries:
            scanned += 1
            last = entry_id
            try:
                record = json.loads(fields.get("r", ""))
            except ValueError:
                continue
            if isinstance(record, dict) and query.matches(record):
                found.append(record)
                if len(found) >= query.limit:
                    return found
    return found
