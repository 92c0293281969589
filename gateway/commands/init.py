"""`agent-sdk init [DIR]`: a new agent project that validates and serves as it is.

It holds a stdio connection (a small notes server shipped with it, needing nothing but the
`mcp` package) and an authored tool, each with comments pointing at the docs. It never
overwrites: a folder that already holds `agent/` or `mcp.json` is refused.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from ..errors import CliError
from ..scaffold import FILES, read

__all__ = ["init", "register"]


def register(sub: argparse._SubParsersAction[Any]) -> None:  # pyright: ignore[reportPrivateUsage]
    p = sub.add_parser("init", help="create a new agent project (a stdio connection and a tool) in DIR")
    p.add_argument("dir", nargs="?", default=".", help="the folder to create it in (default: .)")
    p.set_defaults(func=init)


def init(args: argparse.Namespace) -> int:
    """Write the scaffold into `args.dir`. Raises `CliError` when the folder already holds a project."""
    root = Path(args.dir).expanduser()
    taken = [name for name in ("agent", "mcp.json") if (root / name).exists()]
    if taken:
        raise CliError(
            f"{root} already holds {' and '.join(taken)}; init writes a new project only (pick an empty folder)"
        )
    if root.exists() and not root.is_dir():
        raise CliError(f"{root} is a file; pass a folder for the new project")
    try:
        for relative in FILES:
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(read(relative), encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write the project in {root}: {exc.strerror}") from None
    shown = os.path.relpath(root) if not root.is_absolute() else str(root)
    print(f"created an agent project in {shown}:")
    for relative in FILES:
        print(f"  {relative}")
    print(
        "next:\n"
        f"  agent-sdk validate --dir {shown}\n"
        f'  agent-sdk tools call greet --input \'{{"name": "Ada"}}\' --dir {shown}\n'
        f"  agent-sdk serve --dir {shown}            (or serve --stdio for a desktop client: docs/desktop-clients.md)"
    )
    return 0
