"""`agent/policies.cedar`: checked against the shipped schema by `validate` and `serve` (each error as
`path:line: error: ...`), compiled once, reloaded on change (a failing reload keeps the old policy, one
log line), and decided by Cedar (`cedarpy`) with the entity and action names docs/policy.md fixes."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.auth.chain import Principal
from gateway.auth.oauth_tokens import OAuthIdentity
from gateway.cli import main
from gateway.policy import PolicyError, PolicyGate, connection_target, prompt_target, resource_target, tool_target

from ..conftest import ROOT, make_project

# Every name the issue fixes, in one file the validator must accept against the shipped schema.
CONTRACT = """\
@id("readers")
permit(
  principal,
  action in [AgentSdk::Action::"tools/list", AgentSdk::Action::"tools/call"],
  resource
) when { principal.groups.contains("readers") && resource is AgentSdk::Tool && resource.readOnly };

@id("tenant-connection")
permit(principal, action == AgentSdk::Action::"tools/call", resource is AgentSdk::Tool)
when { principal.hasTag("tenant") && resource.connection == principal.getTag("tenant") };

permit(principal == AgentSdk::Principal::"bearer:3f2a9c1b7d40", action == AgentSdk::Action::"resources/read",
       resource == AgentSdk::Resource::"demo://resource/static/document/architecture.md");
permit(principal, action == AgentSdk::Action::"prompts/get", resource == AgentSdk::Prompt::"simple-prompt");
permit(principal, action == AgentSdk::Action::"completion/complete", resource is AgentSdk::Prompt);
permit(principal, action == AgentSdk::Action::"session/turn", resource);

@id("no-destruction")
forbid(principal, action == AgentSdk::Action::"tools/call", resource)
when { resource.destructive && !(principal.scopes.contains("tools:write")) };
"""


class _Tool:
    """The fields of a `TurnTool` an entity is made of."""

    def __init__(self, name: str, connection: str | None, annotations: dict[str, object] | None = None) -> None:
        self.name, self.connection, self.annotations = name, connection, annotations


def _oauth(tenant: str, groups: list[str], scopes: set[str]) -> Principal:
    identity = OAuthIdentity(
        issuer="https://idp.example",
        subject="alice",
        scopes=frozenset(scopes),
        client_id="cli",
        claims={"tenant": tenant, "groups": groups, "nested": {"x": 1}},
        audiences=frozenset(),
        expires=0.0,
    )
    return Principal(identity.id, "oauth", oauth=identity)


def _project(tmp_path: Path, policy: str) -> Path:
    root = make_project(tmp_path / "project")
    (root / "agent" / "policies.cedar").write_text(policy)
    return root


def test_the_contracts_names_validate_and_decide(tmp_path: Path) -> None:
    gate = PolicyGate.for_project(_project(tmp_path, CONTRACT))
    reader = _oauth("crm", ["readers"], set())
    read_only = tool_target(_Tool("get-env", "crm", {"readOnlyHint": True, "destructiveHint": False}))  # pyright: ignore[reportArgumentType]
    wipe = tool_target(_Tool("wipe", "crm", {"destructiveHint": True}))  # pyright: ignore[reportArgumentType]
    other = tool_target(_Tool("echo", "billing", {"destructiveHint": False}))  # pyright: ignore[reportArgumentType]

    allowed = gate.decide(reader, "tools/call", read_only)
    assert allowed.allowed and set(allowed.policies) == {"readers", "tenant-connection"}
    denied = gate.decide(reader, "tools/call", wipe)  # the tenant's connection, but destructive: forbid wins
    assert not denied.allowed and denied.policies == ("no-destruction",)
    assert gate.decide(_oauth("crm", [], {"tools:write"}), "tools/call", wipe).allowed
    nothing = gate.decide(reader, "tools/call", other)  # another tenant's connection: the default deny
    assert not nothing.allowed and nothing.policies == ()

    named = Principal("bearer:3f2a9c1b7d40", "bearer")
    document = resource_target("demo://resource/static/document/architecture.md")
    assert gate.decide(named, "resources/read", document).policies == ("policies.cedar:12",)
    assert not gate.decide(Principal("bearer:000000000000", "bearer"), "resources/read", document).allowed
    assert gate.decide(named, "prompts/get", prompt_target("simple-prompt")).allowed
    assert not gate.decide(named, "prompts/get", prompt_target("args-prompt")).allowed
    assert gate.decide(named, "session/turn").allowed
    assert not gate.decide(named, "console/restart", connection_target("crm")).allowed


def test_no_policy_file_allows_everything_without_deciding(tmp_path: Path) -> None:
    gate = PolicyGate.for_project(make_project(tmp_path / "project"))
    decision = gate.decide(Principal("anonymous", "anonymous"), "tools/call", resource_target("x://y"))
    assert decision.allowed and not decision.enforced


SYNTAX = """\
permit(principal, action == AgentSdk::Action::"tools/list", resource);

