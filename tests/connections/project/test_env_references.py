"""`${VAR}` references: expanded in stdio `args` (as VS Code and Cursor do), and every one that is
unset in the current environment reported by `validate` (a warning; an error with `--strict`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from connections import Broker, EnvironmentVariableMissing, load_project
from connections.serving import unset_variables
from tests.peers import py_peer

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[3]


def time_project(tmp_path: Path) -> Path:
    (tmp_path / "mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "time": {
                        "command": str(py_peer("mcp-server-time")),
                        "args": ["--local-timezone", "${TEST_TZ}"],
                        "env": {"TZ_HINT": "${env:TZ_HINT_19}"},
                    }
                }
            }
        )
    )
    return tmp_path


async def test_a_variable_in_stdio_args_reaches_the_server_expanded(tmp_path: Path) -> None:
    project = load_project(time_project(tmp_path))
    env = {**os.environ, "TEST_TZ": "Asia/Tokyo", "TZ_HINT_19": "x"}
    async with Broker(project, environ=env) as broker:
        result = await broker.pool.call_tool("time", "get_current_time", {"timezone": "Asia/Tokyo"})
        # The server refuses an unknown --local-timezone at start: it started, so it got "Asia/Tokyo".
        listed = await broker.pool.list_tools("time")
    assert not result.get("isError") and "Asia/Tokyo" in json.dumps(result)  # the pool's one JSON result
    assert "get_current_time" in [t.name for t in listed]


async def test_an_unset_variable_in_args_fails_the_connection_naming_it(tmp_path: Path) -> None:
    project = load_project(time_project(tmp_path))
    env = {k: v for k, v in os.environ.items() if k != "TEST_TZ"} | {"TZ_HINT_19": "x"}
    async with Broker(project, environ=env) as broker:
        with pytest.raises(EnvironmentVariableMissing) as missing:
            await broker.pool.list_tools("time")
    assert str(missing.value) == (
        "connection 'time': argument 'args[1]' reads ${TEST_TZ}, but TEST_TZ is not set; "
        "export TEST_TZ before starting agent-sdk"
    )


def test_unset_variables_lists_each_one_with_its_place(tmp_path: Path) -> None:
    project = load_project(time_project(tmp_path))
    found = unset_variables(project, {"TZ_HINT_19": "x"})
    assert [(d.line, d.severity, d.code, d.message) for d in found] == [
        (1, "warning", "unset-variable", "connection 'time': argument args[1] reads ${TEST_TZ}, which is not set "
         "in this environment; export TEST_TZ before agent-sdk serve (until then every use of 'time' fails)"),
    ]  # fmt: skip
    assert unset_variables(project, {"TZ_HINT_19": "x", "TEST_TZ": "UTC"}) == []


def validate(project: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TEST_TZ", "TZ_HINT_19")}
    return subprocess.run(
        [sys.executable, "-m", "gateway", "validate", "--dir", str(project), *flags],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(ROOT)},
        timeout=60,
        check=False,
    )


def test_validate_warns_for_every_unset_variable_and_strict_makes_them_errors(tmp_path: Path) -> None:
    project = time_project(tmp_path)
    loose = validate(project)
    assert loose.returncode == 0, loose.stderr
    assert loose.stdout.splitlines() == [
        "mcp.json:1: warning: connection 'time': env 'TZ_HINT' reads ${TZ_HINT_19}, which is not set in this "
        "environment; export TZ_HINT_19 before agent-sdk serve (until then every use of 'time' fails)",
        "mcp.json:1: warning: connection 'time': argument args[1] reads ${TEST_TZ}, which is not set in this "
        "environment; export TEST_TZ before agent-sdk serve (until then every use of 'time' fails)",
    ]
    strict = validate(project, "--strict")
    assert strict.returncode == 1
    assert strict.stdout.count(": error: connection 'time':") == 2
    assert "2 error(s), 0 warning(s)" in strict.stderr
