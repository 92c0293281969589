"""The turn toolset builder against real upstream processes: advertising, per-session auth, fail-closed."""

from __future__ import annotations

import json
import random
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from connections import Broker, SessionInfo, ToolInputError, TurnBuildError, load_project
from connections.turns._auth_threads import AUTH_THREADS  # pyright: ignore[reportPrivateUsage]
from tests.conftest import free_port
from tests.peers import node_bin
from tests.processes import recording_server, running

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    """Our recording server: tools `record` (write) and `lookup` (readOnlyHint)."""
    port = free_port()
    with running(recording_server(port, tools="record,lookup", read_only="lookup"), port=port):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def bad_names_upstream() -> Iterator[str]:
    port = free_port()
    with running(recording_server(port, tools="fine,bad name!,dup,dup"), port=port):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def everything() -> Iterator[str]:
    """The reference TypeScript server over Streamable HTTP."""
    port = free_port()
    with running([str(node_bin("mcp-server-everything")), "streamableHttp"], port=port, env={"PORT": str(port)}):
        yield f"http://127.0.0.1:{port}/mcp"


def project(root: Path, files: dict[str, str]) -> Path:
    """Write an agent project: keys are paths under agent/, values the file's source."""
    for rel, source in files.items():
        path = root / "agent" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    return root


def advertised(url: str, extra: str = "") -> str:
    return f"""
        from connections import define_connection
        connection = define_connection(url={url!r}, advertise_tools=True{extra})
    """


TENANT_AUTH = """
    from connections import define_connection

    async def tenant(session):
        return {"headers": {"X-Tenant": str(session.auth)}}

    connection = define_connection(url=URL, auth=tenant, advertise_tools=True)
"""


def session(sid: str = "s1", principal: Any = "alice") -> SessionInfo:
    return SessionInfo(id=sid, auth=principal)


async def recorded(base: str) -> list[dict[str, Any]]:
    async with httpx2.AsyncClient() as client:
        return (await client.get(f"{base}/calls")).json()


async def test_advertised_tools_keep_the_upstream_names_and_schemas(tmp_path: Path, everything: str) -> None:
    root = project(tmp_path, {"mcp-connections/everything.py": advertised(everything)})
    async with Broker(load_project(root)) as broker:
        toolset = await broker.builder.build(session())
        upstream = await broker.host.mcp.list_tools("everything")
    assert {t.name for t in upstream} <= set(toolset.names())
    echo = toolset.get("echo")
    assert echo is not None and echo.source == "advertised" and echo.connection == "everything"
    original = next(t for t in upstream if t.name == "echo")
    assert echo.input_schema == original.input_schema
    assert echo.description == original.description


async def test_passthrough_call_returns_the_upstream_result(tmp_path: Path, everything: str) -> None:
    root = project(tmp_path, {"mcp-connections/everything.py": advertised(everything)})
    async with Broker(load_project(root)) as broker:
        toolset = await broker.builder.build(session())
        echo = await toolset.tools["echo"].call({"message": "hello upstream"})
        total = await toolset.tools["get-sum"].call({"a": 2, "b": 40})
    assert not echo.is_error
    assert "hello upstream" in json.dumps(echo.result["content"])
    assert "42" in json.dumps(total.result["content"])


async def test_read_only_hint_maps_to_read_effect(tmp_path: Path, upstream: str) -> None:
    root = project(tmp_path, {"mcp-connections/rec.py": advertised(f"{upstream}/mcp")})
    async with Broker(load_project(root)) as broker:
        toolset = await broker.builder.build(session())
    assert toolset.tools["lookup"].effect == "read"
    assert toolset.tools["record"].effect is None


async def test_collision_with_an_authored_tool_fails_the_turn(tmp_path: Path, upstream: str) -> None:
    root = project(
        tmp_path,
        {
            "mcp-connections/rec.py": advertised(f"{upstream}/mcp"),
            "tools/record.py": """
                from connections import define_tool
                tool = define_tool(description="authored record", execute=lambda value, ctx: "mine")
            """,
        },
    )
    async with Broker(load_project(root)) as broker:
        with pytest.raises(TurnBuildError) as caught:
            await broker.builder.build(session())
    [problem] = caught.value.problems
    assert (problem.code, problem.connection, problem.tool) == ("collision", "rec", "record")
    assert "authored tool" in str(caught.value)


async def test_collision_between_two_advertised_connections_fails_the_turn(tmp_path: Path, upstream: str) -> None:
    root = project(
        tmp_path,
        {
            "mcp-connections/one.py": advertised(f"{upstream}/mcp"),
            "mcp-connections/two.py": advertised(f"{upstream}/mcp"),
        },
    )
    async with Broker(load_project(root)) as broker:
        with pytest.raises(TurnBuildError) as caught:
            await broker.builder.build(session())
    named = {(p.connection, p.tool) for p in caught.value.problems}
    assert named == {("two", "record"), ("two", "lookup")}
    assert "also advertised by connection 'one'" in str(caught.value)


