"""A JSON-RPC answer serialized in pieces, so a large tool result is not held whole twice (issue #23).

`pydantic_core.to_json` of a whole answer holds the result's objects, its own buffer and the
`bytes` it returns at once: three times a large result; of one content item, still the item, the
buffer and the bytes. `answer_pieces` walks the answer's first levels (the result, its fields,
their items and fields: where a tool result keeps its long texts) and writes a long string in
slices of `SLICE` characters, each serialized on its own, dropping its own reference to each part
once its bytes exist: when nothing else holds the result (a passthrough answer, once its call has
returned) its objects are released as their bytes appear, so the objects left and the bytes made
add up to about the result's size. The bytes are the same as the whole answer's: `to_json`'s at
the handshake versions, and at 2026-07-28 `json.dumps`'s when the answer holds a non-ASCII string
(as the SDK's entry writes it; both are compact and compose part by part). Small answers, the
common case, are serialized in one piece (`connections.holds_long_text` tells them apart).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pydantic_core

from connections.serving import holds_long_text

__all__ = ["SLICE", "answer_pieces"]

SLICE = 256 * 1024
"""Characters of a long string serialized at a time."""
_DEPTH = 4
"""Levels below the answer taken apart: answer → result → content → item → text (or structuredContent → field)."""


def answer_pieces(answer: dict[str, Any], *, modern: bool = False) -> list[bytes]:
    """`answer` (a JSON-RPC answer we built) as JSON, in one or more pieces; `answer` is emptied.

    `modern`: written as the SDK's 2026-07-28 entry writes (ASCII: `json.dumps` when `to_json` is not).
    Never mutates the result it carries, which its maker may still hold: only our own copies are
    taken apart.
    """
    if not holds_long_text(answer.get("result")):
        body = pydantic_core.to_json(answer)
        if modern and not body.isascii():
            body = json.dumps(answer, separators=(",", ":")).encode()
        answer.clear()
        return [body]
    dumps = _ascii_dumps if modern and not _all_ascii(answer, _DEPTH + 1) else pydantic_core.to_json
    pieces: list[bytes] = []
    box: list[Any] = [dict(answer)]
    answer.clear()
    _write(box, pieces, dumps, _DEPTH)
    return pieces


def _write(box: list[Any], out: list[bytes], dumps: Callable[[Any], bytes], depth: int) -> None:
    """Append the JSON of the value in `box` (taken out of it: ours is then the only reference) to `out`."""
    value = box.pop()
    kind = type(value)
    if kind is str and len(value) > SLICE:
        out.append(b'"')
        for start in range(0, len(value), SLICE):
            out.append(dumps(value[start : start + SLICE])[1:-1])
        out.append(b'"')
    elif kind is dict and depth > 0 and value:
        fields: dict[Any, Any] = dict(value)  # our copy, taken apart below (the original is left whole)
        del value
        separator = b"{"
        for key in list(fields):
            out.append(separator + dumps(key) + b":")
            separator = b","
            box.append(fields.pop(key))
            _write(box, out, dumps, depth - 1)
        out.append(b"}")
    elif kind is list and depth > 0 and value:
        items: list[Any] = list(value)
        del value
        items.reverse()  # taken from the end: each item leaves our list as it is written
        separator = b"["
        while items:
            out.append(separator)
            separator = b","
            box.append(items.pop())
            _write(box, out, dumps, depth - 1)
        out.append(b"]")
    else:
        out.append(dumps(value))


def _ascii_dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _all_ascii(value: Any, depth: int) -> bool:
    """Whether `to_json(value)` is ASCII: every string of the first `depth` levels by its flag (no scan),
    what is deeper serialized."""
    kind = type(value)
    if kind is str:
        return value.isascii()
    if depth <= 0 or kind not in (dict, list):
        return pydantic_core.to_json(value).isascii()
    if kind is dict:
        return all(_all_ascii(k, 0) and _all_ascii(v, depth - 1) for k, v in value.items())
    return all(_all_ascii(v, depth - 1) for v in value)
