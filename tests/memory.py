"""What the large-result tests measure memory with (issue #23): a process's RSS fields, reset of its
peak, and our counting server (the Python SDK's FastMCP, tool `big(size)`) over HTTP with JSON answers."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import free_port
from tests.processes import running

__all__ = ["COUNTING", "counting_http", "reset_peak", "status_bytes"]

COUNTING = Path(__file__).resolve().parent / "fixtures" / "upstreams" / "counting_server.py"


def status_bytes(pid: int | str, field: str) -> int:
    """`field` of `/proc/PID/status` (`VmRSS`, `VmHWM`) in bytes; `pid` may be "self"."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def reset_peak(pid: int | str) -> None:
    """Reset the process's `VmHWM` to its current RSS."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


@contextmanager
def counting_http() -> Iterator[str]:
    """The counting server on a loopback port, answering with JSON bodies; its MCP endpoint's URL."""
    port = free_port()
    cmd = [sys.executable, str(COUNTING), "http", str(port)]
    with running(cmd, port=port, env={"JSON_RESPONSE": "1"}, what="counting server"):
        yield f"http://127.0.0.1:{port}/mcp"
