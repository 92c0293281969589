"""Replicas sharing Redis behind nginx: a restartable `redis-server`, nginx running `deploy/nginx.conf`,
and `agent-sdk serve --state-url` replicas (the same files and flags docs/deploy.md gives users)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gateway.state.state_key import new_state_key
from tests.conftest import free_port
from tests.nginx import main_conf
from tests.peers import debian_bin, node_bin
from tests.processes import running, stop, wait_for_port

from .conftest import Served, make_project, serve

ROOT = Path(__file__).resolve().parents[2]
DEPLOY_NGINX = ROOT / "deploy" / "nginx.conf"
BEARER = "replica-test-bearer-token-0123456789"
OPERATOR = "replica-test-operator-token-0123456789"
"""The replicas' `AGENT_SDK_OPERATOR_TOKEN`: the console's actions and logins (BEARER is a peer's)."""
STATE_KEY = new_state_key()
"""The deployment's state key every replica of a test gets (`AGENT_SDK_STATE_KEY`), as docs/deploy.md says."""


class RedisServer:
    """`redis-server` on a loopback port, its data in an append-only file synced on every write, so that a
    `kill -9` and a start on the same port lose nothing that was acknowledged."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        folder.mkdir(parents=True, exist_ok=True)

    def start(self) -> None:
        cmd = [
            debian_bin("redis-server"),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.folder),
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
        ]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        wait_for_port(self.port, self.proc, "redis-server")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)


@contextmanager
def redis_server(folder: Path) -> Iterator[RedisServer]:
    server = RedisServer(folder)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def nginx_conf(replica_ports: Sequence[int], port: int) -> str:
    """`deploy/nginx.conf` with its replica lines and its `listen` line pointed at this test's ports."""
    text = DEPLOY_NGINX.read_text()
    shipped = re.search(r"# replicas: begin\n\s*server \S+ ([^;]*);", text)
    assert shipped is not None, "deploy/nginx.conf lost its replica lines"
    servers = "".join(f"    server 127.0.0.1:{p} {shipped.group(1)};\n" for p in replica_ports)
    text, n = re.subn(r"(# replicas: begin\n).*?(\s*# replicas: end)", rf"\g<1>{servers}\g<2>", text, flags=re.S)
    assert n == 1, "deploy/nginx.conf lost its replica markers"
    text, n = re.subn(r"listen 8080;", f"listen 127.0.0.1:{port};", text)
    assert n == 1, "deploy/nginx.conf lost its listen line"
    # The test's own http-level access log (off, or the replica format these tests read) applies instead.
    text = re.sub(r"\n\s*access_log /var/log/nginx/[^;]+;", "\n", text)
    return text


@contextmanager
def nginx_front(folder: Path, replica_ports: Sequence[int], *, access_log: bool = False) -> Iterator[str]:
    """nginx (Debian's) running `deploy/nginx.conf` in front of the replicas; yields its base URL. With
    `access_log`, `folder/access.log` has one line a request: end time, duration, status, replicas tried, path."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    (folder / "agent-sdk.conf").write_text(nginx_conf(replica_ports, port))
    log = (
        f"log_format replica '$msec $request_time $status \"$upstream_addr\" $uri';\n"
        f"    access_log {folder}/access.log replica;"
        if access_log
        else "access_log off;"
    )
    main = folder / "nginx.conf"
    main.write_text(main_conf(folder, f"{log}\ninclude {folder}/agent-sdk.conf;", error_log="warn"))
    with running([debian_bin("nginx"), "-p", str(folder), "-c", str(main), "-g", "daemon off;"], port=port):
        yield f"http://127.0.0.1:{port}"


def replica_project(root: Path) -> Path:
    """The basic authored tools plus `everything`, the MCP reference server over stdio, advertised."""
    server = str(node_bin("mcp-server-everything"))
    body = (
        "from connections import define_connection\n\n"
        f"connection = define_connection(command={server!r}, args=['stdio'], advertise_tools=True)\n"
    )
    return make_project(root, {"everything": body})


def oauth_project(root: Path, resource_url: str) -> Path:
    """One connection, `docs`: the MCP server at `resource_url` behind OAuth, advertised."""
    body = (
        "from connections import define_connection\n\n"
        f"connection = define_connection(url={resource_url!r}, oauth=True, advertise_tools=True)\n"
    )
    return make_project(root, {"docs": body}, tools=False)


def replica(project: Path, state_root: Path, redis_url: str, *, lease: float = 3.0, port: int | None = None) -> Served:
    """One `agent-sdk serve --state-url` replica with the bearer chain, healthy on return."""
    env = {
        "AGENT_SDK_BEARER_TOKEN": BEARER,
        "AGENT_SDK_OPERATOR_TOKEN": OPERATOR,
        "AGENT_SDK_STATE_URL": redis_url,
        "AGENT_SDK_STATE_KEY": STATE_KEY,
        "PYTHONUNBUFFERED": "1",
    }
    return serve(project, state_root, "--turn-lease", str(lease), env=env, port=port)


def assert_one_turn_at_a_time(events: list[dict[str, Any]]) -> None:
    """Every turn's events lie between its `message.received` and its `session.waiting`, and no two overlap."""
    running: str | None = None
    for event in events:
        turn = event.get("turnId")
        if event["type"] == "message.received":
            assert running is None, f"turn {turn} started while {running} was running"
            running = turn
        elif event["type"] == "session.waiting":
            assert turn == running
            running = None
        elif event["type"] in ("turn.started", "turn.completed", "turn.failed", "message.appended"):
            assert turn == running, event
