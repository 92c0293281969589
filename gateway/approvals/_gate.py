"""`ApprovalGate`: which calls wait for an operator (`require_approval` on their connection), the wait, who may
decide it (`--approval-separation`), and the answer held calls get when the gateway stops."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

import anyio

from connections import ConnectionDefinition

from ._pending import ApprovalAbandoned, ApprovalDenied, ApprovalNotFound, ApprovalSeparation, PendingApproval
from ._store import Approvals, MemoryApprovals, new_approval_id, not_found

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
        separation: bool = False,
    ) -> None:
        self.store: Approvals = store if store is not None else MemoryApprovals()
        self.timeout_s = timeout_s
        self.separation = separation
        """An operator may not decide a call it holds itself (`--approval-separation`, docs/audit.md)."""
        self._needed = {name: d for name, d in connections.items() if d.require_approval}
        self._holding: set[anyio.CancelScope] = set()
        self._stopping = False
        self.counter: Any = None
        """A prometheus `Counter` with labels (decision,); set by the app."""

    def needed(self, tool: str, connection: str | None) -> bool:
        if connection is None or not self._needed:
            return False
        definition = self._needed.get(connection)
        return definition is not None and definition.needs_approval(tool)

    def pending_for(
        self, principal: str, surface: str, tool: str, connection: str | None, **facts: Any
    ) -> PendingApproval:
        """A new held call's record (`facts`: `request_id`, `name`, `subject`, `arguments`, `peer`,
        `peer_request_id`), deadline `timeout_s` from now."""
        now = time.time()
        return PendingApproval(
            new_approval_id(), principal, surface, tool, connection, now, now + self.timeout_s, **facts
        )

    async def wait(self, pending: PendingApproval) -> str:
        """Hold the call until it is decided; the approving operator's id. Raises `ApprovalDenied` for a
        denial and for no answer within `timeout_s` (fail closed), `ApprovalAbandoned` when the gateway stops
        meanwhile (`abandon_all`)."""
        tool = pending.target
        if self._stopping:
            raise self._abandoned(pending)
        logger.info(  # not a failure: the console's approvals panel shows it
            "call of %r by %s waits for an operator's approval %s (agent-sdk approvals approve %s), up to %.0f s",
            tool[:64],
            pending.principal,
            pending.id,
            pending.id,
            self.timeout_s,
        )
        decision = None
        with anyio.CancelScope() as scope:
            self._holding.add(scope)
            try:
                decision = await self.store.hold(pending, self.timeout_s)
            finally:
                self._holding.discard(scope)
        if decision is None:  # `abandon_all` cancelled the hold: the gateway is stopping
            if self.counter is not None:
                self.counter.labels("abandoned").inc()
            raise self._abandoned(pending)
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

    def abandon_all(self) -> None:
        """The gateway is stopping: every call this process holds is answered now (`ApprovalAbandoned`, not
        run) instead of waiting out its deadline, and no new call is held."""
        self._stopping = True
        self.store.ended = "abandoned"  # a late decision is told the gateway stopped
        for scope in list(self._holding):
            scope.cancel()

    @staticmethod
    def _abandoned(pending: PendingApproval) -> ApprovalAbandoned:
        return ApprovalAbandoned(
            f"the gateway is shutting down, so the call of {pending.target[:64]!r} that waited for an operator's "
            f"approval ({pending.id}) was not run; retry it when the gateway is back",
            approval=pending.id,
        )

    async def decide(self, approval_id: str, approve: bool, by: str) -> PendingApproval:
        """Approve or deny a held call as operator `by`. Raises `ApprovalNotFound`, `ApprovalDecided`, and
        `ApprovalSeparation` when separation is on and `by` is the principal whose call it is."""
        if self.separation:
            pending = await self.store.get(approval_id)
            if pending is None:
                raise ApprovalNotFound(not_found(approval_id))
            if pending.principal == by:
                raise ApprovalSeparation(
                    f"approval {approval_id} is for a call you made yourself, and this gateway keeps approvals "
                    "separate (--approval-separation): another operator must approve or deny it"
                )
        return await self.store.decide(approval_id, approve, by)
