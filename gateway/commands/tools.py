"""`agent-sdk tools list|call`: the server tools from the terminal, as `/v1/mcp/tools` serves them.

The set is the session-less toolset (authored tools plus every advertised connection without a
per-session `auth`). `list` is fail-closed: a connection that cannot be listed fails the command,
naming it. `call` finds its tool as `POST /v1/tools/{name}` does (`ToolCatalog.tool`: only the
connection it needs; another connection's failure does not fail it, and a tool that may be on a
connection that could not be listed is refused naming that connection and its cause); it prints
the MCP result as JSON and exits 1 when it is an error.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from connections import Broker, ToolInputError, Toolset, TurnBuildError, acting_for

from ..errors import CliError
from ..mcp.toolsets import ToolCatalog, missing_tool
from ._broker_run import run_with_broker
from ._common import add_project_args, json_object_arg
from .project import load

__all__ = ["register", "tools_call", "tools_list"]


def register(sub: argparse._SubParsersAction[Any]) -> None:  # pyright: ignore[reportPrivateUsage]
    parser = sub.add_parser("tools", help="list and call the server tools (authored and advertised)")
    group = parser.add_subparsers(dest="tools_command", metavar="SUBCOMMAND", required=True)
    p = group.add_parser("list", help="the server tools /v1/mcp/tools lists (advertised connections are listed)")
    add_project_args(p)
    p.add_argument("--json", action="store_true", help="print the tools as MCP JSON")
    p.set_defaults(func=tools_list)
    p = group.add_parser("call", help="call one server tool and print its MCP result as JSON")
    add_project_args(p)
    p.add_argument("name", help="the tool's name, as tools list shows it")
    p.add_argument("--input", default="{}", help='the tool\'s input as a JSON object, e.g. \'{"name": "Ada"}\'')
    p.set_defaults(func=tools_call)


async def _toolset(broker: Broker) -> Toolset:
    try:
        return await broker.builder.build(None)
    except TurnBuildError as exc:
        raise CliError(f"the tools cannot be listed (fail-closed): {'; '.join(str(p) for p in exc.problems)}") from None


def tools_list(args: argparse.Namespace) -> int:
    """Print each server tool (name, source, first line of its description), or MCP `Tool` JSON."""
    project = load(args.dir)

    async def listing(broker: Broker) -> list[dict[str, Any]]:
        toolset = await _toolset(broker)
        return [
            {
                "name": t.name,
                "description": t.description,
                "inputSchema": dict(t.input_schema),
                "source": t.source,
                "connection": t.connection,
            }
            for t in sorted(toolset, key=lambda t: t.name)
        ]

    tools = run_with_broker(project, args, listing, what="listing the server tools")
    if args.json:
        print(json.dumps(tools, indent=2))
        return 0
    if not tools:
        print("(no tools)")
    for tool in tools:
        origin = tool["connection"] or tool["source"]
        summary = (tool["description"] or "").strip().splitlines()
        print(f"{tool['name']:<32} {origin:<16} {summary[0] if summary else ''}".rstrip())
    return 0


def tools_call(args: argparse.Namespace) -> int:
    """Call `args.name` with `--input`; print `{content, isError, structuredContent?}`; 1 when it is an error."""
    arguments = json_object_arg(args.input, "--input", '{"name": "Ada"}')
    project = load(args.dir)

    async def call(broker: Broker) -> dict[str, Any]:
        tool, toolset, problems = await ToolCatalog(broker.builder).tool(args.name)
        if tool is None:
            if problems:
                raise CliError(missing_tool(args.name, toolset.names(), problems).message)
            raise CliError(f"no server tool {args.name[:64]!r}; there are: {', '.join(toolset.names()) or 'none'}")
        try:
            with acting_for("cli"):  # one local caller: a `per_principal` connection's one session
                outcome = await tool.call(arguments)
        except ToolInputError as exc:
            raise CliError(str(exc)) from None
        full = outcome.mcp_result()  # the MCP `CallToolResult`, as an MCP surface answers it
        result: dict[str, Any] = {"content": full.get("content", []), "isError": outcome.is_error}
        if full.get("structuredContent") is not None:
            result["structuredContent"] = full["structuredContent"]
        return result

    result = run_with_broker(project, args, call, what=f"calling {args.name!r}")
    print(json.dumps(result, indent=2))
    return 1 if result["isError"] else 0
