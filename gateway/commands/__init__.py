"""One module per command group; each exposes `register(subparsers)`."""

from __future__ import annotations

import argparse
from typing import Any

from . import audit, hub, init, login, mcp, pin, project, serve, state_backup, state_key, tools

__all__ = ["register_all"]


def register_all(sub: argparse._SubParsersAction[Any]) -> None:  # pyright: ignore[reportPrivateUsage]
    """Add every command to the top-level parser."""
    init.register(sub)
    project.register(sub)
    pin.register(sub)
    serve.register(sub)
    mcp.register(sub)
    tools.register(sub)
    hub.register(sub)
    login.register(sub)
    state_key.register(sub)
    audit.register(sub)
    state_backup.register(sub)
