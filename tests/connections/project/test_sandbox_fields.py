"""`sandbox=` on a stdio connection and in mcp.json: the grants resolved against the project folder, and a
sentence for each bad value (docs/connections.md, "Sandboxed stdio servers")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from connections import define_connection, load_project


def test_mcp_json_sandbox_grants_are_resolved_against_the_project_folder(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    servers = {
        "boxed": {"command": "true", "agent-sdk": {"sandbox": {"writable": ["data"], "maxProcesses": 8}}},
        "plain": {"command": "true"},
    }
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    project = load_project(tmp_path)
    assert project.ok, project.diagnostics
    sandbox = project.connections["boxed"].sandboxed
    assert sandbox is not None and sandbox.writable == (str((tmp_path / "data").resolve()),)
    assert sandbox.max_processes == 8 and sandbox.network is False
    assert project.connections["plain"].sandboxed is None


def test_a_grant_that_does_not_exist_is_an_error_naming_it(tmp_path: Path) -> None:
    servers = {"boxed": {"command": "true", "agent-sdk": {"sandbox": {"writable": ["missing"]}}}}
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    [diag] = load_project(tmp_path).errors
    assert diag.code == "bad-sandbox"
    assert diag.message == (
        "server 'boxed': sandbox grants 'missing', which does not exist (resolved against the project folder); "
        "create it or remove it from the grant"
    )


def test_bad_sandbox_values_are_problems_with_a_sentence() -> None:
    values: list[Any] = ["yes", {"writeable": ["a"]}, {"writable": "a"}, {"max_processes": 0}, {"network": "on"}]
    said = {str(value): [p.message for p in define_connection(command="x", sandbox=value).problems] for value in values}
    assert said == {
        "yes": [
            "field 'sandbox' must be True, False, a Sandbox(...) or a dict of writable, readable, hidden, network, "
            "max_processes, max_open_files, max_memory_mb; got str"
        ],
        "{'writeable': ['a']}": [
            "unknown sandbox field 'writeable'; sandbox takes writable, readable, hidden, network, max_processes, "
            "max_open_files, max_memory_mb"
        ],
        "{'writable': 'a'}": ["sandbox 'writable' must be a list of paths"],
        "{'max_processes': 0}": ["sandbox 'max_processes' must be a whole number of at least 1, got 0"],
        "{'network': 'on'}": ["sandbox 'network' must be True or False"],
    }


def test_sandbox_on_a_url_connection_is_an_error(tmp_path: Path) -> None:
    servers = {"remote": {"url": "https://example.com/mcp", "agent-sdk": {"sandbox": True}}}
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    [diag] = load_project(tmp_path).errors
    assert diag.message == "server 'remote': sandbox only apply to command=... connections; remove them"
