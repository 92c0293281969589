"""Faults with real processes: killed and crashing children, hangs, missing commands, broken HTTP upstreams.

Every failure is a typed error naming the connection, and no test leaves a process behind
(checked from the process table).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import mcp.types as mt
import pytest

from connections import (
    AccountNotConfigured,
    ClientPool,
    ConnectionDefinition,
    ConnectionsError,
    ConnectionUnavailable,
    EnvironmentVariableMissing,
    RestartPolicy,
    UpstreamError,
    UpstreamTimeout,
    define_connection,
)
from connections.account._account import AccountConnections
from connections.pool._identity_pool import IdentityPool  # pyright: ignore[reportPrivateUsage]
from tests.conftest import free_port
from tests.fixtures.upstreams.proctable import alive, matching
from tests.processes import running

pytestmark = pytest.mark.anyio

UPSTREAMS = Path(__file__).resolve().parents[2] / "fixtures" / "upstreams"
RAW = str(UPSTREAMS / "raw_stdio.py")
SILENT = str(UPSTREAMS / "silent_stdio.py")


def raw(tmp_path: Path, *, env: dict[str, str] | None = None, **fields: Any) -> ConnectionDefinition:
    full_env = {"COUNT_FILE": str(tmp_path / "count.txt"), **(env or {})}
    return define_connection(command=sys.executable, args=[RAW], env=full_env, **fields).named("c", None)


def events(tmp_path: Path, kind: str) -> int:
    path = tmp_path / "count.txt"
    lines = path.read_text().splitlines() if path.exists() else []
    return sum(1 for line in lines if line.split()[0] == kind)


def text(result: mt.CallToolResult | dict[str, Any]) -> str:
    if isinstance(result, dict):  # the pool's JSON result
        result = mt.CallToolResult.model_validate(result)
    return "".join(c.text for c in result.content if isinstance(c, mt.TextContent))


def leftovers() -> dict[int, str]:
    """Our stdio fixtures still running below this test process."""
    return matching(RAW) | matching(SILENT) | matching("sleep 300")


async def eventually(condition: Callable[[], bool], limit: float = 15.0) -> None:
    """Poll `condition` (a process-table fact) until it holds; fail after `limit` seconds."""
    with anyio.fail_after(limit):
        while not condition():  # noqa: ASYNC110 - the process table has no event to wait on
            await anyio.sleep(0.02)


@pytest.fixture(autouse=True)
def no_leaked_processes() -> Iterator[None]:
    yield
    assert leftovers() == {}


async def test_child_killed_between_calls_is_restarted_once_on_next_use(tmp_path: Path) -> None:
    async with ClientPool({"c": raw(tmp_path)}) as pool:
        first = int(text(await pool.call_tool("c", "pid", {})))
        assert pool.status("c").pid == first
        os.kill(first, signal.SIGKILL)
        # "Between calls": the death is complete, which the kernel reports (waitid) only once the child
        # is a zombie. /proc stops showing a live process a little earlier, while it is still exiting;
        # a call sent in that window is a call during the death (the next test), not between calls.
        await eventually(lambda: not alive(first) and pool.status("c").state != "open")
        second = int(text(await pool.call_tool("c", "pid", {})))
        assert second != first
        status = pool.status("c")
        assert (status.opens, status.state, status.pid) == (2, "open", second)
        assert events(tmp_path, "start") == 2
        # The restart counts as recovered once an operation succeeds on it.
        assert status.failures == 0


async def test_child_killed_during_a_call_fails_that_call_and_the_next_succeeds(tmp_path: Path) -> None:
    async with ClientPool({"c": raw(tmp_path, timeouts={"call": 60})}) as pool:
        pid = int(text(await pool.call_tool("c", "pid", {})))
        errors: list[ConnectionsError] = []

        async def slow_call() -> None:
            try:
                await pool.call_tool("c", "slow", {"seconds": 120})
            except ConnectionsError as exc:
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow_call)
            await eventually(lambda: events(tmp_path, "slow") == 1)  # the call is running upstream
            os.kill(pid, signal.SIGKILL)
        [error] = errors
        # Not UpstreamTimeout: the call failed when the child died, long before its 60 s timeout.
        assert isinstance(error, ConnectionUnavailable)
        assert error.connection == "c" and "exited" in str(error)
        assert text(await pool.call_tool("c", "echo", {"text": "after"})) == "after"
        assert pool.status("c").opens == 2


async def test_a_crash_loop_pauses_restarts_with_a_clear_error(tmp_path: Path) -> None:
    policy = RestartPolicy(backoff_initial=0.01, backoff_max=0.05, crash_loop_failures=3, crash_loop_pause=600)
    async with ClientPool({"c": raw(tmp_path)}, restart_policy=policy) as pool:
        for _ in range(3):
            with pytest.raises(ConnectionUnavailable, match=r"'c'.*exited"):
                await pool.call_tool("c", "crash", {})
        with pytest.raises(ConnectionUnavailable, match="crash loop") as caught:
            await pool.call_tool("c", "echo", {"text": "x"})
        assert caught.value.code == "connection_unavailable"
        assert pool.status("c").state == "paused"
        assert events(tmp_path, "start") == 3  # no fourth child while paused


async def test_a_hanging_tool_call_times_out_and_the_session_stays_usable(tmp_path: Path) -> None:
    async with ClientPool({"c": raw(tmp_path, timeouts={"call": 1})}) as pool:
        with pytest.raises(UpstreamTimeout, match=r"'c'.*tools/call 'hang' timed out") as caught:
            await pool.call_tool("c", "hang", {})
        assert caught.value.code == "upstream_timeout"
        assert text(await pool.call_tool("c", "echo", {"text": "still here"})) == "still here"
        assert pool.status("c").opens == 1


async def test_a_server_that_never_answers_the_handshake_times_out_and_is_stopped() -> None:
    defn = define_connection(command=sys.executable, args=[SILENT], timeouts={"connect": 1}).named("silent", None)
    async with ClientPool({"silent": defn}) as pool:
        with pytest.raises(UpstreamTimeout, match="'silent': opening the connection timed out"):
            await pool.list_tools("silent")
        await eventually(lambda: not matching(SILENT))


async def test_a_command_that_does_not_exist_is_connection_unavailable() -> None:
    defn = define_connection(command="/nonexistent/mcp-server", env={"TOKEN": "${TOKEN}"}).named("ghost", None)
    async with ClientPool({"ghost": defn}, environ={"TOKEN": "tok-secret-value"}) as pool:
        with pytest.raises(ConnectionUnavailable) as caught:
            await pool.call_tool("ghost", "anything", {})
    message = str(caught.value)
    assert message == "connection 'ghost': cannot start '/nonexistent/mcp-server': No such file or directory"
    assert "tok-secret-value" not in message + repr(caught.value)


async def test_pool_close_stops_a_stubborn_child_and_its_process_group(tmp_path: Path) -> None:
    env = {"GRANDCHILD": "1", "STUBBORN": "1"}
    async with ClientPool({"c": raw(tmp_path, env=env)}) as pool:
        pid = int(text(await pool.call_tool("c", "pid", {})))
        assert matching("sleep 300")  # the grandchild runs
    assert not alive(pid)
    # The autouse check also asserts the grandchild is gone.


async def test_a_child_that_exits_on_eof_leaves_no_grandchild_behind(tmp_path: Path) -> None:
    async with ClientPool({"c": raw(tmp_path, env={"GRANDCHILD": "1"})}) as pool:
        await pool.call_tool("c", "echo", {"text": "x"})
        assert matching("sleep 300")


async def test_cancelling_the_pool_owner_still_stops_every_child(tmp_path: Path) -> None:
    # What Ctrl-C of `agent-sdk serve` does to the app lifespan that owns the pool.
    started = anyio.Event()

    async def owner() -> None:
        async with ClientPool({"c": raw(tmp_path, env={"GRANDCHILD": "1"})}) as pool:
            await pool.call_tool("c", "echo", {"text": "x"})
            started.set()
            await pool.call_tool("c", "slow", {"seconds": 120})

    async with anyio.create_task_group() as tg:
        tg.start_soon(owner)
        await started.wait()
        await eventually(lambda: events(tmp_path, "slow") == 1)
        tg.cancel_scope.cancel()
    assert leftovers() == {}


# -- HTTP upstreams that are not working MCP servers ---------------------------------------


@pytest.fixture(scope="module")
def bad_http() -> Iterator[dict[str, str]]:
    urls: dict[str, str] = {}
    with _bad("status500", urls), _bad("garbage", urls), _bad("html", urls), _bad("hang", urls), _bad("late", urls):
        yield urls


class _bad:
    def __init__(self, mode: str, urls: dict[str, str]) -> None:
        self.port = free_port()
        urls[mode] = f"http://127.0.0.1:{self.port}"
        self.cm = running([sys.executable, str(UPSTREAMS / "bad_http.py"), mode, str(self.port)], port=self.port)

    def __enter__(self) -> None:
        self.cm.__enter__()

    def __exit__(self, *exc: object) -> None:
        self.cm.__exit__(*exc)


@pytest.mark.parametrize(
    ("mode", "transport", "error", "says"),
    [
        ("status500", "streamable-http", UpstreamError, "HTTP 500"),
        ("status500", "sse", UpstreamError, "HTTP 500"),
        ("garbage", "streamable-http", UpstreamError, "not JSON-RPC"),
        ("html", "streamable-http", UpstreamError, "not an MCP endpoint"),
        ("html", "sse", UpstreamError, "not an MCP SSE endpoint"),
        ("hang", "streamable-http", UpstreamTimeout, "timed out"),
    ],
)
async def test_broken_http_upstreams_are_typed_errors(
    bad_http: dict[str, str], mode: str, transport: str, error: type[ConnectionsError], says: str
) -> None:
    url = bad_http[mode] + ("/sse" if transport == "sse" else "/mcp?key=query-secret")
    defn = define_connection(
        url=url, transport=transport, headers={"Authorization": "Bearer ${API_TOKEN}"}, timeouts={"connect": 1.5}
    ).named("broken", None)
    environ = {"API_TOKEN": "header-secret"}
    async with ClientPool({"broken": defn}, environ=environ) as pool:
        with pytest.raises(error) as caught:
            await pool.call_tool("broken", "echo", {"message": "x"})

    def no_headers(_session: Any) -> dict[str, Any]:
        return {"headers": {}}

    async with IdentityPool({"broken": replace(defn, auth=no_headers)}, environ=environ) as ids:
        with pytest.raises(error):  # an `auth` connection's client: the same typed errors
            await ids.call_identity_tool("broken", "echo", {"message": "x"}, {})
    message = str(caught.value)
    assert message.startswith("connection 'broken': ") and says in message
    assert caught.value.connection == "broken"  # type: ignore[attr-defined]
    for secret in ("header-secret", "query-secret"):
        assert secret not in message and secret not in repr(caught.value)


@pytest.mark.parametrize("fast", ["1", "0"])
async def test_a_garbage_answer_after_an_earlier_405_names_the_status_it_came_with(
    bad_http: dict[str, str], fast: str
) -> None:
    # An earlier answer was a 405; the failing answer itself is a 200 whose body is not JSON.
    url = bad_http["late"] + f"/mcp{fast}"
    defn = define_connection(url=url).named("late", None)
    async with ClientPool({"late": defn}, environ={"AGENT_SDK_FAST_CALLS": fast}) as pool:
        assert [t.name for t in await pool.list_tools("late")] == ["echo"]
        with pytest.raises(UpstreamError) as caught:  # 405, then (the pool's one retry) the garbage 200
            await pool.call_tool("late", "echo", {})
    message = str(caught.value)
    assert "not JSON-RPC (HTTP 200)" in message and "405" not in message, message


async def test_an_http_upstream_that_refuses_connections_is_unavailable() -> None:
    defn = define_connection(url=f"http://127.0.0.1:{free_port()}/mcp").named("refused", None)
    async with ClientPool({"refused": defn}) as pool:
        with pytest.raises(ConnectionUnavailable, match=r"'refused': cannot connect to http://127\.0\.0\.1:"):
            await pool.list_tools("refused")


async def test_an_unset_variable_is_named_and_never_counts_as_a_crash() -> None:
    defn = define_connection(command=sys.executable, args=[RAW], env={"KEY": "${UNSET_KEY}"}).named("c", None)
    async with ClientPool({"c": defn}, environ={"PATH": os.environ["PATH"]}) as pool:
        for _ in range(6):
            with pytest.raises(EnvironmentVariableMissing, match="UNSET_KEY") as caught:
                await pool.call_tool("c", "echo", {})
        assert caught.value.code == "environment_variable_missing"
        assert pool.status("c").failures == 0 and pool.status("c").state != "paused"


async def test_an_account_connection_without_a_hub_fails_fast_with_the_fix(tmp_path: Path) -> None:
    defn = define_connection(account=True).named("hub", None)
    async with AccountConnections({"hub": defn}, environ={"HOME": str(tmp_path)}) as accounts:
        with pytest.raises(AccountNotConfigured, match="'hub': no account hub is configured; run agent-sdk login"):
            await accounts.list_tools("hub")
        with pytest.raises(AccountNotConfigured):
            await accounts.call_tool("hub", "echo", {})


def test_the_pool_refuses_an_account_connection() -> None:
    # Account connections live beside the pool (Broker routes them), never inside it.
    with pytest.raises(ValueError, match="'hub' is an account connection"):
        ClientPool({"hub": define_connection(account=True).named("hub", None)})
