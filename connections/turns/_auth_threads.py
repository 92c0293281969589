"""A bounded set of threads for one connection's synchronous `auth` callback.

A sync callback runs off the event loop. Run in anyio's worker pool and abandoned at its timeout,
a callback that hangs keeps its worker thread for good, and the next turn takes another: one
leaked OS thread per turn. Here each connection has at most `limit` callback threads alive at once
(daemon threads, so a hung one never holds up the process's exit); while that many are still
running, the next turn fails closed at once (`auth_busy`) instead of starting another. The threads
are kept and reused: starting one blocks the event loop until it runs (about 0.1 to 0.5 ms on a
busy machine), once per connection per turn before, which cost a 50-connection turn build more
than its listings did.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any

from .._exceptions import ConnectionsError

__all__ = ["AUTH_THREADS", "AuthThreads", "AuthThreadsBusy"]

AUTH_THREADS = 4
"""Callback threads one connection may have running at once."""


class AuthThreadsBusy(ConnectionsError):
    """Every thread of the connection's budget is still running an earlier call of the callback."""


class AuthThreads:
    """Runs `callback(arg)` on one of at most `limit` daemon threads, kept for reuse."""

    def __init__(self, limit: int = AUTH_THREADS) -> None:
        self.limit = limit
        self._free = threading.BoundedSemaphore(limit)
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        """Threads waiting for a job and not yet promised one."""

    async def run(self, callback: Callable[[Any], Any], arg: Any) -> Any:
        """The callback's return value (or its exception, raised here). Raises `AuthThreadsBusy`.

        Cancelling the caller (its timeout) abandons the thread, which keeps its slot until the
        callback returns. asyncio, not anyio: anyio has no thread API that a caller can abandon
        without leaving the work to its shared pool; the gateway always runs on asyncio.
        """
        if not self._free.acquire(blocking=False):
            raise AuthThreadsBusy
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def settle(value: Any, error: BaseException | None) -> None:
            if future.done():  # the caller gave up (timeout or cancel)
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(value)

        def work() -> None:
            value: Any = None
            error: BaseException | None = None
            try:
                value = callback(arg)
            except BaseException as exc:  # handed to the caller, which reports the type only
                error = exc
            finally:
                self._free.release()
            try:
                loop.call_soon_threadsafe(settle, value, error)
            except RuntimeError:  # the loop closed while the callback ran
                pass

        self._jobs.put(work)
        with self._lock:
            # Every job is promised a thread: an idle one, or a new one. Jobs in flight are at most
            # `limit` (the semaphore), so threads are too.
            promised = self._idle > 0
            if promised:
                self._idle -= 1
        if not promised:
            threading.Thread(target=self._serve, name="agent-sdk auth callback", daemon=True).start()
        return await future

    def _serve(self) -> None:
        while True:
            self._jobs.get()()
            with self._lock:
                self._idle += 1
