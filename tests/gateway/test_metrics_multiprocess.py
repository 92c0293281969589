"""Processes sharing a host with `PROMETHEUS_MULTIPROC_DIR`: each counts into the shared files, and
any one's `/v1/metrics` rendering answers the sum over all of them (docs/operations.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[2]

# One process: count `n` turns of `outcome`, then print what its Metrics renders.
COUNT = """\
import sys
from gateway.metrics import Metrics
metrics = Metrics()
for _ in range(int(sys.argv[2])):
    metrics.turn_finished(sys.argv[1])
sys.stdout.write(metrics.render().decode())
"""


def run(folder: Path, outcome: str, n: int) -> str:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(folder), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", COUNT, outcome, str(n)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def turns(text: str) -> dict[str, float]:
    return {
        s.labels["outcome"]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "agent_sdk_turns_total"
    }


def test_processes_sharing_a_multiprocess_dir_are_summed(tmp_path: Path) -> None:
    run(tmp_path, "completed", 3)
    run(tmp_path, "failed", 2)
    last = run(tmp_path, "completed", 1)
    assert turns(last) == {"completed": 4.0, "failed": 2.0}
