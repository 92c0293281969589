"""Real servers we did not write, sandboxed with the grants their docs need (docs/connections.md, "Sandboxed stdio
servers"): server-filesystem on its root, mcp-server-git on its repository, server-everything and mcp-server-time,
each loaded from a project and called through the broker."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as mt
import pytest

from connections import Broker, load_project
from tests.peers import debian_bin, node_bin, py_peer

pytestmark = [pytest.mark.anyio, pytest.mark.peers]


def definition(command: Path, args: list[str], sandbox: str) -> str:
    return (
        "from connections import define_connection\n\n"
        f"connection = define_connection(command={str(command)!r}, args={args!r}, sandbox={sandbox})\n"
    )


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    debian_bin("bwrap")
    project = tmp_path / "project"
    (project / "files").mkdir(parents=True)
    (project / "files" / "hello.txt").write_text("hello from the host")
    repo = project / "repo"
    repo.mkdir()
    git = debian_bin("git")
    await anyio.run_process([git, "init", "-q", str(repo)])
    (repo / "README.md").write_text("sandboxed\n")
    connections = {
        # server-filesystem's README: the folders it serves are its arguments; it writes there.
        "filesystem": definition(
            node_bin("mcp-server-filesystem"), [str(project / "files")], "{'writable': ['files']}"
        ),
        # mcp-server-git's README: `--repository PATH`; staging writes its .git folder.
        "git": definition(py_peer("mcp-server-git"), ["--repository", str(repo)], "{'writable': ['repo']}"),
        "everything": definition(node_bin("mcp-server-everything"), [], "True"),
        "time": definition(py_peer("mcp-server-time"), [], "True"),
    }
    folder = project / "agent" / "mcp-connections"
    folder.mkdir(parents=True)
    for name, body in connections.items():
        (folder / f"{name}.py").write_text(body)
    loaded = load_project(project)
    assert loaded.ok, loaded.diagnostics
    assert all(d.sandboxed is not None for d in loaded.connections.values())
    async with Broker(loaded) as running:
        yield running


async def call(broker: Broker, name: str, tool: str, arguments: dict[str, Any]) -> str:
    result = mt.CallToolResult.model_validate(await broker.pool.call_tool(name, tool, arguments))
    text = "".join(c.text for c in result.content if isinstance(c, mt.TextContent))
    assert not result.is_error, text
    return text


async def test_server_filesystem_reads_and_writes_its_root_sandboxed(broker: Broker, tmp_path: Path) -> None:
    files = tmp_path / "project" / "files"
    read = await call(broker, "filesystem", "read_text_file", {"path": str(files / "hello.txt")})
    assert read == "hello from the host"
    await call(broker, "filesystem", "write_file", {"path": str(files / "new.txt"), "content": "from the sandbox"})
    assert (files / "new.txt").read_text() == "from the sandbox"


async def test_mcp_server_git_reads_and_stages_in_its_repository_sandboxed(broker: Broker, tmp_path: Path) -> None:
    repo = tmp_path / "project" / "repo"
    assert "README.md" in await call(broker, "git", "git_status", {"repo_path": str(repo)})
    await call(broker, "git", "git_add", {"repo_path": str(repo), "files": ["README.md"]})
    staged = await anyio.run_process(["git", "-C", str(repo), "diff", "--cached", "--name-only"])
    assert staged.stdout.decode().split() == ["README.md"]


async def test_server_everything_and_mcp_server_time_answer_sandboxed(broker: Broker) -> None:
    assert "sandboxed echo" in await call(broker, "everything", "echo", {"message": "sandboxed echo"})
    now = json.loads(await call(broker, "time", "get_current_time", {"timezone": "UTC"}))
    assert now["timezone"] == "UTC"
