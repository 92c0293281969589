"""`HeldCalls` in-process: every wait is bounded, and a retry finds only its own principal's held call."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from connections.serving import CallContext, CallRequest, current_call
from gateway.mcp.peers.held import HeldCalls

pytestmark = pytest.mark.anyio


async def _asks_once() -> dict[str, Any]:
    context = current_call()
    assert context is not None and context.elicitation is not None
    try:
        answer = await context.elicitation({"message": "name?", "requestedSchema": {"type": "object"}})
    except MCPError as exc:
        return {"refused": exc.error.message}
    return {"answer": answer}


async def test_an_unanswered_question_fails_upstream_with_a_sentence_and_the_call_ends() -> None:
    held_calls = HeldCalls(timeout_s=0.2)
    context = CallContext(CallRequest(capabilities={"elicitation": {}}))
    held = held_calls.start("alice", "ask", context, _asks_once)
    first = await held_calls.next(held)
    assert first["resultType"] == "input_required"
    ((key, question),) = first["inputRequests"].items()
    assert key == "elicitation-1" and question["method"] == "elicitation/create"
    with anyio.fail_after(5):
        done = await held_calls.next(held)  # no retry came: the question timed out
    assert done == {"refused": "the caller did not answer the elicitation/create request within 0.2s"}
    assert held.id not in held_calls
    with pytest.raises(MCPError, match="not held here any more"):
        held_calls.find(held.id, "alice", "ask")


async def test_a_retry_reaches_only_its_own_principals_held_call_and_needs_every_answer() -> None:
    held_calls = HeldCalls()
    held = held_calls.start("alice", "ask", CallContext(CallRequest(capabilities={"elicitation": {}})), _asks_once)
    await held_calls.next(held)
    for principal, tool in (("mallory", "ask"), ("alice", "other")):
        with pytest.raises(MCPError, match="not held here any more"):
            held_calls.find(held.id, principal, tool)
    with pytest.raises(MCPError, match="inputResponses has no answer for 'elicitation-1'"):
        held_calls.answer(held_calls.find(held.id, "alice", "ask"), {})
    held_calls.answer(held, {"elicitation-1": {"action": "accept", "content": {"name": "Ada"}}})
    with anyio.fail_after(5):
        assert await held_calls.next(held) == {"answer": {"action": "accept", "content": {"name": "Ada"}}}


async def test_a_peer_that_goes_away_while_waiting_cancels_the_held_call() -> None:
    held_calls = HeldCalls()

    async def slow() -> dict[str, Any]:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    held = held_calls.start("alice", "ask", CallContext(CallRequest(capabilities={})), slow)
    with anyio.move_on_after(0.1):
        await held_calls.next(held)
    assert held.task is not None
    with anyio.fail_after(5):
        await asyncio.wait({held.task})
    assert held.task.cancelled() and held.id not in held_calls
