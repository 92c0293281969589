"""The 2026-07-28 tasks extension (`io.modelcontextprotocol/tasks`) on `/v1/mcp/tools`, onto 2025-11-25 upstream tasks.

At 2026-07-28 tasks left the core protocol for an extension: a peer that declares it (in the request's
`_meta` client capabilities) may get `resultType: "task"` from `tools/call` instead of the result, and
then polls `tasks/get` (whose answer carries the result inline once the task completed) and may send
`tasks/cancel`. The upstreams that run tasks today speak 2025-11-25 tasks (server-everything's
`simulate-research-query`), so the gateway bridges:

- `tools/call` of a tool whose upstream listing says `execution.taskSupport` `required` or `optional`,
  from a peer that declares the extension: a task-augmented call upstream (`mcp_tasks.start_task`), and
  the peer gets the extension's `CreateTaskResult` (`taskId` sealed as in `gateway/mcp/tasks.py`, `ttlMs`,
  `pollIntervalMs`);
- `tasks/get`: the upstream's `tasks/get`; when it says `completed`, its `tasks/result` too, inline as
  `result`; `failed` becomes `error`; an upstream task waiting for input (`input_required`) is answered
  `-32603` with a sentence (its input requests travel on the 2025-11-25 `tasks/result` stream, which this
  bridge does not relay);
- `tasks/cancel`: the upstream's `tasks/cancel`;
- `tasks/update` (answers to input requests): `-32601`, for the same reason.

The 2026-07-28 request checks run first (`mcp_lane`'s ladder: headers against the body, the `_meta`
envelope), and errors carry the spec's HTTP status. Another principal's or a forged task id is refused
as in `gateway/mcp/tasks.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as mt
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import Scope, Send

from connections import ConnectionsError
from oauth._shared import printable

from ..auth.chain import Principal
from ..http._asgi import header
from ..policy import caller_of
from ..runtime import Runtime
from ..state.request_state import SealedTask
from .lane_checks import ladder_rejection  # the lane's checks, not a copy
from .task_capability import TASKS_EXTENSION
from .task_owners import TaskGone
from .tasks import Refused, error_answer, gone_task, open_task, start_task, task_request, write_answer

__all__ = ["serve_task_extension"]

_TASK_SUPPORT = ("required", "optional")
_METHODS = frozenset({"tools/call", "tasks/get", "tasks/cancel", "tasks/update"})
_STATUS_FIELDS = ("taskId", "status", "statusMessage", "createdAt", "lastUpdatedAt")


def _declares_tasks(params: Mapping[str, Any]) -> bool:
    meta = params.get("_meta")
    caps = meta.get(CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, dict) else None
    extensions = caps.get("extensions") if isinstance(caps, dict) else None
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


async def serve_task_extension(runtime: Runtime, scope: Scope, send: Send, body: Mapping[str, Any]) -> bool:
    """Answer `body` if it is a 2026-07-28 task request this module takes (module docstring); False otherwise."""
    method, ident, params = body.get("method"), body.get("id"), body.get("params")
    if method not in _METHODS or not isinstance(params, dict) or type(ident) not in (str, int):
        return False  # the hot path (a plain tools/call) leaves here, having read three keys
    if method == "tools/call" and (not _declares_tasks(params) or not isinstance(params.get("name"), str)):
        return False
    version = header(scope, b"mcp-protocol-version")
    if version is None or version in HANDSHAKE_PROTOCOL_VERSIONS:
        return False
    if method == "tools/call":
        tool, _, _ = await runtime.catalog.tool(params["name"], None)
        if tool is None or not tool.execution or tool.execution.get("taskSupport") not in _TASK_SUPPORT:
            return False  # the lane answers it as a plain call
    headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
    rejection = ladder_rejection(body, headers)
    if rejection is not None:
        await _write(send, ident, error=(rejection.code, rejection.message, rejection.data))
        return True
    if method != "tools/call" and not _declares_tasks(params):  # the extension's methods need its declaration
        await _write(send, ident, error=_undeclared(str(method)))
        return True
    principal = caller_of(scope)
    try:
        if method == "tools/call":
            result = await _create(runtime, principal, params)
        elif method == "tasks/update":
            raise Refused(
                METHOD_NOT_FOUND,
                "tasks/update is not relayed: the upstream's task asks for input on its 2025-11-25 "
                "tasks/result stream, which this gateway does not bridge yet",
            )
        else:
            task = open_task(runtime, principal, params.get("taskId"), str(method))
            if method == "tasks/cancel":
                try:
                    await task_request(runtime, task, "tasks/cancel", {})
                except TaskGone as exc:
                    raise Refused(INVALID_PARAMS, f"the task already ended failed: {exc}") from None
                result = {"resultType": "complete"}
            else:
                result = await _status(runtime, task, params["taskId"])
    except Refused as exc:
        await _write(send, ident, error=(exc.code, exc.message, None))
    except MCPError as exc:
        await _write(send, ident, error=(exc.error.code, exc.error.message, None))
    except ConnectionsError as exc:
        await _write(send, ident, error=(INTERNAL_ERROR, printable(f"{exc.code}: {exc}", 500), None))
    else:
        await _write(send, ident, result=result)
    return True


async def _create(runtime: Runtime, principal: Principal, params: Mapping[str, Any]) -> dict[str, Any]:
    # an unknown (or hidden) name: -32602 as on the lane (`start_task` resolves it)
    handle, created = await start_task(runtime, principal, params["name"], params.get("arguments"), None)
    if handle is None:
        return {**created, "resultType": "complete"}
    return {**_v2_task(created), "resultType": "task"}


def _v2_task(task: Mapping[str, Any]) -> dict[str, Any]:
    """A 2025-11-25 task (as JSON) in the extension's shape: `ttl` as `ttlMs`, `pollInterval` as `pollIntervalMs`."""
    out = {k: task[k] for k in _STATUS_FIELDS if k in task}
    out["ttlMs"] = task.get("ttl")
    if task.get("pollInterval") is not None:
        out["pollIntervalMs"] = task["pollInterval"]
    return out


