"""Elicitation and sampling on pooled calls: each upstream request reaches its own call's handler, or is refused.

The upstream is `asking.py` (an `mcp` 2.x `MCPServer`), pinned to one protocol generation per test:
at 2026-07-28 it answers with an `InputRequiredResult` the pool drives; at the handshake versions it
sends `elicitation/create` / `sampling/createMessage` mid-call on the call's answer stream.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as mt
import pytest

from connections import ClientPool, HostMcp, UpstreamError, define_connection
from tests.conftest import free_port
from tests.processes import running

pytestmark = pytest.mark.anyio

ASKING = Path(__file__).resolve().parents[2] / "fixtures" / "upstreams" / "asking.py"
GENERATIONS = ["modern", "legacy"]


@pytest.fixture(scope="module")
def asking() -> Iterator[str]:
    port = free_port()
    with running([sys.executable, str(ASKING), "--port", str(port)], port=port, what="asking upstream"):
        yield f"http://127.0.0.1:{port}/mcp"


def text(result: mt.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, mt.TextContent))


def named(name: str) -> Any:
    async def answer(params: mt.ElicitRequestParams) -> mt.ElicitResult:
        assert params.message == "What is your name?"
        return mt.ElicitResult(action="accept", content={"name": name})

    return answer


async def model(params: mt.CreateMessageRequestParams) -> mt.CreateMessageResult:
    first = params.messages[0].content
    assert isinstance(first, mt.TextContent) and first.text == "A line about the sea"
    return mt.CreateMessageResult(
        role="assistant", content=mt.TextContent(type="text", text="waves, waves"), model="test-model"
    )


@pytest.mark.parametrize("protocol", GENERATIONS)
@pytest.mark.parametrize("fast_calls", [True, False], ids=["fast", "sdk"])
async def test_host_code_answers_elicitation_and_sampling_through_its_handlers(
    asking: str, protocol: str, fast_calls: bool
) -> None:
    defn = define_connection(url=asking, protocol=protocol).named("asking", None)
    async with ClientPool({"asking": defn}, fast_calls=fast_calls) as pool:
        host = HostMcp(pool)
        greeted = await host.call_tool("asking", "ask_name", {}, elicitation=named("Ada"))
        assert text(greeted) == "Hello, Ada!" and not greeted.is_error
        sampled = await host.call_tool("asking", "ask_model", {}, sampling=model)
        assert text(sampled) == "model said: waves, waves"
        both = await host.call_tool("asking", "ask_both", {}, elicitation=named("Bo"), sampling=model)
        assert text(both) == "Bo: waves, waves"
        assert pool.status("asking").protocol_version == ("2026-07-28" if protocol == "modern" else "2025-11-25")


async def test_a_caller_without_a_handler_gets_the_modern_upstreams_own_refusal(asking: str) -> None:
    # 2026-07-28: the request's `_meta` declares only what this caller can answer, so the upstream refuses.
    defn = define_connection(url=asking, protocol="modern").named("asking", None)
    async with ClientPool({"asking": defn}) as pool:
        host = HostMcp(pool)
        for sampling in (None, model):
            with anyio.fail_after(20), pytest.raises(UpstreamError, match="did not declare the form elicitation"):
                await host.call_tool("asking", "ask_name", {}, sampling=sampling)


async def test_a_caller_without_a_handler_is_refused_on_a_handshake_session(asking: str) -> None:
    # The handshake session declared both (it is shared); the pool's client refuses for this caller.
    defn = define_connection(url=asking, protocol="legacy").named("asking", None)
    async with ClientPool({"asking": defn}) as pool:
        host = HostMcp(pool)
        for sampling in (None, model):
            refusal = "-32600: Elicitation not supported: the caller of this tool call cannot answer it"
            with anyio.fail_after(20), pytest.raises(UpstreamError, match=refusal):
                await host.call_tool("asking", "ask_name", {}, sampling=sampling)


async def test_interleaved_callers_on_one_handshake_session_each_answer_their_own_call(asking: str) -> None:
    # One pooled handshake session (capabilities declared once) shared by three concurrent calls: each
    # upstream request reaches the handler of the call it belongs to; a call without one is refused.
    defn = define_connection(url=asking, protocol="legacy").named("asking", None)
    both_asked = anyio.Event()
    asked: list[str] = []

    def waiting(name: str) -> Any:
        async def answer(params: mt.ElicitRequestParams) -> mt.ElicitResult:
            asked.append(name)
            if len(asked) == 2:
                both_asked.set()
            await both_asked.wait()  # both calls wait on their questions at once
            return mt.ElicitResult(action="accept", content={"name": name})

        return answer

    async with ClientPool({"asking": defn}) as pool:
        host = HostMcp(pool)
        results: dict[str, mt.CallToolResult | UpstreamError] = {}

        async def call(key: str, handler: Any) -> None:
            try:
                results[key] = await host.call_tool("asking", "ask_name", {}, elicitation=handler)
            except UpstreamError as exc:
                results[key] = exc

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call, "ada", waiting("Ada"))
                tg.start_soon(call, "bob", waiting("Bob"))
                tg.start_soon(call, "none", None)
        assert sorted(asked) == ["Ada", "Bob"]
        ada, bob, none = results["ada"], results["bob"], results["none"]
        assert isinstance(ada, mt.CallToolResult) and text(ada) == "Hello, Ada!"
        assert isinstance(bob, mt.CallToolResult) and text(bob) == "Hello, Bob!"
        assert isinstance(none, UpstreamError) and "Elicitation not supported" in str(none)
        assert pool.status("asking").opens == 1


@pytest.mark.parametrize("protocol", GENERATIONS)
async def test_a_stdio_upstream_asks_the_one_call_in_flight(protocol: str) -> None:
    # Over stdio nothing on the wire ties a mid-call request to a call: it goes to the call in flight
    # when that is the only request in flight on the session (else it is refused, never misrouted).
    defn = define_connection(command=sys.executable, args=[str(ASKING), "--stdio"], protocol=protocol).named(
        "asking", None
    )
    async with ClientPool({"asking": defn}) as pool:
        host = HostMcp(pool)
        with anyio.fail_after(30):
            both = await host.call_tool("asking", "ask_both", {}, elicitation=named("Cy"), sampling=model)
        assert text(both) == "Cy: waves, waves"


async def test_the_caller_that_opened_a_stdio_session_never_answers_a_later_callers_question() -> None:
    # The session's reader task starts during the first caller's call: it must not carry that call's
    # context, or every later request on the session would find the first caller's handlers.
    defn = define_connection(command=sys.executable, args=[str(ASKING), "--stdio"], protocol="legacy").named(
        "asking", None
    )
    async with ClientPool({"asking": defn}) as pool:
        host = HostMcp(pool)
        with anyio.fail_after(30):
            assert text(await host.call_tool("asking", "ask_name", {}, elicitation=named("Ada"))) == "Hello, Ada!"
            assert text(await host.call_tool("asking", "ask_name", {}, elicitation=named("Cy"))) == "Hello, Cy!"
            with pytest.raises(UpstreamError, match="Elicitation not supported"):
                await host.call_tool("asking", "ask_name", {})
        assert pool.status("asking").opens == 1


async def test_a_question_left_waiting_on_a_shared_stdio_session_yields_to_another_callers_within_the_bound() -> None:
    # A stdio upstream does not say which call a question is about: while A's question waits for its
    # caller (a 2026-07-28 peer's held call before its retry), B's question cannot be routed and is refused.
    # That refusal gives A's question `timeouts.question` seconds more, then the session routes again.
    defn = define_connection(
        command=sys.executable, args=[str(ASKING), "--stdio"], protocol="legacy", timeouts={"question": 0.5}
    ).named("asking", None)
    asked = anyio.Event()

    async def never_answers(_params: mt.ElicitRequestParams) -> mt.ElicitResult:
        asked.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    first: list[BaseException | mt.CallToolResult] = []
    async with ClientPool({"asking": defn}) as pool:
        host = HostMcp(pool)

        async def a_calls() -> None:
            try:
                first.append(await host.call_tool("asking", "ask_name", {}, elicitation=never_answers))
            except UpstreamError as exc:
                first.append(exc)

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(a_calls)
                await asked.wait()
                try:  # B's question, while A's waits: refused, as for a caller that cannot answer
                    refused: Any = await host.call_tool("asking", "ask_name", {}, elicitation=named("Bo"))
                except UpstreamError as exc:
                    refused = exc
                assert "Elicitation not supported" in (
                    str(refused) if isinstance(refused, UpstreamError) else text(refused)
                )
            # A's question was cut 0.5 s after B's refusal (not after 300 s): its call ended with the upstream's answer
            said = str(first[0]) if isinstance(first[0], UpstreamError) else text(first[0])  # pyright: ignore[reportArgumentType]
            assert "within 0.5s of another caller's question on this connection being refused" in said
            # and B is served now
            greeted = await host.call_tool("asking", "ask_name", {}, elicitation=named("Bo"))
        assert text(greeted) == "Hello, Bo!"
