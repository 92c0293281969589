"""The deployment `bench/chaos.py` runs faults against, and the faults themselves.

Real `redis-server` (append-only file synced on every write), nginx running the shipped
`deploy/nginx.conf`, three `agent-sdk serve --state-url` replicas of one project, and two upstreams:
server-everything over stdio (a child per replica: long calls with progress, tasks, resources) and
`bench/fast_upstream.py` (an `mcp` 2.x server) over HTTP, shared by the replicas. Loopback only.

nginx's access log carries each request's `X-Chaos-Id`, the replica it went to and its start and end,
so the report can say which failed call was in flight on which replica when a fault struck.
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Generator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx2

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.conftest import free_port  # noqa: E402
from tests.gateway.conftest import Served, make_project  # noqa: E402
from tests.gateway.replicas import BEARER, OPERATOR, STATE_KEY, RedisServer, nginx_conf  # noqa: E402
from tests.nginx import main_conf  # noqa: E402
from tests.peers import debian_bin, node_bin  # noqa: E402
from tests.processes import running  # noqa: E402

__all__ = ["Cluster", "LogLine", "cluster", "cpu_seconds", "read_access_log"]

LOG_FORMAT = "log_format chaos '$http_x_chaos_id $msec $request_time $status \"$upstream_addr\" $uri';"


def chaos_project(root: Path, fast_url: str) -> Path:
    """The basic authored tools, `everything` over stdio (its own `echo` left out: the HTTP upstream has
    one) with its resources, and `fast` over HTTP."""
    everything = str(node_bin("mcp-server-everything"))
    return make_project(
        root,
        {
            "everything": (
                "from connections import define_connection\n\n"
                f"connection = define_connection(command={everything!r}, args=['stdio'], advertise_tools=True,\n"
                "    advertise_resources=True, deny_tools=['echo'])\n"
            ),
            "fast": (
                "from connections import define_connection\n\n"
                f"connection = define_connection(url={fast_url!r}, advertise_tools=True)\n"
            ),
        },
    )


@dataclass
class Cluster:
    folder: Path
    project: Path
    redis: RedisServer
    replicas: list[Served]
    front: str
    access_log: Path
    lease: float
    ports: list[int] = field(default_factory=list[int])

    def restart(self, i: int, limit: float = 180.0) -> tuple[float, float, int]:
        """Start replica `i` again on its port, as `deploy/agent-sdk.service` does (`Restart=on-failure`,
        `RestartSec=2`: a start that exits, e.g. because Redis did not answer at boot, is made again 2 s later).
        Seconds until it answered `/v1/health` (a loaded box may take long), the CPU seconds the answering
        process had used by then (what a start costs, whatever the box's load), and the starts it took."""
        started = time.monotonic()
        for attempt in itertools.count(1):
            n = sum(1 for p in self.folder.iterdir() if p.name.startswith(f"r{i}-"))
            root = self.folder / f"r{i}-{n}"
            self.replicas[i] = start_replica(self.project, root, self.redis.url, self.lease, self.ports[i])
            try:
                await_healthy([self.replicas[i]], limit=max(1.0, limit - (time.monotonic() - started)))
            except RuntimeError:
                code = self.replicas[i].proc.poll()
                if code is None or code == -signal.SIGKILL or time.monotonic() - started + 2.0 > limit:
                    raise  # still not answering, or the next fault's kill -9 struck it while it started
                time.sleep(2.0)
                continue
            return time.monotonic() - started, cpu_seconds(self.replicas[i].proc.pid), attempt
        raise AssertionError("unreachable")

    def kill(self, i: int) -> None:
        """`kill -9` replica `i` (one that already exited, e.g. a restart that failed, is left as it is)."""
        if self.replicas[i].proc.poll() is None:
            os.kill(self.replicas[i].proc.pid, signal.SIGKILL)
        self.replicas[i].proc.wait(timeout=10)

    def pause(self, i: int, stopped: bool) -> None:
        os.kill(self.replicas[i].proc.pid, signal.SIGSTOP if stopped else signal.SIGCONT)

    def kill_stdio_child(self, i: int) -> int:
        """`kill -9` the server-everything child of replica `i`; its pid (0: it had none running)."""
        pid = self.replicas[i].proc.pid
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except FileNotFoundError:  # the replica itself is down (a kill's restart still under way)
            return 0
        for child in children:
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            except FileNotFoundError:
                continue
            if b"server-everything" in cmdline or b"mcp-server-everything" in cmdline:
                os.kill(int(child), signal.SIGKILL)
                return int(child)
        return 0

    def all_healthy(self, *, ready: bool = False) -> bool:
        """Every replica answers `/v1/health` (with `ready`, also `/v1/ready`: Redis answers) directly."""
        path = "/v1/ready" if ready else "/v1/health"
        for served in self.replicas:
            try:
                if httpx2.get(f"{served.url}{path}", timeout=3.0).status_code != 200:
                    return False
            except httpx2.HTTPError:
                return False
        return True

    def stop(self) -> None:
        for served in self.replicas:
            if served.proc.poll() is None:
                try:
                    os.kill(served.proc.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
                served.stop()


@contextmanager
def cluster(folder: Path, *, lease: float = 3.0, replicas: int = 3) -> Generator[Cluster]:
    """The deployment above, stopped afterwards."""
    folder.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        fast_port = free_port()
        fast_cmd = [sys.executable, str(ROOT / "bench" / "fast_upstream.py"), str(fast_port)]
        stack.enter_context(running(fast_cmd, port=fast_port, what="fast upstream"))
        project = chaos_project(folder / "project", f"http://127.0.0.1:{fast_port}/mcp")
        redis = RedisServer(folder / "redis")
        redis.start()
        stack.callback(redis.stop)
        served: list[Served] = []
        made = Cluster(folder, project, redis, served, "", folder / "nginx" / "access.log", lease)
        stack.callback(made.stop)
        served.extend(start_replica(project, folder / f"r{i}-0", redis.url, lease) for i in range(replicas))
        await_healthy(served)
        made.ports = [s.port for s in served]
        made.front = stack.enter_context(_nginx(folder / "nginx", made.ports))
        yield made


def start_replica(
    project: Path,
    state_root: Path,
    redis_url: str,
    lease: float,
    port: int | None = None,
    *,
    env: dict[str, str] | None = None,
) -> Served:
    """`agent-sdk serve --state-url` as docs/deploy.md runs it (the bearer chain, the deployment's state key;
    without `redis_url`, one gateway on its state root), started with `env` on top; `await_healthy` waits."""
    port = port or free_port()
    state_root.mkdir(parents=True, exist_ok=True)
    log = state_root.parent / f"serve-{state_root.name}.log"
    full = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SDK_") or k == "AGENT_SDK_PEERS"}
    # Bytecode as an installed gateway has it (pip compiles at install): with PYTHONDONTWRITEBYTECODE (set on
    # this box) every start compiled this tree's ~240 modules again, a fifth of a start's CPU.
    full.pop("PYTHONDONTWRITEBYTECODE", None)
    full |= {
        "PYTHONPYCACHEPREFIX": str(state_root.parent / "pycache"),
        "AGENT_SDK_BEARER_TOKEN": BEARER,
        "AGENT_SDK_OPERATOR_TOKEN": OPERATOR,
        "AGENT_SDK_STATE_KEY": STATE_KEY,
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
        **({"AGENT_SDK_STATE_URL": redis_url} if redis_url else {}),
        **(env or {}),
    }
    cmd = [sys.executable, "-m", "gateway", "serve", "--dir", str(project), "--port", str(port)]
    cmd += ["--state-root", str(state_root), "--turn-lease", str(lease)]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=full)
    return Served(proc, f"http://127.0.0.1:{port}", port, state_root, log)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process `pid` has used (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def await_healthy(replicas: list[Served], limit: float = 180.0) -> None:
    """Until each of `replicas` answers `/v1/health`. Raises `RuntimeError` if one exits or `limit` passes."""
    deadline = time.monotonic() + limit
    for served in replicas:
        while True:
            if served.proc.poll() is not None:
                raise RuntimeError(f"a replica exited with {served.proc.returncode}:\n{served.log_text()[-2000:]}")
            try:
                if httpx2.get(f"{served.url}/v1/health", timeout=3.0).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"a replica did not answer /v1/health within {limit:g}s")
            time.sleep(0.1)


@contextmanager
def _nginx(folder: Path, ports: list[int]) -> Generator[str]:
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    (folder / "agent-sdk.conf").write_text(nginx_conf(ports, port))
    http = f"{LOG_FORMAT}\n    access_log {folder}/access.log chaos;\n    include {folder}/agent-sdk.conf;"
    main = folder / "nginx.conf"
    main.write_text(main_conf(folder, http, error_log="warn"))
    cmd = [debian_bin("nginx"), "-p", str(folder), "-c", str(main), "-g", "daemon off;"]
    with running(cmd, port=port, what="nginx"):
        yield f"http://127.0.0.1:{port}"


@dataclass(frozen=True, slots=True)
class LogLine:
    started: float
    ended: float
    status: int
    upstreams: tuple[int, ...]
    """The replica ports nginx tried, in order (the last one answered)."""
    uri: str


_LOG_LINE = re.compile(
    r'(?P<ident>\S+) (?P<ended>\S+) (?P<took>\S+) (?P<status>\d+) "(?P<upstreams>[^"]*)" (?P<uri>.*)'
)


def read_access_log(path: Path) -> dict[str, LogLine]:
    """Chaos id -> what nginx saw of that request."""
    out: dict[str, LogLine] = {}
    for line in path.read_text().splitlines():
        # `$upstream_addr` is quoted and holds ", " between the replicas nginx tried: not split on its spaces.
        match = _LOG_LINE.fullmatch(line)
        if match is None or match["ident"] == "-":
            continue
        ident, ended, took, status, upstreams, uri = match.group("ident", "ended", "took", "status", "upstreams", "uri")
        ports = tuple(int(a.rsplit(":", 1)[1]) for a in upstreams.strip('"').replace(",", " ").split() if ":" in a)
        out[ident] = LogLine(float(ended) - float(took), float(ended), int(status), ports, uri)
    return out


def wait_until(check: Callable[[], bool], limit: float) -> float:
    """Poll `check()` every 50 ms until true; seconds it took (or `limit` when it never was)."""
    started = time.monotonic()
    while time.monotonic() - started < limit:
        if check():
            return time.monotonic() - started
        time.sleep(0.05)
    return limit
