"""Sandboxed stdio servers (docs/connections.md, "Sandboxed stdio servers"): a hostile MCP server written with the
`mcp` SDK, started by a real `agent-sdk serve` under bubblewrap, tries each escape through the gateway and fails.
When bubblewrap is missing or cannot make namespaces, the connection fails closed with a sentence."""

from __future__ import annotations

import json
import os
import signal
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError

from tests.conformance import (
    ACTIVE,
    PASSING_THROUGH_GATEWAY,
    assert_gateway_matches,
    connection_definition,
    http_upstream,
    run_suite,
)
from tests.conformance import gateway as conformance_gateway
from tests.gateway.conftest import Served, assert_clean, make_project, serve
from tests.peers import debian_bin, py_peer
from tests.processes import FIXTURES

pytestmark = pytest.mark.anyio

HOSTILE = FIXTURES / "upstreams" / "hostile_server.py"
SECRET = "sandbox-test-secret-3f1d"
MAX_PROCESSES = 16


def hostile(sandbox: str) -> str:
    return (
        "import sys\nfrom connections import define_connection\n\n"
        f"connection = define_connection(command={sys.executable!r}, args=[{str(HOSTILE)!r}], "
        f"advertise_tools=True, sandbox={sandbox})\n"
    )


def project_with_hostile(root: Path, sandbox: str) -> Path:
    debian_bin("bwrap")
    keeper = (
        "from connections import define_connection\n\n"
        f"connection = define_connection(command={str(py_peer('mcp-server-time'))!r}, "
        "sandbox={'writable': ['keeper-files']})\n"
    )
    project = make_project(root / "project", {"hostile": hostile(sandbox), "keeper": keeper}, tools=False)
    (project / "grant").mkdir()
    (project / "keeper-files").mkdir()
    (project / "keeper-files" / "notes.txt").write_text(SECRET)
    (project / ".env").write_text(f"API_KEY={SECRET}\n")
    state = project / "state"  # inside the child's cwd: only `sandbox_hidden` keeps it out of sight
    state.mkdir()
    (state / "mcp-auth.json").write_text(json.dumps({"access_token": SECRET}))
    return project


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("sandbox")
    sandbox = f"{{'writable': ['grant'], 'max_processes': {MAX_PROCESSES}}}"
    project = project_with_hostile(root, sandbox)
    served = serve(project, project / "state", env={"GATEWAY_SECRET": SECRET})
    try:
        yield served
    finally:
        served.stop()
    assert_clean(served.log_text())


async def attempt(served: Served, tool: str, **arguments: Any) -> dict[str, Any]:
    async with Client(f"{served.url}/v1/mcp/tools") as client:
        result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)  # type: ignore[union-attr]


async def test_the_child_cannot_read_the_token_store_the_state_key_or_another_connections_files(
    gateway: Served,
) -> None:
    project = gateway.state_root.parent
    key = gateway.state_root / "request-state.key"
    assert key.is_file()  # serve made it: the child is shown an empty folder in its place
    for path in (gateway.state_root / "mcp-auth.json", key, project / "keeper-files" / "notes.txt"):
        found = await attempt(gateway, "read_file", path=str(path))
        assert found["ok"] is False and found["error"].startswith("ENOENT"), (path, found)
    env_file = await attempt(gateway, "read_file", path=str(project / ".env"))
    assert SECRET not in json.dumps(env_file)


async def test_the_child_sees_nothing_of_the_home_folder_but_its_runtime(gateway: Served) -> None:
    home, shown, files = _home_files()
    assert files  # the gateway's home holds files
    assert await attempt(gateway, "list_dir", path=str(home)) == {"ok": True, "value": shown}
    for path in files[:5]:
        found = await attempt(gateway, "read_file", path=str(path))
        assert found["ok"] is False and found["error"].startswith("ENOENT"), (path, found)


def _home_files() -> tuple[Path, list[str], list[Path]]:
    """The home folder, what of it a child running this interpreter is shown (its runtime), and its other files."""
    home = Path(os.environ["HOME"])
    runtime = Path(sys.base_prefix).resolve()  # the child's interpreter: shown read-only, and only it
    shown = [runtime.relative_to(home).parts[0]] if runtime.is_relative_to(home) else []
    return home, shown, [p for p in home.iterdir() if p.is_file() and p.name not in shown]


