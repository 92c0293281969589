"""The official MCP conformance suite, client mode, `--suite auth`, against a client built on `oauth`."""

from __future__ import annotations

import os
import re
import sys

import anyio
import pytest

from tests.peers import ROOT, node22, node_module

pytestmark = [pytest.mark.anyio, pytest.mark.peers]


async def test_conformance_auth_suite_passes_every_scenario() -> None:
    suite = node_module("@modelcontextprotocol", "conformance", "dist", "index.js")
    adapter = ROOT / "tests" / "oauth" / "conformance_client.py"
    command = f"{sys.executable} {adapter}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with anyio.fail_after(110):
        done = await anyio.run_process(
            [str(node22()), str(suite), "client", "--command", command, "--suite", "auth"],
            cwd=ROOT,
            env=env,
            check=False,
        )
    output = done.stdout.decode()
    summary = output[output.rfind("=== SUITE SUMMARY ===") :]
    print(summary)
    scenarios = re.findall(r"^([✓✗]) (auth/\S+): (\d+) passed, (\d+) failed", summary, re.M)
    assert len(scenarios) >= 14, output[-3000:]
    failed = [name for mark, name, _, bad in scenarios if mark != "✓" or bad != "0"]
    assert failed == [], summary
    assert re.search(r"Total: \d+ passed, 0 failed, 0 warnings", summary), summary
    assert done.returncode == 0, summary


@pytest.mark.parametrize(
    "scenario",
    [
        "auth/resource-mismatch",
        "auth/2025-03-26-oauth-metadata-backcompat",
        "auth/2025-03-26-oauth-endpoint-fallback",
        "auth/client-credentials-basic",
        "auth/client-credentials-jwt",
    ],
)
async def test_conformance_scenarios_beyond_the_auth_suite(scenario: str) -> None:
    # resource-mismatch (draft): metadata naming another resource must stop the login before any
    # authorization request. metadata-backcompat: a 2025-03-26 server without resource metadata.
    # endpoint-fallback: a 2025-03-26 server with no metadata at all (default /authorize, /token,
    # /register). client-credentials-basic / -jwt: machine-to-machine with a secret or a signed assertion.
    suite = node_module("@modelcontextprotocol", "conformance", "dist", "index.js")
    command = f"{sys.executable} {ROOT / 'tests' / 'oauth' / 'conformance_client.py'}"
    with anyio.fail_after(60):
        done = await anyio.run_process(
            [str(node22()), str(suite), "client", "--command", command, "--scenario", scenario],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            check=False,
        )
    report = done.stderr.decode()
    assert "OVERALL: PASSED" in report, report[-3000:]
    assert re.search(r"Passed: \d+/\d+, 0 failed, 0 warnings", report), report[-3000:]
