"""The project `agent-sdk init` writes (the same files as the repository's `examples/quickstart`).

Kept as files beside this module, copied as they are: what a user reads in a fresh project is what
is here. A test keeps `examples/quickstart` equal to them.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable

__all__ = ["FILES", "read"]

FILES = (
    "agent/mcp-connections/notes.py",
    "agent/tools/greet.py",
    "servers/notes_server.py",
)
"""Every file of the scaffold, relative to the project folder."""


def read(relative: str) -> str:
    """The text of one scaffold file (`relative` is one of `FILES`)."""
    node: Traversable = resources.files(__name__)
    for part in ("files", *relative.split("/")):
        node = node / part
    return node.read_text(encoding="utf-8")
