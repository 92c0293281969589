"""The restart policy is per cause (docs/clients.md, "When a server fails"): what one call provokes fails
that call; only the connection's own failures (a child that keeps dying, a server that refuses to
open) count toward pausing it for everyone.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from connections import ClientPool, ConnectionUnavailable, RestartPolicy, UpstreamError, define_connection
from tests.conftest import free_port
from tests.connections.client.test_fast_calls import nginx, proxied_to
from tests.processes import running

pytestmark = pytest.mark.anyio

LEGS = ("fast", "sdk")
UPSTREAMS = Path(__file__).resolve().parents[2] / "fixtures" / "upstreams"
POLICY = RestartPolicy(backoff_initial=0.01, backoff_max=0.05, crash_loop_failures=3, crash_loop_pause=600)


@pytest.fixture(scope="module")
def cut_answers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An `mcp` SDK server answering with SSE (no event ids: nothing to resume) behind nginx with a 1 s
    read timeout, which cuts any answer stream silent for longer, as a proxy does. Yields the MCP URL."""
    port = free_port()
    with running([sys.executable, str(UPSTREAMS / "sse_answers.py"), str(port)], port=port):
        tmp = tmp_path_factory.mktemp("nginx-cut-sse")
        with nginx(tmp, proxied_to(f"http://127.0.0.1:{port}/mcp", "proxy_read_timeout 1s;")) as front:
            yield f"http://127.0.0.1:{front}/mcp"


@pytest.mark.parametrize("leg", LEGS)
async def test_one_tools_cut_answers_fail_those_calls_and_never_pause_the_connection(
    cut_answers: str, leg: str
) -> None:
    # Any caller can make `slow` outlast the proxy's read timeout: its answer stream is cut every time.
    # Each such call fails on its own; the session stays, and another caller's `echo` still works.
    defn = define_connection(url=cut_answers, protocol="legacy").named("up", None)
    async with ClientPool({"up": defn}, restart_policy=POLICY, fast_calls=leg == "fast") as pool:
        for _ in range(POLICY.crash_loop_failures + 1):
            with pytest.raises(UpstreamError, match=r"'up': tools/call 'slow' failed: .*answer.* cut off"):
                await pool.call_tool("up", "slow", {"seconds": 2})
        result = await pool.call_tool("up", "echo", {"text": "still served"})
        assert result["structuredContent"] == {"result": "still served"}
        status = pool.status("up")
        assert (status.state, status.failures, status.opens, status.fast_calls) == ("open", 0, 1, leg == "fast")


@pytest.mark.parametrize("leg", LEGS)
async def test_a_server_that_refuses_to_open_pauses_the_connection(leg: str) -> None:
    # The connection's own failure: the server is gone, and every attempt to reach it is refused.
    port = free_port()
    defn = define_connection(url=f"http://127.0.0.1:{port}/mcp", protocol="legacy").named("gone", None)
    async with ClientPool({"gone": defn}, restart_policy=POLICY, fast_calls=leg == "fast") as pool:
        with running([sys.executable, str(UPSTREAMS / "sse_answers.py"), str(port)], port=port):
            await pool.call_tool("gone", "echo", {"text": "up"})
        # The session's end is noticed first (the call that meets it fails; that is not counted), then
        # every open is refused: those count, and the third pauses the connection.
        said: list[str] = []
        for _ in range(POLICY.crash_loop_failures + 2):
            with pytest.raises(ConnectionUnavailable) as caught:
                await pool.call_tool("gone", "echo", {"text": "down"})
            said.append(str(caught.value))
            if "crash loop" in said[-1]:
                break
        refused = [s for s in said if s.startswith("connection 'gone': cannot connect")]
        assert len(refused) == POLICY.crash_loop_failures, said
        assert "restarts are paused" in said[-1], said
        assert pool.status("gone").state == "paused"
