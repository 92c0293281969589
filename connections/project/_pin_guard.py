"""`PinGuard`: a live tool listing checked against `mcp.lock`, once per new listing.

The turn builder asks `verdict(defn, tools)` for each advertised connection it lists. The answer is
kept with the listing it was computed for (by the identity of its tool objects, which the listing
cache hands out unchanged until the upstream changes or the entry expires), so a toolset built from
the same listing costs a tuple comparison, and a call costs nothing at all: what is held back is
decided when the listing is taken. The lock file is read again when its stat changes (after
`agent-sdk pin --update`); a lock that stops parsing holds every pinned connection's tools back.

Each change is logged once (a warning naming the connection, the tool, what changed and both digests)
and stays in `held` for the console and the metrics until a listing no longer shows it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp_types as mt

from .._exceptions import TurnProblem
from ._definitions import ConnectionDefinition
from ._pins import KEY_FIELDS, LOCK_FILE, Drift, Lock, PinKind, canonical_definition, drifts, read_lock

__all__ = ["PinGuard", "Verdict", "pinnable", "pinned_names"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one listing of one connection may offer: `held` (tool name -> the sentence saying why it is
    held back), every drift (removals too), and `broken`: a sentence when the lock itself cannot be used
    (then every tool is held back)."""

    held: Mapping[str, str] = field(default_factory=dict[str, str])
    drifts: tuple[Drift, ...] = ()
    broken: str | None = None

    @property
    def clean(self) -> bool:
        return not self.drifts and self.broken is None


_CLEAN = Verdict()


def pinnable(defn: ConnectionDefinition) -> bool:
    """Whether `agent-sdk pin` records `defn`: it advertises tools, resources or prompts, is pooled (no
    per-session `auth`, not an account connection), and is not `pin=False`."""
    offers = defn.advertise_tools or defn.advertise_resources is not False or defn.advertise_prompts is not False
    return offers and defn.pin and defn.auth is None and not defn.host_only and defn.kind != "account"


