"""`PeerAsks`: an upstream's mid-call request, asked of a handshake-era peer on its call's SSE answer.

At the handshake versions a server asks its client mid-call (`elicitation/create`,
`sampling/createMessage`) on the answer stream of the call, and the client POSTs its JSON-RPC
response back. `/v1/mcp/tools` is stateless, so the response arrives as a POST of its own: the
request id the gateway gave the question (`agent-sdk-ask-` and 128 random bits, unguessable) finds
the waiting call in this registry, and only the principal that was asked can answer it. The wait
is bounded (`ASK_TIMEOUT_S`, and the connection's `call` timeout around the whole call): a peer that
never answers ends in a sentence to the upstream, never a hang.

The registry is this process's: the answer must reach the replica whose SSE answer asked the
question. Behind a balancer, route `/v1/mcp/tools` by the `Mcp-Session-Id` header (which these
peers carry, `gateway/mcp/peers/sessions.py`; nginx: `hash $http_mcp_session_id consistent`, docs/deploy.md); an
answer that reaches another replica is not found there, and the question times out.

Each question belongs to its call (`call`, the call's `CallContext`): when the call ends (`ended`), its
questions still waiting end too, and the upstream's requests get an error answer at once. Each principal
has at most `principal_caps.MAX_QUESTIONS` questions waiting; past that its next one is refused with a
sentence, and no other principal's is.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as mt
from mcp.shared.exceptions import MCPError

from .caps import MAX_QUESTIONS, PerPrincipal

__all__ = ["ASK_PREFIX", "ASK_TIMEOUT_S", "PeerAsks"]

ASK_PREFIX = "agent-sdk-ask-"
ASK_TIMEOUT_S = 300.0
"""How long the gateway waits for a peer's answer to one question (a person may be typing)."""


@dataclass(slots=True)
class _Waiter:
    principal: str
    call: object
    done: anyio.Event = field(default_factory=anyio.Event)
    answer: Mapping[str, Any] | None = None
    ended: bool = False


class PeerAsks:
    """Questions put to peers and waiting for their answers, by request id (module docstring)."""

    __slots__ = ("_per_principal", "_timeout", "_waiting")

    def __init__(self, timeout_s: float = ASK_TIMEOUT_S, *, per_principal: int = MAX_QUESTIONS) -> None:
        self._waiting: dict[str, _Waiter] = {}
        self._timeout = timeout_s
        self._per_principal = PerPrincipal(per_principal, _too_many_questions)

    async def ask(
        self,
        principal: str,
        write: Callable[[dict[str, Any]], None],
        method: str,
        params: dict[str, Any],
        *,
        call: object = None,
    ) -> dict[str, Any]:
        """Write `method` with `params` as a request to the peer (`write`: its call's SSE answer) and wait
        for its answer, until `call` (whatever names the call it belongs to) `ended`. Returns the result;
        raises `MCPError` with the peer's own error, when it does not answer in time or its call ended, or
        `principal_caps.AtCap` when `principal` already has `MAX_QUESTIONS` waiting."""
        with self._per_principal.holding(principal):
            ident = ASK_PREFIX + secrets.token_urlsafe(16)
            waiter = self._waiting[ident] = _Waiter(principal, call)
            try:
                write({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
                with anyio.move_on_after(self._timeout):
                    await waiter.done.wait()
            finally:
                del self._waiting[ident]
        if waiter.ended:
            raise MCPError(code=mt.INTERNAL_ERROR, message="the tool call this request belongs to has ended")
        answer = waiter.answer
        if answer is None:
            raise MCPError(
                code=mt.INTERNAL_ERROR,
                message=f"the caller did not answer the {method} request within {self._timeout:g}s",
            )
        error = answer.get("error")
        if isinstance(error, Mapping):
            code, message = error.get("code"), error.get("message")
            raise MCPError(
                code=code if isinstance(code, int) else mt.INTERNAL_ERROR,
                message=str(message)[:500] if message is not None else "the caller refused",
                data=error.get("data"),
            )
        result = answer.get("result")
        if not isinstance(result, Mapping):
            raise MCPError(code=mt.INTERNAL_ERROR, message=f"the caller's answer to {method} carried no result")
        return dict(result)

    def answer(self, principal: str, message: Mapping[str, Any]) -> bool:
        """Hand a peer's JSON-RPC response to the question it answers. False when no question of this
        principal's waits under its id (unknown, answered already, timed out, or another principal's)."""
        ident = message.get("id")
        waiter = self._waiting.get(ident) if isinstance(ident, str) else None
        if waiter is None or waiter.principal != principal or waiter.done.is_set():
            return False
        waiter.answer = message
        waiter.done.set()
        return True

    def ended(self, call: object) -> None:
        """`call` is over: its questions still waiting end now (their askers raise)."""
        for waiter in self._waiting.values():
            if waiter.call is call and call is not None and not waiter.done.is_set():
                waiter.ended = True
                waiter.done.set()

    def waiting_for(self, principal: str) -> int:
        """How many questions wait for `principal`'s answers."""
        return self._per_principal.count(principal)

    def __len__(self) -> int:
        return len(self._waiting)


def _too_many_questions(limit: int) -> str:
    return (
        f"this caller already has {limit} questions (elicitation, sampling) waiting for its answers on this "
        "gateway: answer them first"
    )
