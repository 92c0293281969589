"""`agent-sdk validate`'s optional account check: warn about `servers=[...]` names the hub does not list.

Only when it is cheap: a hub is configured (environment or `agent-sdk login`) and answers within a
few seconds. Anything else (no login, no keyring, hub down, key refused) skips the check with a
note; validation never fails because a hub could not be asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import httpx2
from pydantic import ValidationError

from ._account import HUB_CONNECTORS_PATH, parse_connector_list
from ._account_login import AccountSetupError, load_account_credentials
from ._diagnostics import Diagnostic
from ._loader import Project

__all__ = ["AccountCheck", "check_account_servers"]


@dataclass(frozen=True, slots=True)
class AccountCheck:
    """What the check found: warnings to print, or why it was skipped."""

    warnings: list[Diagnostic]
    skipped: str | None = None


def check_account_servers(project: Project, environ: Mapping[str, str], *, timeout: float = 3.0) -> AccountCheck:
    """Warn for each account connection naming connectors the configured hub does not list for this key."""
    named = [d for d in project.connections.values() if d.kind == "account" and d.servers != "*"]
    if not named:
        return AccountCheck([])
    try:
        creds = load_account_credentials(environ)
    except AccountSetupError as exc:
        return AccountCheck([], f"account servers not checked: {exc}")
    try:
        response = httpx2.get(
            creds.url + HUB_CONNECTORS_PATH,
            headers={"Authorization": f"Bearer {creds.api_key.reveal()}", "Accept": "application/json"},
            timeout=timeout,
        )
    except httpx2.HTTPError as exc:
        return AccountCheck([], f"account servers not checked: cannot reach {creds.url} ({type(exc).__name__})")
    if response.status_code != 200:
        return AccountCheck([], f"account servers not checked: {creds.url} answered HTTP {response.status_code}")
    try:
        linked = sorted(c.name for c in parse_connector_list(response.content))
    except ValidationError:
        return AccountCheck([], f"account servers not checked: {creds.url} is not an agent-sdk hub")
    warnings: list[Diagnostic] = []
    for defn in sorted(named, key=lambda d: d.name):
        missing = [s for s in defn.servers if s not in linked]
        if missing:
            names = ", ".join(repr(m) for m in missing)
            warnings.append(
                Diagnostic(
                    path=defn.source or project.root,
                    line=defn.line,
                    severity="warning",
                    code="account-connector-missing",
                    message=(
                        f"connection {defn.name!r}: the account at {creds.url} has no linked connector {names} "
                        f"(it has: {', '.join(linked) or 'none'}); its turns fail until it is linked or removed "
                        "from servers=[...]"
                    ),
                )
            )
    return AccountCheck(warnings)
