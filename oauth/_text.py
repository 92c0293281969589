"""Text from outside (a server, a hub, a request) made safe to print, log or echo.

A server's `error_description`, a hub's connector name or a request's path is data: it may carry
terminal escape sequences, right-to-left overrides, NUL, newlines that forge a second log line, or
lone surrogates that no UTF-8 writer accepts. `printable` is the one rule every package uses before
such text reaches a terminal, a log line, an error message or a stored record.
"""

from __future__ import annotations

import re

__all__ = ["printable"]

# C0 and C1 controls (tab, newline and carriage return included: one value, one line), DEL,
# the bidirectional embeddings, overrides, isolates and marks, and lone surrogates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def printable(text: object, limit: int = 200) -> str:
    """`text` as one printable line: every control, bidi-override and lone-surrogate character
    replaced by U+FFFD, and at most `limit` characters (the rest cut and marked with `…`)."""
    value = text if isinstance(text, str) else str(text)
    value = _UNSAFE.sub("\ufffd", value)
    if len(value) > limit:
        return value[: max(limit - 1, 0)] + "…"
    return value
