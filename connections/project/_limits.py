"""A connection's limits: the seconds each kind of upstream operation may take (`Timeouts`), and the
defaults of its size and identity caps (docs/connections.md)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_IDENTITY_IDLE_TIMEOUT", "DEFAULT_MAX_IDENTITIES", "DEFAULT_MAX_RESULT_BYTES", "Timeouts"]


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds allowed for each kind of upstream operation (see docs/connections.md)."""

    connect: float = 15.0
    """Start the child / open the HTTP session and finish the MCP handshake."""
    list: float = 30.0
    """One `tools/list` (all pages)."""
    call: float = 120.0
    """One `tools/call`."""
    auth: float = 10.0
    """One per-session `auth` callback."""
    question: float = 30.0
    """On a stdio or SSE session (whose wire does not say which call an upstream's question is about): how much
    longer a question may wait for its caller once another caller's question had to be refused meanwhile."""


DEFAULT_MAX_RESULT_BYTES = 32 * 1024 * 1024
"""The largest upstream answer a connection accepts by default (`max_result_bytes`)."""
DEFAULT_MAX_IDENTITIES = 100
"""Identities (distinct `auth` header sets) an `auth` connection keeps a client for by default."""
DEFAULT_IDENTITY_IDLE_TIMEOUT = 300.0
"""Seconds an identity's client stays open unused by default."""
