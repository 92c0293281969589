"""`agent-sdk mcp list|tools|call` against real upstreams, and the one-sentence errors a user sees."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.cli import main
from tests.conftest import free_port
from tests.fixtures.upstreams.proctable import matching
from tests.peers import node_bin
from tests.processes import running

UPSTREAMS = Path(__file__).resolve().parents[2] / "fixtures" / "upstreams"


def write_connection(root: Path, folder: str, name: str, body: str) -> None:
    path = root / "agent" / folder / f"{name}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"from connections import define_connection\n\nconnection = define_connection({body})\n")


@pytest.fixture(scope="module")
def garbage_url() -> Iterator[str]:
    port = free_port()
    with running([sys.executable, str(UPSTREAMS / "bad_http.py"), "garbage", str(port)], port=port):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture
def project(tmp_path: Path, garbage_url: str) -> Path:
    everything = node_bin("mcp-server-everything")
    write_connection(tmp_path, "mcp-connections", "everything", f"command={str(everything)!r}, args=['stdio']")
    write_connection(tmp_path, "mcp-connections", "ghost", "command='/nonexistent/mcp-server'")
    write_connection(
        tmp_path,
        "host-connections",
        "refused",
        f"url='http://127.0.0.1:{free_port()}/mcp', headers={{'Authorization': 'Bearer ${{CLI_TEST_TOKEN}}'}}",
    )
    write_connection(tmp_path, "mcp-connections", "garbage", f"url={garbage_url!r}")
    return tmp_path


def test_mcp_list_prints_every_connection_without_secrets(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLI_TEST_TOKEN", "tok-do-not-print")
    assert main(["mcp", "list", "--dir", str(project), "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert sorted(rows) == ["everything", "garbage", "ghost", "refused"]
    assert rows["refused"]["hostOnly"] is True and rows["refused"]["kind"] == "http"
    assert rows["everything"]["timeouts"] == {"connect": 15.0, "list": 30.0, "call": 120.0}
    assert main(["mcp", "list", "--dir", str(project)]) == 0
    table = capsys.readouterr().out
    assert "refused" in table and "host-only" in table and "tok-do-not-print" not in table


@pytest.mark.peers
def test_mcp_tools_and_call_against_server_everything(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mcp", "tools", "everything", "--dir", str(project), "--json"]) == 0
    tools = {t["name"]: t for t in json.loads(capsys.readouterr().out)}
    assert tools["echo"]["annotations"]["readOnlyHint"] is True
    assert main(["mcp", "tools", "everything", "--dir", str(project)]) == 0
    assert "get-sum" in capsys.readouterr().out
    assert main(["mcp", "call", "everything", "get-sum", "--args", '{"a": 2, "b": 3}', "--dir", str(project)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert not result.get("isError") and "5" in result["content"][0]["text"]
    # The CLI's stdio child; a session fixture's `streamableHttp` upstream may run meanwhile.
    assert not matching(f"{node_bin('mcp-server-everything')} stdio")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["call", "ghost", "echo"], "connection 'ghost': cannot start '/nonexistent/mcp-server'"),
        (["tools", "refused"], "connection 'refused': cannot connect to http://127.0.0.1:"),
        (["tools", "garbage"], "connection 'garbage': opening the connection failed: the upstream's response is not"),
        (["call", "everything", "no-such-tool"], "connection 'everything': has no tool 'no-such-tool'"),
    ],
)
def test_mcp_failures_are_one_sentence_without_a_traceback(project: Path, argv: list[str], says: str) -> None:
    cmd = [sys.executable, "-c", "import sys; from gateway.cli import main; sys.exit(main())"]
    env_extra = {"CLI_TEST_TOKEN": "tok-do-not-print", "AGENT_SDK_DEBUG": "0"}
    proc = subprocess.run(
        [*cmd, "mcp", *argv, "--dir", str(project)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**_base_env(), **env_extra},
        cwd=Path(__file__).resolve().parents[3],
    )
    assert proc.returncode == 1, proc.stderr
    assert f"agent-sdk: error: {says}" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "tok-do-not-print" not in proc.stderr + proc.stdout
    # The CLI's stdio child; a session fixture's `streamableHttp` upstream may run meanwhile.
    assert not matching(f"{node_bin('mcp-server-everything')} stdio")


def _base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["call", "nowhere", "echo"], "connection 'nowhere': no such connection"),
        (["call", "everything", "echo", "--args", "[1]"], "--args must be a JSON object"),
        (["call", "everything", "echo", "--args", "{oops"], "--args is not valid JSON"),
    ],
)
def test_mcp_usage_errors_are_one_sentence(
    project: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    assert main(["mcp", *argv, "--dir", str(project)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"agent-sdk: error: {says}") and "Traceback" not in err
