"""`agent-sdk mcp ...`: debug a connection (list, tools, call, resources, read, prompts, prompt) and log in
to one (oauth)."""

from __future__ import annotations

import argparse
from typing import Any

from . import mcp_debug, mcp_oauth, mcp_offerings

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[Any]) -> None:  # pyright: ignore[reportPrivateUsage]
    """Add the `mcp` command group."""
    parser = sub.add_parser("mcp", help="inspect, call and log in to MCP connections")
    group = parser.add_subparsers(dest="mcp_command", metavar="SUBCOMMAND", required=True)
    mcp_debug.register(group)
    mcp_offerings.register(group)
    mcp_oauth.register(group)
