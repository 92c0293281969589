"""`agent-sdk mcp resources|read|prompts|prompt`: one connection's resources and prompts from the terminal.

Like `mcp tools` and `mcp call` (`mcp_debug.py`): the serving client pool with static headers, one
sentence and exit 1 on a failure, `--json` for the MCP JSON. Text that came from the upstream goes
through `oauth._shared.printable` line by line before it reaches the terminal.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import mcp_types as mt

from connections import Broker, Project
from oauth._shared import printable

from ..errors import CliError
from ._broker_run import run_with_broker
from ._common import add_project_args
from .project import load

__all__ = ["mcp_prompt", "mcp_prompts", "mcp_read", "mcp_resources", "register"]

_T = TypeVar("_T")
_LINE = 10_000
"""The longest line of upstream text printed as is (longer ones are cut and marked)."""


def register(group: argparse._SubParsersAction[Any]) -> None:  # pyright: ignore[reportPrivateUsage]
    """Add `mcp resources`, `mcp read`, `mcp prompts` and `mcp prompt`."""
    p = group.add_parser("resources", help="list one connection's resources and resource templates")
    add_project_args(p)
    p.add_argument("name", help="the connection")
    p.add_argument("--json", action="store_true", help="print the resources and templates as MCP JSON")
    p.set_defaults(func=mcp_resources)

    p = group.add_parser("read", help="read one resource and print its contents")
    add_project_args(p)
    p.add_argument("name", help="the connection")
    p.add_argument("uri", help="the resource's URI")
    p.add_argument("--json", action="store_true", help="print the MCP ReadResourceResult as JSON")
    p.set_defaults(func=mcp_read)

    p = group.add_parser("prompts", help="list one connection's prompts and their arguments")
    add_project_args(p)
    p.add_argument("name", help="the connection")
    p.add_argument("--json", action="store_true", help="print the prompts as MCP JSON")
    p.set_defaults(func=mcp_prompts)

    p = group.add_parser("prompt", help="get one prompt and print its messages")
    add_project_args(p)
    p.add_argument("name", help="the connection")
    p.add_argument("prompt", help="the prompt's name on that connection")
    p.add_argument(
        "--arg", action="append", default=[], metavar="KEY=VALUE", help="a prompt argument (repeat for more)"
    )
    p.add_argument("--json", action="store_true", help="print the MCP GetPromptResult as JSON")
    p.set_defaults(func=mcp_prompt)


def mcp_resources(args: argparse.Namespace) -> int:
    """Print `args.name`'s resources (URI, name, MIME type) and then its templates."""
    project = load(args.dir)

    async def both(broker: Broker) -> tuple[list[mt.Resource], list[mt.ResourceTemplate]]:
        return (
            await broker.host.mcp.list_resources(args.name),
            await broker.host.mcp.list_resource_templates(args.name),
        )

    resources, templates = _run(project, args, both)
    if args.json:
        print(json.dumps({"resources": _dump(resources), "resourceTemplates": _dump(templates)}, indent=2))
        return 0
    if not resources and not templates:
        print("(no resources)")
    for r in resources:
        print(f"{printable(r.uri):<48} {printable(r.name, 40):<24} {printable(r.mime_type or '', 40)}".rstrip())
    for t in templates:
        line = f"{printable(t.uri_template):<48} {printable(t.name, 40):<24} (template)"
        print(f"{line} {printable(t.mime_type or '', 40)}".rstrip())
    return 0


def mcp_read(args: argparse.Namespace) -> int:
    """Print the contents of `args.uri`: text as text, a blob as one line saying its size and type."""
    project = load(args.dir)
    result: mt.ReadResourceResult = _run(
        project, args, lambda broker: broker.host.mcp.read_resource(args.name, args.uri)
    )
    if args.json:
        print(json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True), indent=2))
        return 0
    for item in result.contents:
        if isinstance(item, mt.TextResourceContents):
            _print_text(item.text)
        else:
            print(f"[blob: {_blob_size(item.blob)} bytes, {printable(item.mime_type or 'no MIME type', 80)}]")
    return 0


def mcp_prompts(args: argparse.Namespace) -> int:
    """Print `args.name`'s prompts: name, arguments (required ones marked `*`) and the first line of the description."""
    project = load(args.dir)
    prompts: list[mt.Prompt] = _run(project, args, lambda broker: broker.host.mcp.list_prompts(args.name))
    if args.json:
        print(json.dumps(_dump(prompts), indent=2))
        return 0
    if not prompts:
        print("(no prompts)")
    for prompt in prompts:
        names = [f"{a.name}{'*' if a.required else ''}" for a in prompt.arguments or []]
        summary = (prompt.description or "").strip().splitlines()
        line = f"{printable(prompt.name, 60):<32} {printable(', '.join(names), 60):<32}"
        print(f"{line} {printable(summary[0]) if summary else ''}".rstrip())
    return 0


def mcp_prompt(args: argparse.Namespace) -> int:
    """Get `args.prompt` with the `--arg` values; print each message (`role: text`, images and resources
    as one line each)."""
    arguments = _key_values(args.arg)
    project = load(args.dir)
    result: mt.GetPromptResult = _run(
        project, args, lambda broker: broker.host.mcp.get_prompt(args.name, args.prompt, arguments)
    )
    if args.json:
        print(json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True), indent=2))
        return 0
    for message in result.messages:
        content = message.content
        if isinstance(content, mt.TextContent):
            print(f"{message.role}:")
            _print_text(content.text)
        elif isinstance(content, mt.ImageContent | mt.AudioContent):
            size, mime = _blob_size(content.data), printable(content.mime_type, 80)
            print(f"{message.role}: [{content.type}: {size} bytes, {mime}]")
        elif isinstance(content, mt.EmbeddedResource):
            print(f"{message.role}: [resource {printable(content.resource.uri)}]")
            if isinstance(content.resource, mt.TextResourceContents):
                _print_text(content.resource.text)
        else:
            print(f"{message.role}: [{printable(content.type, 40)}]")
    return 0


def _key_values(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"--arg takes KEY=VALUE, e.g. --arg city=Paris; got {printable(pair, 60)!r}")
        out[key] = value
    return out


def _print_text(text: str) -> None:
    for line in text.splitlines() or [""]:
        print(printable(line, _LINE))


def _blob_size(data: str) -> int | str:
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return "?"


def _dump(items: list[Any]) -> list[dict[str, Any]]:
    return [item.model_dump(mode="json", by_alias=True, exclude_none=True) for item in items]


def _run(project: Project, args: argparse.Namespace, operation: Callable[[Broker], Awaitable[_T]]) -> _T:
    async def guarded(broker: Broker) -> _T:
        try:
            return await operation(broker)
        except ValueError as exc:  # an account connection (host.mcp says why)
            raise CliError(str(exc)) from None

    return run_with_broker(project, args, guarded, what=f"waiting for connection {args.name!r}")
