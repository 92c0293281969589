"""Give the memory of large answers back to the system once they are served (glibc's allocator).

Python hands every block over 512 bytes to `malloc`. glibc serves blocks above its mmap threshold
(128 KiB) from their own mappings, returned on `free`, but raises that threshold to the size of
each such block freed (up to 32 MiB): after one large tool result, the next ones come from the
heap, whose freed top is seldom returned, and the gateway stays at its peak RSS. Fixing the
threshold (`mallopt(M_MMAP_THRESHOLD)`, which turns the adjustment off) keeps large answers in
mappings of their own. Small blocks, the common case, are untouched. See docs/performance.md.
"""

from __future__ import annotations

import ctypes
import sys

__all__ = ["MMAP_THRESHOLD", "return_large_blocks"]

MMAP_THRESHOLD = 128 * 1024
"""glibc's own initial threshold; blocks this size and larger get a mapping of their own."""
_M_MMAP_THRESHOLD = -3  # <malloc.h>


def return_large_blocks(threshold: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at `threshold` bytes for this process; False where there is no glibc."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, threshold))
