"""`Runtime`: everything a request needs, made in the app lifespan and reached through `request.state`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request

from connections import Offerings, Project, TurnBuilder

from .auth_chain import Principal
from .held_calls import HeldCalls
from .mcp_subscriptions import Subscriptions
from .peer_asks import PeerAsks
from .peer_calls import PeerCalls
from .peer_streams import PeerStreams
from .request_state import RequestStates
from .runners import TurnRunner
from .sessions import SessionService
from .settings import ServeSettings
from .task_owners import TaskOwners
from .toolsets import ToolCatalog

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
    """Questions put to handshake-era peers mid-call, waiting for their POSTed answers (`peer_asks.py`)."""
    held: HeldCalls = field(default_factory=HeldCalls)
    """2026-07-28 peers' calls held open while an upstream's mid-call question waits for a retry (`held_calls.py`)."""
    request_states: RequestStates = field(default_factory=RequestStates.for_one_process)
    """Seals and opens the `requestState` a 2026-07-28 peer retries with (`request_state.py`); a served
    app's is the deployment's (`state.serving_request_states`)."""
    offerings: Offerings | None = None
    """The advertised resources and prompts (`mcp_offerings.py`); None when the broker has none."""
    subscriptions: Subscriptions | None = None
    """What upstreams say changed, relayed to peers' `subscriptions/listen` streams (`mcp_subscriptions.py`)."""
    streams: PeerStreams | None = None
    """Handshake-era peers' GET streams and resource subscriptions on this replica (`peer_streams.py`)."""
    task_owners: TaskOwners | None = None
    """Where each task a peer started lives, and the other replicas' follow-ups for ours (`task_owners.py`)."""


def runtime_of(request: Request) -> Runtime:
    """The lifespan's `Runtime` (Starlette copies lifespan state into every request's scope)."""
    return request.state.runtime


def principal_of(request: Request) -> Principal:
    """The principal the auth chain admitted; anonymous only where the chain did not run (public routes)."""
    principal = request.scope.get("state", {}).get("principal")
    return principal if isinstance(principal, Principal) else Principal("anonymous", "anonymous")
