"""Two processes x 20 concurrent calls share one mcp-auth.json while the access token expires mid-run.

oidc-provider rotates the refresh token on every use and treats a reused one as theft (invalid_grant,
and the whole grant is revoked), so one lost race would show up as an error and failed calls.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from oauth import FileTokenStore, OAuthConfig, follow_redirects, login

from ..helpers import run_worker
from ..peers import AuthServer, ResourceServer

pytestmark = [pytest.mark.anyio, pytest.mark.peers]

CALLS = 20


async def test_two_processes_refresh_a_rotating_token_once_with_zero_relogins(
    tmp_path: Path, auth_server: AuthServer, resource: ResourceServer
) -> None:
    store = FileTokenStore(tmp_path)
    grant = await login("race", resource.url, OAuthConfig(), store, interaction=follow_redirects())
    assert grant.tokens is not None and grant.tokens.expires_at is not None
    before = auth_server.stats()

    reports: list[dict[str, object]] = []

    async def worker() -> None:
        # Rounds of 20 concurrent calls until 2.5 s past the first token's expiry: at least one
        # expiry (and with a 4 s token usually two) falls inside the run.
        reports.append(
            await run_worker(tmp_path, "race", resource.url, calls=CALLS, rounds=2, until=grant.tokens.expires_at + 2.5)
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(worker)
        tg.start_soon(worker)

    after = auth_server.stats()
    refreshes_at_server = after["grants"].get("refresh_token", 0) - before["grants"].get("refresh_token", 0)
    print(f"race: workers={reports} refresh grants at the server={refreshes_at_server}")

    for report in reports:
        assert report["failed"] == 0, report
        assert report["ok"] == CALLS * int(report["rounds"])  # type: ignore[call-overload]
        assert report["logins"] == 0 and report["invalid_grants"] == 0, report
    assert after["codes"] == before["codes"]  # zero re-logins
    assert after["errors"].get("invalid_grant", 0) == before["errors"].get("invalid_grant", 0)  # zero reuse
    assert refreshes_at_server >= 1  # the token did expire mid-run and was refreshed
    # Every rotation the server performed was made by exactly one of the workers.
    assert sum(int(r["refreshes"]) for r in reports) == refreshes_at_server  # type: ignore[call-overload]
