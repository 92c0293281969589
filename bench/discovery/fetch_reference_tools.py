"""Write `reference_tools.json`: the `tools/list` of the reference MCP servers installed in `.peers`.

Run: `.venv/bin/python bench/discovery/fetch_reference_tools.py` (needs `.peers`: server-everything,
server-filesystem, mcp-server-git, mcp-server-time). The catalog generator (`catalog.py`) reads the file.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
PEERS = HERE.parent.parent / ".peers"


def listed(command: list[str]) -> list[dict[str, object]]:
    """The server's tools, from a plain JSON-RPC exchange over its stdin and stdout."""
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]  # fmt: skip
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    for message in messages:
        proc.stdin.write((json.dumps(message) + "\n").encode())
        proc.stdin.flush()
    tools: list[dict[str, object]] = []
    for line in proc.stdout:
        answer = json.loads(line)
        if answer.get("id") == 2:
            tools = answer["result"]["tools"]
            break
    proc.kill()
    proc.wait()
    return tools


def main() -> None:
    folder = Path(tempfile.mkdtemp())
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    bins, py = PEERS / "node_modules" / ".bin", PEERS / "pyvenv" / "bin"
    servers = {
        "everything": [str(bins / "mcp-server-everything"), "stdio"],
        "filesystem": [str(bins / "mcp-server-filesystem"), str(folder)],
        "git": [str(py / "mcp-server-git"), "--repository", str(folder)],
        "time": [str(py / "mcp-server-time")],
    }
    out = {name: listed(command) for name, command in servers.items()}
    (HERE / "reference_tools.json").write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print({name: len(tools) for name, tools in out.items()})


if __name__ == "__main__":
    main()
