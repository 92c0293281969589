"""`${VAR}` expansion for header and env values and stdio `args`, done when a client opens (never at load time).

VS Code and Cursor expand `${VAR}` in `args` too, so an imported `mcp.json` means the same here."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from .._exceptions import EnvironmentVariableMissing
from .._redact import remember_secret

__all__ = ["expand_args", "expand_map", "references"]

# `${VAR}` as in shells and Claude Desktop; `${env:VAR}` as VS Code writes mcp.json.
_REF = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}")


def references(value: str) -> list[str]:
    """The environment variable names `value` reads."""
    return _REF.findall(value)


def expand_map(connection: str, what: str, values: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """Each value with its `${VAR}` references replaced from `environ`.

    Raises `EnvironmentVariableMissing` naming the connection, the key and the variable (never a value).
    """
    out: dict[str, str] = {}
    for key, value in values.items():

        def sub(match: re.Match[str], key: str = key) -> str:
            name = match.group(1)
            if name not in environ:
                raise EnvironmentVariableMissing(connection, name, f"{what} {key!r}")
            remember_secret(environ[name])  # a value read for a header or env is masked in every message
            return environ[name]

        out[key] = _REF.sub(sub, value)
    return out


def expand_args(connection: str, args: Sequence[str], environ: Mapping[str, str]) -> list[str]:
    """Each stdio argument with its `${VAR}` references replaced from `environ`.

    Raises `EnvironmentVariableMissing` naming the connection, the argument's index and the variable.
    """
    expanded = expand_map(connection, "argument", {f"args[{i}]": a for i, a in enumerate(args)}, environ)
    return list(expanded.values())