async def test_every_problem_of_one_build_is_reported_together(
    tmp_path: Path, upstream: str, bad_names_upstream: str
) -> None:
    dead = f"http://127.0.0.1:{free_port()}/mcp"
    root = project(
        tmp_path,
        {
            "mcp-connections/names.py": advertised(f"{bad_names_upstream}/mcp"),
            "mcp-connections/down.py": advertised(dead, ", timeouts={'connect': 3, 'list': 3}"),
            "mcp-connections/raises.py": f"""
                from connections import define_connection

                def broken(session):
                    raise RuntimeError("vault unreachable, token sk-live-123")

                connection = define_connection(url={upstream + "/mcp"!r}, auth=broken, advertise_tools=True)
            """,
        },
    )
    async with Broker(load_project(root)) as broker:
        with pytest.raises(TurnBuildError) as caught:
            await broker.builder.build(session())
    problems = {(p.connection, p.tool, p.code) for p in caught.value.problems}
    assert ("names", "bad name!", "invalid_tool_name") in problems
    assert ("names", "dup", "duplicate_tool") in problems
    assert ("raises", None, "auth_failed") in problems
    assert any(conn == "down" and tool is None for conn, tool, _ in problems)
    message = str(caught.value)
    assert "sk-live-123" not in message  # the callback's message may hold secrets: only its type is named
    for name in ("names", "down", "raises"):
        assert f"connection {name!r}" in message


async def test_no_partial_toolset_even_when_most_connections_work(tmp_path: Path, upstream: str) -> None:
    dead = f"http://127.0.0.1:{free_port()}/mcp"
    root = project(
        tmp_path,
        {"mcp-connections/good.py": advertised(f"{upstream}/mcp"), "mcp-connections/down.py": advertised(dead)},
    )
    async with Broker(load_project(root)) as broker:
        with pytest.raises(TurnBuildError):
            await broker.builder.build(session())
        toolset, problems = await broker.builder.collect(session())
    # The catalog view shows what works and why the rest failed; a turn never gets it.
    assert "record" in toolset and [p.connection for p in problems] == ["down"]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ("return {'X-Tenant': 'a'}", "auth_malformed"),
        ("return {'headers': {'X-Tenant': 7}}", "auth_malformed"),
        ("return {'headers': {'X-Tenant': 'a\\r\\nX-Evil: 1'}}", "auth_malformed"),
        ("import time; time.sleep(5)", "auth_timeout"),
    ],
)
async def test_bad_auth_callbacks_fail_the_turn_naming_the_connection(
    tmp_path: Path, upstream: str, body: str, code: str
) -> None:
    root = project(
        tmp_path,
        {
            "mcp-connections/tenant.py": f"""
                from connections import define_connection

                def auth(session):
                    {body}

                connection = define_connection(
                    url={upstream + "/mcp"!r}, auth=auth, advertise_tools=True, timeouts={{"auth": 0.5}}
                )
            """
        },
    )
    async with Broker(load_project(root)) as broker:
        with pytest.raises(TurnBuildError) as caught:
            await broker.builder.build(session())
    [problem] = caught.value.problems
    assert (problem.connection, problem.code) == ("tenant", code)


async def test_a_hanging_sync_auth_callback_keeps_the_thread_count_flat(tmp_path: Path, upstream: str) -> None:
    release = tmp_path / "release"
    root = project(
        tmp_path,
        {
            "mcp-connections/tenant.py": f"""
                import pathlib, time
                from connections import define_connection

                def auth(session):
                    while not pathlib.Path({str(release)!r}).exists():  # hangs until the test ends
                        time.sleep(0.05)
                    return {{"headers": {{}}}}

                connection = define_connection(
                    url={upstream + "/mcp"!r}, auth=auth, advertise_tools=True, timeouts={{"auth": 0.2}}
                )
            """
        },
    )
    try:
        async with Broker(load_project(root)) as broker:
            before = threading.active_count()
            codes: list[str] = []
            for _ in range(30):
                with pytest.raises(TurnBuildError) as caught:
                    await broker.builder.build(session())
                [problem] = caught.value.problems
                codes.append(problem.code)
            after = threading.active_count()
        # Each turn failed closed; at most AUTH_THREADS callbacks ever ran at once, the rest were refused.
        assert after - before <= AUTH_THREADS, (before, after)
        assert set(codes) == {"auth_timeout", "auth_busy"} and codes[:AUTH_THREADS] == ["auth_timeout"] * AUTH_THREADS
    finally:
        release.touch()


