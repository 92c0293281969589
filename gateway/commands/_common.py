"""Arguments shared by several commands; each flag maps to an `AGENT_SDK_*` environment variable."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from ..errors import CliError

__all__ = ["add_project_args", "json_object_arg", "state_root_of"]


def add_project_args(parser: argparse.ArgumentParser) -> None:
    """`--dir` (the agent project, `AGENT_SDK_DIR`) and `--state-root` (`AGENT_SDK_STATE_ROOT`)."""
    parser.add_argument(
        "--dir",
        default=os.environ.get("AGENT_SDK_DIR", "."),
        help="the agent project folder (holds agent/ and mcp.json); default: . or $AGENT_SDK_DIR",
    )
    parser.add_argument(
        "--state-root",
        default=os.environ.get("AGENT_SDK_STATE_ROOT"),
        help="where sessions and mcp-auth.json live; default: <dir>/.agent-sdk or $AGENT_SDK_STATE_ROOT",
    )


def state_root_of(args: argparse.Namespace) -> Path:
    """The state root a command should use: `--state-root`, else `<dir>/.agent-sdk`."""
    if args.state_root:
        return Path(args.state_root).expanduser().resolve()
    return (Path(args.dir) / ".agent-sdk").resolve()


def json_object_arg(text: str, flag: str, example: str) -> dict[str, Any]:
    """A flag's value parsed as a JSON object. Raises `CliError` naming the flag and showing `example`."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"{flag} is not valid JSON ({exc.msg} at position {exc.pos})") from None
    if not isinstance(value, dict):
        raise CliError(f"{flag} must be a JSON object, e.g. '{example}'")
    return value
