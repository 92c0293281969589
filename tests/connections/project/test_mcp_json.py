"""`mcp.json` import, with files shaped as Claude Desktop, Cursor and VS Code write them."""

from __future__ import annotations

from pathlib import Path

from connections import load_project

# claude_desktop_config.json, as Claude Desktop's "Edit Config" writes it.
CLAUDE_DESKTOP = """{
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": [
        "-y",
        "@modelcontextprotocol/server-filesystem",
        "/Users/ada/Desktop"
      ]
    },
    "github": {
      "command": "docker",
      "args": ["run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/github-mcp-server"],
      "env": {
        "GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"
      }
    }
  }
}
"""

# .cursor/mcp.json: remote servers by url (+ headers), local ones by command.
CURSOR = """{
  "mcpServers": {
    "linear": {
      "url": "https://mcp.linear.app/mcp",
      "headers": {
        "Authorization": "Bearer ${env:LINEAR_API_KEY}"
      }
    },
    "legacy-events": {
      "url": "https://events.example.com/sse",
      "type": "sse"
    },
    "memory": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-memory"],
      "disabled": true
    }
  }
}
"""

# .vscode/mcp.json: "servers" with an explicit "type", plus "inputs" for prompts.
VSCODE = """{
  "inputs": [
    {"type": "promptString", "id": "perplexity-key", "description": "Perplexity API Key", "password": true}
  ],
  "servers": {
    "github": {
      "type": "http",
      "url": "https://api.githubcopilot.com/mcp/"
    },
    "fetch": {
      "type": "stdio",
      "command": "uvx",
      "args": ["mcp-server-fetch"],
      "envFile": "${workspaceFolder}/.env"
    }
  }
}
"""


def project_with(tmp_path: Path, text: str) -> Path:
    (tmp_path / "mcp.json").write_text(text)
    return tmp_path


