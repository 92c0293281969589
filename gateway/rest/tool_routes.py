"""`GET /v1/tools`, `GET /v1/tools/{name}`, `POST /v1/tools/{name}`: the catalog and direct calls."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from connections import TurnTool, acting_for

from ..errors import ApiError, InvalidRequest
from ..http.json_answers import error_response, read_object
from ..mcp.tool_calls import bind_session, call_tool
from ..mcp.toolsets import connection_errors, missing_tool
from ..policy import visible_tools
from ..runtime import principal_of, runtime_of

__all__ = ["tool_routes"]


def _light(tool: TurnTool) -> dict[str, Any]:
    out: dict[str, Any] = {"name": tool.name, "source": tool.source}
    if tool.title:
        out["title"] = tool.title
    return out


def _full(tool: TurnTool) -> dict[str, Any]:
    return {
        "name": tool.name,
        "title": tool.title,
        "description": tool.description,
        "execution": dict(tool.execution) if tool.execution else None,  # the upstream's, e.g. {"taskSupport": ...}
        "effect": tool.effect,
        "inputSchema": dict(tool.input_schema),
        "outputSchema": dict(tool.output_schema) if tool.output_schema is not None else None,
        "annotations": dict(tool.annotations) if tool.annotations is not None else None,
        "source": tool.source,
        "connection": tool.connection,
    }


def _binding(request: Request) -> tuple[object, object]:
    return request.query_params.get("session"), request.query_params.get("continuationToken")


async def list_tools(request: Request) -> JSONResponse:
    runtime = runtime_of(request)
    try:
        _live, info = await bind_session(runtime, principal_of(request), *_binding(request))
    except ApiError as exc:
        return error_response(exc)
    with acting_for(principal_of(request).id):  # a per-person connection lists with the caller's grant
        toolset, problems = await runtime.catalog.collect(info)
    toolset = visible_tools(runtime.policy, principal_of(request), toolset)[0]  # the policy's filter
    return JSONResponse(
        {
            "ok": True,
            "tools": [_light(t) for t in sorted(toolset, key=lambda t: t.name)],
            "connectionErrors": connection_errors(problems),
            "heldBack": dict(sorted(toolset.held_back.items())),  # tool -> what changed since mcp.lock
        }
    )


async def describe_tool(request: Request) -> JSONResponse:
    runtime = runtime_of(request)
    name: str = request.path_params["name"]
    try:
        _live, info = await bind_session(runtime, principal_of(request), *_binding(request))
        with acting_for(principal_of(request).id):
            toolset, problems = await runtime.catalog.collect(info)
        toolset = visible_tools(runtime.policy, principal_of(request), toolset)[0]  # hidden: as unknown
        tool = toolset.get(name)
        if tool is None:
            raise missing_tool(name, toolset.names(), problems, verb="tool")
    except ApiError as exc:
        return error_response(exc)
    return JSONResponse({"ok": True, "tool": _full(tool)})


async def post_tool(request: Request) -> JSONResponse:
    runtime = runtime_of(request)
    name: str = request.path_params["name"]
    try:
        body = await read_object(request, optional=True)
        unknown = set(body) - {"input", "sessionId", "continuationToken"}
        if unknown:
            raise InvalidRequest(f"unknown field(s): {', '.join(sorted(unknown))[:200]}")
        session_id = body.get("sessionId")
        if session_id is not None and not isinstance(session_id, str):
            raise InvalidRequest("field 'sessionId' must be a string")
        envelope = await call_tool(
            runtime,
            principal_of(request),
            name,
            body.get("input"),
            session_id=session_id,
            token=body.get("continuationToken"),
        )
    except ApiError as exc:
        return error_response(exc)
    return JSONResponse(envelope)


def tool_routes() -> list[Route]:
    return [
        Route("/v1/tools", list_tools, methods=["GET"]),
        Route("/v1/tools/{name}", describe_tool, methods=["GET"]),
        Route("/v1/tools/{name}", post_tool, methods=["POST"]),
    ]
