"""The refusal of an action on the gateway itself (the session API, the console): 403 with a sentence.

These are not hidden the way tools, resources and prompts are: the routes exist for everyone, so a
refusal says the policy refused and where the policy lives.
"""

from __future__ import annotations

from ..auth.chain import Principal
from ..errors import Forbidden
from ._decide import PolicyGate
from ._entities import GATEWAY, Target

__all__ = ["require"]


def require(gate: PolicyGate, principal: Principal, action: str, target: Target = GATEWAY) -> None:
    """Raise `Forbidden` unless `principal` may perform `action` on `target` (one decision)."""
    if not gate.decide(principal, action, target).allowed:
        on = "" if target is GATEWAY else f" on {target.id[:200]!r}"
        raise Forbidden(f"the policy (agent/policies.cedar) does not permit {action}{on} for {principal.id}")