async def test_the_child_writes_only_inside_its_grant(gateway: Served) -> None:
    project = gateway.state_root.parent
    inside = await attempt(gateway, "write_file", path=str(project / "grant" / "out.txt"), text="granted")
    assert inside["ok"] is True
    assert (project / "grant" / "out.txt").read_text() == "granted"
    for path in (project / "escape.txt", Path("/usr/local/escape.txt"), gateway.state_root / "escape.txt"):
        found = await attempt(gateway, "write_file", path=str(path), text="escaped")
        assert found["ok"] is False and found["error"].split(":")[0] in ("EROFS", "EACCES"), (path, found)
        assert not path.exists()


async def test_the_child_cannot_open_a_tcp_connection(gateway: Served) -> None:
    loopback = await attempt(gateway, "connect", host="127.0.0.1", port=gateway.port)  # the gateway itself
    assert loopback["ok"] is False and loopback["error"].startswith("ECONNREFUSED")
    # Elsewhere: the child's network namespace has no interface but its own loopback and no route at all, so any
    # other address is unreachable. Read from the kernel rather than dialled: a test sends nothing off this machine.
    interfaces = await attempt(gateway, "read_file", path="/proc/net/dev")
    names = [line.split(":")[0].strip() for line in interfaces["value"].splitlines()[2:]]
    assert names == ["lo"], names
    routes = await attempt(gateway, "read_file", path="/proc/net/route")
    assert routes["value"].splitlines()[1:] == [], routes["value"]


async def test_the_child_sees_only_its_own_processes(gateway: Served) -> None:
    seen = (await attempt(gateway, "processes"))["value"]
    assert str(gateway.proc.pid) not in seen
    # bubblewrap's init (its command line names the server) and the server: nothing of the gateway's
    assert 1 <= len(seen) <= 2 and all(str(HOSTILE) in cmd for cmd in seen.values()), seen


async def test_the_child_cannot_fork_past_its_limit(gateway: Served) -> None:
    found = await attempt(gateway, "fork_many", count=4 * MAX_PROCESSES)
    assert found["ok"] is False and found["error"].startswith("EAGAIN")
    assert found["started"] < MAX_PROCESSES


async def test_the_child_has_no_privileges_its_limits_and_only_the_environment_it_was_given(gateway: Served) -> None:
    found = await attempt(gateway, "status")
    assert found["value"] == {"NoNewPrivs": "1", "CapEff": "0000000000000000"}
    # the defaults a definition can raise (`max_open_files`, `max_memory_mb`)
    assert found["limits"]["Max open files"] == "1024"
    assert found["limits"]["Max address space"] == str(8192 * 1024 * 1024)
    assert "GATEWAY_SECRET" not in found["env"]


async def test_the_child_does_not_outlive_the_gateway(tmp_path: Path) -> None:
    project = project_with_hostile(tmp_path, "True")
    served = serve(project, project / "state")
    marker = f"left-behind-{uuid.uuid4().hex}"
    try:
        assert (await attempt(served, "leave_behind", marker=marker))["ok"] is True
        assert _with_marker(marker)  # it runs, in a session of its own
    finally:
        served.stop()
    with anyio.move_on_after(10):
        while _with_marker(marker):  # noqa: ASYNC110 - the kernel ends the PID namespace's processes once its init is gone
            await anyio.sleep(0.05)
    assert not _with_marker(marker)


def _with_marker(marker: str) -> list[int]:
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if marker.encode() in cmdline and state != "Z":
                found.append(int(entry))
    return found


async def refusal(served: Served) -> str:
    """The error a peer gets listing the tools of a project whose only connection is sandboxed."""
    try:
        async with Client(f"{served.url}/v1/mcp/tools") as client:
            listed = await client.list_tools()
    except Exception as exc:  # the SDK client wraps it in its task groups' exception groups
        leaf: BaseException = exc
        while isinstance(leaf, BaseExceptionGroup):
            leaf = leaf.exceptions[0]
        if isinstance(leaf, MCPError):
            return str(leaf)
        raise
    finally:
        served.stop()
    pytest.fail(f"the sandboxed connection was listed: {[t.name for t in listed.tools]}")


