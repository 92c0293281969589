"""A connection's `max_result_bytes`: a larger answer is refused with a sentence, on every wire, and the
session keeps serving. The upstream is our counting server, as a real child over the SDK's stdio
framing and as a real HTTP server (event-stream and JSON answers) on both protocol generations."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from connections import ClientPool, ConnectionDefinition, ResultTooLarge, define_connection
from tests.conftest import free_port
from tests.processes import running

pytestmark = pytest.mark.anyio

COUNTING = str(Path(__file__).resolve().parents[2] / "fixtures" / "upstreams" / "counting_server.py")
CAP = 100_000


def text(result: dict[str, Any]) -> str:
    return "".join(c["text"] for c in result["content"] if c.get("type") == "text")


@pytest.fixture(scope="module", params=["events", "json"])
def counting_url(request: pytest.FixtureRequest) -> Iterator[str]:
    port = free_port()
    env = {"JSON_RESPONSE": "1"} if request.param == "json" else {}
    with running([sys.executable, COUNTING, "http", str(port)], port=port, env=env):
        yield f"http://127.0.0.1:{port}/mcp"


async def refuses_over_the_cap(defn: ConnectionDefinition, fast_calls: bool = True) -> None:
    async with ClientPool({defn.name: defn}, fast_calls=fast_calls) as pool:
        # The server sends a text twice (as content and as structured content): a quarter of the cap passes.
        assert len(text(await pool.call_tool(defn.name, "big", {"size": CAP // 4}))) == CAP // 4
        with pytest.raises(ResultTooLarge) as refused:
            await pool.call_tool(defn.name, "big", {"size": CAP * 3})
        assert refused.value.code == "result_too_large"
        assert str(refused.value).startswith(
            f"connection {defn.name!r}: tools/call 'big' refused: the upstream's answer"
        )
        assert "max_result_bytes" in str(refused.value) or "limit" in str(refused.value)
        # The session is fine: the next call on it is answered, and nothing was counted against it.
        assert text(await pool.call_tool(defn.name, "echo", {"text": "after"})) == "after"
        assert pool.status(defn.name).opens == 1
        assert pool.status(defn.name).failures == 0


async def test_a_stdio_answer_over_the_cap_is_refused_and_the_child_keeps_serving() -> None:
    defn = define_connection(command=sys.executable, args=[COUNTING, "stdio"], max_result_bytes=CAP).named("s", None)
    await refuses_over_the_cap(defn)


@pytest.mark.parametrize("protocol", ["modern", "legacy"])
@pytest.mark.parametrize("fast_calls", [True, False], ids=["fast-wire", "sdk-transport"])
async def test_an_http_answer_over_the_cap_is_refused_on_both_generations_and_both_wires(
    counting_url: str, protocol: str, fast_calls: bool
) -> None:
    defn = define_connection(url=counting_url, protocol=protocol, max_result_bytes=CAP).named("h", None)
    await refuses_over_the_cap(defn, fast_calls=fast_calls)


def test_a_cap_below_a_kilobyte_is_a_diagnostic() -> None:
    defn = define_connection(command="x", max_result_bytes=10)
    assert [p.code for p in defn.problems] == ["bad-field-type"]
    assert "max_result_bytes" in defn.problems[0].message
