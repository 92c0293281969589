"""The restart policy, per cause: which failures count toward pausing a connection (docs/clients.md).

A failed operation on an open session is judged by its cause (`judge`):

- `"call"`: what the call provoked, on a session that is still fine (an answer cut off or
  malformed on the way back, an answer over a limit). That call fails; nothing else happens.
  Counting these would let any caller pause a connection for everyone by calling one tool.
- `"reopen"`: a remote session's transport ended (an SSE stream dropped, the SDK's transport
  gave up). The session is replaced on the next use, which is the judge: if the server is really
  gone, that open fails and counts.
- `"count"`: the connection's own failure: a stdio child that exited, a server that refuses
  connections. The session is replaced and the failure counts.

Failures to open count too (`RestartState.record`), except a setup mistake (an unset `${VAR}`).
`crash_loop_failures` counted failures within `crash_loop_window` seconds pause restarts for
`crash_loop_pause` seconds; a successful operation clears the count.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Literal

import anyio
import httpx2
import mcp_types as mt
from mcp.shared.exceptions import MCPError

from .._exceptions import ConnectionsError, ConnectionUnavailable
from ..project._definitions import ConnectionDefinition
from ._clients import OpenedClient
from ._translate import leaves

__all__ = ["Cause", "RestartPolicy", "RestartState", "alive_after", "judge", "session_expired"]

logger = logging.getLogger(__name__)

Cause = Literal["call", "reopen", "count"]


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """When a failed or exited upstream is opened again (see docs/clients.md)."""

    backoff_initial: float = 0.25
    """Delay before the second consecutive attempt; doubles each time. The first restart is immediate."""
    backoff_max: float = 5.0
    crash_loop_failures: int = 5
    """This many counted failures within `crash_loop_window` seconds pause restarts."""
    crash_loop_window: float = 60.0
    crash_loop_pause: float = 30.0
    """Seconds every use fails fast with `ConnectionUnavailable`; then one attempt is let through."""

    def delay(self, failures: int) -> float:
        if failures <= 1:
            return 0.0
        return min(self.backoff_initial * 2 ** (failures - 2), self.backoff_max)


@dataclass(slots=True)
class RestartState:
    """One connection's counted failures and pause, under a `RestartPolicy`."""

    policy: RestartPolicy
    failures: list[float] = field(default_factory=list[float])
    """When each counted failure happened, within the policy's window."""
    last_error: ConnectionsError | None = None
    paused_until: float = -math.inf

    def record(self, name: str, error: ConnectionsError, now: float) -> None:
        """Count one failure of the connection's own; pause restarts when the policy says so."""
        window = self.policy.crash_loop_window
        self.failures = [t for t in self.failures if now - t <= window] + [now]
        self.last_error = error
        if len(self.failures) >= self.policy.crash_loop_failures:
            self.paused_until = now + self.policy.crash_loop_pause
            logger.warning(
                "connection %r: %d consecutive failures; restarts paused for %gs",
                name,
                len(self.failures),
                self.policy.crash_loop_pause,
            )

    def recovered(self) -> None:
        """An operation succeeded: the count starts again."""
        if self.failures:
            self.failures.clear()

    def paused(self, now: float) -> bool:
        return now < self.paused_until

    def pause_error(self, name: str, now: float) -> ConnectionUnavailable:
        return ConnectionUnavailable(
            name,
            f"restarts are paused for {self.paused_until - now:.0f}s after "
            f"{len(self.failures)} consecutive failures (crash loop); last error: {self.last_error}",
        )

    def delay(self) -> float:
        """How long to wait before the next open (backoff after consecutive failures)."""
        return self.policy.delay(len(self.failures))


def judge(defn: ConnectionDefinition, exc: BaseException, error: ConnectionsError, opened: OpenedClient) -> Cause:
    """The cause of `exc` (translated to `error`), raised by an operation on `opened`: see the module docstring."""
    if not isinstance(error, ConnectionUnavailable):
        return "call"  # an error answer, a timeout, a refused login: the session is fine
    if defn.kind == "stdio":
        return "count"  # the child's stdout ended: it exited, or is about to
    if any(isinstance(leaf, httpx2.ConnectError | httpx2.ConnectTimeout) for leaf in leaves(exc)):
        return "count"  # the server refuses (or cannot be reached): its own failure
    if not opened.alive:
        return "reopen"
    return "call"


def session_expired(exc: BaseException, opened: OpenedClient) -> bool:
    """The Streamable HTTP server no longer knows our `Mcp-Session-Id` (it restarted or expired it).

    The spec's answer is 404: the SDK reports a bare 404 as "Session terminated", and a server that
    sends a JSON-RPC body with its 404 (the Python SDK's "Session not found") is recognised by the
    status the client saw. Servers built on the TypeScript SDK's examples (the reference server
    `server-everything` among them) answer 400 instead, with an error body that has no `id` (so
    the SDK reports only "Server returned an error response"). A 400 is a refusal either way: the
    server did not process the request, so one retry on a fresh session is safe, and a request
    that is really malformed fails again there and is reported.
    """
    if opened.session_id is None:
        return False  # no session to forget: the SDK reads such a 404 as "no such method", a 400 as a refusal
    for leaf in leaves(exc):
        if not isinstance(leaf, MCPError):
            continue
        if leaf.code == mt.INVALID_REQUEST and (leaf.message == "Session terminated" or opened.http_status == [404]):
            return True
        if opened.http_status == [400]:
            return True
    return False


_EXIT_PEEK_S = 0.5
"""How long a call that lost its stdio child waits for the exit status to name it in the error."""
_SDK_CLOSED = "Connection closed"
"""The message of the SDK dispatcher's own -32000, when its transport ended or refused a write."""


async def alive_after(exc: BaseException, opened: OpenedClient) -> bool:
    """Whether `opened`'s transport (and stdio child) is still up after `exc`: then a -32000 the SDK did not
    make is the upstream's own answer (`made_here`). A child that exited has its exit status read first,
    for the message."""
    closed = [e for e in leaves(exc) if isinstance(e, MCPError) and e.code == mt.CONNECTION_CLOSED]
    if closed and opened.alive and any(e.message == _SDK_CLOSED for e in closed):
        # The SDK's own "Connection closed" can come a moment before the read stream's end reaches the
        # session (a write to a child that stopped reading): wait for that end, briefly. An upstream that
        # answers with these very words from a live child costs its own caller the wait, nothing more.
        with anyio.move_on_after(_EXIT_PEEK_S):
            await opened.gone.wait()
    if closed and opened.child is not None and not opened.alive:
        with anyio.move_on_after(_EXIT_PEEK_S):  # the exit status, for the message
            await opened.child.process.wait()
    return opened.alive
