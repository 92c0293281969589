"""agent-sdk's bottom utilities, used by all three packages and by none of them for OAuth:
`printable`, `write_private` and `Secret`. Private: not part of `oauth`'s API (`import oauth._shared`).

- `printable`: text from outside (a server, a hub, a request) made safe to print, log or echo. A
  server's `error_description`, a hub's connector name or a request's path is data: it may carry
  terminal escape sequences, right-to-left overrides, NUL, newlines that forge a second log line, or
  lone surrogates that no UTF-8 writer accepts; this is the one rule every package applies before
  such text reaches a terminal, a log line, an error message or a stored record.
- `write_private`: the one atomic write of a file that holds secrets (0600, fsync, rename), for the
  token file, the hub's key file and the account link file: readers see the old file or the new one,
  never half of one, and no other user can read it at any moment.
- `Secret`: a string that never shows itself in a `repr`, `str`, log line or traceback.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import re
import tempfile
from pathlib import Path

__all__ = ["Secret", "printable", "write_private"]


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


def write_private(path: Path, payload: bytes) -> None:
    """Replace `path` with `payload`, atomically, mode 0600 from the first byte; the folder must exist."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class Secret:
    """Wraps a credential (token, key, header value); read it only with `.reveal()` at the wire."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The plain value; call this only where the value goes onto the wire or into a 0600 store."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    def __str__(self) -> str:
        return "***"

    def __format__(self, spec: str) -> str:
        return "***"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash(self._value)

    def __bool__(self) -> bool:
        return bool(self._value)

    def __reduce__(self) -> str | tuple[object, ...]:
        raise TypeError("a Secret cannot be pickled; store it with a token store instead")
