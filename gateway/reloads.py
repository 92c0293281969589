"""What `serve` reads from files and reads again while serving: checked every `--policy-reload` seconds and at once
on SIGHUP (`Reloads`), one mechanism for the policy file (`gateway/policy/`) and the connection and tool
definitions (`ProjectReload`).

A file is "changed" when its (mtime ns, size, inode) stamp is (`file_stamp`). A reload validates first: a bad
file keeps what is in force and logs one line naming each bad file and line. A good one is handed to the broker
(`connections.Broker.redefine`): a connection whose definition did not change keeps its pooled client, a changed
or removed one is closed (a stdio child stopped). docs/connections.md#reloading.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import anyio

from connections import Project, load_project
from connections.serving import Change

__all__ = ["DEFINITION_PLACES", "ProjectReload", "Reloads", "Stamp", "file_stamp", "serving_reloads"]

logger = logging.getLogger("agent_sdk.reload")

Stamp = tuple[int, int, int]
"""(mtime ns, size, inode) of a file."""

DEFINITION_PLACES = (
    "agent/mcp-connections",
    "agent/host-connections",
    "agent/tools",
    "agent/extensions",
    "agent/lib",
)
"""The folders whose files define connections and tools (with `mcp.json`), relative to the project root."""


def file_stamp(path: Path) -> Stamp | None:
    """`path`'s stamp, None when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class Reloads:
    """Runs each reload step every `interval` seconds, and at once when asked (`ask`; SIGHUP in `run` where the
    app runs in the main thread, as under `serve`). A step gets `forced`: True when asked, so that it reads its
    files even when their stamps did not change."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._steps: list[Callable[[bool], object]] = []
        self._asked: anyio.Event | None = None

    def add(self, step: Callable[[bool], object]) -> None:
        self._steps.append(step)

    def ask(self) -> None:
        """Reload now (from the event loop's thread)."""
        if self._asked is not None:
            self._asked.set()

    async def run(self) -> None:
        """Until cancelled."""
        self._asked = anyio.Event()
        async with anyio.create_task_group() as tg:
            if threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGHUP"):
                tg.start_soon(self._on_hangup)
            while True:
                with anyio.move_on_after(self.interval):
                    await self._asked.wait()
                forced = self._asked.is_set()
                self._asked = anyio.Event()
                if forced:
                    logger.info("SIGHUP: reloading the policy and the definitions", extra={"event": "reload_asked"})
                for step in self._steps:
                    step(forced)

    async def _on_hangup(self) -> None:
        # SIGHUP's default action ends the process; here it asks for a reload (systemd's ExecReload sends it).
        with anyio.open_signal_receiver(signal.SIGHUP) as signals:
            async for _ in signals:
                self.ask()


class Redefinable(Protocol):
    def redefine(self, project: Project) -> list[str]: ...


class ProjectReload:
    """The connection and tool definitions of the project at `project.root`, read again when a file under
    `DEFINITION_PLACES` or `mcp.json` changed (or on SIGHUP) and handed to `broker`; `changed` is told the
    connections closed after each reload that took (the toolset listings drop what they reused)."""

    def __init__(self, project: Project, broker: Redefinable, changed: Callable[[list[str]], None]) -> None:
        self.root = project.root
        self.broker = broker
        self.changed = changed
        self._stamps = self.stamps()

    def stamps(self) -> dict[Path, Stamp]:
        found: dict[Path, Stamp] = {}
        places = [self.root / place for place in DEFINITION_PLACES]
        for path in [self.root / "mcp.json", *(p for place in places if place.is_dir() for p in place.rglob("*"))]:
            if "__pycache__" in path.parts or not path.is_file():
                continue
            stamp = file_stamp(path)
            if stamp is not None:
                found[path] = stamp
        return found

    def __call__(self, forced: bool = False) -> bool:
        """Reload if a file changed (or `forced`); True when new definitions are in force."""
        stamps = self.stamps()
        if stamps == self._stamps and not forced:
            return False
        self._stamps = stamps
        try:
            project = load_project(self.root)
        except Exception as exc:  # the folder went away: keep serving what was read
            logger.warning("definitions reload failed, the previous definitions stay in force: %s", exc)
            return False
        if project.errors:
            shown = "; ".join(d.format(self.root) for d in project.errors)
            logger.warning(
                "definitions reload failed, the previous definitions stay in force: %s",
                shown,
                extra={"event": "definitions_reload_failed"},
            )
            return False
        try:
            closed = self.broker.redefine(project)
        except ValueError as exc:
            logger.warning(
                "definitions reload refused, the previous definitions stay in force: %s",
                exc,
                extra={"event": "definitions_reload_failed"},
            )
            return False
        self.changed(closed)
        logger.info(
            "definitions reloaded: %d connection(s), %d tool(s); closed: %s",
            len(project.connections),
            len(project.tools),
            ", ".join(closed) or "none",
            extra={"event": "definitions_reloaded"},
        )
        return True


def serving_reloads(
    interval: float, policy: Callable[[bool], object], project: Project, broker: Any, runtime: Any
) -> Reloads:
    """The app's reloads: the policy file (`PolicyGate.reload`), and the definitions where the broker can take
    new ones (a test's broker may not); `runtime` is the app's `Runtime` (its catalog and subscriptions)."""
    reloads = Reloads(interval)
    reloads.add(policy)
    if callable(getattr(broker, "redefine", None)):

        def changed(closed: list[str]) -> None:
            runtime.catalog.forget()
            if runtime.subscriptions is not None:  # peers listening hear that a closed connection's tools changed
                for name in closed:
                    runtime.subscriptions.changed(name, Change("tools"))

        reloads.add(ProjectReload(project, broker, changed))
    return reloads
