"""Tasks on `/v1/mcp/tools` (MCP 2025-11-25): a task-augmented `tools/call` and `tasks/*`, relayed to the upstream.

A peer that calls an advertised tool with `params.task` gets the upstream's `CreateTaskResult`, whose
`taskId` is replaced by a sealed one (`RequestStates.seal_task`, on the deployment key that also seals
`requestState`): the connection, the upstream's own task id and the principal who made it, encrypted
and authenticated, so any replica opens it and no peer can read, forge or alter it. A later
`tasks/get`, `tasks/result` or `tasks/cancel` with that id is opened by whichever replica receives it
and sent to the owning connection's pooled session with the upstream's id; no state is held in any
gateway process. Every answer leaves with the sealed id in place of the upstream's. An id that does
not open, or that another principal made, is refused with a JSON-RPC error (-32602) that says no more
than "not issued to you".

`tasks/list` is refused (-32601) and the `tasks.list` capability is not advertised: the gateway's
pooled upstream session is shared by every principal, so the upstream's list would show other
principals' tasks, and the gateway keeps no record of its own to filter it with (docs/http-api.md).

Tasks run on pooled connections (stdio, HTTP, SSE). A tool of an authored module, of an account
connection, or of a connection with a per-session `auth` callback (its calls carry the session's
identity, which a pooled session does not) answers -32601 to a task-augmented call, as the spec says
for a tool that does not support tasks.

The requests come here before the one lane (`gateway/mcp/lane.py`) at the handshake versions; at 2026-07-28
tasks are an extension (`io.modelcontextprotocol/tasks`) this module does not speak yet: such requests
go to the SDK as before.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Mapping
from datetime import UTC, datetime
from typing import Any

import mcp_types as mt
from mcp.shared.exceptions import MCPError
from mcp_types import DEFAULT_NEGOTIATED_VERSION, INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND
from mcp_types import methods as _methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError
from starlette.types import Scope, Send

from connections import ConnectionsError, ToolTask
from connections.serving import TASK_METHODS
from oauth._shared import printable

from ..audit import refusal_rpc_error
from ..auth.chain import Principal
from ..errors import CallRefused, GatewayError
from ..http._asgi import header
from ..policy import caller_of, connection_target
from ..runtime import Runtime
from ..state.request_state import SealedTask
from .pipeline import resolve
from .task_owners import TaskGone

__all__ = [
    "RELATED_TASK_META_KEY",
    "Refused",
    "error_answer",
    "gone_task",
    "open_task",
    "serve_tasks",
    "start_task",
    "task_request",
    "write_answer",
]

logger = logging.getLogger("agent_sdk.mcp")

RELATED_TASK_META_KEY = "io.modelcontextprotocol/related-task"
_NOT_YOURS = "unknown task id: it was not issued to this principal by this gateway"
_FOLLOW_UP_PARAMS: dict[str, type[BaseModel]] = {
    "tasks/get": mt.GetTaskRequestParams,
    "tasks/result": mt.GetTaskPayloadRequestParams,
    "tasks/cancel": mt.CancelTaskRequestParams,
    "tasks/list": mt.PaginatedRequestParams,
}


class Refused(GatewayError):
    """A task request the gateway answers with a JSON-RPC error of its own (`code`, `message`)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


async def serve_tasks(runtime: Runtime, scope: Scope, send: Send, body: Mapping[str, Any]) -> bool:
    """Answer `body` if it is a task request this module takes (module docstring); False, nothing sent, otherwise."""
    method, ident, params = body.get("method"), body.get("id"), body.get("params")
    if type(ident) not in (str, int) or not isinstance(params, dict):
        return False
    is_task_call = method == "tools/call" and "task" in params
    if not is_task_call and method not in TASK_METHODS:
        return False
    version = header(scope, b"mcp-protocol-version") or DEFAULT_NEGOTIATED_VERSION
    if version not in HANDSHAKE_PROTOCOL_VERSIONS:
        return False
    principal = caller_of(scope)
    try:
        if is_task_call:
            _methods.validate_client_request("tools/call", version, params)
        else:  # not in the SDK's table of requests: the 2025-11-25 schema's params
            _FOLLOW_UP_PARAMS[str(method)].model_validate(params, by_name=False)
        if is_task_call:
            result = await _start(runtime, principal, params)
        else:
            result = await _follow(runtime, principal, str(method), params)
        answer: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "result": result}
    except Refused as exc:
        answer = error_answer(ident, exc.code, exc.message)
    except MCPError as exc:
        answer = error_answer(ident, exc.error.code, exc.error.message, exc.error.data)
    except ValidationError as exc:
        answer = error_answer(ident, INVALID_PARAMS, f"invalid params for {method}: {exc.error_count()} error(s)")
    except ConnectionsError as exc:
        answer = error_answer(ident, INTERNAL_ERROR, printable(f"{exc.code}: {exc}", 500))
    await write_answer(send, answer)
    return True


def _failed(created: Any) -> bool:
    return bool(getattr(created, "isError", False))


