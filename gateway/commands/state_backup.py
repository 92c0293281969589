"""`agent-sdk state-backup` and `agent-sdk state-restore`: a copy of the gateway's keys in the Redis of
`AGENT_SDK_STATE_URL`, and their restore (docs/deploy.md, "Backup and restore"; `gateway/state/backup.py`).

`agent-sdk state-backup --out FILE` writes every `agent-sdk:` key (mode 0600: it holds refresh tokens);
`agent-sdk state-restore FILE` puts them back into an empty database (`--replace` overwrites what is there).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from ..errors import CliError, StateUnavailable
from ..state.backup import BackupInvalid, dump_state, restore_state

__all__ = ["register"]

_URL_ENV = "AGENT_SDK_STATE_URL"


def register(sub: argparse._SubParsersAction[Any]) -> None:  # pyright: ignore[reportPrivateUsage]
    p = sub.add_parser("state-backup", help="copy the gateway's keys in Redis (AGENT_SDK_STATE_URL) to a file")
    p.add_argument("--out", required=True, metavar="FILE", help="the backup file to write (mode 0600)")
    p.set_defaults(func=state_backup)
    r = sub.add_parser("state-restore", help="put the keys of a state-backup file back into Redis")
    r.add_argument("backup", metavar="FILE", help="a file written by `agent-sdk state-backup`")
    r.add_argument("--replace", action="store_true", help="overwrite keys that are there (default: refuse)")
    r.set_defaults(func=state_restore)


def _url() -> str:
    url = os.environ.get(_URL_ENV, "").strip()
    if not url:
        raise CliError(f"set {_URL_ENV} to the replicas' Redis URL (redis://:PASSWORD@host:6379/0)")
    return url


def state_backup(args: argparse.Namespace) -> int:
    out = Path(args.out).expanduser()
    if not out.parent.is_dir():
        raise CliError(f"{out.parent} is not a folder; make it first (mkdir -p -m 700 {out.parent})")
    try:
        count = dump_state(_url(), out)
    except (StateUnavailable, OSError) as exc:
        raise CliError(
            str(exc) if isinstance(exc, StateUnavailable) else f"cannot write {out}: {exc.strerror}"
        ) from None
    print(f"backed up {count} keys to {out} (mode 0600: it holds OAuth refresh tokens)")
    return 0


def state_restore(args: argparse.Namespace) -> int:
    try:
        count = restore_state(_url(), Path(args.backup).expanduser(), replace=args.replace)
    except (StateUnavailable, BackupInvalid) as exc:
        raise CliError(str(exc)) from None
    print(f"restored {count} keys from {args.backup}")
    return 0