class PinGuard:
    """Checks listings against the lock at `path` (absent: nothing is pinned, every verdict is clean)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stat: tuple[int, int, int] | None = None
        self._lock: Lock | None = None
        self._broken: str | None = None
        self._memo: dict[tuple[str, str | None], tuple[tuple[int, ...], tuple[mt.Tool, ...], Verdict]] = {}
        self._logged: set[tuple[str, str, str, str | None, str | None]] = set()
        self._offer_memo: dict[tuple[str, PinKind], tuple[tuple[Any, ...], tuple[Any, ...]]] = {}
        self.held_offers: dict[tuple[str, PinKind], dict[str, str]] = {}
        """(connection, kind) -> the resources, templates or prompts its latest listing holds back (key -> why)."""
        self.latest: dict[str, Verdict] = {}
        """Connection -> the verdict on its latest listing (for the console and the metrics)."""
        self.checks = 0
        """Listings actually compared with the lock (a listing seen before is not compared again)."""

    @classmethod
    def for_project(cls, root: Path) -> PinGuard:
        return cls(root / LOCK_FILE)

    def pins(self, defn: ConnectionDefinition) -> bool:
        """Whether `defn`'s listings are checked: a lock exists and `pinnable(defn)`."""
        self._refresh()
        return pinnable(defn) and (self._lock is not None or self._broken is not None)

    def verdict(self, defn: ConnectionDefinition, tools: Sequence[mt.Tool], principal: str | None = None) -> Verdict:
        """The verdict on `tools`, `defn`'s listing (already filtered by its allow/deny lists); `principal`:
        whose listing it is, for a `grants="per_principal"` connection (each person's is checked on its own,
        and a drift names the person whose listing to pin from)."""
        if not self.pins(defn):
            return _CLEAN
        ids = tuple(id(t) for t in tools)
        memo = self._memo.get((defn.name, principal))
        if memo is not None and memo[0] == ids:
            return memo[2]
        self.checks += 1
        verdict = self._check(defn.name, tools, principal)
        # The tools are kept with their ids, so no id can be reused by another object while it is the key.
        self._memo[(defn.name, principal)] = (ids, tuple(tools), verdict)
        self.latest[defn.name] = verdict
        self._log(defn.name, verdict)
        return verdict

    def offered(self, defn: ConnectionDefinition, kind: PinKind, items: tuple[Any, ...]) -> tuple[Any, ...]:
        """The items of `defn`'s `kind` listing (JSON, as `Offerings` keeps them) that the lock lets through;
        the rest go to `held_offers`. Checked once per listing (`items` is the offer cache's own tuple)."""
        if not self.pins(defn):
            return items
        memo = self._offer_memo.get((defn.name, kind))
        if memo is not None and memo[0] is items:
            return memo[1]
        self.checks += 1
        key = KEY_FIELDS[kind]
        current = {str(item.get(key)): canonical_definition(item) for item in items}
        if self._lock is None:
            held = dict.fromkeys(current, f"{self._broken or LOCK_FILE + ' cannot be read'}; held back")
            found: list[Drift] = []
        else:
            found = drifts(defn.name, kind, self._lock.connections.get(defn.name), current, self._lock.definitions)
            held = {d.name: d.sentence() for d in found if d.held_back}
        self.held_offers[(defn.name, kind)] = held
        self._log(defn.name, Verdict(drifts=tuple(found)))
        kept = tuple(item for item in items if str(item.get(key)) not in held)
        self._offer_memo[(defn.name, kind)] = (items, kept)
        return kept

    def owner(self, tool: str) -> str | None:
        """The one connection whose pinned tools include `tool` (None: none, several, or no usable lock)."""
        self._refresh()
        if self._lock is None:
            return None
        found = [name for name, entry in self._lock.connections.items() if tool in entry.items.get("tools", {})]
        return found[0] if len(found) == 1 else None

    def quarantined(self) -> dict[str, int]:
        """Connection -> how many of its tools its latest listing holds back (for the metrics)."""
        return {name: len(v.held) for name, v in self.latest.items()}

    def _check(self, name: str, tools: Sequence[mt.Tool], principal: str | None) -> Verdict:
        if self._broken is not None or self._lock is None:
            reason = self._broken or f"{LOCK_FILE} cannot be read"
            return Verdict({t.name: f"{reason}; every pinned tool is held back" for t in tools}, (), reason)
        current: dict[str, dict[str, Any]] = {t.name: canonical_definition(t) for t in tools}
        found = drifts(name, "tools", self._lock.connections.get(name), current, self._lock.definitions)
        found = [dataclasses.replace(d, principal=principal) for d in found]
        return Verdict({d.name: d.sentence() for d in found if d.held_back}, tuple(found))

    def _refresh(self) -> None:
        try:
            st = self.path.stat()
        except OSError:
            if self._stat is not None or self._lock is not None:
                self._forget(None, None)
            return
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp == self._stat:
            return
        lock, problems = read_lock(self.path)
        broken = None
        if lock is None or problems:
            broken = f"{LOCK_FILE} cannot be used ({problems[0].message if problems else 'unreadable'})"
            lock = None
            logger.error("%s; every pinned connection's tools are held back until it is fixed", broken)
        self._forget(lock, broken)
        self._stat = stamp

    def _forget(self, lock: Lock | None, broken: str | None) -> None:
        self._lock, self._broken, self._stat = lock, broken, None
        self._memo.clear()
        self._offer_memo.clear()
        self.held_offers.clear()
        self.latest.clear()

    def _log(self, name: str, verdict: Verdict) -> None:
        for drift in verdict.drifts:
            key = (name, f"{drift.kind}/{drift.name}", drift.change, drift.new, drift.principal)
            if key in self._logged:
                continue
            self._logged.add(key)
            action = "held back" if drift.held_back else "reported"
            logger.warning("pinned tools: %s (%s)", drift.sentence(full=True), action)


def pinned_names(
    guard: PinGuard | None,
    defn: ConnectionDefinition,
    listing: Sequence[mt.Tool],
    held: dict[str, str],
    problems: list[TurnProblem] | None,
    principal: str | None = None,
) -> set[str]:
    """The names in `listing` (`principal`'s, for a per-person connection) that `mcp.lock` lets through.
    Each tool held back goes to `held`; for a turn (`problems` given) each drift, a removal too, is also a
    problem naming the tool."""
    names = {t.name for t in listing}
    if guard is None:
        return names
    verdict = guard.verdict(defn, listing, principal)
    if verdict.clean:
        return names
    held.update(verdict.held)
    if problems is not None:
        if verdict.broken is not None:
            problems.append(TurnProblem("pin_lock_broken", verdict.broken, connection=defn.name))
        for drift in verdict.drifts:
            problems.append(TurnProblem(f"pin_{drift.change}", drift.detail(), connection=defn.name, tool=drift.name))
    return names - set(verdict.held)
