"""Reading `agent/policies.cedar`: compiled once against the shipped schema, or every error with its line.

Cedar's parser and validator name a policy (`policy3`) but not a line, so the file is cut into its
statements here (at each `;` outside a string or a `//` comment) to give each error the line it is
on: a parse error the line where the policy stops parsing, a validation error the line its policy
starts on. A policy's id in a decision is its `@id("...")` annotation, else `policies.cedar:<line>`.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import cedarpy

from connections import Diagnostic

__all__ = ["POLICY_FILE", "CompiledPolicy", "PolicyError", "compile_policy", "policy_diagnostics", "schema_text"]

POLICY_FILE = Path("agent") / "policies.cedar"
"""Where a project holds its policy, relative to the project root."""
_EOF = "unexpected end of input"


def schema_text() -> str:
    """The Cedar schema shipped in the package for the gateway's entity types and actions."""
    return resources.files("gateway.policy").joinpath("agent_sdk.cedarschema").read_text(encoding="utf-8")


_SCHEMA: list[cedarpy.Schema] = []


def _schema() -> cedarpy.Schema:
    if not _SCHEMA:
        _SCHEMA.append(cedarpy.Schema.from_str(schema_text()))
    return _SCHEMA[0]


@dataclass(frozen=True, slots=True)
class CompiledPolicy:
    """A policy file parsed and validated once: the Cedar set and the shown id of each Cedar policy id."""

    path: Path
    policies: cedarpy.PolicySet
    names: dict[str, str]
    count: int


class PolicyError(Exception):
    """A policy file that does not parse or does not match the schema; `diagnostics` name each line."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        super().__init__("; ".join(d.format() for d in diagnostics))
        self.diagnostics = diagnostics


@dataclass(frozen=True, slots=True)
class _Statement:
    line: int
    """The line the statement starts on (1-based)."""
    text: str


def _statements(text: str) -> list[_Statement]:
    """`text` cut at each `;` outside strings and `//` comments; each piece with its first line."""
    out: list[_Statement] = []
    start, line, first = 0, 1, 0
    i, n = 0, len(text)
    in_string = False
    while i < n:
        ch = text[i]
        if in_string:
            if ch == "\\":
                i += 1
            elif ch == '"':
                in_string = False
            elif ch == "\n":
                line += 1
        elif ch == '"':
            in_string = True
            first = first or line
        elif ch == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif ch == "\n":
            line += 1
        elif ch == ";":
            out.append(_Statement(first or line, text[start : i + 1]))
            start, first = i + 1, 0
        elif not ch.isspace():
            first = first or line
        i += 1
    if first:  # text after the last `;`: a policy missing its end (the parser says so)
        out.append(_Statement(first, text[start:]))
    return out


def _parse_error_line(statement: _Statement) -> int:
    """The line of `statement` where Cedar stops parsing it: the first prefix of lines that fails for a
    reason other than running out of input."""
    lines = statement.text.split("\n")
    offset = (
        statement.line - 1 - next(i for i, ln in enumerate(lines) if ln.strip() and not ln.strip().startswith("//"))
    )
    for k in range(1, len(lines) + 1):
        try:
            cedarpy.PolicySet.from_str("\n".join(lines[:k]))
        except ValueError as exc:
            if str(exc) != _EOF:
                return offset + k
    return offset + len(lines)


def _diag(path: Path, line: int | None, message: str, code: str) -> Diagnostic:
    return Diagnostic(path=path, line=line, severity="error", message=message, code=code)


def compile_policy(path: Path) -> CompiledPolicy:
    """The policy file at `path` parsed and validated against the schema. Raises `PolicyError` naming
    each error's line (an unreadable file too)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError([_diag(path, None, f"cannot read the policy file: {exc}", "policy-unreadable")]) from None
    statements = _statements(text)
    problems: list[Diagnostic] = []
    for statement in statements:
        try:
            cedarpy.PolicySet.from_str(statement.text)
        except ValueError as exc:
            problems.append(_diag(path, _parse_error_line(statement), f"policy does not parse: {exc}", "policy-syntax"))
    if problems:
        raise PolicyError(problems)
    policies = cedarpy.PolicySet.from_str(text)
    if len(policies) != len(statements):  # the cut disagrees with Cedar's parse: no line can be trusted
        raise PolicyError([_diag(path, None, "policy file could not be split into policies", "policy-syntax")])
    result = cedarpy.validate_policies(text, _schema())
    for error in result.errors:
        index = _index(error.policy_id)
        line = statements[index].line if index is not None and index < len(statements) else None
        message = error.error.removeprefix(f"for policy `{error.policy_id}`, ")
        problems.append(_diag(path, line, f"{message} (the schema: docs/policy.md)", "policy-schema"))
    if problems:
        raise PolicyError(problems)
    names = {f"policy{i}": f"{path.name}:{s.line}" for i, s in enumerate(statements)}
    names.update(_annotations(policies))
    return CompiledPolicy(path=path, policies=policies, names=names, count=len(statements))


def _index(policy_id: str) -> int | None:
    digits = policy_id.removeprefix("policy")
    return int(digits) if digits.isdigit() else None


def _annotations(policies: cedarpy.PolicySet) -> dict[str, str]:
    """Each policy's `@id("...")`, where it has one."""
    found: dict[str, str] = {}
    tree = policies.to_pst()
    for policy in [*tree.static_policies.values(), *tree.templates.values()]:
        value = policy.annotations.get("id")
        if value:
            found[policy.id] = value
    return found


def policy_diagnostics(root: Path) -> list[Diagnostic]:
    """What `agent-sdk validate` and `serve` report for a project's policy file (nothing when it has none)."""
    path = root / POLICY_FILE
    if not path.exists():
        return []
    try:
        compile_policy(path)
    except PolicyError as exc:
        return exc.diagnostics
    return []
