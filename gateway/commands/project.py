"""`agent-sdk validate` and `agent-sdk info`: what the loader finds in a project."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from connections import Project, ProjectError, load_project
from connections.serving import check_account_servers, unset_variables

from ..errors import CliError
from ..info import add_undeclared, project_info
from ..limits import LimitsFileError, load_limit_rules
from ..policy import policy_diagnostics
from ._common import add_project_args
from ._online_check import online_diagnostics, sandbox_diagnostics, unchecked_connections, undeclared_capabilities
from ._progress import waiting

__all__ = ["info", "load", "register", "validate"]


def register(sub: argparse._SubParsersAction[Any]) -> None:  # pyright: ignore[reportPrivateUsage]
    p = sub.add_parser("validate", help="report every problem in the project; exit 1 on any error")
    add_project_args(p)
    p.add_argument("--strict", action="store_true", help="an unset ${VAR} the project reads is an error, not a warning")
    p.add_argument(
        "--online",
        action="store_true",
        help="also list the advertised connections: report upstream tools that collide or break the name rule",
    )
    p.set_defaults(func=validate)
    p = sub.add_parser("info", help="show the connections, tools and extensions the project defines")
    add_project_args(p)
    p.add_argument("--json", action="store_true", help="print the JSON document GET /v1/info serves")
    p.add_argument("--show-args", action="store_true", help="show stdio arguments too (known secrets still masked)")
    p.add_argument(
        "--offline",
        action="store_true",
        help="do not ask the servers of connections that advertise resources or prompts whether they offer them",
    )
    p.set_defaults(func=info)


def _undeclared_warnings(project: Project, args: argparse.Namespace, doc: dict[str, Any]) -> list[str]:
    """Ask the servers of connections that advertise resources or prompts whether they declare them (issue 34
    item 12); the sentences, also set in `doc`. A broker that cannot run is a note on stderr, not a failure."""
    if not any(d.advertise_resources or d.advertise_prompts for d in project.connections.values()):
        return []
    try:
        undeclared = undeclared_capabilities(project, args)
    except CliError as exc:
        print(f"agent-sdk: capabilities not checked: {exc}", file=sys.stderr)
        return []
    return add_undeclared(doc, undeclared)


def load(directory: str) -> Project:
    """Load the project or raise `CliError` with the reason."""
    try:
        return load_project(Path(directory))
    except ProjectError as exc:
        raise CliError(str(exc)) from None


def _limit_problems(root: Path) -> list[str]:
    """`agent/limits.toml`'s problems, one `path: error: ...` line each (docs/audit.md)."""
    try:
        load_limit_rules(root)
    except LimitsFileError as exc:
        return str(exc).splitlines()
    return []


def validate(args: argparse.Namespace) -> int:
    """Print `path:line: severity: message` for each diagnostic; 1 when any is an error."""
    project = load(args.dir)
    # Optional and cheap: with a hub configured, warn about servers=[...] names it does not list.
    with waiting("asking the account hub"):
        account = check_account_servers(project, os.environ)
    unset = unset_variables(project, os.environ, strict=args.strict)
    found = [*project.diagnostics, *policy_diagnostics(project.root), *unset, *account.warnings]
    if args.online and project.ok:
        found += sandbox_diagnostics(project, os.environ)
        found += online_diagnostics(project, args)
        if unchecked := unchecked_connections(project):
            print(f"not listed (per-session auth, listed per session): {', '.join(unchecked)}", file=sys.stderr)
    elif args.online:
        print("--online: fix the errors first; the connections were not listed", file=sys.stderr)
    for diag in found:
        print(diag.format(project.root))
    limit_errors = _limit_problems(project.root)
    for problem in limit_errors:
        print(problem)
    if account.skipped:
        print(account.skipped, file=sys.stderr)
    errors = sum(d.severity == "error" for d in found) + len(limit_errors)
    warnings = len(found) + len(limit_errors) - errors
    summary = (
        f"{len(project.connections)} connection(s), {len(project.tools)} tool(s); "
        f"{errors} error(s), {warnings} warning(s)"
    )
    print(summary, file=sys.stderr)
    return 1 if errors else 0


def info(args: argparse.Namespace) -> int:
    """Print the project's surface as a table, or as JSON with `--json`."""
    project = load(args.dir)
    doc = project_info(project, show_args=args.show_args)
    # Account connections show the connectors the hub resolves them to, when a hub answers quickly.
    with waiting("asking the account hub"):
        account = check_account_servers(project, os.environ, resolve_all=True)
    for entry in doc["connections"]:
        if entry["kind"] == "account":
            entry["connectors"] = (account.resolved or {}).get(entry["name"])
    if account.skipped and not args.json:
        print(
            account.skipped.replace("account servers not checked", "account connectors not resolved"), file=sys.stderr
        )
    warned = [] if args.offline else _undeclared_warnings(project, args, doc)
    for sentence in warned if not args.json else []:
        print(f"warning: {sentence}", file=sys.stderr)
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    print(f"agent {doc['agent']['name']}  ({doc['agent']['root']})")
    print("\nconnections:")
    if not doc["connections"]:
        print("  (none)")
    for c in doc["connections"]:
        flags = [
            f
            for f, on in (
                ("host-only", c["hostOnly"]),
                ("advertised", c["advertiseTools"]),
                ("oauth", c["oauth"]),
                ("auth", c["hasAuth"]),
                ("sandboxed", c.get("sandbox") is not None),
            )
            if on
        ]
        target = c.get("url") or " ".join([c.get("command") or "", *c.get("args", [])]).strip()
        if c["kind"] == "account":
            target = "servers: " + (c["servers"] if c["servers"] == "*" else ", ".join(c["servers"]))
            if c.get("connectors") is not None:
                target += " -> " + (", ".join(c["connectors"]) or "(none linked)")
        print(f"  {c['name']:<24} {c['kind']:<8} {target:<40} {' '.join(flags)}".rstrip())
        if c.get("sandbox") is not None:
            print(f"  {'':<24} sandbox: {c['sandbox']['summary']}")
    print("\ntools:")
    if not doc["tools"]:
        print("  (none)")
    for t in doc["tools"]:
        print(f"  {t['name']:<24} {t['effect'] or '-':<6} {t['description'].splitlines()[0][:60]}")
    if doc["extensions"]:
        print("\nextensions:")
        for e in doc["extensions"]:
            print(
                f"  {e['namespace']:<24} tools: {', '.join(e['tools']) or '-'}; "
                f"connections: {', '.join(e['connections']) or '-'}"
            )
    if project.diagnostics:
        print("\ndiagnostics:")
        for diag in project.diagnostics:
            print(f"  {diag.format(project.root)}")
    return 0
