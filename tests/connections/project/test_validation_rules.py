"""Every validation rule of docs/connections.md, one fixture project each (tests/fixtures/projects/<rule>/).

Each case loads the project in-process and asserts the one diagnostic it must produce: file, line
(where the loader can know it), severity, stable code and the sentence the user reads. The same
projects go through the real `agent-sdk validate` in tests/gateway/commands/test_cli_project.py.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from connections import load_project

PROJECTS = Path(__file__).resolve().parents[2] / "fixtures" / "projects"

NAME_RULE_TEXT = "breaks the tool-name rule ^[A-Za-z0-9_-]{1,64}$ (1 to 64 letters, digits, '_' or '-')"
ADVERTISE_TEXT = (
    "is contradictory: advertising puts the tools in the model's toolset, host-only keeps them off the model; drop one"
)


@dataclass(frozen=True)
class Expected:
    path: str
    line: int | None
    severity: str
    code: str
    message: str


RULES: dict[str, Expected] = {
    "no-target": Expected(
        "agent/mcp-connections/empty.py", 3, "error", "exactly-one-target",
        "a connection needs exactly one of url=..., command=... or account=True; it sets none",
    ),
    "two-targets": Expected(
        "agent/mcp-connections/both.py", 3, "error", "exactly-one-target",
        "a connection needs exactly one of url=..., command=... or account=True; it sets url and command",
    ),
    "auth-needs-url": Expected(
        "agent/mcp-connections/local.py", 8, "error", "auth-needs-url",
        "auth=... only works on url connections (per-session headers are HTTP headers); remove auth or use url=...",
    ),
    "auth-with-oauth": Expected(
        "agent/mcp-connections/crm.py", 3, "error", "auth-with-oauth",
        "auth=... cannot be combined with oauth=...: the OAuth provider owns the Authorization header; "
        "keep one of them",
    ),
    "oauth-grant-unknown": Expected(
        "agent/mcp-connections/docs.py", 3, "error", "oauth-grant",
        "OAuthConfig(grant='token-exchange') is not a grant this gateway runs; use one of authorization_code, "
        "client_credentials, token_exchange, id_jag",
    ),
    "id-jag-without-idp-client": Expected(
        "agent/mcp-connections/docs.py", 3, "error", "oauth-grant-client",
        "OAuthConfig(grant='id_jag') needs idp_client_id=... and idp_client_secret_env=...: the gateway's "
        "client at the identity provider that issues the ID-JAGs",
    ),
    "oauth-needs-url": Expected(
        "agent/mcp-connections/files.py", 3, "error", "oauth-needs-url",
        "oauth=... needs url=...: OAuth protects remote servers only",
    ),
    "oauth-with-authorization-header": Expected(
        "agent/mcp-connections/linear.py", 3, "error", "oauth-with-authorization-header",
        "headers set Authorization on an oauth connection; the OAuth provider owns that header, remove it",
    ),
    "advertise-host-folder": Expected(
        "agent/host-connections/deploys.py", 3, "error", "advertise-host-only",
        f"advertise_tools=True in host-connections/ {ADVERTISE_TEXT}",
    ),
    "advertise-host-only": Expected(
        "agent/mcp-connections/admin.py", 3, "error", "advertise-host-only",
        f"advertise_tools=True with host_only=True {ADVERTISE_TEXT}",
    ),
    "bad-name": Expected(
        "agent/mcp-connections/my.server.py", None, "error", "bad-name",
        f"connection name 'my.server' {NAME_RULE_TEXT}; rename the file",
    ),
    "reserved-name": Expected(
        "agent/tools/ci__failed_jobs.py", None, "error", "bad-name",
        "tool name 'ci__failed_jobs' contains '__', which is reserved for extension namespaces; rename the file",
    ),
    "reserved-meta-tool": Expected(
        "agent/tools/mcp_call_tool.py", None, "error", "bad-name",
        "tool name 'mcp_call_tool' is reserved for the attached-connection meta-tools",
    ),
    "bad-namespace": Expected(
        "agent/extensions/ci__v2", None, "error", "bad-name",
        "extension namespace name 'ci__v2' contains '__', which is reserved for extension namespaces; "
        "rename the folder",
    ),
    "namespace-too-long": Expected(
        "agent/extensions/a_very_long_namespace_name_for_testing_limits/tools/and_a_fairly_long_tool_name.py",
        None, "error", "bad-name",
        "tool name 'a_very_long_namespace_name_for_testing_limits__and_a_fairly_long_tool_name' is 74 characters; "
        "the tool-name rule ^[A-Za-z0-9_-]{1,64}$ allows 64: shorten the file name or the extension folder",
    ),
    "duplicate-across-folders": Expected(
        "agent/host-connections/github.py", 3, "error", "duplicate-name",
        "connection 'github' is defined twice: here and in agent/mcp-connections/github.py; rename or remove one",
    ),
    "duplicate-with-mcp-json": Expected(
        "mcp.json", 3, "error", "duplicate-name",
        "connection 'memory' is defined twice: here and in agent/mcp-connections/memory.py; rename or remove one",
    ),
    "unknown-field": Expected(
        "agent/mcp-connections/search.py", 3, "error", "unknown-field",
        "unknown field 'uri' in define_connection(...); did you mean 'url'?",
    ),
    "unknown-tool-field": Expected(
        "agent/tools/lookup.py", 3, "error", "unknown-field",
        "unknown field 'efect' in define_tool(...); did you mean 'effect'?",
    ),
    "raises-on-import": Expected(
        "agent/mcp-connections/flaky.py", 7, "error", "import-error",
        "importing this file raised RuntimeError: FLAKY_TOKEN is not configured; "
        f"fix it (run `{sys.executable} flaky.py` in its folder to see the traceback)",
    ),
    "syntax-error": Expected(
        "agent/mcp-connections/broken.py", 4, "error", "import-error",
        "importing this file raised SyntaxError: invalid syntax. Perhaps you forgot a comma?; "
        f"fix it (run `{sys.executable} broken.py` in its folder to see the traceback)",
    ),
    "no-definition": Expected(
        "agent/mcp-connections/notes.py", None, "error", "no-definition",
        "defines no connection: add a module-level `connection = define_connection(...)` "
        "(from connections import define_connection)",
    ),
    "wrong-slot": Expected(
        "agent/mcp-connections/greet.py", None, "error", "wrong-slot",
        "defines a tool, but files in mcp-connections/ define a connection; move it",
    ),
    "many-definitions": Expected(
        "agent/mcp-connections/pair.py", None, "error", "many-definitions",
        "defines 2 connections; one file defines exactly one (split it: the file name is the name)",
    ),
    "bad-servers": Expected(
        "agent/mcp-connections/hub.py", 3, "error", "bad-servers",
        "field 'servers' must be a list of connector names or '*', got 'linear,notion'",
    ),
    "empty-servers": Expected(
        "agent/mcp-connections/hub.py", 3, "error", "bad-servers",
        "field 'servers' is an empty list; name at least one connector or use '*'",
    ),
    "linkable-account": Expected(
        "agent/mcp-connections/hub.py", 3, "error", "linkable-account",
        "linkable=True cannot be combined with account=True: a hub links connections that reach an upstream "
        "themselves; link the hub's own url or command connection instead",
    ),
    "linkable-with-auth": Expected(
        "agent/mcp-connections/tickets.py", 8, "error", "linkable-with-auth",
        "linkable=True cannot be combined with auth=...: a hub calls linked connectors with its own "
        "credentials, and an account has no session to compute per-session headers from; use headers or oauth",
    ),
    "linkable-bridge": Expected(
        "agent/mcp-connections/tools.py", 3, "error", "linkable-bridge",
        "bridge=True cannot be combined with linkable=True: accounts reach a linked connection from other "
        "machines, and the bridge secret must never reach them; drop one",
    ),
    "bridge-needs-command": Expected(
        "agent/mcp-connections/remote.py", 3, "error", "bridge-needs-command",
        "bridge=True hands the account bridge's URL and secret to a stdio child; it needs command=...",
    ),
    "servers-without-account": Expected(
        "agent/mcp-connections/docs.py", 3, "error", "servers-without-account",
        "field 'servers' only applies to account=True connections",
    ),
    "bad-url": Expected(
        "agent/mcp-connections/legacy.py", 3, "error", "bad-url",
        "field 'url' must be an http:// or https:// URL, got 'ftp://files.example.com/mcp'",
    ),
    "bad-transport": Expected(
        "agent/mcp-connections/events.py", 3, "error", "bad-field-type",
        "field 'transport' must be 'streamable-http' or 'sse', got 'websocket'",
    ),
    "bad-timeouts": Expected(
        "agent/mcp-connections/slow.py", 3, "error", "bad-field-type",
        "every timeout must be a positive number of seconds",
    ),
    "bad-log-level": Expected(
        "agent/mcp-connections/chatty.py", 3, "error", "bad-field-type",
        "field 'min_log_level' must be one of 'debug', 'info', 'notice', 'warning', 'error', 'critical', "
        "'alert', 'emergency', got 'verbose'",
    ),
    "headers-need-url": Expected(
        "agent/mcp-connections/local.py", 3, "error", "headers-need-url",
        "headers=... only apply to url connections; remove them or use url=...",
    ),
    "stdio-fields-need-command": Expected(
        "agent/mcp-connections/remote.py", 3, "error", "stdio-fields-need-command",
        "args only apply to command=... connections; remove them",
    ),
    "transport-needs-url": Expected(
        "agent/mcp-connections/local.py", 3, "error", "transport-needs-url",
        "transport='sse' only applies to url connections",
    ),
    "hardcoded-secret": Expected(
        "agent/mcp-connections/api.py", 3, "warning", "hardcoded-secret",
        "header 'Authorization' holds a literal value; read secrets from the environment instead, "
        'e.g. {"Authorization": "Bearer ${MY_TOKEN}"}',
    ),
    "allow-and-deny": Expected(
        "agent/mcp-connections/fs.py", 3, "warning", "allow-and-deny",
        "tool 'write' is in both allow_tools and deny_tools; deny wins, remove it from one list",
    ),
    "bad-effect": Expected(
        "agent/tools/archive.py", 3, "error", "bad-effect",
        "field 'effect' must be 'read' or 'write', got 'delete'",
    ),
    "missing-description": Expected(
        "agent/tools/archive.py", 3, "error", "missing-description",
        "define_tool(...) needs a non-empty description string",
    ),
    "bad-input-schema": Expected(
        "agent/tools/count.py", 3, "error", "bad-input-schema",
        "field 'input' must be a JSON Schema of type 'object'",
    ),
    "mcp-json-invalid": Expected(
        "mcp.json", 3, "error", "bad-json",
        "mcp.json is not valid JSON: Expecting property name enclosed in double quotes (column 33)",
    ),
    "mcp-json-no-servers": Expected(
        "mcp.json", 1, "error", "bad-mcp-json",
        'mcp.json must be an object with "mcpServers" (or VS Code\'s "servers") mapping each server name '
        'to {"command": ...} or {"url": ...}',
    ),
    "mcp-json-unknown-type": Expected(
        "mcp.json", 3, "error", "bad-mcp-json",
        "server 'remote': unknown type 'websocket'; use stdio, http or sse",
    ),
    "mcp-json-unknown-key": Expected(
        "mcp.json", 3, "warning", "unknown-field",
        "server 'memory': unknown key 'restart' ignored",
    ),
    "mcp-json-bad-name": Expected(
        "mcp.json", 3, "error", "bad-name",
        f"server name 'my server' {NAME_RULE_TEXT}; rename it in mcp.json",
    ),
    "mcp-json-vscode-input": Expected(
        "mcp.json", 4, "error", "unsupported-variable",
        "server 'github': header 'Authorization' reads a VS Code ${input:...} prompt, which agent-sdk cannot show; "
        "use ${env:VAR} (or ${VAR}) and export VAR",
    ),
    "bad-identity-bounds": Expected(
        "agent/mcp-connections/tickets.py", 3, "error", "bad-field-type",
        "field 'max_identities' must be a whole number of at least 1, got 0",
    ),
    "identity-bounds-without-auth": Expected(
        "agent/mcp-connections/tickets.py", 3, "warning", "identity-bounds-without-auth",
        "max_identities and identity_idle_timeout bound the clients kept per identity of an auth=... connection; "
        "this one has no auth callback, so they do nothing: remove them",
    ),
    "upstream-sessions-bad-value": Expected(
        "agent/mcp-connections/notes.py", 3, "error", "bad-field-type",
        "field 'upstream_sessions' must be 'shared' or 'per_principal', got 'per_peer'",
    ),
    "upstream-sessions-with-auth": Expected(
        "agent/mcp-connections/crm.py", 3, "warning", "upstream-sessions-with-auth",
        "upstream_sessions='per_principal' on a connection with auth=...: its upstream sessions are already one "
        "per identity (per set of headers auth returns); remove upstream_sessions",
    ),
    "grants-need-oauth": Expected(
        "agent/mcp-connections/linear.py", 3, "error", "grants-need-oauth",
        "grants='per_principal' needs oauth=True: each principal's own grant is an OAuth login; add oauth=True "
        "or remove grants",
    ),
    "unpinned-connection": Expected(
        "agent/mcp-connections/wiki.py", 3, "warning", "unpinned-connection",
        "connection 'wiki' is not in mcp.lock: serve holds back every tool it lists until you review them with "
        "agent-sdk pin --update wiki (or set pin=False)",
    ),
    "dpop-needs-oauth": Expected(
        "agent/mcp-connections/docs.py", 3, "error", "dpop-needs-oauth",
        "dpop=True binds the tokens of an OAuth grant to a key, and this connection has no oauth=...; add "
        "oauth=True or remove dpop",
    ),
    "dpop-bad-value": Expected(
        "agent/mcp-connections/docs.py", 3, "error", "bad-field-type",
        "field 'dpop' must be True, False or None (bind to DPoP only where the upstream asks), got 'yes'",
    ),
    "dpop-conflict": Expected(
        "agent/mcp-connections/docs.py", 3, "error", "dpop-conflict",
        "dpop=False contradicts OAuthConfig(dpop=True); set it in one place",
    ),
    "grants-with-client-credentials": Expected(
        "agent/mcp-connections/reports.py", 4, "error", "grants-with-client-credentials",
        "grants='per_principal' cannot be combined with OAuthConfig(grant='client_credentials'): a client "
        "credentials token is the deployment's own, not a person's; drop one",
    ),
    "grants-bad-value": Expected(
        "agent/mcp-connections/linear.py", 3, "error", "bad-field-type",
        "field 'grants' must be 'gateway' or 'per_principal', got 'per_user'",
    ),
    "upstream-sessions-account": Expected(
        "agent/mcp-connections/team.py", 3, "error", "upstream-sessions-account",
        "upstream_sessions='per_principal' cannot be combined with account=True: an account connection's sessions "
        "belong to its hub; set it on the hub's own url or command connection instead",
    ),
    "upstream-sessions-linkable": Expected(
        "agent/mcp-connections/notes.py", 3, "error", "upstream-sessions-linkable",
        "upstream_sessions='per_principal' cannot be combined with linkable=True: a hub calls a linked connector "
        "for accounts, not for this gateway's principals; drop one",
    ),
    "advertise-prompts-host-only": Expected(
        "agent/mcp-connections/admin.py", 3, "error", "advertise-host-only",
        "advertise_prompts=... with host_only=True is contradictory: advertising offers them to peers of "
        "/v1/mcp/tools, host-only keeps them to host.mcp; drop one",
    ),
    "advertise-resources-account": Expected(
        "agent/mcp-connections/team.py", 3, "error", "advertise-account-offerings",
        "advertise_resources=... is not supported on account=True connections yet; link the connector's own "
        "url or command connection and advertise there",
    ),
    "advertise-resources-with-auth": Expected(
        "agent/mcp-connections/crm.py", 3, "warning", "advertise-with-auth",
        "advertise_resources=... on a connection with auth=...: /v1/mcp/tools has no session to compute the "
        "headers from, so nothing of this connection is offered there (host.mcp still reaches it)",
    ),
    "empty-advertise-prompts": Expected(
        "agent/mcp-connections/docs.py", 3, "error", "empty-advertise-prompts",
        "field 'advertise_prompts' lists no prompt names (or an empty one); name at least one, or use True "
        "for all of them",
    ),
    "bad-uri-template": Expected(
        "agent/mcp-connections/files.py", 3, "error", "bad-uri-template",
        "advertise_resources entry 'file:///{a}{b}' is not an RFC 6570 URI template: Variables 'a' and 'b' "
        "are adjacent with no literal separator",
    ),
    "resource-allow-and-deny": Expected(
        "agent/mcp-connections/files.py", 3, "warning", "allow-and-deny",
        "resource 'file:///a' is in both advertise_resources and deny_resources; deny wins, remove it from one list",
    ),
    "stray-file": Expected(
        "agent/mcp-connections/README.md", None, "warning", "stray-file",
        "ignored: only <name>.py files are definitions in mcp-connections/; move it to agent/lib/",
    ),
    "empty-project": Expected(
        ".", None, "warning", "empty-project",
        "no agent/ folder and no mcp.json here; is --dir pointing at your agent project?",
    ),
}  # fmt: skip


def expected_line(rule: str) -> str:
    """The line `agent-sdk validate` prints for the rule's fixture."""
    e = RULES[rule]
    where = f"{e.path}:{e.line}" if e.line is not None else e.path
    return f"{where}: {e.severity}: {e.message}"


@pytest.mark.parametrize("rule", sorted(RULES))
def test_each_rule_reports_one_diagnostic_naming_file_line_and_fix(rule: str) -> None:
    project = load_project(PROJECTS / rule)
    found = [d.to_json(project.root) for d in project.diagnostics]
    e = RULES[rule]
    assert found == [{"path": e.path, "line": e.line, "severity": e.severity, "code": e.code, "message": e.message}]
    assert [d.format(project.root) for d in project.diagnostics] == [expected_line(rule)]


@pytest.mark.parametrize("rule", sorted(RULES))
def test_a_definition_with_an_error_is_left_out_and_blocks_serve(rule: str) -> None:
    project = load_project(PROJECTS / rule)
    broken = project.root / RULES[rule].path
    loaded = [c.source for c in project.connections.values()] + [t.source for t in project.tools.values()]
    if RULES[rule].severity == "error":
        assert not project.ok
        assert broken not in loaded
    else:
        assert project.ok


def test_every_fixture_project_has_a_rule() -> None:
    on_disk = {p.name for p in PROJECTS.iterdir() if p.is_dir()}
    assert on_disk - {"ten-broken", "extensions", "every-field"} == set(RULES)
