"""`RecentRecords`: a bounded log handler keeping the last records the log wrote, with their request ids.

It keeps what the log already says, from the gateway's, the connections' and the OAuth loggers, so
the console can show it beside the request id an operator greps the log for. Three of them run per
process (`ConsoleServices`): the last 100 warnings and errors (*Last failures*), the last 200
records at INFO and above but the access lines (*Recent log*), and the last 50 operator actions
(`event: operator_action`). Each message goes through the one redaction rule and `oauth._shared.printable`.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Generator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from connections.serving import redact
from oauth._shared import printable

from ..http.request_ids import current_request_id

__all__ = ["WATCHED_LOGGERS", "RecentRecords"]

WATCHED_LOGGERS = ("agent_sdk", "gateway", "connections", "oauth")
_FIELDS = ("event", "connection", "tool", "code", "action")


class RecentRecords(logging.Handler):
    """The last `size` records at `level` or above (of `event` only, when given; none from the `skip`
    loggers), as JSON-ready dicts, oldest first."""

    def __init__(
        self, size: int = 100, level: int = logging.WARNING, *, event: str | None = None, skip: tuple[str, ...] = ()
    ) -> None:
        super().__init__(level)
        self.records: deque[dict[str, Any]] = deque(maxlen=size)
        self.event = event
        self.skip = skip

    def emit(self, record: logging.LogRecord) -> None:
        if record.name in self.skip or (self.event is not None and getattr(record, "event", None) != self.event):
            return
        if getattr(record, "console_before_token", False):  # the page's own 401s before a token was typed
            return
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            message = str(record.msg)
        entry: dict[str, Any] = {
            "at": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": printable(redact(message), 500),
            # This handler runs before the root handler's filter stamps the id: read it from the context.
            "requestId": getattr(record, "request_id", None) or current_request_id(),
        }
        for key in _FIELDS:
            entry[key] = getattr(record, key, None)
        self.records.append(entry)

    def newest_first(self) -> list[dict[str, Any]]:
        out = list(self.records)
        out.reverse()
        return out

    @contextmanager
    def watching(self, loggers: tuple[str, ...] = WATCHED_LOGGERS) -> Generator[RecentRecords]:
        """Attached to `loggers` until the block ends."""
        for name in loggers:
            logging.getLogger(name).addHandler(self)
        try:
            yield self
        finally:
            for name in loggers:
                logging.getLogger(name).removeHandler(self)
