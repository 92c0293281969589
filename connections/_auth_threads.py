"""A bounded set of threads for one connection's synchronous `auth` callback.

A sync callback runs off the event loop. Run in anyio's worker pool and abandoned at its timeout,
a callback that hangs keeps its worker thread for good, and the next turn takes another: one
leaked OS thread per turn. Here each connection has at most `limit` callback threads alive at once
(daemon threads, so a hung one never holds up the process's exit); while that many are still
running, the next turn fails closed at once (`auth_busy`) instead of starting another.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["AUTH_THREADS", "AuthThreads", "AuthThreadsBusy"]

AUTH_THREADS = 4
"""Callback threads one connection may have running at once."""


class AuthThreadsBusy(Exception):
    """Every thread of the connection's budget is still running an earlier call of the callback."""


class AuthThreads:
    """Runs `callback(arg)` on a fresh daemon thread, at most `limit` at once."""

    def __init__(self, limit: int = AUTH_THREADS) -> None:
        self.limit = limit
        self._free = threading.BoundedSemaphore(limit)

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

        threading.Thread(target=work, name="agent-sdk auth callback", daemon=True).start()
        return await future
