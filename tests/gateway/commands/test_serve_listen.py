"""A starting `agent-sdk serve` refuses connections until it can answer them.

A replica restarting behind nginx must not accept connections it cannot serve yet: its kernel would
hold them in the listen backlog while the app still starts (seconds on a loaded box), and nginx would
wait on them instead of sending the request to a live replica (`proxy_next_upstream error` moves on
only from a refused connect). Here the start is held at a known point after the port is bound: the
`--oauth-issuer` whose metadata `serve` reads before the app starts is a TCP listener that accepts and
never answers, until the test lets it go.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import free_port

from ..conftest import ROOT, make_project


def test_the_port_refuses_connections_while_the_gateway_still_starts(tmp_path: Path) -> None:
    issuer = socket.create_server(("127.0.0.1", 0))
    issuer.settimeout(60)
    iss = f"http://127.0.0.1:{issuer.getsockname()[1]}"
    port = free_port()
    project = make_project(tmp_path / "project")
    cmd = [sys.executable, "-c", "from gateway.cli import entrypoint; entrypoint()", "serve", "--dir", str(project)]
    cmd += ["--port", str(port), "--state-root", str(tmp_path / "state"), "--oauth-issuer", iss]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        held, _ = issuer.accept()  # serve has bound its port and now reads the issuer's metadata
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        held.close()  # the metadata cannot be read: serve names the issuer and exits
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        issuer.close()
    assert proc.returncode != 0
    assert f"--oauth-issuer: the metadata of issuer {iss} cannot be read" in out.decode()
