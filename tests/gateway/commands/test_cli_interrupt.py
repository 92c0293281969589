"""Ctrl-C of `agent-sdk mcp tools|call` while the upstream never answers stops the command at once,
not when the connect timeout runs out (issue #19 item 1)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import free_port

ROOT = Path(__file__).resolve().parents[3]

# Accepts TCP connections and never answers: an HTTP MCP server that hangs. Says "accepted" each time.
SILENT = """\
import socket, sys
server = socket.create_server(("127.0.0.1", int(sys.argv[1])))
held = []
while True:
    conn, _ = server.accept()
    held.append(conn)
    print("accepted", flush=True)
"""


@pytest.fixture
def silent_server(tmp_path: Path) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", SILENT, str(port)], stdout=subprocess.PIPE, text=True)
    try:
        yield port, proc
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("command", [["tools", "hang"], ["call", "hang", "echo", "--args", "{}"]])
def test_ctrl_c_stops_a_command_waiting_on_a_silent_upstream_before_its_connect_timeout(
    tmp_path: Path, silent_server: tuple[int, subprocess.Popen[str]], command: list[str]
) -> None:
    port, server = silent_server
    conn = tmp_path / "agent" / "mcp-connections" / "hang.py"
    conn.parent.mkdir(parents=True)
    # A connect budget of 300 s: a command that waited on it could not stop in time.
    conn.write_text(
        "from connections import define_connection\n\n"
        f"connection = define_connection(url='http://127.0.0.1:{port}/mcp', timeouts={{'connect': 300}})\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SDK_")} | {"PYTHONPATH": str(ROOT)}
    cli = subprocess.Popen(
        [sys.executable, "-m", "gateway", "mcp", *command, "--dir", str(tmp_path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        assert server.stdout.readline().strip() == "accepted"  # the command is now waiting on the upstream
        cli.send_signal(signal.SIGINT)
        # Not a speed measure: the old pool held a cancelled open until its 10 s close grace ran out
        # (and then until the connect timeout, 300 s here); "at once" is anything well below that.
        _out, err = cli.communicate(timeout=8)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    assert cli.returncode == 130
    assert err.strip() == "agent-sdk: interrupted"
