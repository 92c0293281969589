"""The `agent-sdk` command line: a thin layer over the programmatic API.

Every command is a function in `gateway.commands.*` that the tests can call; this module only
parses arguments, runs the command and turns a `CliError` (or any other failure) into one
sentence on stderr and an exit code. No traceback reaches a user unless `AGENT_SDK_DEBUG=1`. Once
`serve --log-format json` made the log JSON, that sentence is one JSON object too (`logs.tell`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from importlib import metadata
from typing import NoReturn

from connections.serving import redact

from .commands import register_all
from .errors import CliError
from .logs import tell

__all__ = ["build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    """argparse, except that a usage error never echoes a value back (a key typed as an argument)."""

    def error(self, message: str) -> NoReturn:
        head, sep, rest = message.partition("unrecognized arguments: ")
        if sep:  # flags by name, values hidden: `login --key ask_...` must not print the key
            shown = [a.split("=", 1)[0] if a.startswith("-") else "…" for a in rest.split(" ")]
            message = f"{head}unrecognized arguments: {' '.join(shown)} (values are not shown)"
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {redact(message)}\n")


def build_parser() -> argparse.ArgumentParser:
    """The full `agent-sdk` argument parser."""
    parser = _Parser(
        prog="agent-sdk",
        description="MCP gateway and connection broker: load connections, log in, serve tools to peer agents.",
    )
    parser.add_argument("--version", action="version", version=f"agent-sdk {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    register_all(sub)
    return parser


def _version() -> str:
    try:
        return metadata.version("agent-sdk")
    except metadata.PackageNotFoundError:  # run from a checkout without installing
        return "unknown (not installed; pip install -e .)"


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the process exit code (also used as `sys.exit` by the console script)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args.func(args)
    except CliError as exc:
        tell(f"agent-sdk: error: {redact(str(exc))}", event="error", level=logging.ERROR)
        return exc.exit_code
    except KeyboardInterrupt:
        tell("agent-sdk: interrupted", event="interrupted", level=logging.WARNING)
        return 130
    except Exception as exc:  # boundary: a bug must still reach the user as a sentence
        if os.environ.get("AGENT_SDK_DEBUG") == "1":
            raise
        tell(
            f"agent-sdk: internal error ({type(exc).__name__}); rerun with AGENT_SDK_DEBUG=1 for the traceback "
            "and report it",
            event="internal_error",
            level=logging.ERROR,
        )
        return 70
    return int(code or 0)


def entrypoint() -> None:  # pragma: no cover - console script shim
    sys.exit(main())
