"""A precise check for the output schema most tools list: an object of plain typed members.

`mcp` servers that return a plain value (`-> str`, `-> int`, a small model of scalars) list an output schema
of exactly this shape, e.g. `{"type": "object", "properties": {"result": {"type": "string"}}, "required":
["result"]}`. Checking a result against it with `jsonschema`'s general validator costs about 25 µs a call;
the same verdict by hand costs about 1 µs. `simple_check` returns that hand check for a schema of this shape
and `None` for any other (which keeps the general validator). The hand check only ever says "valid": when it
cannot, the caller asks the general validator, whose verdict and sentence stand, so a schema this module
misreads can only cost time, never let bad content through.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cachetools import LRUCache

__all__ = ["simple_check"]

Check = Callable[[Any], bool]

# JSON Schema's scalar types as Python's JSON values hold them (a bool is not a number in JSON Schema).
_SCALARS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: type(v) is str,
    "integer": lambda v: type(v) is int,
    "number": lambda v: type(v) is int or type(v) is float,
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
}
_OBJECT_KEYS = frozenset({"type", "properties", "required", "title", "description"})
_MEMBER_KEYS = frozenset({"type", "title", "description"})
_NOTES = (str,)  # title and description: annotations, they constrain nothing

_checks: LRUCache[int, tuple[object, Check | None]] = LRUCache(maxsize=1024)


def simple_check(schema: object) -> Check | None:
    """The hand check for `schema` (made once per schema object), or None when it is not of the plain shape."""
    kept = _checks.get(id(schema))
    if kept is not None and kept[0] is schema:
        return kept[1]
    check = _made(schema)
    _checks[id(schema)] = (schema, check)
    return check


def _made(schema: object) -> Check | None:
    if not isinstance(schema, dict) or schema.get("type") != "object" or not _OBJECT_KEYS.issuperset(schema):
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(properties, dict) or not isinstance(required, list):
        return None
    if not all(isinstance(name, str) for name in required) or len(set(required)) != len(required):
        return None
    members: list[tuple[str, Callable[[Any], bool]]] = []
    for name, member in properties.items():
        if not isinstance(member, dict) or not _MEMBER_KEYS.issuperset(member):
            return None
        if not all(isinstance(member.get(note, ""), _NOTES) for note in ("title", "description")):
            return None
        kind = member.get("type")
        scalar = _SCALARS.get(kind) if isinstance(kind, str) else None  # a list of types: the general validator
        if scalar is None:
            return None
        members.append((name, scalar))
    if not all(isinstance(schema.get(note, ""), _NOTES) for note in ("title", "description")):
        return None
    needed = tuple(required)

    def check(value: Any) -> bool:
        if type(value) is not dict:
            return False
        for name in needed:
            if name not in value:
                return False
        for name, scalar in members:
            if name in value and not scalar(value[name]):
                return False
        return True

    return check
