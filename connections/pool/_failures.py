"""What a failed pooled operation becomes (`ClientPool._operate`): a retry on a new session, or the error the
caller gets, with the slot's session retired when the failure's cause says the session is done.

The cause is judged by `connections/client/_restart.py`: a call's own failure fails that call and keeps the
session; a session whose transport ended is replaced on the next use; the connection's own failures count
toward its pause. A read (`READS`) whose remote session ended under it is asked once more on a new session;
a call is not (the upstream may have run it).
"""

from __future__ import annotations

from .._exceptions import ConnectionsError, ConnectionUnavailable
from ..client._clients import OpenedClient
from ..client._listing_cache import ListingCache
from ..client._restart import alive_after, judge, session_expired
from ..client._session_runner import PooledSession, SessionSlot
from ..client._translate import Operation, answer_lost, translate

__all__ = ["READS", "settle_failure"]

READS: frozenset[Operation] = frozenset(
    {"list", "resources/list", "resources/templates/list", "resources/read", "prompts/list", "prompts/get"}
)
"""Operations that only read: one that lost its remote session under it is sent once more on a new one."""


async def settle_failure(
    slot: SessionSlot,
    session: PooledSession,
    opened: OpenedClient,
    exc: Exception,
    operation: Operation,
    tool: str | None,
    cache: ListingCache,
    *,
    first_attempt: bool,
) -> ConnectionsError | None:
    """The error `operation` on `session` fails with after `exc`, or None when it is to be sent once more on a
    new session (the slot's session is then retired already)."""
    if first_attempt and session_expired(exc, opened):
        # MCP 2025-11-25 transports §Session Management: on 404 for our session id the
        # client MUST start a new session. The server did not know the session, so the
        # request was not processed: one retry on a fresh session is safe.
        slot.retire(session, cache, "reopen")
        return None
    alive = await alive_after(exc, opened)
    error = translate(
        slot.defn,
        exc,
        operation,
        http_status=opened.http_status,
        tool=tool,
        child=opened.child,
        alive=alive,
    )
    cause = judge(slot.defn, exc, error, opened)
    if cause == "call" and isinstance(error, ConnectionUnavailable):
        error = answer_lost(slot.defn, exc, operation, tool)
    elif cause != "call":
        slot.retire(session, cache, cause)  # the next use opens a new session
        if first_attempt and cause == "reopen" and operation in READS:
            return None  # a read changes nothing upstream: asked again on the new session
    return error
