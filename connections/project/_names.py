"""The tool-name rule shared by connections, tools and extension namespaces."""

from __future__ import annotations

import re

__all__ = ["NAME_RULE", "check_name", "is_valid_tool_name"]

NAME_RULE = "^[A-Za-z0-9_-]{1,64}$"
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def is_valid_tool_name(name: str) -> bool:
    """True when `name` matches `^[A-Za-z0-9_-]{1,64}$` (namespaced names included)."""
    return _NAME.fullmatch(name) is not None


def check_name(name: str, what: str, fix: str = "rename the file") -> str | None:
    """Why `name` cannot name a connection, tool or namespace, or None when it can.

    `__` is reserved for extension namespaces (`<ns>__<name>`), so an authored name may not hold it.
    """
    if not is_valid_tool_name(name):
        return (
            f"{what} name {name!r} breaks the tool-name rule {NAME_RULE} (1 to 64 letters, digits, '_' or '-'); {fix}"
        )
    if "__" in name:
        return f"{what} name {name!r} contains '__', which is reserved for extension namespaces; {fix}"
    return None
