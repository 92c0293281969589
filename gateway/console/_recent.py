"""`RecentFailures`: a bounded log handler keeping the last warnings and errors, with their request ids.

It keeps what the log already says (the last 100 records at WARNING or above from the gateway's, the
connections' and the OAuth loggers), so the console can show the last failures beside the request
id an operator greps the log for. Each message goes through the one redaction rule and
`oauth.printable`.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Generator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from connections import redact
from oauth import printable

from ..request_ids import current_request_id

__all__ = ["WATCHED_LOGGERS", "RecentFailures"]

WATCHED_LOGGERS = ("agent_sdk", "gateway", "connections", "oauth")


class RecentFailures(logging.Handler):
    """The last `size` records at WARNING or above, as JSON-ready dicts (oldest first)."""

    def __init__(self, size: int = 100) -> None:
        super().__init__(logging.WARNING)
        self.records: deque[dict[str, Any]] = deque(maxlen=size)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            message = str(record.msg)
        self.records.append(
            {
                "at": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
                "level": record.levelname.lower(),
                "logger": record.name,
                "message": printable(redact(message), 500),
                # This handler runs before the root handler's filter stamps the id: read it from the context.
                "requestId": getattr(record, "request_id", None) or current_request_id(),
                "event": getattr(record, "event", None),
                "connection": getattr(record, "connection", None),
                "tool": getattr(record, "tool", None),
                "code": getattr(record, "code", None),
            }
        )

    @contextmanager
    def watching(self, loggers: tuple[str, ...] = WATCHED_LOGGERS) -> Generator[RecentFailures]:
        """Attached to `loggers` until the block ends."""
        for name in loggers:
            logging.getLogger(name).addHandler(self)
        try:
            yield self
        finally:
            for name in loggers:
                logging.getLogger(name).removeHandler(self)
