"""One module per command group; each exposes `register(subparsers)`."""

from __future__ import annotations

import argparse
from typing import Any

from . import hub, login, mcp, project, serve

__all__ = ["register_all"]


def register_all(sub: argparse._SubParsersAction[Any]) -> None:  # pyright: ignore[reportPrivateUsage]
    """Add every command to the top-level parser."""
    project.register(sub)
    serve.register(sub)
    mcp.register(sub)
    hub.register(sub)
    login.register(sub)
