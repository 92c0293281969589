"""`agent-sdk mcp list|tools|call`: talk to one connection from the terminal."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register"]


def register(group: argparse._SubParsersAction[Any]) -> None:  # pyright: ignore[reportPrivateUsage]
    """Add `mcp list`, `mcp tools` and `mcp call` (built with the connection clients)."""
