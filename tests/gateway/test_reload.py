"""A running `agent-sdk serve` reads its connection and tool definitions again, on a change and on SIGHUP, with a
real MCP client (the `mcp` SDK's) on `/v1/mcp/tools`, the reference "everything" server over HTTP and a real
stdio child: SIGHUP no longer ends `serve`; an unchanged connection keeps its pooled client; a changed one's
child is stopped and the next call starts one with the new definition; a bad file keeps the old definitions
and logs one line naming the file and line; a removed connection's child is stopped and its tools are gone."""

from __future__ import annotations

import os
import re
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from mcp import Client
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.upstreams.proctable import matching

from .conftest import Served, Upstream, make_project, serve, url_connection

pytestmark = [pytest.mark.anyio, pytest.mark.peers]
NOTES = Path(__file__).resolve().parents[2] / "examples" / "quickstart" / "servers" / "notes_server.py"


def stdio_connection(script: Path, extra: str = "") -> str:
    return (
        "from connections import define_connection\n\n"
        f"connection = define_connection(command={sys.executable!r}, args=[{str(script)!r}], advertise_tools=True"
        f"{extra})\n"
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, everything: Upstream) -> Iterator[tuple[Served, Path, Path]]:
    root = tmp_path_factory.mktemp("reload")
    script = root / "reload_notes_server.py"  # its own path: its child is told apart from any other
    shutil.copy(NOTES, script)
    connections = {"everything": url_connection(everything.url), "notes": stdio_connection(script)}
    project = make_project(root / "project", connections)
    running = serve(project, root / "state", "--log-format", "json")
    yield running, project, script
    running.stop()


def wait_until(what: str, check: Callable[[], bool], served: Served, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert served.proc.poll() is None, f"serve exited ({served.proc.returncode}):\n{served.log_text()[-3000:]}"
        assert time.monotonic() < deadline, f"{what}, not seen:\n{served.log_text()[-3000:]}"
        time.sleep(0.05)


def child_environ(pid: int) -> bytes:
    with open(f"/proc/{pid}/environ", "rb") as f:
        return f.read()


def events(served: Served, event: str) -> list[str]:
    return [line for line in served.log_text().splitlines() if f'"event": "{event}"' in line]


def connection_open(served: Served, name: str) -> bool:
    with served.client() as http:
        text = http.get("/v1/metrics").text
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "agent_sdk_connection_state" and s.labels == {"connection": name, "state": "open"}:
                return s.value == 1
    return False


async def tool_names(served: Served) -> set[str]:
    async with Client(f"{served.url}/v1/mcp/tools", mode="legacy") as client:
        return {t.name for t in (await client.list_tools()).tools}


async def call(served: Served, tool: str, arguments: dict[str, object]) -> str:
    async with Client(f"{served.url}/v1/mcp/tools", mode="legacy") as client:
        result = await client.call_tool(tool, arguments)
    assert not result.is_error, result
    return "".join(getattr(c, "text", "") for c in result.content)


async def test_sighup_reloads_a_changed_connection_and_keeps_the_unchanged_ones_client(
    served: tuple[Served, Path, Path],
) -> None:
    running, project, script = served
    await call(running, "echo", {"message": "before"})
    await call(running, "add_note", {"text": "before"})
    [child] = matching(str(script))
    assert connection_open(running, "everything")
    # A changed definition (an env var for its child) and SIGHUP: serve stays up and reloads.
    (project / "agent" / "mcp-connections" / "notes.py").write_text(
        stdio_connection(script, ", env={'RELOADED_BY': 'sighup'}")
    )
    before = len(events(running, "definitions_reloaded"))
    os.kill(running.proc.pid, signal.SIGHUP)
    wait_until("a reload after SIGHUP", lambda: len(events(running, "definitions_reloaded")) > before, running)
    assert running.proc.poll() is None
    [line] = events(running, "definitions_reloaded")[before:]
    assert "closed: notes" in line
    # The changed connection's child is stopped; the unchanged one's pooled session is still open.
    wait_until("the changed connection's child stopped", lambda: child not in matching(str(script)), running)
    assert connection_open(running, "everything")
    assert await call(running, "add_note", {"text": "after"})
    [new_child] = matching(str(script))
    assert new_child != child
    assert b"RELOADED_BY=sighup" in child_environ(new_child)
    assert await call(running, "echo", {"message": "after"}) == "Echo: after"


async def test_a_bad_file_keeps_the_old_definitions_and_logs_its_file_and_line(
    served: tuple[Served, Path, Path],
) -> None:
    running, project, script = served
    await call(running, "add_note", {"text": "before"})
    [child] = matching(str(script))
    definition = project / "agent" / "mcp-connections" / "notes.py"
    good = definition.read_text()
    before = len(events(running, "definitions_reload_failed"))
    definition.write_text(good + "\nthis is not python (\n")  # noticed on change, no signal
    wait_until("a failed reload", lambda: len(events(running, "definitions_reload_failed")) > before, running)
    [line] = events(running, "definitions_reload_failed")[before:]
    assert re.search(r"agent/mcp-connections/notes\.py:\d+: error: ", line), line
    assert "previous definitions stay in force" in line
    assert list(matching(str(script))) == [child]
    assert "add_note" in await tool_names(running)
    assert await call(running, "add_note", {"text": "still served"})
    definition.write_text(good)


async def test_a_removed_connection_is_closed_and_its_tools_are_gone(served: tuple[Served, Path, Path]) -> None:
    running, project, script = served
    await call(running, "add_note", {"text": "before"})
    assert matching(str(script))
    before = len(events(running, "definitions_reloaded"))
    (project / "agent" / "mcp-connections" / "notes.py").unlink()
    wait_until("a reload", lambda: len(events(running, "definitions_reloaded")) > before, running)
    wait_until("the removed connection's child stopped", lambda: not matching(str(script)), running)
    names = await tool_names(running)
    assert "add_note" not in names and "echo" in names
    assert connection_open(running, "everything")
