"""The optional account check of `validate` and `info`: which connectors the hub lists for this key.

Only when it is cheap: a hub is configured (environment or `agent-sdk login`) and answers within a
few seconds. Anything else (no login, no keyring, hub down, key refused) skips the check with a
note; validation never fails because a hub could not be asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import httpx2
from pydantic import ValidationError

from oauth._shared import printable

from ..client._translate import transport_failure
from ..project._diagnostics import Diagnostic
from ..project._loader import Project
from ._account import HUB_CONNECTORS_PATH, parse_connector_list
from ._account_login import AccountSetupError, load_account_credentials

__all__ = ["AccountCheck", "check_account_servers"]


@dataclass(frozen=True, slots=True)
class AccountCheck:
    """What the check found: warnings to print, or why it was skipped."""

    warnings: list[Diagnostic]
    skipped: str | None = None
    resolved: dict[str, list[str]] | None = None
    """Each account connection's connectors as the hub lists them now (None when it was not asked)."""


def _linked(environ: Mapping[str, str], timeout: float) -> tuple[str, list[str]] | str:
    """(hub URL, the connectors this key may use), or the sentence saying why the hub was not asked."""
    try:
        creds = load_account_credentials(environ)
    except AccountSetupError as exc:
        return f"account servers not checked: {exc}"
    try:
        response = httpx2.get(
            creds.url + HUB_CONNECTORS_PATH,
            headers={"Authorization": f"Bearer {creds.api_key.reveal()}", "Accept": "application/json"},
            timeout=timeout,
        )
    except httpx2.HTTPError as exc:
        return f"account servers not checked: cannot reach {creds.url} ({transport_failure(exc)})"
    if response.status_code != 200:
        return f"account servers not checked: {creds.url} answered HTTP {response.status_code}"
    try:
        # The hub's names are its text: made printable before `validate` or `info` print them.
        return creds.url, sorted(printable(c.name, 64) for c in parse_connector_list(response.content))
    except ValidationError:
        return f"account servers not checked: {creds.url} is not an agent-sdk hub"


def check_account_servers(
    project: Project, environ: Mapping[str, str], *, timeout: float = 3.0, resolve_all: bool = False
) -> AccountCheck:
    """Ask the configured hub (once, within `timeout`) which connectors each account connection gets.

    Warns for each connection naming connectors the hub does not list for this key, and reports
    what every account connection resolves to (`resolved`, shown by `agent-sdk info`). Without
    `resolve_all` the hub is asked only when some connection names its servers (`validate`). Never
    raises: a hub that cannot be asked is a `skipped` note.
    """
    accounts = [d for d in project.connections.values() if d.kind == "account"]
    if not accounts or not (resolve_all or any(d.servers != "*" for d in accounts)):
        return AccountCheck([])
    found = _linked(environ, timeout)
    if isinstance(found, str):
        return AccountCheck([], found)
    url, linked = found
    warnings: list[Diagnostic] = []
    resolved: dict[str, list[str]] = {}
    for defn in sorted(accounts, key=lambda d: d.name):
        if defn.servers == "*":
            resolved[defn.name] = linked
            continue
        resolved[defn.name] = [s for s in defn.servers if s in linked]
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
                        f"connection {defn.name!r}: the account at {url} has no linked connector {names} "
                        f"(it has: {', '.join(linked) or 'none'}); its turns fail until it is linked or removed "
                        "from servers=[...]"
                    ),
                )
            )
    return AccountCheck(warnings, resolved=resolved)
