"""`agent-sdk hub keys create|list|revoke`: the API keys accounts use to reach this hub (docs/accounts.md).

Keys live hashed in `<state root>/hub-keys.json` (mode 0600); `create` prints the key once, on
stdout, and nothing else ever shows it. A running `serve --hub` sees a revocation on its next request.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..accounts.hub_keys import HubKeyError
from ..accounts.routes import linkable_connections
from ..errors import CliError
from ..stores import hub_key_store
from ._common import add_project_args, state_root_of
from .project import load

__all__ = ["create_key", "list_keys", "register", "revoke_key"]


def register(sub: argparse._SubParsersAction[Any]) -> None:  # pyright: ignore[reportPrivateUsage]
    """Add the `hub` command group."""
    parser = sub.add_parser("hub", help="manage the API keys of accounts that use this gateway as their hub")
    group = parser.add_subparsers(dest="hub_command", metavar="SUBCOMMAND", required=True)
    keys = group.add_parser("keys", help="create, list and revoke hub API keys").add_subparsers(
        dest="keys_command", metavar="ACTION", required=True
    )

    create = keys.add_parser("create", help="make a key for an account; prints it once")
    add_project_args(create)
    create.add_argument("--account", required=True, help="the account the key belongs to")
    which = create.add_mutually_exclusive_group(required=True)
    which.add_argument("--connectors", help="comma-separated linkable connections the key may use")
    which.add_argument("--all", action="store_true", help="every linkable connection, now and later")
    create.add_argument("--json", action="store_true", help="print {id, account, connectors, created, key} as JSON")
    create.set_defaults(func=create_key)

    listing = keys.add_parser("list", help="every key's id, account, connectors and state (never the key)")
    add_project_args(listing)
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=list_keys)

    revoke = keys.add_parser("revoke", help="revoke a key by id; a serving hub refuses it from the next request")
    add_project_args(revoke)
    revoke.add_argument("id", help="the key id (hk_...), from hub keys list")
    revoke.set_defaults(func=revoke_key)


def create_key(args: argparse.Namespace) -> int:
    """Make a key; connectors must be linkable connections of the project in `--dir`."""
    connectors: tuple[str, ...] | None = None
    if not args.all:
        connectors = tuple(c.strip() for c in str(args.connectors).split(",") if c.strip())
        if not connectors:
            raise CliError("--connectors names no connection; pass names separated by commas, or --all")
        project = load(args.dir)
        linkable = linkable_connections(project)
        unknown = [c for c in connectors if c not in linkable]
        if unknown:
            raise CliError(
                f"not linkable in {project.root.name}: {', '.join(unknown)}; linkable connections are "
                f"{', '.join(linkable) or 'none (mark one with define_connection(..., linkable=True))'}"
            )
    try:
        record, key = hub_key_store(state_root_of(args)).create(args.account, connectors)
    except HubKeyError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print(json.dumps({**record.to_json(), "key": key.reveal()}))
    else:
        print(key.reveal())
        scope = "all linkable connectors" if connectors is None else ", ".join(connectors)
        print(
            f"created {record.id} for account {record.account!r} ({scope}); the key above is shown only now",
            file=sys.stderr,
        )
    return 0


def list_keys(args: argparse.Namespace) -> int:
    """One line (or JSON object) per key: id, account, connectors, created, revoked."""
    try:
        records = hub_key_store(state_root_of(args)).list()
    except HubKeyError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print(json.dumps([r.to_json() for r in records], indent=2))
        return 0
    if not records:
        print("no hub keys; make one with agent-sdk hub keys create --account NAME --all")
    for r in records:
        connectors = "*" if r.connectors is None else ",".join(r.connectors)
        state = f"revoked {r.revoked}" if r.revoked else "active"
        print(f"{r.id}  {r.account:<20} {connectors:<30} created {r.created}  {state}")
    return 0


def revoke_key(args: argparse.Namespace) -> int:
    """Revoke one key (idempotent)."""
    try:
        record = hub_key_store(state_root_of(args)).revoke(args.id)
    except HubKeyError as exc:
        raise CliError(str(exc)) from None
    print(f"revoked {record.id} (account {record.account!r}) at {record.revoked}")
    return 0
