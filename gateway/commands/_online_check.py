"""`agent-sdk validate --online`: list the advertised upstreams and report what would fail a turn.

Offline validation reads the definition files only, so it cannot see an upstream tool that collides
with an authored one (or with another connection's), an upstream tool name that breaks the tool-name
rule, or a connection that cannot be listed at all. `--online` builds the session-less toolset as
`serve` would (the same `TurnBuilder.collect`) and turns each problem into a diagnostic on the
connection's definition file: the turn-failing ones as errors, a connection that could not be listed
as a warning (its tools were not checked). A connection that advertises resources or prompts while
its server offers none (it declares no such capability) is a warning too: `serve` offers nothing for it.
Connections with per-session `auth` are listed per session and are not checked here.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path

import anyio

from connections import Broker, Diagnostic, Project, Toolset, TurnProblem
from connections.serving import element_lines, sandbox_unavailable, unmatched

from ..info import undeclared_warning
from ._broker_run import run_with_broker

__all__ = ["online_diagnostics", "sandbox_diagnostics", "unchecked_connections", "undeclared_capabilities"]

_TOOL_PROBLEMS = {"collision": "tool-collision", "invalid_tool_name": "invalid-upstream-tool-name"}


def unchecked_connections(project: Project) -> list[str]:
    """Advertised connections `--online` cannot list without a session (per-session `auth`)."""
    return sorted(d.name for d in project.connections.values() if d.advertise_tools and d.auth is not None)


def sandbox_diagnostics(project: Project, environ: Mapping[str, str]) -> list[Diagnostic]:
    """Say (on stderr) which stdio connections are sandboxed and how; an error on each when bubblewrap cannot
    sandbox them here (they would fail closed under `serve`)."""
    sandboxed = {n: s for n, d in sorted(project.connections.items()) if (s := d.sandboxed) is not None}
    if not sandboxed:
        return []
    for name, sandbox in sandboxed.items():
        print(f"sandboxed: {name}: {sandbox.describe()}", file=sys.stderr)
    problem = anyio.run(sandbox_unavailable, environ)
    if problem is None:
        return []
    return [
        Diagnostic(*_place(project, name), "error", f"connection {name!r}: {problem}", "sandbox-unavailable")
        for name in sandboxed
    ]


def online_diagnostics(project: Project, args: argparse.Namespace) -> list[Diagnostic]:
    """List every advertised connection now; one diagnostic per problem a turn would fail on.

    Raises `CliError` (from `run_with_broker`) only when the broker itself cannot run."""

    async def collect(broker: Broker) -> tuple[Toolset, list[TurnProblem], dict[str, list[str]]]:
        toolset, problems = await broker.builder.collect(None)
        broker.offerings.warn_undeclared = False  # a diagnostic here, not a log line
        undeclared = await broker.offerings.undeclared()
        return toolset, problems, {name: list(kinds) for name, kinds in undeclared.items()}

    toolset, problems, undeclared = run_with_broker(project, args, collect, what="listing the advertised connections")
    found = [_diagnostic(project, p) for p in problems]
    found += [_undeclared(project, name, kinds) for name, kinds in undeclared.items()]
    return found + _unmatched_entries(project, toolset, problems)


def _unmatched_entries(project: Project, toolset: Toolset, problems: list[TurnProblem]) -> list[Diagnostic]:
    """An entry of a curated server's `tools` that picks no tool of the listing (docs/curated-servers.md);
    a connection that could not be listed, or is listed per session, is not judged."""
    unlisted = {p.connection for p in problems if p.connection is not None} | set(unchecked_connections(project))
    out: list[Diagnostic] = []
    for server in project.servers.values():
        if server.source is None:
            continue
        lines = element_lines(server.source, server.line)
        for entry in unmatched(server, toolset, unlisted):
            out.append(
                Diagnostic(
                    server.source,
                    lines.get(entry.where, server.line),
                    "error",
                    f"{entry.where} picks no tool: no listed tool matches it (the tools listed now are "
                    f"{sorted(toolset.names())[:20]}); fix its connection, name or annotation",
                    "unmatched-selector",
                )
            )
    return out


def undeclared_capabilities(project: Project, args: argparse.Namespace) -> dict[str, list[str]]:
    """Connection -> the kinds (resources, prompts) it advertises that its server does not declare, asking
    only the connections that advertise them (`agent-sdk info`). Raises `CliError` when the broker cannot run."""

    async def collect(broker: Broker) -> dict[str, list[str]]:
        broker.offerings.warn_undeclared = False  # said by the caller, not as a log line
        return {name: list(kinds) for name, kinds in (await broker.offerings.undeclared()).items()}

    return run_with_broker(project, args, collect, what="asking the servers what they offer")


def _undeclared(project: Project, name: str, kinds: list[str]) -> Diagnostic:
    path, line = _place(project, name)
    return Diagnostic(path, line, "warning", undeclared_warning(name, kinds), "undeclared-capability")


def _place(project: Project, name: str | None) -> tuple[Path, int | None]:
    """The definition file and line of connection `name` (`mcp.json` when it has none)."""
    defn = project.connections.get(name or "")
    path = defn.source if defn is not None and defn.source is not None else project.root / "mcp.json"
    return Path(path), defn.line if defn is not None else None


def _diagnostic(project: Project, problem: TurnProblem) -> Diagnostic:
    path, line = _place(project, problem.connection)
    who = f"connection {problem.connection!r}"
    if problem.tool is not None:
        code = _TOOL_PROBLEMS.get(problem.code, problem.code.replace("_", "-"))
        return Diagnostic(path, line, "error", f"{who}: upstream tool {problem.tool!r}: {problem.message}", code)
    return Diagnostic(
        path,
        line,
        "warning",
        f"{who} could not be listed, so its tools were not checked: {problem.message}",
        "listing-failed",
    )
