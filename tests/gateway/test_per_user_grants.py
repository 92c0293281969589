"""Per-user grants (docs/oauth.md#per-user-grants) against real components: oidc-provider as the upstream's
authorization server, the audience-checking `mcp` 2.x resource server whose `whoami` answers the subject of
the token each call came with, and `agent-sdk serve` with three bearer principals.

Each principal signs in through the URL its first call is answered with, then the three call interleaved:
the upstream sees every call with its caller's own subject. A principal's grant removed (console) or
revoked at the authorization server fails that principal's calls only, each with a new way in."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.oauth.peers import AuthServer, ResourceServer

from .conftest import Served
from .per_user import (
    OPERATOR,
    PEERS,
    THREE,
    assert_retried_after_sign_in,
    call_body,
    modern_headers,
    per_user_gateway,
    principal_of,
    session_turn,
    sign_in,
    sign_in_url_in,
    text_of,
    ts_peer_signs_in,
    whoami,
)

CALLS = 2000


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, resource: ResourceServer) -> Iterator[Served]:
    with per_user_gateway(tmp_path_factory.mktemp("per-user"), resource.url) as served:
        yield served


def test_without_a_grant_a_call_fails_closed_with_a_sign_in_url_for_that_principal(gateway: Served) -> None:
    with httpx2.Client(timeout=30.0) as http:
        result = whoami(http, gateway.url, "alice")
    assert result["isError"] is True
    text = text_of(result)
    assert "sign_in_required" in text and "'docs'" in text
    assert sign_in_url_in(text).startswith(f"{gateway.url}/v1/oauth/sign-in?ticket=agent-sdk.signin1.")


def test_a_sign_in_url_opened_by_another_principal_is_refused_and_stays_good_for_its_own(gateway: Served) -> None:
    with httpx2.Client(timeout=30.0) as http:
        url = sign_in_url_in(text_of(whoami(http, gateway.url, "carol")))
        stranger = http.get(url, headers={"authorization": f"Bearer {PEERS['bob']}"})
        assert stranger.status_code == 403
        assert "issued to someone else" in stranger.text
        forged = http.get(url[:-6] + "AAAAAA", headers={"authorization": f"Bearer {PEERS['carol']}"})
        assert forged.status_code == 400 and "not issued by this gateway" in forged.text
    assert "Signed in" in sign_in(url, "carol").text  # the stranger's attempt did not use it up
    with httpx2.Client(timeout=30.0) as http:
        again = http.get(url, headers={"authorization": f"Bearer {PEERS['carol']}"})
        assert again.status_code == 400 and "already used" in again.text
        answered = whoami(http, gateway.url, "carol")  # the retried call succeeds, as carol
    assert (answered["isError"], answered["structuredContent"]) == (False, {"result": "carol"})


def _signed_in(gateway: Served, name: str) -> None:
    with httpx2.Client(timeout=30.0) as http:
        result = whoami(http, gateway.url, name)
    if result["isError"]:
        page = sign_in(sign_in_url_in(text_of(result)), name)
        assert page.status_code == 200 and "Signed in" in page.text, page.text


async def _interleaved(gateway: Served, calls: int) -> Counter[tuple[str, str]]:
    """`calls` `whoami` calls, the three principals taking turns over a few concurrent lanes each; (caller, answer)."""
    seen: Counter[tuple[str, str]] = Counter()
    names = list(THREE)
    async with httpx2.AsyncClient(timeout=60.0, limits=httpx2.Limits(max_connections=12)) as http:

        async def lane(start: int) -> None:
            for i in range(start, calls, 12):
                name = names[i % 3]
                answer = await http.post(
                    f"{gateway.url}/v1/mcp/tools", json=call_body("whoami", i), headers=modern_headers(name)
                )
                result = answer.json()["result"]
                seen[(name, result["content"][0]["text"] if not result["isError"] else "error")] += 1

        with anyio.fail_after(240):
            async with anyio.create_task_group() as tg:
                for start in range(12):
                    tg.start_soon(lane, start)
    return seen


@pytest.mark.anyio
async def test_three_principals_interleaved_each_call_reaches_the_upstream_as_its_caller(
    gateway: Served, resource: ResourceServer, auth_server: AuthServer
) -> None:
    for name in THREE:
        _signed_in(gateway, name)
    before = Counter(resource.stats()["whoami"])
    seen = await _interleaved(gateway, CALLS)
    assert sum(seen.values()) == CALLS
    assert {pair for pair in seen if pair[0] != pair[1]} == set()  # 0 calls answered with another's subject
    after = Counter(resource.stats()["whoami"])
    assert after - before == Counter({name: seen[(name, name)] for name in THREE})

    # The operator removes alice's grant only (console, per principal): her next call is asked to sign in.
    with httpx2.Client(timeout=30.0, headers={"authorization": f"Bearer {OPERATOR}"}) as operator:
        removed = operator.post(
            f"{gateway.url}/v1/connections/docs/logout", params={"principal": principal_of("alice")}
        )
    assert removed.status_code == 200 and removed.json()["deleted"] is True, removed.text
    seen = await _interleaved(gateway, 60)
    assert seen == Counter({("alice", "error"): 20, ("bob", "bob"): 20, ("carol", "carol"): 20})

    # bob's refresh token revoked at the authorization server (RFC 7009), and the upstream refusing his
    # access token: his next call refreshes, the server says invalid_grant, and only bob is asked to sign in.
    grant = _stored_grant(gateway.state_root, principal_of("bob"))
    revoked = httpx2.post(
        f"{auth_server.issuer}/token/revocation",
        data={"token": grant["tokens"]["refresh_token"], "client_id": grant["client"]["client_id"]},
    )
    assert revoked.status_code == 200
    httpx2.post(f"{resource.base}/_control/reject-subject", params={"sub": "bob"})
    seen = await _interleaved(gateway, 60)
    assert seen == Counter({("alice", "error"): 20, ("bob", "error"): 20, ("carol", "carol"): 20})
    with httpx2.Client(timeout=30.0) as http:
        text = text_of(whoami(http, gateway.url, "bob"))
    assert "refused by the authorization server (invalid_grant)" in text
    sign_in_url_in(text)


def _stored_grant(state_root: Path, principal: str) -> dict[str, object]:
    data = json.loads((state_root / "mcp-auth.json").read_text())
    (record,) = data["grants"][f"docs@{principal}"].values()
    return record


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("era", "name", "version"), [("legacy", "dave", "2025-11-25"), ("modern", "erin", "2026-07-28")]
)
async def test_the_typescript_sdk_peer_is_asked_to_sign_in_by_url_and_its_retry_succeeds(
    gateway: Served, era: str, name: str, version: str
) -> None:
    report = await ts_peer_signs_in(f"{gateway.url}/v1/mcp/tools", name, era)
    assert_retried_after_sign_in(report, gateway.url, era, name, version)


@pytest.mark.anyio
async def test_a_session_turn_fails_naming_the_connection_with_the_url_and_runs_once_signed_in(gateway: Served) -> None:
    failed = await session_turn(gateway.url, "frank", "call whoami {}")
    assert failed["type"] == "turn.failed" and failed["data"]["error"] == "turn_build_failed"
    assert [(p["code"], p["connection"]) for p in failed["data"]["problems"]] == [("sign_in_required", "docs")]
    [way_in] = failed["data"]["signIn"]
    assert way_in["connection"] == "docs" and way_in["url"].startswith(f"{gateway.url}/v1/oauth/sign-in?ticket=")
    page = await anyio.to_thread.run_sync(sign_in, way_in["url"], "frank")
    assert "Signed in" in page.text
    done = await session_turn(gateway.url, "frank", "call whoami {}", failed["session"])
    assert done["type"] == "turn.completed", done
    assert "frank" in json.dumps(done["data"])  # the turn's call ran with frank's own grant


def test_direct_calls_and_the_catalog_act_as_the_caller_with_its_own_grant(gateway: Served) -> None:
    # POST /v1/tools/{name} (the console's Run form) and GET /v1/tools use the caller's grant, as /v1/mcp/tools does.
    def as_(name: str) -> httpx2.Client:
        return httpx2.Client(timeout=30.0, headers={"authorization": f"Bearer {PEERS[name]}"})

    for name in ("carol", "erin"):  # both signed in by the tests above
        with as_(name) as http:
            listed = http.get(f"{gateway.url}/v1/tools")
            assert listed.status_code == 200, listed.text
            assert "whoami" in [t["name"] for t in listed.json()["tools"]], listed.text
            described = http.get(f"{gateway.url}/v1/tools/whoami")
            assert described.status_code == 200 and described.json()["tool"]["connection"] == "docs", described.text
            called = http.post(f"{gateway.url}/v1/tools/whoami", json={"input": {}})
        assert called.status_code == 200, called.text
        envelope = called.json()
        assert envelope["isError"] is False, envelope
        assert name in json.dumps(envelope["result"])  # the upstream saw the caller's own subject
    with as_("alice") as http:  # her grant was removed: her direct call asks her to sign in, as hers
        refused = http.post(f"{gateway.url}/v1/tools/whoami", json={"input": {}})
    assert "names none" not in refused.text
    assert "sign_in_required" in refused.text or "sign-in" in refused.text, refused.text


def test_operators_see_how_many_principals_signed_in_never_who_and_each_person_their_own_state(
    gateway: Served,
) -> None:
    # By now (the tests above, in order): alice's grant removed, bob's refused at refresh (kept, dead),
    # carol, dave, erin and frank signed in.
    def docs(name: str, **params: str) -> dict[str, Any]:
        with httpx2.Client(timeout=30.0, headers={"authorization": f"Bearer {name}"}) as http:
            answer = http.get(f"{gateway.url}/v1/connections", params=params)
        assert answer.status_code == 200, answer.text
        assert all(principal_of(n) not in answer.text for n in PEERS)  # nobody is named
        return next(c for c in answer.json()["connections"] if c["name"] == "docs")

    mine = docs(PEERS["erin"])
    assert (mine["state"], mine["oauth"]["loggedIn"], mine["oauth"]["principals"]) == ("ready", True, 5)
    assert mine["oauth"]["principal"] == "you"
    theirs = docs(PEERS["alice"])
    assert (theirs["state"], theirs["oauth"]["loggedIn"]) == ("needs_login", False)
    asked = docs(OPERATOR, principal=principal_of("dave"))  # an operator asks about one principal
    assert (asked["oauth"]["principal"], asked["oauth"]["loggedIn"]) == ("asked", True)
    ignored = docs(PEERS["alice"], principal=principal_of("dave"))  # a peer cannot look at another's
    assert (ignored["oauth"]["principal"], ignored["oauth"]["loggedIn"]) == ("you", False)

    with httpx2.Client(timeout=30.0, headers={"authorization": f"Bearer {OPERATOR}"}) as operator:
        text = operator.get(f"{gateway.url}/v1/metrics").text
    samples = {
        (s.name, s.labels.get("connection")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("agent_sdk_oauth_grants", "docs")] == 5
    assert samples[("agent_sdk_oauth_refresh_failures_total", "docs")] >= 1  # bob's refused refresh
    assert all(principal_of(n) not in text for n in PEERS)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", "from gateway.cli import entrypoint; entrypoint()", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=90, check=False)


def test_the_cli_logs_out_one_principal_and_refuses_a_logout_naming_none(gateway: Served) -> None:
    where = ["--dir", str(gateway.state_root.parent / "project"), "--state-root", str(gateway.state_root)]
    refused = _cli("mcp", "oauth", "docs", *where, "--logout")
    assert refused.returncode != 0
    assert "grants='per_principal': each principal signs in through the gateway; name one with --principal" in (
        refused.stderr
    )
    assert _stored_grant(gateway.state_root, principal_of("carol"))
    done = _cli("mcp", "oauth", "docs", *where, "--logout", "--principal", principal_of("carol"))
    assert done.returncode == 0, done.stderr
    assert "logged out; revoked at the authorization server" in done.stdout
    assert all(token not in done.stdout + done.stderr for token in PEERS.values())
    holders = json.loads((gateway.state_root / "mcp-auth.json").read_text())["grants"]
    assert f"docs@{principal_of('carol')}" not in holders
    assert {f"docs@{principal_of(n)}" for n in ("dave", "erin", "frank")} <= set(holders)  # the others stay


def test_a_403_insufficient_scope_asks_that_principal_to_sign_in_again_for_the_union(
    gateway: Served, resource: ResourceServer
) -> None:
    # Step-up (RFC 6750 §3.1, issue 45 item 2): a principal whose grant lacks a scope the upstream now wants gets a
    # sign-in link naming it, and that sign-in asks for the scopes held and the scope challenged, so the call works.
    _signed_in(gateway, "erin")
    resource.require_scope("mcp:admin")
    try:
        with httpx2.Client(timeout=30.0) as http:
            refused = whoami(http, gateway.url, "erin")
            assert refused["isError"] is True
            text = text_of(refused)
            assert "sign_in_required" in text and "'mcp:admin'" in text and "'mcp:tools mcp:admin'" in text, text
            assert "***" not in text
            page = sign_in(sign_in_url_in(text), "erin")
            assert page.status_code == 200 and "Signed in" in page.text, page.text
            answered = whoami(http, gateway.url, "erin")
        assert (answered["isError"], answered["structuredContent"]) == (False, {"result": "erin"})
    finally:
        resource.require_scope(None)