// a comment; with a semicolon and "a quote
permit(
  principal,
  action == AgentSdk::Action::"tools/call",
  resource
) when { resource.connection == };
"""
SCHEMA = """\
permit(principal, action == AgentSdk::Action::"tools/list", resource);
permit(principal, action == AgentSdk::Action::"tools/call", resource)
  when { resource.conection == "crm" };
@id("typo")
permit(principal, action == AgentSdk::Action::"tool/call", resource);
"""


def test_validate_names_each_bad_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _project(tmp_path / "syntax", SYNTAX)
    assert main(["validate", "--dir", str(root)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == ["agent/policies.cedar:8: error: policy does not parse: unexpected token `}`"]

    root = _project(tmp_path / "schema", SCHEMA)
    assert main(["validate", "--dir", str(root)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("agent/policies.cedar:2: error: attribute `conection` on entity type `AgentSdk::Tool`")
    assert out[1].startswith('agent/policies.cedar:4: error: unrecognized action `AgentSdk::Action::"tool/call"`')
    assert all(": error: " in line and "Traceback" not in line for line in out)


def test_serve_refuses_a_bad_policy_naming_the_line(tmp_path: Path) -> None:
    root = _project(tmp_path, SCHEMA)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--dir", str(root), "--port", "0", "--state-root", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode != 0
    assert "agent/policies.cedar:2: error: attribute `conection`" in done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_a_reload_swaps_the_policy_and_a_failing_one_keeps_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = _project(tmp_path, 'permit(principal, action == AgentSdk::Action::"tools/list", resource);\n')
    gate = PolicyGate.for_project(root)
    who = Principal("loopback", "loopback", "operator")
    assert gate.decide(who, "tools/list").allowed
    assert not gate.decide(who, "session/turn").allowed
    path = root / "agent" / "policies.cedar"

    path.write_text('permit(principal, action == AgentSdk::Action::"session/turn", resource);\n')
    assert gate.reload()
    assert gate.decide(who, "session/turn").allowed and not gate.decide(who, "tools/list").allowed

    caplog.set_level(logging.INFO, logger="agent_sdk.policy")
    caplog.clear()
    path.write_text('permit(principal, action == AgentSdk::Action::"tools/list", resource)\nwhen { principal.nope };\n')
    assert not gate.reload()
    assert gate.decide(who, "session/turn").allowed, "the failing file must not replace the policy in force"
    assert [r.getMessage() for r in caplog.records] == [
        "policy reload failed, the previous policy stays in force: "
        f"{path}:1: error: attribute `nope` on entity type `AgentSdk::Principal` not found (the schema: docs/policy.md)"
    ]
    assert not gate.reload()  # unchanged since: not read again, not logged again
    assert len(caplog.records) == 1


def test_a_principal_with_claims_the_schema_lacks_is_decided(tmp_path: Path) -> None:
    gate = PolicyGate.for_project(_project(tmp_path, CONTRACT))
    odd = _oauth("crm", ["readers", 7], set())  # pyright: ignore[reportArgumentType]  # a number among the groups
    tool = _Tool("t", "crm", {"readOnlyHint": True, "destructiveHint": False})
    assert gate.decide(odd, "tools/call", tool_target(tool)).allowed  # pyright: ignore[reportArgumentType]


def test_a_bad_policy_raises_with_its_diagnostics(tmp_path: Path) -> None:
    root = _project(tmp_path, "permit(principal, action, resource)")  # no `;`
    with pytest.raises(PolicyError) as caught:
        PolicyGate.for_project(root)
    assert [d.line for d in caught.value.diagnostics] == [1]


def test_every_example_in_the_docs_validates(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "policy.md").read_text()
    examples = re.findall(r"```cedar\n(.*?)```", text, re.S)
    assert len(examples) >= 6
    for i, example in enumerate(examples):
        PolicyGate.for_project(_project(tmp_path / str(i), example))  # raises PolicyError naming the line
