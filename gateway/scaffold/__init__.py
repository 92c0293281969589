"""The project `agent-sdk init` writes: the files under `quickstart/`, copied as they are.

The repository's `examples/quickstart` (the README's first command serves it) is a link to that
folder, so the example and the scaffold are one set of files.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable

__all__ = ["FILES", "read"]

FILES = (
    "agent/mcp-connections/notes.py",
    "agent/tools/greet.py",
    "servers/notes_server.py",
    "mcp.lock",
)
"""Every file of the scaffold, relative to the project folder."""


def read(relative: str) -> str:
    """The text of one scaffold file (`relative` is one of `FILES`)."""
    node: Traversable = resources.files(__name__)
    for part in ("quickstart", *relative.split("/")):
        node = node / part
    return node.read_text(encoding="utf-8")
