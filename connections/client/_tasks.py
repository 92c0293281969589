"""Tasks (MCP 2025-11-25, `basic/utilities/tasks`): a task-augmented `tools/call` and the requests that follow it.

A tool whose listing says `execution.taskSupport: "required"` (server-everything's
`simulate-research-query`) runs only as a task: `tools/call` with a `task` member answers at once with
a `CreateTaskResult` (`{"task": {"taskId", "status", ...}}`); `tasks/get` polls its status,
`tasks/result` waits for and returns the tool's `CallToolResult`, `tasks/cancel` stops it, `tasks/list`
lists the session's tasks. A task lives on the upstream session that made it, so these go to the pooled
session of the connection (`ClientPool.start_tool_task`, `ClientPool.task_request`), as JSON; each answer
is validated against the spec's shape before anyone sees it.

`ToolTask` is the handle `host.mcp.call_tool(..., task=True)` returns (docs/clients.md, "Tasks").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import mcp_types as mt
from mcp import Client
from pydantic import BaseModel

from ._raw_requests import send_request
from ._tool_results import as_call_tool_result

__all__ = ["TASK_METHODS", "TaskRequests", "ToolTask", "start_task_json", "task_request_json"]

TASK_METHODS = frozenset({"tasks/get", "tasks/result", "tasks/cancel", "tasks/list"})
"""The requests that follow a task-augmented call (2025-11-25)."""

_RESULTS: dict[str, type[BaseModel]] = {
    "tasks/get": mt.GetTaskResult,
    "tasks/cancel": mt.CancelTaskResult,
    "tasks/list": mt.ListTasksResult,
    "tasks/result": mt.CallToolResult,  # the payload of a `tools/call` task: its `CallToolResult`
}


def _json(model: type[BaseModel], raw: Any) -> dict[str, Any]:
    """`raw` validated as `model` (`pydantic.ValidationError` otherwise), dumped as the wire has it."""
    return model.model_validate(raw, by_name=False).model_dump(mode="json", by_alias=True, exclude_none=True)


async def start_task_json(
    client: Client, tool: str, arguments: Mapping[str, Any], task: Mapping[str, Any]
) -> dict[str, Any]:
    """`tools/call` of `tool` with `task` (e.g. `{"ttl": 60000}`): the upstream's `CreateTaskResult` as JSON,
    or, from an upstream that ran the call at once instead (a tool whose task support is optional), its
    `CallToolResult`. Raises what the session's dispatcher raises and `pydantic.ValidationError`."""
    params = {"name": tool, "arguments": dict(arguments), "task": dict(task)}
    raw = await send_request(client, "tools/call", params)
    if isinstance(raw, dict) and "task" in raw:
        return _json(mt.CreateTaskResult, raw)
    return _json(mt.CallToolResult, raw)


async def task_request_json(client: Client, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """One of `TASK_METHODS` on `client`; its answer as JSON. Raises `ValueError` for another method."""
    model = _RESULTS.get(method)
    if model is None:
        raise ValueError(f"{method!r} is not a task request (one of {', '.join(sorted(TASK_METHODS))})")
    return _json(model, await send_request(client, method, dict(params)))


class TaskRequests(Protocol):
    """Where a task's requests go: the pool (or anything that routes a connection's task requests)."""

    async def task_request(self, name: str, method: str, params: Mapping[str, Any]) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class ToolTask:
    """A tool call running as a task on connection `connection` (from `host.mcp.call_tool(..., task=True)`).

    `await status()` polls it, `await result()` waits for the tool's `CallToolResult` (within the
    connection's `call` timeout), `await cancel()` stops it. Each raises the connection errors
    (`UpstreamError` for a task the upstream no longer knows, `UpstreamTimeout`, `ConnectionUnavailable`).
    """

    connection: str
    task: mt.Task
    """The task as the upstream created it (`task.task_id`, `task.status`, `task.poll_interval`, ...)."""
    _requests: TaskRequests = field(repr=False, compare=False)

    @property
    def task_id(self) -> str:
        return self.task.task_id

    async def status(self) -> mt.GetTaskResult:
        """`tasks/get`: the task's current status (`working`, `input_required`, `completed`, `failed`, `cancelled`)."""
        data = await self._requests.task_request(self.connection, "tasks/get", {"taskId": self.task_id})
        return mt.GetTaskResult.model_validate(data, by_name=False)

    async def result(self) -> mt.CallToolResult:
        """`tasks/result`: waits until the task is done and returns the tool's result (an `isError` one included)."""
        return as_call_tool_result(
            await self._requests.task_request(self.connection, "tasks/result", {"taskId": self.task_id})
        )

    async def cancel(self) -> mt.CancelTaskResult:
        """`tasks/cancel`: asks the upstream to stop the task; its status afterwards."""
        data = await self._requests.task_request(self.connection, "tasks/cancel", {"taskId": self.task_id})
        return mt.CancelTaskResult.model_validate(data, by_name=False)
