"""Tasks followed from any replica, and tasks whose upstream session is gone (docs/http-api.md, "Tasks").

A task runs in the upstream session that created it: a replica's own stdio child, or its pooled session
with an upstream that keeps tasks per MCP session (server-everything over HTTP). The sealed task id
names the app that made it (`TaskOwners.me`, random per start). A peer's `tasks/get`, `tasks/result`
or `tasks/cancel` reaches whichever replica nginx picks (round-robin, no affinity), so:

- on the owner, it goes to the owner's pooled session;
- on another replica of a deployment sharing Redis (`--state-url`), it is asked of the owner over Redis
  pub/sub: the owner listens on `agent-sdk:task-owner:<id>` while it runs, answers on the reply channel
  the asker named, and the asker relays that answer. An owner that listens but does not answer within
  `FORWARD_S` (a hung process) gets the peer a JSON-RPC error that says to retry, not a verdict;
- when nobody listens on the owner's channel (its process was killed: Redis drops a closed connection's
  subscriptions; asked three times over a second, so a Redis restart's resubscription is not mistaken
  for it), before the request or while the asker waits for its answer (an owner killed with the request
  in flight), or the deployment has no Redis and the owner is a previous start of this gateway, the local
  session is asked (an upstream that shares its tasks, a 2026-07-28 one, knows it);
- an upstream that answers that it does not know a task id the gateway sealed (JSON-RPC -32602: its
  session, and the task with it, ended when the replica or the child process died) makes the task
  `failed`, with a `statusMessage` that says why and to start it again (`TaskGone`): a peer polling it
  sees it end, never a task `working` forever nor an error it cannot tell from a bad request.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from connections import ConnectionsError, UpstreamError
from oauth._shared import printable

__all__ = ["FORWARD_S", "Local", "OwnerSilent", "TaskGone", "TaskOwners"]

logger = logging.getLogger("agent_sdk.mcp")

FORWARD_S = 5.0
"""How long a replica waits for the owner's answer to a forwarded task request."""
_LISTEN_TRIES = 3
_LISTEN_EVERY_S = 0.5
"""While it waits for the owner's answer, the asker checks this often that the owner still listens: an owner
killed with the request in flight stops listening, and after `_LISTEN_TRIES` such checks in a row (so a
Redis restart's resubscription is not mistaken for it) the task is answered as one whose owner is gone."""
_REDIS_TRIES = 4
Local = Callable[[str, str, Mapping[str, Any]], Awaitable[dict[str, Any]]]
"""The pooled session's task request: (connection, method, params with the upstream's id) -> answer."""


class TaskGone(Exception):
    """The upstream session that ran a task ended with it; the message says why (the task's `statusMessage`)."""


class OwnerSilent(MCPError):
    """The owning replica listens but did not answer in time: retry (JSON-RPC -32603)."""

    def __init__(self) -> None:
        super().__init__(
            INTERNAL_ERROR,
            f"the replica running this task did not answer within {FORWARD_S:g} s (it may be hung or busy); retry",
        )


