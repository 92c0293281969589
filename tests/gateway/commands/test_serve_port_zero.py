"""`agent-sdk serve --port 0` binds a free port first, so the port it prints (and hands to the
account bridge's children) is the one it listens on."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest

ROOT = Path(__file__).resolve().parents[3]
CLI = Path(sys.executable).parent / "agent-sdk"


def test_port_zero_serves_on_the_port_it_prints(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            str(CLI),
            "serve",
            "--dir",
            str(ROOT / "examples" / "quickstart"),
            "--port",
            "0",
            "--state-root",
            str(tmp_path),
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the first line: "agent-sdk: serving <name> on http://host:port (...)"
        found = re.search(r"http://127\.0\.0\.1:(\d+) ", line)
        assert found is not None, line
        port = int(found.group(1))
        assert port != 0
        deadline = time.monotonic() + 30
        while True:
            try:
                response = httpx2.get(f"http://127.0.0.1:{port}/v1/health", timeout=2)
                break
            except httpx2.TransportError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail(f"serve did not answer on the port it printed ({port})")
                time.sleep(0.1)
        assert response.json() == {"ok": True}
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
