"""Approvals an operator can judge (docs/audit.md), against real components: oidc-provider as the company IdP
(its own keys sign every token: a person's login, and tokens carrying the email, name and group claims the
provider's access tokens leave out), `agent-sdk serve --oauth-issuer` with server-everything behind, and the
Python `mcp` client as the peer.

- a held call shows the tool, connection, arguments (a credential in them masked), the person (display name
  and subject), the peer and the deadline, on `GET /v1/approvals`, `approvals list|show` and the audit record,
  which `audit search --who` finds by the person's name or subject;
- the request id in approvals and audit is the gateway's own, the peer's `X-Request-Id` beside it;
- with separation (the default off loopback), an operator cannot approve its own held call;
- a call held when `serve` stops (SIGTERM) is answered with a JSON-RPC error and recorded as `abandoned`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import redis
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from gateway.approvals import ApprovalDecided, RedisApprovals
from gateway.state._redis import redis_client

from ..conftest import ROOT, Served, Upstream, assert_clean, make_project, serve
from ..oauth_peers import Issuer, claims_for, mint, person_token
from ..replicas import STATE_KEY, redis_server

pytestmark = [pytest.mark.peers, pytest.mark.timeout(240)]

OPERATOR = "judged-operator-token-0123456789"
OPS = {"Authorization": f"Bearer {OPERATOR}"}
SECRET = "sk-live-0123456789abcdefXYZ"
MESSAGE = f"delete doc 42 (Authorization: Bearer {SECRET})"
SHOWN = "delete doc 42 (Authorization: Bearer ***)"


def _project(root: Path, everything: Upstream) -> Path:
    body = (
        "from connections import define_connection\n\n"
        f"connection = define_connection(url={everything.url!r}, advertise_tools=True, require_approval=['echo'])\n"
    )
    return make_project(root / "project", {"everything": body}, tools=False)


def _env() -> dict[str, str]:
    return {"AGENT_SDK_OPERATOR_TOKEN": OPERATOR, "AGENT_SDK_APPROVAL_TIMEOUT": "120"}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, idp: Issuer, everything: Upstream) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("judged")
    served = serve(
        _project(root, everything), root / "state", "--oauth-issuer", idp.url, "--operator-claim", "groups=ops",
        env=_env(),
    )  # fmt: skip
    try:
        yield served
    finally:
        served.stop()
    assert_clean(served.log_text(), [SECRET, OPERATOR])


def _token(idp: Issuer, gateway: Served, sub: str, **claims: Any) -> str:
    return mint(idp.key, claims_for(idp.url, gateway.url, sub=sub, **claims))


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SDK_")}
    clean.update({"PYTHONPATH": str(ROOT), "AGENT_SDK_OPERATOR_TOKEN": OPERATOR, **(env or {})})
    cmd = [sys.executable, "-c", "from gateway.cli import entrypoint; entrypoint()", *args]
    return subprocess.run(cmd, env=clean, capture_output=True, text=True, timeout=90, check=False)


async def _pending(served: Served, tool: str = "echo") -> dict[str, Any]:
    """The call waiting for approval, as `GET /v1/approvals` shows it (polled: the hold has no other signal)."""
    async with httpx2.AsyncClient(base_url=served.url, headers=OPS, timeout=30) as http:
        with anyio.fail_after(30):
            while True:
                listed = (await http.get("/v1/approvals")).json()["approvals"]
                if found := [a for a in listed if a["tool"] == tool]:
                    return found[0]
                await anyio.sleep(0.05)


async def _mcp_call(
    url: str, token: str, arguments: dict[str, Any], request_id: str | None = None, mode: str = "auto"
) -> Any:
    """`tools/call echo` from the Python `mcp` client as the holder of `token`; the result or the `MCPError`."""
    headers = {"authorization": f"Bearer {token}", **({"x-request-id": request_id} if request_id else {})}
    async with httpx2.AsyncClient(timeout=150, headers=headers) as http:
        transport = streamable_http_client(f"{url}/v1/mcp/tools", http_client=http)
        async with Client(transport, mode=mode, cache=None) as client:
            try:
                return await client.call_tool("echo", arguments)
            except MCPError as exc:
                return exc


def _direct_call(served: Served, token: str, message: str) -> tuple[threading.Thread, list[httpx2.Response]]:
    """`POST /v1/tools/echo` as the holder of `token`, started in a thread (it waits for an operator); its answer."""
    answers: list[httpx2.Response] = []

    def call() -> None:
        with httpx2.Client(base_url=served.url, timeout=150, headers={"Authorization": f"Bearer {token}"}) as http:
            answers.append(http.post("/v1/tools/echo", json={"input": {"message": message}}))

    held = threading.Thread(target=call, daemon=True)
    held.start()
    return held, answers


def _audit(served: Served, *filters: str) -> list[dict[str, Any]]:
    where = ["--dir", str(served.state_root.parent / "project"), "--state-root", str(served.state_root)]
    done = _cli("audit", "search", *where, *filters)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.mark.anyio
async def test_a_held_call_shows_the_arguments_person_peer_and_deadline_everywhere(
    gateway: Served, idp: Issuer
) -> None:
    alice = _token(idp, gateway, "alice-0001", email="alice@example.com", name="Alice Example")
    answers: list[Any] = []
    pending: dict[str, Any] = {}

    async def call() -> None:
        answers.append(await _mcp_call(gateway.url, alice, {"message": MESSAGE}, request_id="forged-by-peer"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        pending = await _pending(gateway)
        assert (pending["tool"], pending["connection"], pending["surface"]) == ("echo", "everything", "mcp/tools")
        assert pending["arguments"] == {"message": SHOWN}
        assert (pending["name"], pending["subject"]) == ("alice@example.com", "alice-0001")
        assert pending["principal"].startswith("oauth:")
        peer = pending["peer"]  # the clientInfo of the 2026-07-28 call (the SDK's default), its User-Agent
        assert peer["client"].startswith("mcp ") and peer["userAgent"].startswith("python-httpx2/"), peer
        assert pending["requestId"].startswith("req_") and pending["peerRequestId"] == "forged-by-peer"
        assert pending["expiresAt"] > pending["requestedAt"]

        listed = await anyio.to_thread.run_sync(_cli, "approvals", "list", "--url", gateway.url)
        assert listed.returncode == 0, listed.stderr
        assert [json.loads(line) for line in listed.stdout.splitlines()] == [pending]
        shown = await anyio.to_thread.run_sync(_cli, "approvals", "show", pending["id"], "--url", gateway.url)
        assert shown.returncode == 0 and json.loads(shown.stdout) == pending, shown.stderr
        assert SECRET not in listed.stdout + shown.stdout

        approved = await anyio.to_thread.run_sync(_cli, "approvals", "approve", pending["id"], "--url", gateway.url)
        assert approved.returncode == 0, approved.stderr
        assert f"approved {pending['id']} (echo for alice@example.com)" in approved.stdout
    [result] = answers
    assert not isinstance(result, MCPError) and SECRET in result.content[0].text  # the call ran as sent

    [record] = _audit(gateway, "--who", "alice@example.com")
    assert (record["name"], record["subject"], record["outcome"]) == ("alice@example.com", "alice-0001", "ok")
    assert record["approval"]["id"] == pending["id"] and record["approval"]["arguments"] == {"message": SHOWN}
    assert (record["requestId"], record["peerRequestId"]) == (pending["requestId"], "forged-by-peer")
    assert _audit(gateway, "--who", "ALICE-0001") == [record]  # by subject, whatever the case
    assert _audit(gateway, "--who", "bob@example.com") == []
    with gateway.client(OPS) as http:
        scraped = http.get("/v1/metrics").text
    assert 'decision="approved"' in scraped and "alice" not in scraped  # personal data: never a metric label


@pytest.mark.anyio
async def test_a_handshake_era_peer_is_shown_by_its_session_digest_and_a_person_by_name_without_email(
    gateway: Served, idp: Issuer
) -> None:
    erin = _token(idp, gateway, "erin-5", name="Erin Example")  # no email: the name claim
    answers: list[Any] = []

    async def call() -> None:
        answers.append(await _mcp_call(gateway.url, erin, {"message": "erin's"}, mode="legacy"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        pending = await _pending(gateway)
        assert (pending["name"], pending["subject"]) == ("Erin Example", "erin-5")
        peer = pending["peer"]  # 2025-11-25: no clientInfo on the call; its session, by a digest only
        assert "client" not in peer and peer["session"].startswith("sha256:") and len(peer["session"]) == 19, peer
        async with httpx2.AsyncClient(base_url=gateway.url, headers=OPS, timeout=30) as http:
            denied = await http.post(f"/v1/approvals/{pending['id']}", json={"decision": "deny"})
        assert denied.status_code == 200, denied.text
    [answer] = answers
    assert isinstance(answer, MCPError) and answer.error.code == -32003, answer


@pytest.mark.anyio
async def test_a_person_signed_in_at_the_idp_is_shown_by_subject_when_the_token_names_no_email(
    gateway: Served, idp: Issuer
) -> None:
    carol = await anyio.to_thread.run_sync(person_token, idp.url, gateway.url, "carol")  # oidc-provider's login
    held, answers = _direct_call(gateway, carol, "carol's")
    pending = await _pending(gateway)
    assert (pending["name"], pending["subject"], pending["surface"]) == ("carol", "carol", "http")
    async with httpx2.AsyncClient(base_url=gateway.url, headers=OPS, timeout=30) as http:
        denied = await http.post(f"/v1/approvals/{pending['id']}", json={"decision": "deny"})
    assert denied.status_code == 200, denied.text
    await anyio.to_thread.run_sync(held.join, 60)
    assert answers[0].status_code == 403 and answers[0].json()["error"] == "approval_denied"
    [record] = _audit(gateway, "--who", "carol")
    assert (record["outcome"], record["reason"]) == ("refused", "approval_denied")


@pytest.mark.anyio
async def test_an_operator_cannot_approve_its_own_held_call_and_another_operator_can(
    gateway: Served, idp: Issuer
) -> None:
    olivia = _token(idp, gateway, "olivia-7", email="olivia@example.com", groups=["ops"])  # an operator by group
    held, answers = _direct_call(gateway, olivia, "olivia's own")
    pending = await _pending(gateway)
    async with httpx2.AsyncClient(base_url=gateway.url, timeout=30) as http:
        as_olivia = {"Authorization": f"Bearer {olivia}"}
        own = await http.post(f"/v1/approvals/{pending['id']}", json={"decision": "approve"}, headers=as_olivia)
        assert own.status_code == 403, own.text
        assert own.json()["error"] == "approval_separation"
        assert "a call you made yourself" in own.json()["message"] and "another operator" in own.json()["message"]
        other = await http.post(f"/v1/approvals/{pending['id']}", json={"decision": "approve"}, headers=OPS)
    assert other.status_code == 200, other.text
    await anyio.to_thread.run_sync(held.join, 60)
    assert answers[0].status_code == 200 and "olivia's own" in answers[0].text


@pytest.mark.anyio
async def test_a_call_held_when_serve_stops_is_answered_and_recorded_as_abandoned(
    tmp_path: Path, idp: Issuer, everything: Upstream
) -> None:
    # On Redis (--state-url), as replicas run: a late decision through another replica is told what happened.
    with redis_server(tmp_path / "redis") as store:
        env = {**_env(), "AGENT_SDK_STATE_URL": store.url, "AGENT_SDK_STATE_KEY": STATE_KEY}
        served = serve(
            _project(tmp_path, everything), tmp_path / "state", "--oauth-issuer", idp.url,
            "--principal-claim", "preferred_username", env=env,
        )  # fmt: skip
        try:
            dana = _token(idp, served, "dana-3", email="dana@example.com", preferred_username="dana")
            answers: list[Any] = []
            pending: dict[str, Any] = {}
            started = time.monotonic()

            async def call() -> None:
                answers.append(await _mcp_call(served.url, dana, {"message": "never run"}))

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                pending = await _pending(served)
                assert pending["name"] == "dana"  # --principal-claim
                served.proc.send_signal(signal.SIGTERM)
            code = await anyio.to_thread.run_sync(served.proc.wait, 30)
        finally:
            served.stop()
        client = redis_client(store.url)
        try:
            with pytest.raises(ApprovalDecided, match="the gateway stopped while it waited, so the call was not run"):
                await RedisApprovals(client).decide(pending["id"], True, "bearer:another-replica")
        finally:
            await client.aclose()
        shared = redis.Redis.from_url(store.url, decode_responses=True)
        try:
            entries: list[Any] = shared.xrange("agent-sdk:audit")  # pyright: ignore[reportAssignmentType]
        finally:
            shared.close()
        records = [json.loads(fields["r"]) for _id, fields in entries]
    [answer] = answers
    assert isinstance(answer, MCPError), answer
    assert answer.error.code == -32004 and "shutting down" in answer.error.message and "not run" in answer.error.message
    assert time.monotonic() - started < 60  # answered as the gateway stopped, not at the 120 s deadline
    assert code in (0, -signal.SIGTERM)  # uvicorn ends by re-raising the signal it handled
    [record] = _audit(served, "--outcome", "abandoned")  # the file; the shared stream has it too
    assert (record["name"], record["target"], record["reason"]) == ("dana", "echo", "gateway_stopping")
    assert record["approval"]["id"] == pending["id"]
    assert [r["outcome"] for r in records] == ["abandoned"]
    assert_clean(served.log_text(), [OPERATOR])
