"""`ApprovalGate`: which calls wait for an operator (`require_approval` on their connection), and the wait."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from connections import ConnectionDefinition

from ._pending import ApprovalDenied, PendingApproval
from ._store import Approvals, MemoryApprovals, new_approval_id

__all__ = ["ApprovalGate"]

logger = logging.getLogger("gateway.approvals")


class ApprovalGate:
    """Holds the calls of tools whose connection says `require_approval` until an operator answers."""

    def __init__(
        self,
        connections: Mapping[str, ConnectionDefinition],
        store: Approvals | None = None,
        *,
        timeout_s: float = 300.0,
    ) -> None:
        self.store: Approvals = store if store is not None else MemoryApprovals()
        self.timeout_s = timeout_s
        self._needed = {name: d for name, d in connections.items() if d.require_approval}
        self.counter: Any = None
        """A prometheus `Counter` with labels (decision,); set by the app."""

    def needed(self, tool: str, connection: str | None) -> bool:
        if connection is None or not self._needed:
            return False
        definition = self._needed.get(connection)
        return definition is not None and definition.needs_approval(tool)

    async def wait(
        self, principal: str, surface: str, tool: str, connection: str | None, request_id: str | None
    ) -> str:
        """Hold the call until it is decided; the approving operator's id. Raises `ApprovalDenied` for a
        denial and for no answer within `timeout_s` (fail closed)."""
        now = time.time()
        pending = PendingApproval(
            new_approval_id(), principal, surface, tool, connection, now, now + self.timeout_s, request_id
        )
        logger.info(  # not a failure: the console's approvals panel shows it
            "call of %r by %s waits for an operator's approval %s (agent-sdk approvals approve %s), up to %.0f s",
            tool[:64],
            principal,
            pending.id,
            pending.id,
            self.timeout_s,
        )
        decision = await self.store.hold(pending, self.timeout_s)
        if self.counter is not None:
            self.counter.labels(decision.state).inc()
        if decision.approved:
            return decision.by or ""
        if decision.state == "denied":
            raise ApprovalDenied(
                f"an operator ({decision.by}) denied the call of {tool[:64]!r} (approval {pending.id})",
                approval=pending.id,
                approver=decision.by,
            )
        raise ApprovalDenied(
            f"the call of {tool[:64]!r} needs an operator's approval and none came within {self.timeout_s:.0f} s "
            f"(approval {pending.id}), so it is denied; ask an operator to watch the console's approvals",
            approval=pending.id,
        )
