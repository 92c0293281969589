"""`agent-sdk mcp oauth NAME [--store | --status | --logout]`: PKCE login for an oauth connection."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register"]


def register(group: argparse._SubParsersAction[Any]) -> None:  # pyright: ignore[reportPrivateUsage]
    """Add `mcp oauth` (built on the `oauth` package)."""