async def test_a_sandboxed_connection_fails_closed_when_bubblewrap_is_missing(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project", {"hostile": hostile("True")}, tools=False)
    said = await refusal(serve(project, tmp_path / "state", env={"PATH": str(tmp_path / "no-programs-here")}))
    assert "bubblewrap (bwrap) is not on the PATH" in said and "apt-get install bubblewrap" in said, said
    assert "does not start unsandboxed" in said


async def test_a_sandboxed_connection_fails_closed_when_bubblewrap_cannot_make_namespaces(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project", {"hostile": hostile("True")}, tools=False)
    # The gateway itself without capabilities (as root, bwrap needs CAP_SYS_ADMIN to make namespaces); setpriv
    # execs it in place, so stopping it stops serve itself.
    drop = (debian_bin("setpriv"), "--bounding-set=-all", "--inh-caps=-all")
    launcher = (*drop, sys.executable, "-c", "from gateway.cli import entrypoint; entrypoint()")
    said = await refusal(serve(project, tmp_path / "state", launcher=launcher))
    assert "bubblewrap cannot create namespaces here (bwrap: Creating new namespace failed" in said, said
    assert "CAP_SYS_ADMIN" in said and "unprivileged_userns_clone" in said and "does not start unsandboxed" in said


def test_v1_info_says_the_connection_is_sandboxed_and_how(gateway: Served) -> None:
    with gateway.client() as client:
        connections = {c["name"]: c for c in client.get("/v1/info").json()["connections"]}
    sandbox = connections["hostile"]["sandbox"]
    assert sandbox["by"] == "bubblewrap" and sandbox["network"] is False
    assert sandbox["maxProcesses"] == MAX_PROCESSES
    assert sandbox["writable"] == [str((gateway.state_root.parent / "grant").resolve())]


@pytest.mark.peers
@pytest.mark.timeout(600)
def test_the_conformance_hop_passes_with_the_upstream_sandboxed(tmp_path: Path) -> None:
    """The MCP conformance suite (tests/conformance.py) against `/v1/mcp/tools` of a gateway whose stdio upstream
    runs under bubblewrap passes every scenario it passes against the upstream directly: the active suite's 30."""
    debian_bin("bwrap")
    with http_upstream() as url:
        direct = run_suite(url)
    with conformance_gateway(tmp_path, connection_definition(stdio="both", sandbox=True)) as through:
        sandboxed = run_suite(through)
    assert_gateway_matches(direct, sandboxed, scenarios=PASSING_THROUGH_GATEWAY)
    passed = {name for name, outcome in sandboxed.items() if outcome.passed}
    assert passed == ACTIVE == PASSING_THROUGH_GATEWAY, sorted(ACTIVE - passed)
    assert len(passed) == 30


async def test_a_reload_keeps_the_sandbox_and_the_hidden_state_root(tmp_path: Path) -> None:
    """`serve`'s reload (SIGHUP): an unchanged sandboxed connection keeps its child, and a changed one's new child
    is as sandboxed as the first (the state root, hidden by `serve`, stays hidden)."""
    project = project_with_hostile(tmp_path, "True")
    served = serve(project, project / "state", "--log-format", "json")
    key = str(project / "state" / "request-state.key")
    hostile_file = project / "agent" / "mcp-connections" / "hostile.py"
    try:
        assert (await attempt(served, "read_file", path=key))["ok"] is False
        for change, closed in (
            (project / "agent" / "mcp-connections" / "keeper.py", "keeper"),
            (hostile_file, "hostile"),
        ):
            change.write_text(
                change.read_text().replace(
                    "connection = define_connection(", "connection = define_connection(description='changed', "
                )
            )
            line = await _reloaded(served)
            assert f"closed: {closed}" in line, line
            found = await attempt(served, "read_file", path=key)
            assert found["ok"] is False and found["error"].startswith("ENOENT"), found
    finally:
        served.stop()


async def _reloaded(served: Served) -> str:
    """SIGHUP `serve` and wait for its `definitions_reloaded` log line."""

    def reloads() -> list[str]:
        return [line for line in served.log_text().splitlines() if '"event": "definitions_reloaded"' in line]

    before = len(reloads())
    os.kill(served.proc.pid, signal.SIGHUP)
    with anyio.fail_after(20):
        while len(reloads()) == before:  # noqa: ASYNC110 - the log is the only sign of a reload
            await anyio.sleep(0.05)
    return reloads()[before]
