"""`FileSessionStore`: sessions as files under the state root; survives a restart.

    <state-root>/sessions/<id>.json     the record (owner, title, current continuation token); mode 0600
    <state-root>/traces/<id>.ndjson     the event stream, one JSON object a line, append-only

Records are replaced atomically (write a temporary file, then rename). A line cut short by a
crash is dropped on load, so appends after a restart start on a clean line.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from .._asgi import loads_stored

__all__ = ["SESSION_ID", "FileSessionStore", "SessionRecord"]

logger = logging.getLogger("agent_sdk.sessions")

SESSION_ID = re.compile(r"ses_[0-9a-f]{24}")


@dataclass(slots=True)
class SessionRecord:
    id: str
    owner: str
    continuation_token: str
    created_at: str
    title: str | None = None
    channel_id: str = "http"
    mode: Literal["chat", "task"] = "chat"
    purpose: Literal["live", "eval"] = "live"


class FileSessionStore:
    """Synchronous file I/O, each call small (one record or one line); call it from the event loop."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._records = root / "sessions"
        self._traces = root / "traces"

    def open(self) -> None:
        """Create the folders (mode 0700). Raises `OSError` when the state root is not writable."""
        for folder in (self.root, self._records, self._traces):
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)

    def save(self, record: SessionRecord) -> None:
        path = self._records / f"{record.id}.json"
        tmp = path.with_suffix(".json.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(asdict(record), fh)
        os.replace(tmp, path)

    def append(self, session_id: str, event: dict[str, Any]) -> None:
        line = json.dumps(event, separators=(",", ":"), default=str) + "\n"
        fd = os.open(self._traces / f"{session_id}.ndjson", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as fh:
            fh.write(line)

    def load_all(self) -> list[tuple[SessionRecord, list[dict[str, Any]]]]:
        """Every stored session with its events; unreadable records are logged and skipped."""
        out: list[tuple[SessionRecord, list[dict[str, Any]]]] = []
        for path in sorted(self._records.glob("ses_*.json")):
            if not SESSION_ID.fullmatch(path.stem):
                continue
            try:
                record = SessionRecord(**loads_stored(path.read_bytes()))
            except (OSError, ValueError, TypeError):
                logger.warning("skipping unreadable session record %s", path.name)
                continue
            out.append((record, self._load_events(record.id)))
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
