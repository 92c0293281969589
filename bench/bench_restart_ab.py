"""Restart to health of two checkouts in one run, 100 against 10,000 stored sessions, starts alternating.

    git worktree add /tmp/base <commit>
    .venv/bin/python bench/bench_restart_ab.py --base /tmp/base              # 7 rounds, ~4 min on a busy box
    .venv/bin/python bench/bench_restart_ab.py --base /tmp/base --rounds 11

Two state roots (100 and 10,000 one-turn sessions, written through this checkout's file store, as
`bench_sessions.py` writes them) are shared by both checkouts; each round starts `agent-sdk serve`
of the base checkout (A) and of this one (B) on each root, one after the other, and stops it once
`/v1/health` answers 200. Printed per checkout and size: the median wall time from the process's
start to health and the median CPU time (user + system) the process used until then, and the
10,000 / 100 ratio of each. The base reads whatever of the state root it understands (a checkout
without the session index ignores `session-index.ndjson`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_sessions import cpu_s, populate, wait_healthy  # noqa: E402
from harness import free_port, wait_port  # noqa: E402

SIZES = (100, 10_000)


def start_once(tree: Path, project: Path, state: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) from `serve`'s start to its first 200 on `/v1/health`."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SDK_")}
    cmd = [sys.executable, "-c", "from gateway.cli import entrypoint; entrypoint()", "serve", "--dir", str(project)]
    cmd += ["--port", str(port), "--state-root", str(state)]
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd, env={**env, "PYTHONPATH": str(tree)}, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_port(port, proc, "agent-sdk serve")
        wall = wait_healthy(f"http://127.0.0.1:{port}", started)
        return wall, cpu_s(proc.pid)
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", type=Path, required=True, help="checkout to compare against (A)")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    trees = {"A (base)": args.base.resolve(), "B (this)": ROOT}
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        (project / "agent").mkdir(parents=True)
        states = {n: Path(tmp) / f"state-{n}" for n in SIZES}
        for n, state in states.items():
            anyio.run(populate, state, n, 1)
        times: dict[tuple[str, int], list[tuple[float, float]]] = {(t, n): [] for t in trees for n in SIZES}
        for _ in range(args.rounds):
            for n in SIZES:
                for name, tree in trees.items():
                    times[(name, n)].append(start_once(tree, project, states[n]))
    print("| checkout | wall, 100 | wall, 10,000 | ratio | CPU, 100 | CPU, 10,000 | ratio |")
    print("|---|---|---|---|---|---|---|")
    for name in trees:
        wall = [statistics.median(w for w, _ in times[(name, n)]) for n in SIZES]
        cpu = [statistics.median(c for _, c in times[(name, n)]) for n in SIZES]
        print(
            f"| {name} | {wall[0]:.2f} s | {wall[1]:.2f} s | {wall[1] / wall[0]:.2f} | "
            f"{cpu[0]:.2f} s | {cpu[1]:.2f} s | {cpu[1] / cpu[0]:.2f} |"
        )


if __name__ == "__main__":
    os.environ.pop("AGENT_SDK_STATE_URL", None)
    main()
