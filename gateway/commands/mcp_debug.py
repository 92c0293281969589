"""`agent-sdk mcp list|tools|call`: talk to one connection from the terminal.

The commands use the same client pool as `serve` (static headers, stored OAuth tokens from the
state root; never a session's `auth` callback). Failures print one sentence naming the
connection and exit 1; the SDK's own log lines (and their tracebacks) stay quiet unless
`AGENT_SDK_DEBUG=1`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import mcp_types as mt

from connections import Broker, ConnectionDefinition, Project
from connections.serving import CallContext, CallRequest, NotificationsOnly, calling, shown_command, shown_url
from oauth._shared import printable

from ._broker_run import run_with_broker
from ._common import add_project_args, json_object_arg
from .project import load

__all__ = ["mcp_call", "mcp_list", "mcp_tools", "register"]

_T = TypeVar("_T")


def register(group: argparse._SubParsersAction[Any]) -> None:  # pyright: ignore[reportPrivateUsage]
    """Add `mcp list`, `mcp tools` and `mcp call` (built with the connection clients)."""
    p = group.add_parser("list", help="list the project's connections (no upstream is contacted)")
    add_project_args(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--show-args", action="store_true", help="show stdio arguments too (known secrets still masked)")
    p.set_defaults(func=mcp_list)

    p = group.add_parser("tools", help="list one connection's tools (after its allow/deny lists)")
    add_project_args(p)
    p.add_argument("name", help="the connection")
    p.add_argument("--json", action="store_true", help="print the tools as MCP JSON")
    p.set_defaults(func=mcp_tools)

    p = group.add_parser("call", help="call one tool and print its result as JSON")
    add_project_args(p)
    p.add_argument("name", help="the connection")
    p.add_argument("tool", help="the tool's name on that connection")
    p.add_argument("--args", default="{}", help='the tool\'s arguments as a JSON object, e.g. \'{"text": "hi"}\'')
    p.set_defaults(func=mcp_call)


def mcp_list(args: argparse.Namespace) -> int:
    """Print each connection: name, kind, target and flags (never header or env values)."""
    project = load(args.dir)
    rows = [_describe(d, args.show_args) for d in sorted(project.connections.values(), key=lambda d: d.name)]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("(no connections)")
    for row in rows:
        flags = " ".join(f for f in ("host-only", "advertised", "oauth", "auth") if row[_FLAG_KEYS[f]])
        print(f"{row['name']:<24} {row['kind']:<8} {row['target']:<48} {flags}".rstrip())
    return 0


def mcp_tools(args: argparse.Namespace) -> int:
    """List the tools of `args.name` as a table or, with `--json`, as MCP `Tool` objects."""
    project = load(args.dir)
    _warn_auth(project, args.name)
    tools = _run(project, args, lambda broker: broker.host.mcp.list_tools(args.name))
    if args.json:
        print(json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools], indent=2))
        return 0
    if not tools:
        print("(no tools)")
    for tool in tools:
        read_only = tool.annotations is not None and tool.annotations.read_only_hint is True
        summary = (tool.description or "").strip().splitlines()
        print(f"{tool.name:<32} {'read' if read_only else '    '}  {summary[0] if summary else ''}".rstrip())
    return 0


def mcp_call(args: argparse.Namespace) -> int:
    """Call `args.tool` on `args.name`; print the result as JSON; exit 1 when the result is an error."""
    arguments = json_object_arg(args.args, "--args", '{"text": "hi"}')
    project = load(args.dir)
    _warn_auth(project, args.name)
    # The server's own progress notifications go to stderr as they come (stdout stays the result).
    context = CallContext(CallRequest(progress_token="agent-sdk-cli"), NotificationsOnly(_show_progress(args.name)))

    async def call(broker: Broker) -> mt.CallToolResult:
        with calling(context):
            return await broker.host.mcp.call_tool(args.name, args.tool, arguments)

    result: mt.CallToolResult = run_with_broker(project, args, call, what=f"calling {args.tool!r} on {args.name!r}")
    print(json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True), indent=2))
    return 1 if result.is_error else 0


def _show_progress(name: str) -> Callable[[str, dict[str, Any]], None]:
    def sink(method: str, params: dict[str, Any]) -> None:
        if method != "notifications/progress":
            return
        total = params.get("total")
        done = _number(params.get("progress")) + (f"/{_number(total)}" if total is not None else "")
        message = params.get("message")
        line = f"{name}| progress {done}" + (f": {printable(str(message), 300)}" if message else "")
        # On a terminal, erase the spinner's line first (it redraws below).
        print(("\r\x1b[2K" if sys.stderr.isatty() else "") + line, file=sys.stderr, flush=True)

    return sink


def _number(value: object) -> str:
    return f"{value:g}" if isinstance(value, int | float) else printable(str(value), 40)


_FLAG_KEYS = {"host-only": "hostOnly", "advertised": "advertiseTools", "oauth": "oauth", "auth": "hasAuth"}


def _describe(defn: ConnectionDefinition, show_args: bool) -> dict[str, Any]:
    # The URL's shape and the command's name only: paths, queries and args may carry secrets.
    target = shown_url(defn.url) if defn.url else shown_command(defn.command or "", defn.args, show_args=show_args)
    if defn.kind == "account":
        target = "servers: " + (defn.servers if isinstance(defn.servers, str) else ", ".join(defn.servers))
    return {
        "name": defn.name,
        "kind": defn.kind,
        "target": target,
        "hostOnly": defn.host_only,
        "advertiseTools": defn.advertise_tools,
        "advertiseResources": _offered(defn.advertise_resources),
        "advertisePrompts": _offered(defn.advertise_prompts),
        "oauth": defn.oauth is not None,
        "hasAuth": defn.auth is not None,
        "protocol": defn.protocol,
        "timeouts": {
            "connect": defn.timeouts.connect,
            "list": defn.timeouts.list,
            "call": defn.timeouts.call,
        },
    }


def _offered(value: bool | frozenset[str]) -> bool | list[str]:
    return value if isinstance(value, bool) else sorted(value)


def _warn_auth(project: Project, name: str) -> None:
    defn = project.connections.get(name)
    if defn is not None and defn.auth is not None:
        print(
            f"agent-sdk: note: connection {name!r} has a per-session auth callback; "
            "this command sends its static headers only",
            file=sys.stderr,
        )


def _run(project: Project, args: argparse.Namespace, operation: Callable[[Broker], Awaitable[_T]]) -> _T:
    return run_with_broker(project, args, operation, what=f"waiting for connection {args.name!r}")
