"""A task request forwarded to the replica that owns the task, over real Redis (`gateway/mcp/task_owners.py`).

The replicas' end-to-end behaviour is in `tests/gateway/test_replica_tasks.py`; here the owner's death is
placed exactly: after it took the request and before it answered, which is what a `kill -9` during a
peer's `tasks/get` does (the chaos run, docs/deploy.md section 11, found it).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis.asyncio as redis_asyncio

from connections import UpstreamError
from gateway.mcp.task_owners import TaskGone, TaskOwners

from ..replicas import redis_server

pytestmark = [pytest.mark.anyio, pytest.mark.peers]


async def test_an_owner_killed_with_the_request_in_flight_makes_the_task_gone_not_a_retry(tmp_path: Path) -> None:
    taken = anyio.Event()

    async def owner_local(_connection: str, _method: str, _params: Mapping[str, Any]) -> dict[str, Any]:
        taken.set()
        await anyio.sleep_forever()  # the owner is busy with the request when it dies
        raise AssertionError("unreachable")

    async def asker_local(connection: str, _method: str, _params: Mapping[str, Any]) -> dict[str, Any]:
        # The asker's own session never had the task: the upstream says it does not know the id.
        raise UpstreamError.refused(
            connection, "unknown task", rpc_code=-32602, rpc_message="unknown task", rpc_data=None
        )

    with redis_server(tmp_path / "redis") as server:
        owner_redis = redis_asyncio.Redis.from_url(server.url, decode_responses=True)
        asker_redis = redis_asyncio.Redis.from_url(server.url, decode_responses=True)
        owner, asker = TaskOwners(owner_local, owner_redis), TaskOwners(asker_local, asker_redis)
        outcome: list[BaseException | dict[str, Any]] = []

        async def ask() -> None:
            try:
                outcome.append(await asker.request(owner.me, "everything", "tasks/get", {"taskId": "t1"}))
            except (TaskGone, Exception) as exc:
                outcome.append(exc)

        try:
            with anyio.fail_after(30):
                async with anyio.create_task_group() as tg:
                    serving = anyio.CancelScope()

                    async def serve_owner() -> None:
                        with serving:
                            await owner.serve()

                    tg.start_soon(serve_owner)
                    channel = f"agent-sdk:task-owner:{owner.me}"
                    for _ in range(400):  # until the owner listens
                        if any(n for _, n in await owner_redis.pubsub_numsub(channel)):
                            break
                        await anyio.sleep(0.05)
                    tg.start_soon(ask)
                    await taken.wait()
                    serving.cancel()  # the owner dies: its subscription ends, its answer is never sent
                    await owner_redis.aclose()
        finally:
            await asker_redis.aclose()

    assert len(outcome) == 1
    # Not "did not answer within 5 s; retry" (OwnerSilent): a retry could never be answered by a dead owner.
    assert isinstance(outcome[0], TaskGone), outcome[0]
    assert "went away" in str(outcome[0]) and "start it again" in str(outcome[0])
