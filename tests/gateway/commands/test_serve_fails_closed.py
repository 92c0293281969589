"""A background task of the app that fails while `agent-sdk serve` is serving takes the app's lifespan down
with it (the pool, the sessions and the audit trail close): serve then logs the failure whole and exits 1
so that its supervisor starts it again, instead of answering every request with a closed pool.

The failure is injected into a real `agent-sdk serve` (uvicorn, the app, its lifespan): the watcher of the
policy and definition files (`gateway/reloads.py`) raises a second after the start, as a listener's unexpected
error would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ..conftest import make_project, serve

INJECT = (
    "import anyio, gateway.reloads as reloads\n"
    "async def run(self):\n"
    "    await anyio.sleep(1.0)\n"
    "    raise RuntimeError('an injected failure of a background task')\n"
    "reloads.Reloads.run = run\n"
    "from gateway.cli import entrypoint; entrypoint()\n"
)


def test_a_background_task_that_fails_ends_serve_with_exit_1_and_its_traceback(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    served = serve(project, tmp_path / "state", launcher=(sys.executable, "-c", INJECT))
    try:
        code = served.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        served.proc.kill()
        served.proc.wait()
        raise AssertionError("serve kept running after its app stopped:\n" + served.log_text()) from None
    log = served.log_text()
    assert code == 1, log
    assert "the app stopped: a background task failed" in log
    assert "RuntimeError: an injected failure of a background task" in log  # the traceback, whole
    assert "serve exits so that it is restarted" in log