async def start_task(
    runtime: Runtime, caller: Principal, name: str, arguments: Any, ttl: Any
) -> tuple[ToolTask | None, dict[str, Any]]:
    """Start `name` as a task of `caller`'s on its connection: the handle and the task as JSON with its sealed
    id, or (None, the `CallToolResult`) from an upstream that ran it at once. Raises `Refused`, `MCPError`
    (an unknown tool, or one the policy hides from `caller`), `ConnectionsError`."""
    principal = caller.id
    tool = await resolve(runtime, name, caller)
    connection = tool.connection
    defn = runtime.project.connections.get(connection) if connection is not None else None
    own_sessions = defn is not None and (defn.auth is not None or defn.upstream_sessions == "per_principal")
    if connection is None or defn is None or defn.kind == "account" or own_sessions:
        raise Refused(
            METHOD_NOT_FOUND,
            f"tool {tool.name!r} cannot run as a task here: tasks run on shared pooled connections "
            "(not authored tools, account connections, connections with a per-session auth callback "
            "or with upstream_sessions='per_principal')",
        )

    def create() -> Awaitable[Any]:
        return runtime.host.mcp.call_tool(
            connection, tool.name, arguments, task=True, ttl_ms=ttl if isinstance(ttl, int) else None
        )

    try:
        if runtime.guard is None:
            created = await create()
        else:  # audit, limits, approval before the task starts (docs/audit.md)
            created = await runtime.guard.run(tool.name, connection, None, principal, arguments, create, _failed)
    except CallRefused as exc:
        raise refusal_rpc_error(exc) from None
    except ValueError as exc:  # an account connection: no tasks there
        raise Refused(METHOD_NOT_FOUND, str(exc)) from None
    if not isinstance(created, ToolTask):  # the upstream ran it at once: its CallToolResult
        return None, created.model_dump(mode="json", by_alias=True, exclude_none=True)
    task_json = created.task.model_dump(mode="json", by_alias=True, exclude_none=True)
    owner = runtime.task_owners.me if runtime.task_owners is not None else ""
    sealed = runtime.request_states.seal_task(
        connection, created.task_id, principal, owner=owner, created_at=created.task.created_at, ttl=created.task.ttl
    )
    return created, {**task_json, "taskId": sealed}


def open_task(runtime: Runtime, caller: Principal, task_id: Any, action: str) -> SealedTask:
    """What `task_id` seals, if `caller` made it and the policy lets it perform `action` (`tasks/get`, ...) on
    that connection. Raises `Refused` (the same answer for both)."""
    opened = runtime.request_states.task_facts(task_id, caller.id)
    if opened is None or not runtime.policy.decide(caller, action, connection_target(opened.connection)).allowed:
        raise Refused(INVALID_PARAMS, _NOT_YOURS)
    return opened


async def task_request(runtime: Runtime, task: SealedTask, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """`method` for `task` where it lives (`task_owners.py`), `params` with the upstream's id. Raises `TaskGone`
    (its session ended with its replica or child), `MCPError`, `ConnectionsError`."""
    upstream = {**params, "taskId": task.upstream_id}
    if runtime.task_owners is None:
        return await runtime.host.mcp.task_request(task.connection, method, upstream)
    return await runtime.task_owners.request(task.owner, task.connection, method, upstream)


def gone_task(task: SealedTask, sealed_id: str, reason: str) -> dict[str, Any]:
    """A task whose upstream session ended (`TaskGone`), as the 2025-11-25 `Task` the peer polls: `failed`."""
    now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return {
        "taskId": sealed_id,
        "status": "failed",
        "statusMessage": reason,
        "createdAt": task.created_at or now,
        "lastUpdatedAt": now,
        "ttl": task.ttl,
    }


async def _start(runtime: Runtime, principal: Principal, params: Mapping[str, Any]) -> dict[str, Any]:
    task: Any = params["task"]
    ttl = task.get("ttl") if isinstance(task, dict) else None
    handle, created = await start_task(runtime, principal, params["name"], params.get("arguments"), ttl)
    return created if handle is None else {"task": created}


async def _follow(runtime: Runtime, principal: Principal, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    if method == "tasks/list":
        raise Refused(
            METHOD_NOT_FOUND,
            "tasks/list is not served: upstream tasks are shared by every principal of this gateway; "
            "keep the task ids your task-augmented calls returned and ask tasks/get for each",
        )
    task = open_task(runtime, principal, params.get("taskId"), method)
    sealed_id = params["taskId"]
    try:
        answer = await task_request(runtime, task, method, params)
    except TaskGone as exc:
        if method == "tasks/cancel":  # 2025-11-25: a terminal task cannot be cancelled (-32602)
            raise Refused(INVALID_PARAMS, f"the task already ended failed: {exc}") from None
        if method == "tasks/result":  # what the call returns, for a call that failed
            stamp = {RELATED_TASK_META_KEY: {"taskId": sealed_id}}
            return {"content": [{"type": "text", "text": str(exc)}], "isError": True, "_meta": stamp}
        return gone_task(task, sealed_id, str(exc))
    if method == "tasks/result":
        meta = answer.get("_meta")
        related = meta.get(RELATED_TASK_META_KEY) if isinstance(meta, dict) else None
        if isinstance(meta, dict) and isinstance(related, dict):
            answer["_meta"] = {**meta, RELATED_TASK_META_KEY: {**related, "taskId": sealed_id}}
        return answer
    return {**answer, "taskId": sealed_id}


def error_answer(ident: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": ident, "error": error}


async def write_answer(send: Send, answer: dict[str, Any], status: int = 200) -> None:
    """One JSON-RPC answer as `application/json` with `status`."""
    payload = json.dumps(answer, separators=(",", ":")).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
