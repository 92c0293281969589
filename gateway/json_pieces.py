"""A JSON-RPC answer serialized in pieces, so a large tool result is not held whole twice (issue #23).

`pydantic_core.to_json` of a whole answer holds the result's objects, its own buffer and the
`bytes` it returns at once: three times a large result. `answer_pieces` serializes the `result`
field by field and the `content` list item by item, dropping its own references to each part once
it is serialized: when nothing else holds the result (a passthrough answer, once its call has
returned) its objects are released as their bytes appear, and at most one part is being
serialized at a time. The bytes are the same as `to_json` of the whole answer. Small answers, the
common case, are serialized in one piece (`connections.holds_long_text` tells them apart).
"""

from __future__ import annotations

from typing import Any

import pydantic_core

from connections import holds_long_text

__all__ = ["answer_pieces"]


def answer_pieces(answer: dict[str, Any]) -> list[bytes]:
    """`answer` (a JSON-RPC answer we built) as JSON, in one or more pieces; `answer` is emptied.

    Never mutates the result it carries, which its maker may still hold: only our own copies are
    taken apart.
    """
    result = answer.get("result")
    if not isinstance(result, dict) or not holds_long_text(result):  # pyright: ignore[reportUnknownArgumentType]
        body = pydantic_core.to_json(answer)
        answer.clear()
        return [body]
    fields: dict[str, Any] = dict(result)  # pyright: ignore[reportUnknownArgumentType]
    del result
    answer.pop("result")
    envelope = pydantic_core.to_json(answer)  # jsonrpc and id, in that order
    answer.clear()
    pieces = [envelope[:-1] + b',"result":{']
    separator = b""
    for key in list(fields):
        value = fields.pop(key)
        head = separator + pydantic_core.to_json(key) + b":"
        separator = b","
        if key == "content" and isinstance(value, list):
            items: list[Any] = list(value)  # pyright: ignore[reportUnknownArgumentType]
            del value
            pieces.append(head + b"[")
            for i in range(len(items)):
                pieces.append((b"," if i else b"") + pydantic_core.to_json(items[i]))
                items[i] = None  # our reference to the item goes as soon as its bytes exist
            pieces.append(b"]")
        else:
            pieces.append(head + pydantic_core.to_json(value))
            del value
    pieces.append(b"}}")
    return pieces