async def test_rotated_credential_is_live_on_the_next_turn(tmp_path: Path, upstream: str) -> None:
    token_file = tmp_path / "token.txt"
    token_file.write_text("first")
    root = project(
        tmp_path,
        {
            "mcp-connections/rotating.py": f"""
                from pathlib import Path
                from connections import define_connection

                def auth(session):
                    return {{"headers": {{"Authorization": "Bearer " + Path({str(token_file)!r}).read_text()}}}}

                connection = define_connection(url={upstream + "/mcp"!r}, auth=auth, advertise_tools=True)
            """
        },
    )
    async with Broker(load_project(root)) as broker:
        first = await broker.builder.build(session())
        out1 = await first.tools["record"].call({"value": "rotation-1"})
        token_file.write_text("second")
        second = await broker.builder.build(session())
        out2 = await second.tools["record"].call({"value": "rotation-2"})
    assert out1.result["structuredContent"]["authorization"] == "Bearer first"
    assert out2.result["structuredContent"]["authorization"] == "Bearer second"
    calls = {c["arguments"].get("value"): c for c in await recorded(upstream)}
    assert calls["rotation-2"]["authorization"] == "Bearer second"


async def test_tenants_never_see_each_others_identity(tmp_path: Path, upstream: str) -> None:
    """50 sessions of 10 tenants, 2,000 interleaved advertised calls: each carries its own tenant."""
    root = project(tmp_path, {"mcp-connections/tenant.py": TENANT_AUTH.replace("URL", repr(upstream + "/mcp"))})
    sessions = [SessionInfo(id=f"iso-{i}", auth=f"tenant-{i % 10}") for i in range(50)]
    async with Broker(load_project(root)) as broker:
        toolsets = {s.id: await broker.builder.build(s) for s in sessions}
        plan = [s for s in sessions for _ in range(40)]
        random.Random(7).shuffle(plan)
        limiter = anyio.Semaphore(16)

        async def call(n: int, s: SessionInfo) -> None:
            async with limiter:
                await toolsets[s.id].tools["record"].call({"value": f"{s.id}|{n}"})

        async with anyio.create_task_group() as tg:
            for n, s in enumerate(plan):
                tg.start_soon(call, n, s)
    expected = {s.id: s.auth for s in sessions}
    mine = [c for c in await recorded(upstream) if str(c["arguments"].get("value", "")).startswith("iso-")]
    assert len(mine) == 2000
    wrong = [c for c in mine if c["tenant"] != expected[c["arguments"]["value"].split("|")[0]]]
    assert wrong == []


async def test_host_only_connections_never_reach_the_toolset(tmp_path: Path, upstream: str) -> None:
    root = project(
        tmp_path,
        {
            "host-connections/admin.py": f"""
                from connections import define_connection
                connection = define_connection(url={upstream + "/mcp"!r})
            """
        },
    )
    async with Broker(load_project(root)) as broker:
        toolset = await broker.builder.build(session())
        assert "admin" in broker.host.mcp.names()
    assert toolset.names() == []


async def test_attached_connections_are_reached_through_the_meta_tools_with_session_auth(
    tmp_path: Path, upstream: str
) -> None:
    root = project(
        tmp_path,
        {
            "mcp-connections/attached.py": f"""
                from connections import define_connection

                def auth(session):
                    return {{"headers": {{"X-Tenant": "meta-" + session.id}}}}

                connection = define_connection(url={upstream + "/mcp"!r}, auth=auth)
            """
        },
    )
    async with Broker(load_project(root)) as broker:
        toolset = await broker.builder.build(session("m1"))
        assert toolset.names() == ["mcp_call_tool", "mcp_list_tools"]
        listing = await toolset.tools["mcp_list_tools"].call({"connection": "attached"})
        out = await toolset.tools["mcp_call_tool"].call(
            {"connection": "attached", "tool": "record", "arguments": {"value": "via-meta"}}
        )
        with pytest.raises(ToolInputError) as wrong:
            await toolset.tools["mcp_call_tool"].call({"connection": "nope", "tool": "record"})
    assert [t["name"] for t in listing.result["tools"]] == ["record", "lookup"]
    assert out.result["structuredContent"]["tenant"] == "meta-m1"
    # The refusal names the meta-tool the model called, not its sibling.
    assert (
        str(wrong.value) == "invalid input for tool 'mcp_call_tool': 'connection' must be one of attached; got 'nope'"
    )


async def test_server_tools_reach_host_mcp_with_static_headers_only(tmp_path: Path, upstream: str) -> None:
    root = project(
        tmp_path,
        {
            "mcp-connections/tenant.py": f"""
                from connections import define_connection

                def auth(session):
                    return {{"headers": {{"X-Tenant": "from-session"}}}}

                connection = define_connection(
                    url={upstream + "/mcp"!r}, headers={{"X-Tenant": "static"}}, auth=auth, advertise_tools=True
                )
            """,
            "tools/via_host.py": """
                from connections import define_tool

                async def execute(value, ctx):
                    result = await ctx.host.mcp.call_tool("tenant", "record", {"value": "host-call"})
                    return result.structured_content

                tool = define_tool(description="calls the upstream through host.mcp", execute=execute)
            """,
        },
    )
    async with Broker(load_project(root)) as broker:
        toolset = await broker.builder.build(session())
        via_session = await toolset.tools["record"].call({"value": "session-call"})
        via_host = await toolset.tools["via_host"].call({})
    assert via_session.result["structuredContent"]["tenant"] == "from-session"
    assert via_host.result["tenant"] == "static"
