"""`agent/limits.toml`: the project's rate limits and quotas, one `[[limit]]` table each (docs/audit.md).

[[limit]]
rate = "60/minute"             # the `limits` package's notation: "N/second|minute|hour|day", "N per M hours"
per = ["principal", "tool"]    # what one counter is kept for: any of principal, tool, connection
tools = ["echo"]               # optional: only calls of these tools
connections = ["everything"]   # optional: only calls of these connections' tools
principals = ["bearer:3f2a"]   # optional: only these principals' calls
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from limits import RateLimitItem, parse

__all__ = ["LIMITS_FILE", "LimitRule", "LimitsFileError", "load_limit_rules"]

LIMITS_FILE = Path("agent") / "limits.toml"
_KEYS = ("principal", "tool", "connection")
_FIELDS = {"rate", "per", "tools", "connections", "principals"}


class LimitsFileError(ValueError):
    """`agent/limits.toml` is not what it must be; `str(exc)` is `path: error: ...` lines, one per problem."""


@dataclass(frozen=True, slots=True)
class LimitRule:
    """One `[[limit]]`: a rate, the dimensions it counts per, and the calls it applies to."""

    index: int
    text: str
    item: RateLimitItem
    per: tuple[str, ...]
    tools: frozenset[str] | None = None
    connections: frozenset[str] | None = None
    principals: frozenset[str] | None = None

    def applies(self, principal: str, tool: str, connection: str | None) -> bool:
        return (
            (self.tools is None or tool in self.tools)
            and (self.connections is None or (connection is not None and connection in self.connections))
            and (self.principals is None or principal in self.principals)
        )

    def identifiers(self, principal: str, tool: str, connection: str | None) -> tuple[str, ...]:
        """The counter's key: the rule's index, then each `per` dimension's value."""
        values = {"principal": principal, "tool": tool, "connection": connection or ""}
        return (f"limit{self.index}", *(f"{k}={values[k]}" for k in self.per))


def _names(where: str, key: str, value: object, problems: list[str]) -> frozenset[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        problems.append(f'{where}: {key} must be a list of names, e.g. {key} = ["echo"]')
        return None
    return frozenset(value)


def _rule(index: int, table: Any, problems: list[str]) -> LimitRule | None:
    where = f"limit {index + 1}"
    if not isinstance(table, dict):
        problems.append(f"{where}: each [[limit]] must be a table")
        return None
    entry: dict[str, Any] = table
    unknown = sorted(set(entry) - _FIELDS)
    if unknown:
        problems.append(f"{where}: unknown field(s) {', '.join(unknown)}; a limit has {', '.join(sorted(_FIELDS))}")
    rate = entry.get("rate")
    item: RateLimitItem | None = None
    if not isinstance(rate, str):
        problems.append(f'{where}: rate is missing; write it as rate = "60/minute" (or "1000 per 1 day")')
    else:
        try:
            item = parse(rate)
        except ValueError:
            problems.append(f'{where}: rate {rate[:40]!r} is not a rate; write it as "60/minute" or "1000 per 1 day"')
    per = entry.get("per", ["principal", "tool"])
    if isinstance(per, str):
        per = [per]
    if not isinstance(per, list) or not per or any(p not in _KEYS for p in per):
        problems.append(f"{where}: per must name one or more of {', '.join(_KEYS)}")
        per = ["principal", "tool"]
    tools = _names(where, "tools", entry.get("tools"), problems)
    connections = _names(where, "connections", entry.get("connections"), problems)
    principals = _names(where, "principals", entry.get("principals"), problems)
    if item is None:
        return None
    ordered = tuple(k for k in _KEYS if k in per)
    return LimitRule(index, rate, item, ordered, tools, connections, principals)  # pyright: ignore[reportArgumentType]


def load_limit_rules(root: Path) -> tuple[LimitRule, ...]:
    """The rules of the project at `root` (none without the file). Raises `LimitsFileError` naming every problem."""
    path = root / LIMITS_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ()
    except (OSError, UnicodeDecodeError) as exc:
        raise LimitsFileError(f"{path}: error: cannot be read ({type(exc).__name__})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = getattr(exc, "lineno", None)
        raise LimitsFileError(f"{path}:{line or 1}: error: not TOML: {getattr(exc, 'msg', exc)}") from None
    problems: list[str] = []
    unknown = sorted(set(data) - {"limit"})
    if unknown:
        problems.append(f"unknown table(s) {', '.join(unknown)}; the file holds [[limit]] tables only")
    tables = data.get("limit", [])
    if not isinstance(tables, list):
        problems.append("limit must be an array of tables: write [[limit]], not [limit]")
        tables = []
    rules = [_rule(i, t, problems) for i, t in enumerate(tables)]
    if problems:
        raise LimitsFileError("\n".join(f"{path}: error: {p}" for p in problems))
    return tuple(r for r in rules if r is not None)
