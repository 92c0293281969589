"""`agent-sdk validate` and `agent-sdk info` through the installed console script, as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.cli import main
from tests.connections.project.test_validation_rules import PROJECTS, RULES, expected_line

ROOT = Path(__file__).resolve().parents[3]
AGENT_SDK = Path(sys.executable).parent / "agent-sdk"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(AGENT_SDK), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        check=False,
    )
    assert "Traceback" not in result.stdout + result.stderr
    return result


@pytest.mark.parametrize("rule", sorted(RULES))
def test_validate_command_prints_each_rules_diagnostic(rule: str, capsys: pytest.CaptureFixture[str]) -> None:
    # In-process for every rule (the command function the console script calls); the real script
    # runs below on the projects where a subprocess can show more (import errors, mcp.json, warnings).
    code = main(["validate", "--dir", str(PROJECTS / rule)])
    out, err = capsys.readouterr()
    assert out.splitlines() == [expected_line(rule)]
    assert "Traceback" not in out + err
    assert code == (1 if RULES[rule].severity == "error" else 0)


@pytest.mark.parametrize(
    "rule",
    ["raises-on-import", "syntax-error", "mcp-json-invalid", "bad-namespace", "unknown-field", "hardcoded-secret"],
)
def test_validate_script_prints_the_diagnostic_and_no_traceback(rule: str) -> None:
    result = run("validate", "--dir", str(PROJECTS / rule))
    assert result.stdout.splitlines() == [expected_line(rule)]
    assert result.returncode == (1 if RULES[rule].severity == "error" else 0)


def test_validate_reports_all_ten_broken_files_in_one_run() -> None:
    result = run("validate", "--dir", str(PROJECTS / "ten-broken"))
    lines = result.stdout.splitlines()
    assert result.returncode == 1
    assert len(lines) == 10
    assert all(": error: " in line for line in lines)
    assert len({line.split(":", 1)[0] for line in lines}) == 10
    assert "10 error(s), 0 warning(s)" in result.stderr


def test_validate_on_the_quickstart_passes() -> None:
    result = run("validate", "--dir", str(ROOT / "examples" / "quickstart"))
    assert result.returncode == 0
    assert result.stdout == ""
    assert "1 connection(s), 1 tool(s); 0 error(s), 0 warning(s)" in result.stderr


def test_validate_on_a_missing_folder_is_one_sentence(tmp_path: Path) -> None:
    result = run("validate", "--dir", str(tmp_path / "nope"))
    assert result.returncode == 1
    assert result.stderr.startswith("agent-sdk: error: project folder ")
    assert "does not exist; pass --dir with your agent project" in result.stderr


def test_info_json_describes_the_quickstart() -> None:
    result = run("info", "--dir", str(ROOT / "examples" / "quickstart"), "--json")
    assert result.returncode == 0
    doc = json.loads(result.stdout)
    assert [(c["name"], c["kind"], c["advertiseTools"]) for c in doc["connections"]] == [("notes", "stdio", True)]
    assert [(t["name"], t["effect"]) for t in doc["tools"]] == [("greet", "read")]
    assert doc["diagnostics"] == []


def test_info_table_lists_connections_and_tools() -> None:
    result = run("info", "--dir", str(ROOT / "examples" / "quickstart"))
    assert result.returncode == 0
    assert "notes" in result.stdout and "stdio" in result.stdout and "advertised" in result.stdout
    assert "greet" in result.stdout and "Greet someone by name." in result.stdout


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_info_never_shows_a_header_value_a_query_secret_or_an_env_value(tmp_path: Path) -> None:
    write(
        tmp_path / "agent" / "mcp-connections" / "crm.py",
        "from connections import define_connection\n\n"
        "connection = define_connection(\n"
        '    url="https://user:pw-in-url@crm.example.com/mcp?api_key=query-secret",\n'
        '    headers={"Authorization": "Bearer ${CRM_TOKEN}", "X-Team": "team-value"},\n'
        ")\n",
    )
    write(
        tmp_path / "mcp.json",
        json.dumps({"mcpServers": {"db": {"command": "db-server", "env": {"DB_PASSWORD": "env-secret"}}}}),
    )
    result = run("info", "--dir", str(tmp_path), "--json", env={"CRM_TOKEN": "token-secret"})
    assert result.returncode == 0
    for secret in ("pw-in-url", "query-secret", "token-secret", "team-value", "env-secret", "${CRM_TOKEN}"):
        assert secret not in result.stdout
    doc = json.loads(result.stdout)
    crm = next(c for c in doc["connections"] if c["name"] == "crm")
    assert crm["url"] == "https://crm.example.com/mcp?*"  # the query is there, its values are not
    assert crm["headers"] == ["Authorization", "X-Team"]


def test_a_definition_file_that_prints_does_not_break_info_json(tmp_path: Path) -> None:
    write(
        tmp_path / "agent" / "mcp-connections" / "chatty.py",
        "from connections import define_connection\n\n"
        'print("loading chatty")\n'
        'connection = define_connection(url="https://chatty.example.com/mcp")\n',
    )
    result = run("info", "--dir", str(tmp_path), "--json")
    assert json.loads(result.stdout)["connections"][0]["name"] == "chatty"
    assert "loading chatty" in result.stderr


def test_info_lists_diagnostics_without_failing(tmp_path: Path) -> None:
    result = run("info", "--dir", str(PROJECTS / "ten-broken"), "--json")
    assert result.returncode == 0
    assert len(json.loads(result.stdout)["diagnostics"]) == 10
