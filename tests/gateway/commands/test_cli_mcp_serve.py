"""Ctrl-C of `agent-sdk serve` stops every stdio child the client pool started (no orphans)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx2

from tests.conftest import free_port
from tests.fixtures.upstreams.proctable import descendants, matching
from tests.processes import wait_for_port

ROOT = Path(__file__).resolve().parents[3]
RAW = str(ROOT / "tests" / "fixtures" / "upstreams" / "raw_stdio.py")


def test_ctrl_c_of_serve_stops_every_stdio_child(tmp_path: Path) -> None:
    conn = tmp_path / "agent" / "mcp-connections" / "raw.py"
    conn.parent.mkdir(parents=True)
    conn.write_text(
        "from connections import define_connection\n\n"
        f"connection = define_connection(command={sys.executable!r}, args=[{RAW!r}], env={{'GRANDCHILD': '1'}}, "
        "advertise_tools=True)\n"
    )
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    cli = [sys.executable, "-c", "import sys; from gateway.cli import main; sys.exit(main())"]
    proc = subprocess.Popen(
        [*cli, "serve", "--dir", str(tmp_path), "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_port(port, None)
        # Listing the catalog lists the advertised connection: the pool starts its child.
        response = httpx2.get(f"http://127.0.0.1:{port}/v1/tools", timeout=30)
        assert response.status_code == 200, response.text
        children = matching(RAW, proc.pid)
        assert len(children) == 1, descendants(proc.pid)
        assert matching("sleep 300", proc.pid)  # the server's own helper, in its process group
        before = set(descendants(proc.pid))
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode is not None
    # Every process the gateway had started is gone (the grandchild was reparented, so look by pid).
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{pid}").exists() and _live(pid) for pid in before) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [pid for pid in before if _live(pid)] == []
    assert "Traceback" not in (proc.stderr.read() if proc.stderr else "")


def _live(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"