class TaskOwners:
    """Who runs which task (module docstring): `me`, and with `redis` the channel to the other replicas."""

    def __init__(self, local: Local, redis: Any = None, *, prefix: str = "agent-sdk:") -> None:
        self.me = secrets.token_hex(8)
        self._local = local
        self._redis = redis
        self._p = prefix

    async def request(self, owner: str, connection: str, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """`method` (with the upstream's task id in `params`) where the task lives. Raises `TaskGone`, `OwnerSilent`,
        and what the pooled session raises."""
        if owner and owner != self.me and self._redis is not None:
            answer = await self._ask(owner, connection, method, params)
            if answer is not None:
                return answer
        try:
            return await self._local(connection, method, params)
        except UpstreamError as exc:
            if exc.rpc_code != INVALID_PARAMS:  # the params were checked: only the id can be unknown there
                raise
            raise TaskGone(_gone(owner == self.me or not owner)) from None

    async def _ask(self, owner: str, connection: str, method: str, params: Mapping[str, Any]) -> dict[str, Any] | None:
        """The owner's answer; None when nobody listens for `owner` (it is gone). Raises `TaskGone`, `OwnerSilent`,
        `MCPError` (the owner's error, or Redis unavailable: asked up to `_REDIS_TRIES` times, since each
        pooled connection a Redis restart broke fails once, at its next use; a task request may be answered
        twice, and each is a read or, for `tasks/cancel`, the same cancel again)."""
        import redis.exceptions

        for attempt in range(_REDIS_TRIES):
            try:
                return await self._ask_once(owner, connection, method, params)
            except (redis.exceptions.RedisError, OSError) as exc:
                if attempt + 1 == _REDIS_TRIES:
                    raise MCPError(
                        INTERNAL_ERROR, f"the state store is unavailable ({type(exc).__name__}); retry"
                    ) from None
                await anyio.sleep(0.25)
        raise AssertionError("unreachable")

    async def _ask_once(
        self, owner: str, connection: str, method: str, params: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        import redis.exceptions

        reply = f"{self._p}task-reply:{secrets.token_hex(8)}"
        request = json.dumps({"reply": reply, "c": connection, "m": method, "params": dict(params)})
        pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(reply)
            for attempt in range(_LISTEN_TRIES):
                if await self._redis.publish(self._channel(owner), request):
                    break
                if attempt + 1 < _LISTEN_TRIES:
                    await anyio.sleep(0.5)
            else:
                return None
            answer: dict[str, Any] | None = None
            silent = 0  # checks in a row that found nobody listening for `owner`
            with anyio.move_on_after(FORWARD_S):
                while answer is None:
                    message = await pubsub.get_message(timeout=_LISTEN_EVERY_S)
                    if message is not None and isinstance(message.get("data"), str):
                        answer = json.loads(message["data"])
                    elif message is None:
                        silent = silent + 1 if not await self._listens(owner) else 0
                        if silent == _LISTEN_TRIES:  # it died with our request: as if nobody had listened
                            return None
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    await pubsub.aclose()
                except (redis.exceptions.RedisError, OSError):
                    pass
        if answer is None:
            raise OwnerSilent
        if "gone" in answer:
            raise TaskGone(str(answer["gone"]))
        if "error" in answer:
            code, message = answer["error"]
            raise MCPError(int(code), str(message))
        return answer["result"]

    async def _listens(self, owner: str) -> bool:
        """Whether `owner` still listens on its channel (a killed process's subscription ends with its connection).
        True when Redis cannot say (it is restarting): only the answer's own wait decides then, as before."""
        import redis.exceptions

        try:
            counts = await self._redis.pubsub_numsub(self._channel(owner))
        except (redis.exceptions.RedisError, OSError):
            return True
        return any(int(n) > 0 for _, n in counts)

    def _channel(self, owner: str) -> str:
        return f"{self._p}task-owner:{owner}"

    async def serve(self) -> None:
        """Answer the other replicas' requests for this app's tasks until cancelled, resubscribing after Redis
        comes back (an asker retries while nobody listens). Returns at once without Redis."""
        if self._redis is None:
            return
        import redis.exceptions

        lost = False
        # The answers run in this task group, outside the loop's `try`: a Redis error ends the subscription and is
        # caught there, and never reaches the group (which would wrap it and end the app's lifespan with it).
        async with anyio.create_task_group() as tg:
            while True:
                pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
                try:
                    await pubsub.subscribe(self._channel(self.me))
                    if lost:
                        logger.info("the task channel is back")
                        lost = False
                    while True:
                        message = await pubsub.get_message(timeout=1.0)
                        if message is not None and isinstance(message.get("data"), str):
                            tg.start_soon(self._answer, message["data"])
                except (redis.exceptions.RedisError, OSError) as exc:
                    if not lost:
                        logger.warning("lost the task channel (%s); resubscribing", type(exc).__name__)
                        lost = True
                    await anyio.sleep(0.5)
                except Exception:  # boundary: the client's own failure must not end the listener (nor the app)
                    logger.exception("the task channel failed; resubscribing")
                    lost = True
                    await anyio.sleep(0.5)
                finally:
                    with anyio.CancelScope(shield=True):
                        try:
                            await pubsub.aclose()
                        except (redis.exceptions.RedisError, OSError):
                            pass

    async def _answer(self, data: str) -> None:
        import redis.exceptions

        try:
            request = json.loads(data)
            reply, connection, method, params = request["reply"], request["c"], request["m"], request["params"]
        except (ValueError, KeyError, TypeError):
            return  # not one of ours: nothing to answer
        try:
            answer: dict[str, Any] = {"result": await self.request(self.me, connection, method, params)}
        except TaskGone as exc:
            answer = {"gone": str(exc)}
        except MCPError as exc:
            answer = {"error": [exc.error.code, exc.error.message]}
        except (ConnectionsError, ValueError) as exc:
            answer = {"error": [INTERNAL_ERROR, printable(f"{getattr(exc, 'code', 'error')}: {exc}", 500)]}
        except Exception:  # an answer that fails must not end the listener (nor the app with it)
            logger.exception("a forwarded task request failed")
            answer = {"error": [INTERNAL_ERROR, "the replica running this task failed to answer; see its log"]}
        for _ in range(_REDIS_TRIES):  # each pooled connection a Redis restart broke fails once
            try:
                await self._redis.publish(reply, json.dumps(answer))
                return
            except (redis.exceptions.RedisError, OSError):
                await anyio.sleep(0.1)
        # else the asker times out and tells its peer to retry


def _gone(here: bool) -> str:
    where = (
        "its upstream session on this gateway ended (the server process exited, or the connection was reopened)"
        if here
        else "the gateway replica that ran it went away, and its upstream session with it"
    )
    return f"this task can no longer finish: {where}; start it again"
