"""`serving_guard`: the audit trail, limits and approvals a serving gateway runs with, from its settings."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from connections import Project

from ..approvals import ApprovalGate, RedisApprovals
from ..limits import Limiter, limits_storage, load_limit_rules
from ..settings import ServeSettings
from ..state._redis import redis_client
from ..state.state_key import derive_key, load_state_key
from ._guard import CallGuard
from ._sinks import FileSink, OtelSink, RedisSink, Sink, audit_folder
from ._trail import AuditTrail

__all__ = ["guard_counters", "serving_guard"]

AUDIT_DIGEST = "audit-argument-digest"
"""The label of the `--audit-argument-digest` HMAC key (`derive_key` of the deployment's state key)."""


def guard_counters(guard: CallGuard, registry: CollectorRegistry | None) -> None:
    """Count refusals by rate limit, dropped audit records and approval decisions in the app's metrics."""
    guard.limiter.refused_counter = Counter(
        "agent_sdk_rate_limited_calls", "Tool calls refused by a rate limit (agent/limits.toml), by tool", ["tool"],
        registry=registry,
    )  # fmt: skip
    guard.trail.drop_counter = Counter(
        "agent_sdk_audit_dropped_records", "Audit records dropped because the audit queue was full", registry=registry
    )
    guard.approvals.counter = Counter(
        "agent_sdk_approvals",
        "Calls held for approval, by how they ended (approved, denied, timeout, gone)",
        ["decision"],
        registry=registry,
    )


async def serving_guard(
    settings: ServeSettings, project: Project, stack: AsyncExitStack, *, mcp_surface: str = "mcp/tools"
) -> CallGuard:
    """The guard, its trail's writer running until `stack` closes. Raises `LimitsFileError` for a bad
    `agent/limits.toml` (`create_app` checks the file first, so `serve` refuses to start with its sentence)."""
    rules = load_limit_rules(project.root)
    url = settings.state_url.get_secret_value() if settings.state_url is not None else None
    sinks: list[Sink] = [FileSink(audit_folder(settings.state_root), max_bytes=settings.audit_max_bytes)]
    redis: Any = None
    if url is not None:
        redis = redis_client(url)
        stack.push_async_callback(redis.aclose)
        sinks.append(RedisSink(redis, max_len=settings.audit_stream_max))
    sinks.append(OtelSink())
    digest_key = derive_key(await load_state_key(settings), AUDIT_DIGEST) if settings.audit_argument_digest else None
    trail = await stack.enter_async_context(
        AuditTrail.running(sinks, required=settings.audit_required, digest_key=digest_key)
    )
    storage = limits_storage(url)
    approvals = ApprovalGate(
        project.connections,
        RedisApprovals(redis) if redis is not None else None,
        timeout_s=settings.approval_timeout_s,
        separation=settings.auth_mode != "loopback-strict"
        if settings.approval_separation is None
        else settings.approval_separation,
    )
    guard = CallGuard(trail, Limiter(rules, storage), approvals, mcp_surface=mcp_surface)
    guard.stream_reader = redis
    return guard
