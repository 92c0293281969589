"""A separate process that serves calls with stored tokens only (it may never log in).

    python tests/oauth/client_worker.py STATE_ROOT CONNECTION URL CALLS ROUNDS UNTIL

Opens `FileTokenStore(STATE_ROOT)` and `connection_auth(CONNECTION, URL, OAuthConfig(), store)` with
no interaction, then runs ROUNDS rounds of CALLS concurrent `tools/call echo` (and keeps going, up to
60 rounds, while the Unix time UNTIL has not passed). Prints one JSON line: calls ok/failed, the auth's
stats and the first failure's sentence.
"""

from __future__ import annotations

import json
import sys
import time

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from oauth import FileTokenStore, OAuthConfig, connection_auth


async def main(state_root: str, connection: str, url: str, calls: int, rounds: int, until: float) -> None:
    ok, failed, first_error = 0, 0, ""
    async with FileTokenStore(state_root) as store:
        auth = connection_auth(connection, url, OAuthConfig(), store)
        async with auth, httpx2.AsyncClient(auth=auth, timeout=30.0) as http:

            async def one(i: int) -> None:
                nonlocal ok, failed, first_error
                try:
                    with anyio.fail_after(30):
                        async with Client(streamable_http_client(url, http_client=http), mode="2026-07-28") as c:
                            result = await c.call_tool("echo", {"text": f"call {i}"})
                    if result.is_error:
                        raise RuntimeError("tool error")
                    ok += 1
                except BaseException as exc:
                    failed += 1
                    first_error = first_error or _sentence(exc)

            done = 0
            while done < 60 and (done < rounds or time.time() < until):
                async with anyio.create_task_group() as tg:
                    for i in range(calls):
                        tg.start_soon(one, i)
                done += 1
        stats = auth.stats
    print(
        json.dumps(
            {
                "ok": ok,
                "failed": failed,
                "rounds": done,
                "refreshes": stats.refreshes,
                "adopted": stats.adopted,
                "logins": stats.logins,
                "retries_after_401": stats.retries_after_401,
                "invalid_grants": stats.invalid_grants,
                "error": first_error,
            }
        )
    )


def _sentence(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


if __name__ == "__main__":
    root, name, target, n, r, u = sys.argv[1:7]
    anyio.run(main, root, name, target, int(n), int(r), float(u))
