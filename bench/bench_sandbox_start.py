"""Start cost of a sandboxed stdio child against an unsandboxed one: from spawn to the MCP handshake done.

    .venv/bin/python bench/bench_sandbox_start.py              # 20 starts of each server, each way
    .venv/bin/python bench/bench_sandbox_start.py --runs 50

Each start opens one client (`connections.client._clients.open_client`: spawn the child, `initialize`,
`notifications/initialized`) and closes it; the time is spawn to initialized, the close is not counted. The
servers: our small Python MCP server (`bench/stdio_tool_server.py`), `mcp-server-time` (the Python reference
server, in .peers/pyvenv) and `server-everything` (Node.js). The sandboxed and unsandboxed starts alternate,
so a load that comes and goes hits both alike; one sandboxed start before the runs pays bubblewrap's one-off
check (cached for the gateway's life). docs/performance.md holds the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from connections import define_connection  # noqa: E402
from connections.client._clients import open_client  # noqa: E402
from connections.client._sandbox import sandboxed_command  # noqa: E402

PEERS = Path(os.environ.get("AGENT_SDK_PEERS", ROOT / ".peers"))
SERVERS = {
    "python (stdio_tool_server.py)": (sys.executable, [str(ROOT / "bench" / "stdio_tool_server.py"), "t"]),
    "mcp-server-time (Python)": (str(PEERS / "pyvenv" / "bin" / "mcp-server-time"), []),
    "server-everything (Node.js)": (str(PEERS / "node_modules" / ".bin" / "mcp-server-everything"), []),
}


async def start_once(command: str, args: list[str], sandbox: bool) -> float:
    defn = define_connection(command=command, args=args, sandbox=sandbox).named("bench", None)
    start = time.perf_counter()
    async with open_client(defn):
        took = time.perf_counter() - start
    return took


async def bare_floor(runs: int) -> tuple[float, float]:
    """p50 (ms) of running `/bin/true` plainly and in the same sandbox (bwrap + prlimit, and as root the pids
    cgroup): what the sandbox adds before any server code runs."""
    defn = define_connection(command="/bin/true", sandbox=True).named("bench", None)
    sandbox = defn.sandboxed
    assert sandbox is not None
    plain: list[float] = []
    boxed: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        await anyio.run_process(["/bin/true"])
        plain.append(time.perf_counter() - start)
        start = time.perf_counter()
        async with sandboxed_command(sandbox, "/bin/true", [], cwd=str(ROOT), environ=os.environ) as (cmd, args):
            await anyio.run_process([cmd, *args])
        boxed.append(time.perf_counter() - start)
    return statistics.median(plain) * 1000, statistics.median(boxed) * 1000


async def main(runs: int) -> None:
    print(f"{runs} starts each way, spawn to initialized (ms); uid {os.geteuid()}, {os.cpu_count()} cores")
    print(f"{'server':<32}{'unsandboxed p50':>17}{'sandboxed p50':>15}{'added p50':>11}{'p90 un/sb':>17}")
    for name, (command, args) in SERVERS.items():
        await start_once(command, args, True)  # bubblewrap's one-off check, and warm file caches
        await start_once(command, args, False)
        plain: list[float] = []
        boxed: list[float] = []
        for _ in range(runs):
            plain.append(await start_once(command, args, False))
            boxed.append(await start_once(command, args, True))
        p50 = statistics.median(plain) * 1000, statistics.median(boxed) * 1000
        p90 = (statistics.quantiles(plain, n=10)[-1] * 1000, statistics.quantiles(boxed, n=10)[-1] * 1000)
        print(f"{name:<32}{p50[0]:>17.1f}{p50[1]:>15.1f}{p50[1] - p50[0]:>+11.1f}{p90[0]:>9.1f}/{p90[1]:<7.1f}")
    plain_true, boxed_true = await bare_floor(runs)
    print(f"{'/bin/true (no MCP)':<32}{plain_true:>17.1f}{boxed_true:>15.1f}{boxed_true - plain_true:>+11.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    anyio.run(main, parser.parse_args().runs)
