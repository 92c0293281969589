"""A progress line on stderr for waits over a second, only when stderr is a terminal.

`with waiting("listing tools of 'github'"):` shows nothing for the first second, then
`⠋ listing tools of 'github' (1.2s)` redrawn ten times a second, erased when the block ends.
Piped or redirected stderr (scripts, CI, tests) gets nothing at all.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Generator
from contextlib import contextmanager
from typing import TextIO

__all__ = ["waiting"]

_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_AFTER_S = 1.0
_EVERY_S = 0.1


@contextmanager
def waiting(what: str, *, stream: TextIO | None = None) -> Generator[None]:
    """Show `what` with a spinner and the elapsed seconds while the block runs longer than a second."""
    out = stream if stream is not None else sys.stderr
    if not out.isatty():
        yield
        return
    done = threading.Event()
    started = time.monotonic()
    drawn = False

    def draw() -> None:
        nonlocal drawn
        if done.wait(_AFTER_S):
            return
        frame = 0
        while not done.is_set():
            out.write(f"\r\x1b[2K{_FRAMES[frame % len(_FRAMES)]} {what} ({time.monotonic() - started:.1f}s)")
            out.flush()
            drawn = True
            frame += 1
            done.wait(_EVERY_S)

    # A thread, not a task: the wait it reports on may block the event loop (a slow import, a child start).
    thread = threading.Thread(target=draw, name="agent-sdk-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        if drawn:
            out.write("\r\x1b[2K")
            out.flush()
