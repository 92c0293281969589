"""`Runtime`: everything a request needs, made in the app lifespan and reached through `request.state`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request

from connections import Project, TurnBuilder
from connections.serving import Offerings, tracing_enabled

from .audit import CallGuard
from .auth.chain import Principal
from .mcp.discovery import DiscoveryView
from .mcp.peers.asks import PeerAsks
from .mcp.peers.calls import PeerCalls
from .mcp.peers.held import HeldCalls
from .mcp.peers.streams import PeerStreams
from .mcp.pipeline import Executor, traced
from .mcp.subscriptions import Subscriptions
from .mcp.task_owners import TaskOwners
from .mcp.toolsets import ToolCatalog
from .policy import PolicyGate
from .runners import TurnRunner
from .sessions import SessionService
from .settings import ServeSettings
from .state.request_state import RequestStates

__all__ = ["Runtime", "principal_of", "runtime_of"]


@dataclass(slots=True)
class Runtime:
    settings: ServeSettings
    project: Project
    builder: TurnBuilder
    catalog: ToolCatalog
    sessions: SessionService
    runner: TurnRunner
    host: Any
    started_at: str
    mcp: dict[str, StreamableHTTPSessionManager]
    """The stateless MCP session managers by endpoint: `agent` (/v1/mcp) and `tools` (/v1/mcp/tools)."""
    peers: PeerCalls = field(default_factory=PeerCalls)
    """Peers' `tools/call` requests in flight on `/v1/mcp/tools` and their `logging/setLevel` levels."""
    asks: PeerAsks = field(default_factory=PeerAsks)
    """Questions put to handshake-era peers mid-call, waiting for their POSTed answers (`gateway/mcp/peers/asks.py`)."""
    held: HeldCalls = field(default_factory=HeldCalls)
    """2026-07-28 peers' calls held open while an upstream's mid-call question waits (`mcp/peers/held.py`)."""
    request_states: RequestStates = field(default_factory=RequestStates.for_one_process)
    """Seals and opens the `requestState` a 2026-07-28 peer retries with (`gateway/state/request_state.py`); a served
    app's is the deployment's (`state.serving_request_states`)."""
    offerings: Offerings | None = None
    """The advertised resources and prompts (`gateway/mcp/offerings.py`); None when the broker has none."""
    subscriptions: Subscriptions | None = None
    """What upstreams say changed, relayed to peers' `subscriptions/listen` streams (`gateway/mcp/subscriptions.py`)."""
    streams: PeerStreams | None = None
    """Handshake-era peers' GET streams and resource subscriptions on this replica (`gateway/mcp/peers/streams.py`)."""
    task_owners: TaskOwners | None = None
    """Where each task a peer started lives, and other replicas' follow-ups for ours (`gateway/mcp/task_owners.py`)."""
    policy: PolicyGate = field(default_factory=PolicyGate)
    """The project's Cedar policy (`agent/policies.cedar`), or none: every surface asks it (`gateway/policy/`)."""
    guard: CallGuard | None = None
    """The audit trail, rate limits and approvals every tool call passes (`gateway/audit`, docs/audit.md)."""
    discovery: DiscoveryView | None = field(init=False)
    """Discovery mode's view of `/v1/mcp/tools` (`gateway/mcp/discovery.py`); None when it is off."""
    executor: Executor = field(init=False)
    """Runs every peer's `tools/call` (`gateway/mcp/pipeline.py`); `executor.wrap(...)` puts a wrapper around each."""

    def __post_init__(self) -> None:
        self.discovery = DiscoveryView.of(self.settings)
        self.executor = Executor(self)
        if tracing_enabled():  # decided once at start-up: off, no call pays for a span
            opted = frozenset(n for n, d in self.project.connections.items() if d.trace_content)
            self.executor.wrap(traced(opted))


def runtime_of(request: Request) -> Runtime:
    """The lifespan's `Runtime` (Starlette copies lifespan state into every request's scope)."""
    return request.state.runtime


def principal_of(request: Request) -> Principal:
    """The principal the auth chain admitted; anonymous only where the chain did not run (public routes)."""
    principal = request.scope.get("state", {}).get("principal")
    return principal if isinstance(principal, Principal) else Principal("anonymous", "anonymous")
