"""`agent-sdk state-key`: make the deployment's state key (docs/deploy.md, "The state key").

`agent-sdk state-key --out PATH` writes a new key to PATH (mode 0600; an existing file is never replaced),
for `serve --state-key-file PATH`; plain `agent-sdk state-key` prints one (and nothing else) for a secret
manager or `AGENT_SDK_STATE_KEY=$(agent-sdk state-key)`. Every replica of a deployment must get the same key.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import CliError
from ..state.state_key import StateKeyInvalid, new_state_key, write_state_key

__all__ = ["register", "state_key"]


def register(sub: argparse._SubParsersAction[Any]) -> None:  # pyright: ignore[reportPrivateUsage]
    p = sub.add_parser("state-key", help="make a state key for replicas (serve --state-key-file, AGENT_SDK_STATE_KEY)")
    p.add_argument(
        "--out",
        default=None,
        metavar="PATH",
        help="write the key to PATH (mode 0600, never replacing a file) instead of printing it",
    )
    p.set_defaults(func=state_key)


def state_key(args: argparse.Namespace) -> int:
    """Print a new key, or write it to `--out`. Raises `CliError` when the file cannot be written."""
    if args.out is None:
        print(new_state_key())
        return 0
    path = Path(args.out).expanduser()
    try:
        write_state_key(path)
    except StateKeyInvalid as exc:
        raise CliError(str(exc)) from None
    print(f"wrote a new state key to {path} (mode 0600); give every replica this file: serve --state-key-file {path}")
    return 0
