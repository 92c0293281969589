"""`PolicyGate`: the one decision point. `decide(principal, action, resource) -> Decision`.

Without `agent/policies.cedar` every decision is allow (no Cedar call at all). With it the default is
deny: Cedar's own semantics (a `forbid` overrides any `permit`; nothing permits, nothing is allowed).
The policy set is compiled once (`_source.py`) and swapped whole when the file changes (`reload`, run by
`gateway/reloads.py` on a change and on SIGHUP): a reload that fails keeps the policy in force and logs one
line. A decision is one Cedar call on the parsed set and a parsed entity pair; a listing is one batch
call. Cedar's answer depends on nothing but the policy set, the request's entities and its one context
attribute, `server` (the curated server it came through, docs/curated-servers.md; no clock), so each
decision is kept, keyed by the principal's and the target's entity text, the action and the server,
until the policy changes: a repeated call costs a dictionary lookup (docs/performance.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import cedarpy
from cachetools import LRUCache

from ..auth.chain import Principal
from ..reloads import file_stamp
from ._entities import GATEWAY, Target, principal_json
from ._source import POLICY_FILE, CompiledPolicy, PolicyError, compile_policy

__all__ = ["Decision", "PolicyGate", "Refusal"]

logger = logging.getLogger("agent_sdk.policy")

_ACTION = "AgentSdk::Action"


@dataclass(frozen=True, slots=True)
class Decision:
    """One decision: `allowed`, and `policies`, the ids of the policies that decided it (a `permit`'s for
    an allow, a `forbid`'s for a deny; none for the default deny and where no policy file is)."""

    allowed: bool
    policies: tuple[str, ...] = ()
    enforced: bool = True
    """False where the project has no policy file (everything allowed, nothing evaluated)."""


_OPEN = Decision(True, (), enforced=False)
_MEMO_SIZE = 16384


@dataclass(frozen=True, slots=True)
class Refusal:
    """A request answered as for a name that does not exist (a hidden or unknown tool, resource, template or
    prompt): what the audit trail records of it. `reason` is `policy_denied` (with the `policies` that
    decided), `unknown_tool`, `tool_held_back` or `not_offered`."""

    method: str
    target: str
    connection: str | None = None
    policies: tuple[str, ...] = ()
    reason: str = "policy_denied"


class PolicyGate:
    """The compiled policy of one project (or none) and its decisions."""

    def __init__(self, path: Path | None = None, compiled: CompiledPolicy | None = None) -> None:
        self.path = path
        self._compiled = compiled
        self._stamp = file_stamp(path) if path is not None else None
        self._decisions: LRUCache[tuple[str, str, str, str], Decision] = LRUCache(maxsize=16384)
        self._memo: dict[tuple[int, str, int, str], tuple[Principal, Target, Decision]] = {}
        """The decision per principal object x action x target object x server: one dict lookup on a call's
        path (a principal and a listed tool's target are each one object for as long as they live:
        `gateway/auth/chain.py`, `_entities.tool_target`), `_decisions` behind it by value."""
        self.on_denied_call: Callable[[Principal, Refusal, str | None], None] | None = None
        """Told of each request answered as for a name that does not exist (the principal, the refusal, the
        surface): the audit trail's record of it (`gateway/audit`), set by the app."""

    @classmethod
    def for_project(cls, root: Path) -> PolicyGate:
        """The gate for the project at `root`: its `agent/policies.cedar` compiled, or open when it has none.
        Raises `PolicyError` naming each bad line."""
        path = root / POLICY_FILE
        return cls(path, compile_policy(path) if path.exists() else None)

    @property
    def enforcing(self) -> bool:
        return self._compiled is not None

    @property
    def policy_count(self) -> int:
        return self._compiled.count if self._compiled is not None else 0

    # -- deciding ------------------------------------------------------------------------------------

    def decide(self, principal: Principal, action: str, resource: Target = GATEWAY, server: str = "") -> Decision:
        """May `principal` perform `action` (an MCP method, `session/turn`, a `console/...` action) on
        `resource`, through the curated server `server` ("" for the gateway's own endpoints: `context.server`)?
        One Cedar call; allow without a policy file."""
        compiled = self._compiled
        if compiled is None:
            return _OPEN
        memo_key = (id(principal), action, id(resource), server)
        kept = self._memo.get(memo_key)
        if kept is not None and kept[0] is principal and kept[1] is resource:  # not a recycled `id()`
            return kept[2]
        who = principal_json(principal)
        key = (who, action, resource.entity, server)
        found = self._decisions.get(key)
        if found is None:
            found = self.evaluate(compiled, principal, who, action, resource, server)
            self._decisions[key] = found
        if len(self._memo) >= _MEMO_SIZE:  # bounded: start again rather than keep an LRU's order per call
            self._memo.clear()
        self._memo[memo_key] = (principal, resource, found)
        return found

    def evaluate(
        self, compiled: CompiledPolicy, principal: Principal, who: str, action: str, resource: Target, server: str = ""
    ) -> Decision:
        """One Cedar evaluation (what `decide` keeps), for the benchmark's cold figure too."""
        request = {
            "principal": {"type": "AgentSdk::Principal", "id": principal.id},
            "action": {"type": _ACTION, "id": action},
            "resource": resource.uid,
            "context": {"server": server},
        }
        entities = f"[{who},{resource.entity}]"
        return self._decision(compiled, cedarpy.is_authorized(request, compiled.policies, entities))

    def decide_many(
        self, principal: Principal, action: str, resources: Sequence[Target], server: str = ""
    ) -> list[Decision]:
        """`decide` for each of `resources` (a listing), in one Cedar call."""
        compiled = self._compiled
        if compiled is None:
            return [_OPEN] * len(resources)
        who = principal_json(principal)
        keys = [(who, action, r.entity, server) for r in resources]
        found = [self._decisions.get(k) for k in keys]
        missing = [i for i, d in enumerate(found) if d is None]
        if missing:
            unique = {resources[i].entity: None for i in missing}
            entities = "[" + ",".join([who, *unique]) + "]"
            uid = {"type": "AgentSdk::Principal", "id": principal.id}
            act = {"type": _ACTION, "id": action}
            context = {"server": server}
            requests = [
                {"principal": uid, "action": act, "resource": resources[i].uid, "context": context} for i in missing
            ]
            results = cedarpy.is_authorized_batch(requests, compiled.policies, entities)
            for i, result in zip(missing, results, strict=True):
                found[i] = self._decisions[keys[i]] = self._decision(compiled, result)
        return [d for d in found if d is not None]

    def visible(self, principal: Principal, action: str, resources: Sequence[Target], server: str = "") -> list[bool]:
        """Which of `resources` a listing shows `principal`: those it may perform `action` on."""
        return [d.allowed for d in self.decide_many(principal, action, resources, server)]

    @staticmethod
    def _decision(compiled: CompiledPolicy, result: cedarpy.AuthzResult) -> Decision:
        names = compiled.names
        return Decision(result.allowed, tuple(names.get(r, r) for r in result.diagnostics.reasons))

    # -- reloading -----------------------------------------------------------------------------------

    def reload(self, forced: bool = False) -> bool:
        """Compile the file again if it changed since it was read (or `forced`: SIGHUP); True when a new policy
        is in force. A file that fails keeps the old policy (one log line naming the lines); a removed file
        keeps it too (restart to serve without a policy)."""
        if self.path is None:
            return False
        stamp = file_stamp(self.path)
        if stamp == self._stamp and not forced:
            return False
        self._stamp = stamp
        if stamp is None:
            if self._compiled is not None:
                logger.warning("policy file %s is gone; the policy read before stays in force", self.path)
            return False
        try:
            compiled = compile_policy(self.path)
        except PolicyError as exc:
            shown = "; ".join(d.format() for d in exc.diagnostics)
            kept = "the previous policy stays in force" if self._compiled is not None else "serving stays open"
            logger.warning("policy reload failed, %s: %s", kept, shown, extra={"event": "policy_reload_failed"})
            return False
        self._compiled = compiled
        self._memo = {}  # a new dict, not clear(): a decision being read stays the old policy's, whole
        self._decisions.clear()
        logger.info(
            "policy reloaded from %s: %d policies", self.path, compiled.count, extra={"event": "policy_reloaded"}
        )
        return True
