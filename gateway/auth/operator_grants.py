"""Which OAuth peers are operators: `--operator-scope SCOPE` and `--operator-claim NAME=VALUE`.

The auth chain asks `OperatorGrant.admits` once, where it admits an OAuth principal, and sets the role on
the `Principal` it makes (`auth_chain`); routes never look at scopes or claims for this.

- a scope: the token's `scope` (or `scp`) holds it;
- a claim `NAME=VALUE`: the token's claim `NAME` is `VALUE`, or is a list that contains `VALUE` (the
  `groups` and `roles` claims IdPs send). `NAME` is looked up as given first (Auth0's namespaced
  `https://example.com/roles`), then as a dotted path into objects (Keycloak's `realm_access.roles`).

Any one match makes the principal an operator (docs/http-api.md, "Roles"; docs/deploy.md, "OAuth").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .oauth_tokens import OAuthIdentity

__all__ = ["OperatorGrant", "parse_claim"]


def parse_claim(entry: str) -> tuple[str, str]:
    """`NAME=VALUE` as a pair; raises `ValueError` with a sentence for anything else."""
    name, sep, value = entry.partition("=")
    if not sep or not name.strip() or not value.strip():
        raise ValueError(f"{entry[:80]!r} is not NAME=VALUE (e.g. groups=gateway-admins, realm_access.roles=admin)")
    return name.strip(), value.strip()


def _claim(claims: Mapping[str, Any], name: str) -> object:
    if name in claims:
        return claims[name]
    node: object = claims
    for part in name.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _holds(found: object, value: str) -> bool:
    if isinstance(found, list | tuple):
        return any(isinstance(item, str) and item == value for item in found)
    if isinstance(found, bool):
        return value == ("true" if found else "false")
    return isinstance(found, str | int) and str(found) == value


@dataclass(frozen=True, slots=True)
class OperatorGrant:
    """The scopes and claims (any one suffices) that make an OAuth principal an operator."""

    scopes: frozenset[str]
    claims: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, scopes: Iterable[str], claims: Iterable[str]) -> OperatorGrant | None:
        """The grant the settings configure; None when they configure none."""
        grant = cls(frozenset(scopes), tuple(parse_claim(c) for c in claims))
        return grant if grant.scopes or grant.claims else None

    def admits(self, identity: OAuthIdentity) -> bool:
        if self.scopes & identity.scopes:
            return True
        return any(_holds(_claim(identity.claims, name), value) for name, value in self.claims)
