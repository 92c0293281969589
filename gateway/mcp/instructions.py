"""The `instructions` of `/v1/mcp/tools` (and `serve --stdio`): what its upstreams say of themselves.

A server's `instructions` (the `initialize` result at the handshake versions, `server/discover` at
2026-07-28) tell a client's model how to use its tools. A gateway that dropped them would serve the
tools without the advice. So the gateway's own `instructions` are the instructions of every connection
whose tools, resources or prompts it offers there, each inside `<connection name="...">` ... `</connection>`
(a heading would be ambiguous: upstream instructions are Markdown with headings of their own), in name order,
bounded: `MAX_PER_CONNECTION` bytes of each (cut at a character boundary, marked), `MAX_TOTAL` bytes in
all (the connections that do not fit are named instead). Host-only, account and per-session `auth`
connections take no part (their tools are not offered there).

Before answering `initialize` or `server/discover`, the middleware opens the offered connections (as
the `tools/list` that follows would, from the listing cache when fresh), waiting at most `OPEN_WAIT`
seconds: a connection that is down or slow is left out of that answer rather than holding it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.lowlevel import Server

from connections import ConnectionDefinition, ConnectionsError

from ..runtime import Runtime

__all__ = ["MAX_PER_CONNECTION", "MAX_TOTAL", "OPEN_WAIT", "InstructionsMiddleware", "compose", "offered"]

MAX_PER_CONNECTION = 2048
"""Bytes (UTF-8) of one connection's instructions; the rest is cut."""
MAX_TOTAL = 8192
"""Bytes (UTF-8) of the gateway's whole `instructions`."""
OPEN_WAIT = 10.0
"""Seconds an `initialize` / `server/discover` waits for the offered connections to open."""

_INTRO = (
    "This gateway serves the tools of several MCP servers. What each server says about its own tools "
    "follows, inside a <connection> element named for its connection."
)
_CUT = " […cut]"


def offered(connections: Sequence[ConnectionDefinition]) -> list[ConnectionDefinition]:
    """The connections whose tools, resources or prompts `/v1/mcp/tools` offers, by name."""
    return sorted(
        (
            d
            for d in connections
            if not d.host_only
            and d.auth is None
            and d.kind != "account"
            and (d.advertise_tools or d.advertise_resources is not False or d.advertise_prompts is not False)
        ),
        key=lambda d: d.name,
    )


def _cut(text: str, limit: int) -> str:
    data = text.encode()
    if len(data) <= limit:
        return text
    keep = limit - len(_CUT.encode())
    return data[:keep].decode(errors="ignore") + _CUT


def compose(parts: Sequence[tuple[str, str | None]]) -> str | None:
    """The gateway's `instructions` from `(connection, its instructions)` in order; None when none has any."""
    sections = [(name, _cut(text.strip(), MAX_PER_CONNECTION)) for name, text in parts if text and text.strip()]
    if not sections:
        return None
    out, used = [_INTRO], len(_INTRO.encode())
    for i, (name, text) in enumerate(sections):
        section = f'<connection name="{name}">\n{text}\n</connection>'
        rest = [n for n, _ in sections[i + 1 :]]
        note = f"(Left out, over the {MAX_TOTAL}-byte bound: the instructions of {', '.join([name, *rest])}.)"
        if used + len(section.encode()) + 2 + (len(note.encode()) + 2 if rest else 0) > MAX_TOTAL:
            out.append(_cut(note, MAX_TOTAL - used - 2))
            break
        out.append(section)
        used += len(section.encode()) + 2
    return "\n\n".join(out)


class InstructionsMiddleware(ServerMiddleware[Any]):
    """Sets `server.instructions` from the offered connections before an `initialize` or `server/discover`
    is answered (module docstring). The value is the same for every peer, so one server holds it."""

    only_methods = frozenset({"initialize", "server/discover"})
    """It acts on these alone: the `/v1/mcp/tools` lane (`gateway/mcp/lane.py`) still answers `tools/*` itself."""

    def __init__(self, server: Server[Any], runtime: Callable[[ServerRequestContext[Any, Any]], Runtime]) -> None:
        self._server = server
        self._runtime = runtime

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method in self.only_methods:
            runtime = self._runtime(ctx)
            if runtime.host is not None:
                self._server.instructions = await _gathered(runtime)
        return await call_next(ctx)


async def _gathered(runtime: Runtime) -> str | None:
    host = runtime.host.mcp
    defns = offered(list(runtime.project.connections.values()))

    async def open_one(defn: ConnectionDefinition) -> None:
        try:
            await host.list_tools(defn.name, use_cache=True)
        except ConnectionsError:
            pass  # down or refusing: its instructions are left out of this answer (its tools/list says why)

    with anyio.move_on_after(OPEN_WAIT):
        async with anyio.create_task_group() as tg:
            for defn in defns:
                if host.status(defn.name).state != "open":
                    tg.start_soon(open_one, defn)
    return compose([(d.name, host.status(d.name).instructions) for d in defns])
