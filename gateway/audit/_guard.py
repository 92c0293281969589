"""`CallGuard`: what every surface does around a tool call, in one place (docs/audit.md).

Before the call: room in the audit queue (with `--audit-required`), the project's rate limits
(`gateway/limits`), an operator's approval where the connection asks for one (`gateway/approvals`).
After it, or after a refusal: one audit record. Each surface wraps the tool it is about to run
(`guard.tool(...)`) where it runs it, and turns a `CallRefused` into its own wire's refusal.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from mcp.shared.exceptions import MCPError

from connections import ConnectionsError, ToolInputError, ToolOutcome, Toolset, TurnTool
from connections.serving import shown_arguments

from ..approvals import ApprovalAbandoned, ApprovalGate
from ..auth.chain import Principal
from ..errors import CallRefused
from ..http.request_ids import own_request_id, peer_facts, peer_request_id
from ..limits import Limiter
from ..policy import PolicyGate, Refusal, tool_target
from ._record import AuditRecord, argument_digest
from ._trail import AuditTrail

__all__ = ["AuditUnavailable", "CallGuard", "refusal_rpc_error"]

T = TypeVar("T")
_GUARDED_KEPT = 4096
"""Guarded tools kept for reuse (`CallGuard.tool`); past this many the cache starts again."""


class AuditUnavailable(CallRefused):
    status = 503
    code = "audit_unavailable"
    rpc_code = -32004


def refusal_rpc_error(exc: CallRefused) -> MCPError:
    """The JSON-RPC error a refusal is on MCP: its code, its sentence, and `data` with the wire code (and
    `retryAfterS` for a rate limit)."""
    return MCPError(exc.rpc_code, exc.message, data={"error": exc.code, **exc.extra})


def _is_error(outcome: ToolOutcome) -> bool:
    return outcome.is_error


def _who(principal: Principal | str) -> tuple[str, str | None]:
    if isinstance(principal, str):
        return principal, None
    return principal.id, principal.oauth.issuer if principal.oauth is not None else None


def _record(principal: Principal | str, surface: str, target: str, connection: str | None) -> AuditRecord:
    """A new record of a call by `principal`: who (id, issuer, display name, subject) and which request (the
    gateway's own id, the peer's beside it)."""
    who, issuer = _who(principal)
    record = AuditRecord(who, surface, target, issuer=issuer, connection=connection)
    if isinstance(principal, Principal):
        record.name, record.subject = principal.display, principal.subject
    record.request_id, record.peer_request_id = own_request_id(), peer_request_id()
    return record


class CallGuard:
    """The audit trail, the limits and the approvals of one gateway process, applied to each call."""

    def __init__(
        self, trail: AuditTrail, limiter: Limiter, approvals: ApprovalGate, *, mcp_surface: str = "mcp/tools"
    ) -> None:
        self.mcp_surface = mcp_surface
        self.trail = trail
        self.limiter = limiter
        self.approvals = approvals
        self.stream_reader: Any = None
        self.policy: PolicyGate | None = None
        """The project's policy (`gateway/policy/`): each record names the policies that decided its call."""
        """The Redis client `GET /v1/audit` reads the shared stream with (None: the file is read)."""
        self._guarded: dict[tuple[object, ...], tuple[TurnTool, TurnTool]] = {}

    def tool(
        self,
        tool: TurnTool,
        surface: str | None,
        principal: Principal | str,
        *,
        served_as: str | None = None,
        server: str = "",
    ) -> TurnTool:
        """`tool` with its calls checked and recorded as `principal`'s on `surface` (None: this guard's MCP
        surface, `mcp/tools` or `stdio`); through curated server `server`, under its name `served_as`.
        Its call raises `CallRefused` subclasses (`RateLimited`,
        `LimitsUnavailable`, `ApprovalDenied`, `AuditUnavailable`) before it runs; the rest is the tool's own."""
        policies = self._policies(principal, tool, server)
        # The guarded copy is kept per (tool, surface, who, policies): a call of a reused listing's tool
        # pays a dict lookup, not a dataclass copy (the record depends on nothing else of `principal`).
        key = (id(tool), surface, *_who(principal), policies, served_as)
        kept = self._guarded.get(key)
        if kept is not None and kept[0] is tool:
            return kept[1]
        invoke = tool.invoke

        async def guarded(arguments: Mapping[str, Any]) -> ToolOutcome:
            return await self.run(
                tool.name,
                tool.connection,
                surface,
                principal,
                arguments,
                lambda: invoke(arguments),
                _is_error,
                policies=policies,
                served_as=served_as,
            )

        wrapped = dataclasses.replace(tool, invoke=guarded)
        if len(self._guarded) >= _GUARDED_KEPT:  # listings come and go (session turns build their own)
            self._guarded.clear()
        self._guarded[key] = (tool, wrapped)  # holding `tool` keeps its id from being reused meanwhile
        return wrapped

    async def run(
        self,
        name: str,
        connection: str | None,
        surface: str | None,
        principal: Principal | str,
        arguments: object,
        call: Callable[[], Awaitable[T]],
        is_error: Callable[[T], bool],
        *,
        policies: tuple[str, ...] = (),
        served_as: str | None = None,
    ) -> T:
        """`call()` once the call of tool `name` is admitted, and its audit record. Raises `CallRefused`
        (recorded as `refused`) and whatever `call` raises (recorded as `failed`)."""
        record = _record(principal, surface or self.mcp_surface, name, connection)
        record.served_as = served_as
        record.policies = list(policies)
        if self.trail.digest_key is not None:
            record.arguments_digest = argument_digest(arguments, self.trail.digest_key)
        started = time.perf_counter()
        try:
            record.approver = await self._admit(record, arguments)
        except CallRefused as exc:
            outcome = "abandoned" if isinstance(exc, ApprovalAbandoned) else "refused"
            record.decision, record.outcome, record.reason = "deny", outcome, exc.code
            record.duration_ms = (time.perf_counter() - started) * 1000
            self.trail.write(record)
            raise
        try:
            result = await call()
        except ToolInputError:
            record.outcome, record.reason = "refused", "invalid_tool_input"
            raise
        except ConnectionsError as exc:
            record.outcome, record.reason = "failed", exc.code
            raise
        except Exception:  # the tool's own body raised: the peer sees an error result, as for `isError`
            record.outcome, record.reason = "tool_error", "tool_failed"
            raise
        except BaseException:  # cancelled: the caller went away
            record.outcome, record.reason = "failed", "cancelled"
            raise
        else:
            record.outcome = "tool_error" if is_error(result) else "ok"
            return result
        finally:
            record.duration_ms = (time.perf_counter() - started) * 1000
            self.trail.write(record)

    def _policies(self, principal: Principal | str, tool: TurnTool, server: str = "") -> tuple[str, ...]:
        """The ids of the policies that let `principal` call `tool` (none without a policy file)."""
        if self.policy is None or not self.policy.enforcing or not isinstance(principal, Principal):
            return ()
        return self.policy.decide(principal, "tools/call", tool_target(tool), server).policies

    def policy_refused(self, principal: Principal, refusal: Refusal, surface: str | None) -> None:
        """The record of a request answered as for a name that does not exist: a tool, resource, template or
        prompt the policy hides (`policy_denied`), or one that is not there (`unknown_tool`, `not_offered`)."""
        record = _record(principal, surface or self.mcp_surface, refusal.target, refusal.connection)
        record.method = refusal.method
        record.decision, record.outcome, record.reason = "deny", "refused", refusal.reason
        record.policies = list(refusal.policies)
        record.duration_ms = 0.0
        self.trail.write(record)

    def toolset(self, toolset: Toolset, surface: str, principal: Principal | str) -> Toolset:
        """Every tool of `toolset` guarded (a turn's toolset, for the session API)."""
        tools = {name: self.tool(t, surface, principal) for name, t in toolset.tools.items()}
        return dataclasses.replace(toolset, tools=tools)

    async def _admit(self, record: AuditRecord, arguments: object) -> str | None:
        if self.trail.required and not self.trail.has_room():
            raise AuditUnavailable(
                "the audit trail cannot take another record (its queue is full) and --audit-required is set, so "
                "this call is refused; retry shortly"
            )
        await self.limiter.admit(record.principal, record.target, record.connection)
        if self.approvals.needed(record.target, record.connection):
            pending = self.approvals.pending_for(
                record.principal,
                record.surface,
                record.target,
                record.connection,
                request_id=record.request_id,
                name=record.name,
                subject=record.subject,
                arguments=shown_arguments(arguments),
                peer=peer_facts(),
                peer_request_id=record.peer_request_id,
            )
            record.approval = pending.audit_json()  # what the operator is shown to judge it
            return await self.approvals.wait(pending)
        return None
