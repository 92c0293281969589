"""Start real peer processes on loopback ports and stop them (the whole process group) afterwards."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def wait_for_port(
    port: int, proc: subprocess.Popen[bytes] | None = None, what: str = "peer process", limit: float = 30.0
) -> None:
    """Return once something accepts connections on 127.0.0.1:`port`; fail the test after `limit` s,
    or as soon as `proc` exits."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"{what} exited with {proc.returncode} before listening on port {port}")
        with socket.socket() as sock:
            sock.settimeout(0.2)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    pytest.fail(f"{what} did not listen on 127.0.0.1:{port} within {limit:g}s")


@contextmanager
def running(
    cmd: Sequence[str],
    *,
    port: int,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    what: str = "peer process",
) -> Iterator[subprocess.Popen[bytes]]:
    """Run `cmd` in its own process group until the block ends; wait until it listens on `port`."""
    proc = subprocess.Popen(
        list(cmd),
        env={**os.environ, **(env or {})},
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for_port(port, proc, what)
        yield proc
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate the process group, then kill it if it lingers."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


def recording_server(port: int, *, tools: str = "record", read_only: str = "", list_delay_ms: float = 0) -> list[str]:
    """The command line of our recording upstream (tests/fixtures/recording_server.py)."""
    return [
        sys.executable,
        str(FIXTURES / "recording_server.py"),
        "--port",
        str(port),
        "--tools",
        tools,
        "--read-only",
        read_only,
        "--list-delay-ms",
        str(list_delay_ms),
    ]


def identity_upstream(port: int, *, stateful: bool, refuse_tenant: str | None = None) -> list[str]:
    """The command line of our identity-counting upstream (tests/fixtures/identity_upstream.py)."""
    cmd = [sys.executable, str(FIXTURES / "identity_upstream.py"), "--port", str(port)]
    if stateful:
        cmd.append("--stateful")
    if refuse_tenant is not None:
        cmd += ["--refuse-tenant", refuse_tenant]
    return cmd