def test_claude_desktop_command_args_env_become_stdio_connections(tmp_path: Path) -> None:
    project = load_project(project_with(tmp_path, CLAUDE_DESKTOP))
    assert project.diagnostics == []
    fs, gh = project.connections["filesystem"], project.connections["github"]
    assert (fs.kind, fs.command, fs.args) == (
        "stdio", "npx", ("-y", "@modelcontextprotocol/server-filesystem", "/Users/ada/Desktop")
    )  # fmt: skip
    assert (gh.kind, dict(gh.env)) == ("stdio", {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"})
    assert (fs.source, fs.line, gh.line) == (tmp_path / "mcp.json", 3, 11)


def test_cursor_url_and_headers_become_http_and_sse_connections(tmp_path: Path) -> None:
    project = load_project(project_with(tmp_path, CURSOR))
    assert project.diagnostics == []
    linear, events = project.connections["linear"], project.connections["legacy-events"]
    assert (linear.kind, linear.url, dict(linear.headers)) == (
        "http", "https://mcp.linear.app/mcp", {"Authorization": "Bearer ${env:LINEAR_API_KEY}"}
    )  # fmt: skip
    assert (events.kind, events.url) == ("sse", "https://events.example.com/sse")


def test_a_disabled_server_is_not_imported(tmp_path: Path) -> None:
    assert "memory" not in load_project(project_with(tmp_path, CURSOR)).connections


def test_vscode_servers_with_type_are_imported(tmp_path: Path) -> None:
    project = load_project(project_with(tmp_path, VSCODE))
    assert project.diagnostics == []
    assert project.connections["github"].kind == "http"
    fetch = project.connections["fetch"]
    assert (fetch.kind, fetch.command, fetch.args, fetch.line) == ("stdio", "uvx", ("mcp-server-fetch",), 10)


def test_mcp_json_connections_load_beside_folder_connections(tmp_path: Path) -> None:
    (tmp_path / "agent" / "host-connections").mkdir(parents=True)
    (tmp_path / "agent" / "host-connections" / "deploys.py").write_text(
        "from connections import define_connection\n\n"
        'connection = define_connection(url="https://deploy.example.com/mcp")\n'
    )
    project = load_project(project_with(tmp_path, CLAUDE_DESKTOP))
    assert sorted(project.connections) == ["deploys", "filesystem", "github"]


def test_an_entry_with_both_url_and_command_is_an_error_on_its_line(tmp_path: Path) -> None:
    text = '{\n  "mcpServers": {\n    "both": {"url": "https://x.example.com/mcp", "command": "x"}\n  }\n}\n'
    [diag] = load_project(project_with(tmp_path, text)).diagnostics
    assert (diag.line, diag.code) == (3, "exactly-one-target")
    assert diag.message.startswith("server 'both': a connection needs exactly one of url=..., command=...")


def test_the_line_is_the_servers_own_key_not_an_env_key_with_its_name(tmp_path: Path) -> None:
    text = (
        '{"mcpServers": {\n'
        '  "first": {"command": "x", "env": {"second": "1"}},\n'
        '  "second": {"command": "y", "args": [1]}\n'
        "}}\n"
    )
    [diag] = load_project(project_with(tmp_path, text)).diagnostics
    assert diag.line == 3
    assert diag.message == "server 'second': field 'args' must be a list of strings, got a list holding int 1"


def test_a_server_that_is_not_an_object_is_an_error(tmp_path: Path) -> None:
    [diag] = load_project(project_with(tmp_path, '{"mcpServers": {"x": "npx"}}')).diagnostics
    assert (diag.code, diag.message) == ("bad-mcp-json", "server 'x' must be an object with command or url")


def test_an_agent_sdk_key_in_an_entry_advertises_its_tools(tmp_path: Path) -> None:
    text = (
        '{"mcpServers": {\n'
        '  "time": {"command": "uvx", "args": ["mcp-server-time"],\n'
        '           "agent-sdk": {"advertiseTools": true, "denyTools": ["convert_time"], "timeouts": {"call": 5}}}\n'
        "}}\n"
    )
    project = load_project(project_with(tmp_path, text))
    assert project.diagnostics == []
    time = project.connections["time"]
    assert (time.advertise_tools, time.deny_tools, time.timeouts.call) == (True, frozenset({"convert_time"}), 5)


def test_a_bad_agent_sdk_key_is_an_error_naming_the_server_and_the_known_keys(tmp_path: Path) -> None:
    text = (
        '{"mcpServers": {\n'
        '  "a": {"command": "x", "agent-sdk": {"advertise": true}},\n'
        '  "b": {"command": "x", "agent-sdk": true},\n'
        '  "c": {"command": "x", "agent-sdk": {"advertiseTools": "yes"}}\n'
        "}}\n"
    )
    project = load_project(project_with(tmp_path, text))
    assert [(d.line, d.severity, d.message) for d in project.diagnostics] == [
        (2, "error", "server 'a': unknown key 'advertise' in \"agent-sdk\"; use advertisePrompts, "
         "advertiseResources, advertiseTools, allowTools, denyPrompts, denyResources, denyTools, description, dpop, "
         "grants, hostOnly, oauth, optional, pin, protocol, sandbox, timeouts, traceContent, upstreamSessions"),
        (3, "error", "server 'b': \"agent-sdk\" must be an object such as {\"advertiseTools\": true}"),
        (4, "error", "server 'c': field 'advertise_tools' must be True or False, got 'yes'"),
    ]  # fmt: skip
    assert project.connections == {}


def test_optional_and_dpop_in_an_agent_sdk_key_set_the_connection_and_a_bad_value_is_a_sentence(tmp_path: Path) -> None:
    text = (
        '{"mcpServers": {\n'
        '  "docs": {"url": "https://docs.example.com/mcp",\n'
        '           "agent-sdk": {"oauth": true, "dpop": false, "optional": true, "advertiseTools": true}},\n'
        '  "a": {"url": "https://a.example.com/mcp", "agent-sdk": {"optional": "yes"}},\n'
        '  "b": {"url": "https://b.example.com/mcp", "agent-sdk": {"oauth": true, "dpop": "always"}},\n'
        '  "c": {"url": "https://c.example.com/mcp", "agent-sdk": {"dpop": true}}\n'
        "}}\n"
    )
    project = load_project(project_with(tmp_path, text))
    assert [(d.line, d.code, d.message) for d in project.diagnostics] == [
        (4, "bad-field-type", "server 'a': field 'optional' must be True or False, got 'yes'"),
        (5, "bad-field-type", "server 'b': field 'dpop' must be True, False or None (bind to DPoP only where the "
         "upstream asks), got 'always'"),
        (6, "dpop-needs-oauth", "server 'c': dpop=True binds the tokens of an OAuth grant to a key, and this "
         "connection has no oauth=...; add oauth=True or remove dpop"),
    ]  # fmt: skip
    docs = project.connections["docs"]
    assert (docs.optional, docs.dpop, docs.oauth is not None and docs.oauth.dpop) == (True, False, False)
