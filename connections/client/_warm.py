"""`WarmProgress`: how far `serve --warm`'s start of every pooled connection has come.

Read by the gateway's readiness route (`/v1/ready` answers 503 until every warm start finished) and
logged as each start finishes ("warm start: 3 of 5 connections ready"), so an operator watching a
start of many stdio servers sees how many of how many are up.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

__all__ = ["StartBatch", "WarmProgress"]

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class WarmProgress:
    """Counts of one warm start: `total` connections, `finished` (opened or failed), `ready` (opened)."""

    total: int
    finished: int = 0
    ready: int = 0
    failed: list[str] = field(default_factory=list[str])
    """The connections whose warm start failed (each tried again on its first use)."""

    @property
    def done(self) -> bool:
        return self.finished >= self.total

    def record(self, name: str, ok: bool) -> None:
        """One connection's warm start finished; log the running count."""
        self.finished += 1
        if ok:
            self.ready += 1
        else:
            self.failed.append(name)
        failed = f" ({len(self.failed)} failed: tried again on first use)" if self.failed else ""
        logger.info(
            "warm start: %d of %d connections ready%s",
            self.ready,
            self.total,
            failed,
            extra={"event": "warm_progress", "connection": name},
        )


@dataclass(slots=True)
class StartBatch:
    """The stdio children starting together (a first listing of many, or `--warm`): each finished start
    of a batch of more than one logs "stdio servers: 12 of 100 ready"; the batch ends when all have."""

    begun: int = 0
    finished: int = 0
    ready: int = 0

    def begin(self) -> None:
        self.begun += 1

    def finish(self, name: str, ok: bool) -> None:
        self.finished += 1
        self.ready += ok
        if self.begun > 1:
            failed = self.finished - self.ready
            logger.info(
                "stdio servers: %d of %d ready%s",
                self.ready,
                self.begun,
                f" ({failed} failed)" if failed else "",
                extra={"event": "start_progress", "connection": name},
            )
        if self.finished >= self.begun:
            self.begun = self.finished = self.ready = 0
