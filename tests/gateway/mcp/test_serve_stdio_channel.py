"""`agent-sdk serve --stdio`: stdout is the MCP channel, so nothing but JSON-RPC frames may reach it.

A desktop client parses every stdout line as JSON-RPC: a validation error printed there is a parse
error in the client's log instead of the reason. The reason goes to stderr, and a tool's own print
while serving does too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parents[3]
AGENT_SDK = Path(sys.executable).parent / "agent-sdk"

_PRINTING_TOOL = """
from connections import define_tool


async def execute(value: dict[str, object], ctx: object) -> dict[str, object]:
    print("a stray print from the tool")
    return {"said": value["text"]}


print("a stray print at import")
tool = define_tool(
    description="Say it back.",
    input={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    effect="read",
    execute=execute,
)
"""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_SDK_", "PYTEST_"))}
    return {**env, "AGENT_SDK_STATE_ROOT": str(tmp_path / "state")}


def test_a_broken_project_says_why_on_stderr_and_writes_nothing_to_stdout(tmp_path: Path) -> None:
    project = ROOT / "tests" / "fixtures" / "projects" / "unknown-field"
    done = subprocess.run(
        [str(AGENT_SDK), "serve", "--stdio", "--dir", str(project)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=_env(tmp_path),
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == b"", done.stdout
    stderr = done.stderr.decode()
    assert "search.py" in stderr and "uri" in stderr and "error(s) in the project" in stderr, stderr


@pytest.mark.anyio
async def test_every_stdout_line_is_json_rpc_while_a_tool_prints(tmp_path: Path) -> None:
    project = tmp_path / "my-agent"
    (project / "agent" / "tools").mkdir(parents=True)
    (project / "agent" / "tools" / "say.py").write_text(_PRINTING_TOOL)
    errlog = tmp_path / "stderr.txt"
    params = StdioServerParameters(
        command=str(AGENT_SDK), args=["serve", "--stdio", "--dir", str(project)], env=_env(tmp_path)
    )
    # The real SDK client: a non-JSON line on stdout reaches it as an exception on its read stream.
    with errlog.open("w") as err:
        async with stdio_client(params, errlog=err) as (read, write):
            async with ClientSession(read, write) as session:
                with anyio.fail_after(60):
                    await session.initialize()
                    result = await session.call_tool("say", {"text": "hi"})
    assert not result.is_error, result
    assert json.loads(result.content[0].text) == {"said": "hi"}  # pyright: ignore[reportAttributeAccessIssue]
    stderr = errlog.read_text()
    assert "a stray print at import" in stderr and "a stray print from the tool" in stderr, stderr


def test_raw_stdout_holds_only_frames(tmp_path: Path) -> None:
    project = tmp_path / "my-agent"
    (project / "agent" / "tools").mkdir(parents=True)
    (project / "agent" / "tools" / "say.py").write_text(_PRINTING_TOOL)
    frames = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "say", "arguments": {"text": "hi"}}},
    ]  # fmt: skip
    proc = subprocess.Popen(
        [str(AGENT_SDK), "serve", "--stdio", "--dir", str(project)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(tmp_path),
    )
    assert proc.stdin is not None and proc.stdout is not None
    lines: list[bytes] = []
    for frame in frames:
        proc.stdin.write(json.dumps(frame).encode() + b"\n")
        proc.stdin.flush()
        if "id" in frame:
            lines.append(proc.stdout.readline())
    rest, stderr = proc.communicate(timeout=60)
    lines.extend(rest.splitlines(keepends=True))
    assert [json.loads(line)["jsonrpc"] for line in lines] == ["2.0", "2.0"], lines
    assert b"a stray print from the tool" in stderr
