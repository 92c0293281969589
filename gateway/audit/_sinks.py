"""Where audit lines go: a JSON Lines file with size rotation, a capped Redis stream, OpenTelemetry logs.

Each sink takes a batch of lines from the trail's writer task, never from a call: a slow disk or an
absent Redis delays the trail, not the calls (docs/audit.md, "Sinks").
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Protocol

import anyio
from filelock import FileLock
from opentelemetry import _logs as otel_logs

from connections.serving import tracing_enabled

from ._record import AuditRecord

__all__ = ["AUDIT_STREAM", "FileSink", "OtelSink", "RedisSink", "Sink", "audit_folder"]

logger = logging.getLogger("gateway.audit")

AUDIT_STREAM = "agent-sdk:audit"
"""The Redis stream every replica of a deployment appends to (`--state-url`)."""


def audit_folder(state_root: Path) -> Path:
    return state_root / "audit"


class Sink(Protocol):
    """One destination of the trail. `write` must not raise for the destination's own failures."""

    name: str

    async def write(self, records: list[AuditRecord], lines: list[str]) -> None: ...  # pragma: no cover - protocol


class FileSink:
    """`audit.jsonl` under the state root's `audit/`, one record a line, 0600. Past `max_bytes` the file
    becomes `audit.jsonl.1` (`.1` becomes `.2`, ... up to `keep`, the oldest dropped). A file lock keeps
    two processes sharing the folder from rotating under each other."""

    name = "file"

    def __init__(self, folder: Path, *, max_bytes: int = 16 * 1024 * 1024, keep: int = 5) -> None:
        self.folder = folder
        self.path = folder / "audit.jsonl"
        self.max_bytes = max_bytes
        self.keep = keep
        self._lock = FileLock(str(folder / ".audit.lock"))
        self._failed = False

    def _append(self, data: bytes) -> None:
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        with self._lock:
            try:
                size = self.path.stat().st_size
            except FileNotFoundError:
                size = 0
            if size and size + len(data) > self.max_bytes:
                self._rotate()
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)

    def _rotate(self) -> None:
        for n in range(self.keep - 1, 0, -1):
            older = self.folder / f"audit.jsonl.{n}"
            if older.exists():
                older.replace(self.folder / f"audit.jsonl.{n + 1}")
        self.path.replace(self.folder / "audit.jsonl.1")

    async def write(self, records: list[AuditRecord], lines: list[str]) -> None:
        data = ("\n".join(lines) + "\n").encode()
        try:
            await anyio.to_thread.run_sync(self._append, data)
        except OSError as exc:
            if not self._failed:
                logger.error("the audit file %s cannot be written (%s); records are lost until it can", self.path, exc)
            self._failed = True
            return
        if self._failed:
            logger.warning("the audit file %s is written again", self.path)
            self._failed = False


class RedisSink:
    """`XADD agent-sdk:audit MAXLEN ~ cap`: one stream for every replica. While Redis does not answer the
    records go to the other sinks only; that is said once when it starts and once when it ends."""

    name = "redis"

    def __init__(self, redis: Any, *, max_len: int = 100_000) -> None:
        self.redis = redis
        self.max_len = max_len
        self.down = False

    async def write(self, records: list[AuditRecord], lines: list[str]) -> None:
        from redis.exceptions import RedisError

        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                for line in lines:
                    pipe.xadd(AUDIT_STREAM, {"r": line}, maxlen=self.max_len, approximate=True)
                await pipe.execute()
        except (RedisError, OSError) as exc:
            if not self.down:
                logger.warning(
                    "the audit stream in Redis cannot be written (%s); calls go on and their records reach the "
                    "audit file only until Redis answers",
                    type(exc).__name__,
                )
            self.down = True
            return
        if self.down:
            logger.warning("the audit stream in Redis is written again")
            self.down = False


class OtelSink:
    """Each record as an OpenTelemetry log record (body: the record, attributes: its fields), while an
    OpenTelemetry SDK is installed (`tracing_enabled`); nothing otherwise."""

    name = "otel"

    def __init__(self) -> None:
        self._logger = otel_logs.get_logger("agent_sdk.audit")

    async def write(self, records: list[AuditRecord], lines: list[str]) -> None:
        if not tracing_enabled():
            return
        for record, line in zip(records, lines, strict=True):
            fields = record.to_json()
            attributes = {f"agent_sdk.audit.{k}": v for k, v in fields.items() if isinstance(v, str | int | float)}
            self._logger.emit(
                severity_number=otel_logs.SeverityNumber.INFO,
                body=line,
                attributes=attributes,
                event_name="agent_sdk.audit",
            )
