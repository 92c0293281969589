"""`agent-sdk pin`: write, show, check and update `mcp.lock`, the reviewed definitions of every advertised
connection's tools, resources, resource templates and prompts (docs/connections.md, "The lock file").

- `pin` (and `pin --update [NAME]`) lists the connections, prints a unified diff of each definition that
  differs from the lock, and writes the lock once confirmed (a prompt on a terminal, `--yes` elsewhere);
  with no lock yet it writes one at once.
- `pin --check` lists and compares only: each drift on a line, exit 1 on any (for CI).
- `pin --show NAME` prints a pinned definition in full from the lock (`connection/item` or `item`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from connections import Broker, Project
from connections.serving import (
    LOCK_FILE,
    Drift,
    Lock,
    compare_pins,
    definition_diff,
    lock_of,
    pin_snapshot,
    pinnable,
    read_lock,
    write_lock,
)

from ..errors import CliError
from ..stores import STATE_URL_ENV
from ._broker_run import run_with_broker
from ._common import add_project_args
from .project import load

__all__ = ["pin", "register"]


def register(sub: argparse._SubParsersAction[Any]) -> None:  # pyright: ignore[reportPrivateUsage]
    p = sub.add_parser("pin", help="write mcp.lock: the reviewed definitions of every advertised connection")
    add_project_args(p)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="compare the live definitions with it; exit 1 on drift")
    mode.add_argument("--show", metavar="NAME", help="print a pinned definition in full (connection/item or item)")
    mode.add_argument(
        "--update",
        metavar="NAME",
        nargs="?",
        const="",
        help="show a diff of each changed definition, then rewrite the lock (one connection with NAME)",
    )
    p.add_argument("--yes", action="store_true", help="write the reviewed lock without asking")
    p.add_argument(
        "--principal",
        metavar="ID",
        help="list grants='per_principal' connections as this principal, with its own grant in --state-root "
        "(sign in through the gateway first; docs/connections.md, 'Pinning per-user connections')",
    )
    p.set_defaults(func=pin)


def pin(args: argparse.Namespace) -> int:
    """Run the `pin` mode `args` asks for; 0 when done and clean, 1 on drift (`--check`) or a refusal."""
    project = load(args.dir)
    path = project.root / LOCK_FILE
    previous = _read(path) if path.exists() else None
    if args.show is not None:
        if previous is None:
            raise CliError(f"there is no {LOCK_FILE} in {project.root}; run agent-sdk pin to write one")
        print(_show(previous, args.show))
        return 0
    names = _chosen(project, args.update or None)
    if args.check and previous is None:
        raise CliError(f"there is no {LOCK_FILE} in {project.root}; run agent-sdk pin, review it and commit it")

    async def listing(broker: Broker) -> Any:
        return await pin_snapshot(broker, names, args.principal)

    found = _listed(project, args, listing, len(names))
    if args.check:
        assert previous is not None
        changes = compare_pins(previous, found)
        for drift in changes:
            print(drift.sentence(full=True))
        missing = sorted(set(previous.connections) - {d.name for d in project.connections.values() if pinnable(d)})
        for name in missing:
            print(f"connection {name!r} is in {LOCK_FILE} but is not a pinned connection of this project")
        print(f"{LOCK_FILE}: {len(changes) + len(missing)} drift(s) in {len(names)} connection(s)", file=sys.stderr)
        return 1 if changes or missing else 0
    lock = lock_of(found, previous, names if args.update else None)
    changes = compare_pins(previous, found) if previous is not None else []
    for drift in changes:
        print(f"# {drift.sentence(full=True)}")
        if drift.before is not None or drift.after is not None:
            print(definition_diff(drift))
    if previous is not None and lock.text() == previous.text():
        print(f"{LOCK_FILE} is up to date ({len(names)} connection(s))", file=sys.stderr)
        return 0
    if previous is not None and not _confirmed(args, changes):
        return 1
    write_lock(path, lock)
    counts = sum(len(items) for entry in lock.connections.values() for items in entry.items.values())
    print(f"wrote {path} ({len(lock.connections)} connection(s), {counts} definition(s))", file=sys.stderr)
    return 0


def _listed(project: Project, args: argparse.Namespace, listing: Any, count: int) -> Any:
    try:
        return run_with_broker(project, args, listing, what=f"listing {count} connection(s)")
    except CliError as exc:
        if args.principal is None or os.environ.get(STATE_URL_ENV, "").strip() or "own sign-in" not in str(exc):
            raise
        raise CliError(
            f"{exc}. pin read the grants under --state-root; for replicas that share Redis, set {STATE_URL_ENV} "
            "(and the deployment's state key) as they have them"
        ) from None


def _read(path: Any) -> Lock:
    lock, problems = read_lock(path)
    if lock is None or problems:
        where = problems[0].format() if problems else str(path)
        raise CliError(f"{where}; fix it or delete it and run agent-sdk pin")
    return lock


def _chosen(project: Project, name: str | None) -> list[str]:
    pinned = sorted(n for n, d in project.connections.items() if pinnable(d))
    if name is None:
        return pinned
    if name not in pinned:
        why = "not defined" if name not in project.connections else "not advertise_tools, or pin=False"
        raise CliError(f"connection {name!r} is not pinned ({why}); pinned: {', '.join(pinned) or 'none'}")
    return [name]


def _confirmed(args: argparse.Namespace, changes: list[Drift]) -> bool:
    if args.yes:
        return True
    what = f"{len(changes)} change(s) above" if changes else "the listing"
    if not sys.stdin.isatty():
        print(f"{LOCK_FILE} not written: review {what} and run again with --yes", file=sys.stderr)
        return False
    answer = input(f"write {LOCK_FILE} with {what}? [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def _show(lock: Lock, name: str) -> str:
    # `connection/item` when the part before the first "/" is a pinned connection (an item may be a URI).
    head, _, rest = name.partition("/")
    connection, item = (head, rest) if rest and head in lock.connections else ("", name)
    found: list[tuple[str, str, str]] = []
    for conn, entry in sorted(lock.connections.items()):
        if connection and conn != connection:
            continue
        for kind, items in entry.items.items():
            if item in items:
                found.append((conn, kind, items[item]))
    if not found:
        raise CliError(f"{name!r} is not pinned in {LOCK_FILE}; give connection/item as the lock names it")
    if len(found) > 1:
        shown = ", ".join(f"{c}/{item} ({k})" for c, k, _ in found)
        raise CliError(f"{name!r} is pinned more than once: {shown}; give connection/item")
    conn, kind, digest = found[0]
    definition = lock.definitions.get(digest)
    if definition is None:
        raise CliError(f"{LOCK_FILE} holds the digest of {conn}/{item} but not its definition; run pin --update")
    head = f"# {conn} {kind} {item} sha256:{digest}"
    return head + "\n" + json.dumps(definition, indent=2, sort_keys=True, ensure_ascii=False)
