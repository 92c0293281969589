"""`JsonChunks`: a JSON text parsed into Python objects as its chunks arrive, never held whole (issue #23).

A large tool result is mostly a few long strings. Joining the answer's chunks and then parsing the
joined bytes holds the bytes and the objects at once: twice the answer. Here, once more than
`STREAM_FROM` bytes have arrived, each chunk is scanned as it comes (two regular expressions, C
speed: one skips everything outside strings together with the complete strings, the other runs
through a string's body) and split into a *skeleton* (everything but the long strings) and the
long string literals (from `LONG_LITERAL` bytes). Each long literal is parsed on its own as soon as
its closing quote arrives (`pydantic_core.from_json` of the literal: escapes and UTF-8 checked as
for the whole text), its bytes dropped, and a placeholder written into the skeleton in its place (a string
carrying a random mark of this text, so no text can spell one);
at the end the skeleton is parsed and the placeholders replaced by the strings. So the bytes held
at any moment are one chunk, the skeleton, and the one long literal being read: an answer of two
long texts peaks at about 1.5 times its size instead of 2.

Why not `ijson` (yajl): its C backend re-scans a token that spans chunks from its start at every
chunk, so a long string with escapes costs quadratic time (1, 2, 4 MB of escaped text: 0.20, 0.33,
1.81 s); see docs/architecture.md.

The result is the same as `pydantic_core.from_json` of the joined chunks, errors included
(`ValueError` for text that is not one JSON value); a small text (under `STREAM_FROM`) is parsed
exactly that way, from its joined chunks.
"""

from __future__ import annotations

import io
import re
import secrets
from typing import Any

import pydantic_core

__all__ = ["HEAD", "LONG_LITERAL", "STREAM_FROM", "JsonChunks"]

STREAM_FROM = 1024 * 1024
"""Bytes from which a text is split as it arrives; below, its chunks are joined and parsed whole."""
HEAD = 256
"""Bytes of the text's start kept (`JsonChunks.head`)."""
LONG_LITERAL = 64 * 1024
"""Bytes from which a string literal is cut out of the skeleton and parsed on its own."""

# Outside strings: everything but a quote, and complete strings; stops at a string left open.
_OUTSIDE = re.compile(rb'[^"]*+(?:"[^"\\]*+(?:\\.[^"\\]*+)*+"[^"]*+)*+', re.DOTALL)
# Inside a string: its body up to the closing quote, or to the chunk's end (a lone `\` left over).
_INSIDE = re.compile(rb'[^"\\]*+(?:\\.[^"\\]*+)*+', re.DOTALL)


