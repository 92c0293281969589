"""`agent-sdk serve --stdio`: the toolset `/v1/mcp/tools` serves, as a plain stdio MCP server.

A desktop client (Claude Desktop, Cursor, VS Code) launches the gateway as it launches any local
server and sees the project's authored tools and every advertised upstream tool, listed live and
fail-closed exactly as on `/v1/mcp/tools` (the same `tools_server`, the same catalog and broker).
stdout carries the protocol only: the log, the children's stderr and any print of a definition
file go to stderr. The session ends when the client closes stdin; every upstream client and stdio
child is closed then (as on Ctrl-C).
"""

from __future__ import annotations

import fcntl
import functools
import os
import sys
import time
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from io import TextIOWrapper
from typing import Any, BinaryIO

import anyio
from mcp.server.stdio import stdio_server

from connections import Project
from connections.serving import tracing_enabled

from ..app import default_broker
from ..audit import serving_guard
from ..policy import PolicyGate, turn_toolset
from ..reloads import serving_reloads
from ..runners._select import make_runner
from ..runtime import Runtime
from ..sessions import SessionService
from ..settings import ServeSettings
from ..stores import session_store
from ..telemetry import record_session
from .curated import CuratedView
from .tools import tools_server
from .toolsets import ToolCatalog

__all__ = ["claim_protocol_stdout", "serve_stdio"]


def claim_protocol_stdout() -> BinaryIO:
    """Take fd 1 for the protocol and point fd 1 (and so `print`, logging, children) at stderr.

    Called before the project loads: a validation error, a warning or a library's print must not
    reach a client that parses every stdout line as JSON-RPC. The SDK's `stdio_server` does the
    same while it serves; this covers everything before it and after it. Raises `OSError` when
    the descriptors cannot be duplicated.
    """
    sys.stdout.flush()
    wire = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    os.dup2(2, 1)
    return os.fdopen(wire, "wb")


async def _serve(project: Project, settings: ServeSettings, wire: BinaryIO, curated: str | None) -> None:
    runner = make_runner(settings.runner)
    async with (
        default_broker(project, settings) as broker,
        SessionService.running(session_store(settings), broker.builder, runner) as sessions,
        AsyncExitStack() as stack,
    ):
        guard = await serving_guard(settings, project, stack, mcp_surface="stdio")  # docs/audit.md
        runtime = Runtime(
            settings=settings,
            project=project,
            builder=broker.builder,
            catalog=ToolCatalog(broker.builder, ttl=settings.toolset_ttl_s),
            sessions=sessions,
            runner=runner,
            host=getattr(broker, "host", None),
            started_at=datetime.now(UTC).isoformat(timespec="seconds"),
            mcp={},
            offerings=getattr(broker, "offerings", None),
            policy=PolicyGate.for_project(project.root),
            guard=guard,
        )
        sessions.narrow = functools.partial(turn_toolset, runtime.policy)
        guard.policy = runtime.policy  # each audit record names the policies that decided it
        runtime.policy.on_denied_call = guard.policy_refused

        pool = getattr(broker, "pool", None)
        if pool is not None:  # a changed upstream's tools are checked against mcp.lock before the next call
            pool.listing_cache.watch(runtime.catalog.changed)

        def runtime_of(_ctx: Any) -> Runtime:
            return runtime

        if curated is None:
            server = tools_server(runtime_of, runtime.offerings)
        else:  # a curated server (docs/curated-servers.md)
            server = tools_server(runtime_of, runtime.offerings, view=CuratedView(project.servers[curated]))
        stdout = anyio.wrap_file(TextIOWrapper(wire, encoding="utf-8"))
        started = time.perf_counter()
        try:
            async with stdio_server(stdout=stdout) as (read, write), anyio.create_task_group() as watcher:
                watcher.start_soon(
                    serving_reloads(settings.policy_reload_s, runtime.policy.reload, project, broker, runtime).run
                )  # gateway/reloads.py
                await server.run(read, write, server.create_initialization_options())
                watcher.cancel_scope.cancel()
        finally:
            if tracing_enabled():  # the one peer's session: until it closed stdin
                record_session("pipe", time.perf_counter() - started)


def serve_stdio(project: Project, settings: ServeSettings, wire: BinaryIO, curated: str | None = None) -> None:
    """Serve `project`'s server tools (or its curated server `curated`) on stdin and `wire` (see
    `claim_protocol_stdout`) until stdin closes.

    Raises `ValueError` for an unknown runner name.
    """
    anyio.run(_serve, project, settings, wire, curated)