async def _status(runtime: Runtime, sealed: SealedTask, sealed_id: str) -> dict[str, Any]:
    try:
        got = await task_request(runtime, sealed, "tasks/get", {})
        result = await task_request(runtime, sealed, "tasks/result", {}) if got.get("status") == "completed" else {}
    except TaskGone as exc:
        got, result = gone_task(sealed, sealed_id, str(exc)), {}
    task = {**_v2_task(got), "taskId": sealed_id, "resultType": "complete"}
    if got.get("status") == "completed":
        result.pop("_meta", None)  # the upstream's related-task stamp names its own id
        task["result"] = {**result, "resultType": "complete"}
    elif got.get("status") == "failed":
        task["error"] = {"code": INTERNAL_ERROR, "message": got.get("statusMessage") or "the upstream task failed"}
    elif got.get("status") == "input_required":
        raise Refused(
            INTERNAL_ERROR,
            "the upstream task is waiting for input, which the 2026-07-28 tasks bridge does not relay yet; "
            "cancel it, or call the tool from a 2025-11-25 client",
        )
    return task


def _undeclared(method: str) -> tuple[int, str, Any]:
    """-32021 (missing required client capability) naming the extension, as the `mcp` SDK's
    `require_client_extension` answers (SEP-2133): the peer learns what to declare, not that its task is unknown."""
    required = mt.ClientCapabilities(extensions={TASKS_EXTENSION: {}})
    data = mt.MissingRequiredClientCapabilityErrorData(required_capabilities=required)
    message = (
        f"{method} belongs to the {TASKS_EXTENSION!r} extension, which this request did not declare: add it to "
        "_meta's clientCapabilities.extensions"
    )
    return MISSING_REQUIRED_CLIENT_CAPABILITY, message, data.model_dump(by_alias=True, mode="json", exclude_none=True)


async def _write(
    send: Send, ident: Any, *, result: dict[str, Any] | None = None, error: tuple[int, str, Any] | None = None
) -> None:
    if error is not None:  # at 2026-07-28 an error carries the spec's HTTP status
        code, message, data = error
        await write_answer(send, error_answer(ident, code, message, data), ERROR_CODE_HTTP_STATUS.get(code, 200))
    else:
        await write_answer(send, {"jsonrpc": "2.0", "id": ident, "result": result})
