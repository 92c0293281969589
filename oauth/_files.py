"""`write_private`: the one atomic write of a file that holds secrets (0600, fsync, rename).

Used by the token file, the hub's key file and the account link file: readers see the old file or
the new one, never half of one, and no other user can read it at any moment.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["write_private"]


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