class JsonChunks:
    """Feed a JSON text's chunks in order (`feed`), then take the parsed value (`finish`).

    `replace_invalid_utf8`: bytes that are not UTF-8 become U+FFFD instead of failing the parse (as
    the SDK's stdio client reads a line, `errors="replace"`).
    """

    __slots__ = (
        "_chunks",
        "_escape",
        "_head",
        "_literal",
        "_literals",
        "_mark",
        "_replace",
        "_size",
        "_skeleton",
    )

    def __init__(self, *, replace_invalid_utf8: bool = False) -> None:
        self._replace = replace_invalid_utf8
        self._chunks: list[bytes] = []  # raw chunks, until the text reaches STREAM_FROM
        self._size = 0
        self._head = b""
        self._skeleton: list[bytes] | None = None  # set once splitting
        self._literal: io.BytesIO | None = None  # the open string's bytes (from its opening quote)
        self._escape = False  # the open string's bytes so far end in the `\` of an escape
        self._literals: list[str] = []
        self._mark = b""

    @property
    def size(self) -> int:
        """Bytes fed so far."""
        return self._size

    @property
    def head(self) -> bytes:
        """The text's first `HEAD` bytes (to find an `id` in a text that is dropped)."""
        return self._head

    def feed(self, chunk: bytes) -> None:
        if len(self._head) < HEAD:
            self._head += chunk[: HEAD - len(self._head)]
        self._size += len(chunk)
        if self._skeleton is None:
            self._chunks.append(chunk)
            if self._size < STREAM_FROM:
                return
            self._skeleton = []
            self._mark = b"\\u0000" + secrets.token_hex(8).encode() + b":"
            chunks, self._chunks = self._chunks, []
            for i in range(len(chunks)):
                piece, chunks[i] = chunks[i], b""
                self._split(piece)
            return
        self._split(chunk)

    def finish(self) -> Any:
        """The parsed value; `ValueError` when the text is not one JSON value."""
        return self.finish_with_text()[0]

    def finish_with_text(self) -> tuple[Any, bytes | None]:
        """The parsed value and, for a text under `STREAM_FROM` (held whole anyway), the text itself; a
        longer one was parsed as it arrived and is not kept. `ValueError` as `finish`."""
        if self._skeleton is None:
            chunks, self._chunks = self._chunks, []
            text = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            return self._loads(text), text
        if self._literal is not None:
            raise ValueError("EOF while parsing a string")
        skeleton, self._skeleton = b"".join(self._skeleton), None
        value = self._loads(skeleton)
        del skeleton
        if self._literals:
            prefix = self._mark.replace(b"\\u0000", b"\x00").decode()
            literals, self._literals = self._literals, []
            value = _restore(value, prefix, literals)
            literals.clear()
        return value, None

    def _split(self, chunk: bytes) -> None:
        assert self._skeleton is not None
        at, end = 0, len(chunk)
        while at < end:
            if self._literal is None:
                stop = _OUTSIDE.match(chunk, at).end()  # type: ignore[union-attr]  # always matches
                if stop > at:
                    self._skeleton.append(chunk[at:stop])
                if stop == end:
                    return
                self._literal, at = io.BytesIO(), stop + 1  # a string left open: read its body
                self._literal.write(b'"')
                continue
            if self._escape:  # the escaped byte, first in this chunk
                self._escape = False
                self._literal.write(chunk[at : at + 1])
                at += 1
                continue
            stop = _INSIDE.match(chunk, at).end()  # type: ignore[union-attr]  # always matches
            if stop == end or chunk[stop] == 0x5C:  # the chunk ends inside the string (maybe after a `\`)
                self._literal.write(chunk[at:end] if at else chunk)
                self._escape = stop < end
                return
            self._literal.write(chunk[at : stop + 1])  # through the closing quote
            self._close()
            at = stop + 1

    def _close(self) -> None:
        assert self._literal is not None and self._skeleton is not None
        buffer, self._literal = self._literal, None
        literal = buffer.getvalue()  # the buffer itself, not a copy (its last reference)
        del buffer
        if len(literal) < LONG_LITERAL:
            self._skeleton.append(literal)
            return
        text = self._loads(literal)
        del literal
        self._skeleton.append(b'"' + self._mark + str(len(self._literals)).encode() + b'"')
        self._literals.append(text)

    def _loads(self, data: bytes) -> Any:
        try:
            return pydantic_core.from_json(data)
        except ValueError:
            if not self._replace:
                raise
            return pydantic_core.from_json(data.decode(errors="replace"))


def _restore(node: Any, prefix: str, literals: list[str]) -> Any:
    """`node` with each placeholder string (`prefix` + its index) replaced by its literal.

    Plain recursion, no closure: a nested function that calls itself is a reference cycle, which
    would keep the literals alive until the next garbage collection.
    """
    kind = type(node)
    if kind is str:
        found = _literal(node, prefix, literals)
        return node if found is None else found
    if kind is list:
        for i, item in enumerate(node):
            if type(item) in _CONTAINERS:
                node[i] = _restore(item, prefix, literals)
    elif kind is dict:
        if any(_literal(key, prefix, literals) is not None for key in node):
            return {_restore(key, prefix, literals): _restore(item, prefix, literals) for key, item in node.items()}
        for key, item in node.items():
            if type(item) in _CONTAINERS:
                node[key] = _restore(item, prefix, literals)
    return node


_CONTAINERS = (str, list, dict)


def _literal(text: str, prefix: str, literals: list[str]) -> str | None:
    if len(text) <= len(prefix) or not text.startswith(prefix):
        return None
    index = text[len(prefix) :]
    return literals[int(index)] if index.isascii() and index.isdigit() and int(index) < len(literals) else None
