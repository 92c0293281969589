"""Peers are not operators: two `--bearer-token` principals and one `--operator-token`, on a real
`agent-sdk serve` (a stdio child to restart, oidc-provider behind an OAuth connection) and in process.

A peer calls tools and uses sessions; it cannot restart a connection (killing other principals' calls),
read `/v1/failures` or `/v1/metrics`, start a console login, or finish the operator's (the callback wants
the cookie of the browser that started it). The operator can do each. The loopback-strict default (the
local user is the operator) is what the console tests run on (`test_console_browser.py`, `test_metrics.py`).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import anyio
import httpx2
import pytest
from pydantic import SecretStr, ValidationError
from starlette.types import Message, Receive, Scope, Send

from connections import load_project
from gateway.app import create_app
from gateway.settings import ServeSettings
from tests.oauth.helpers import authorize
from tests.oauth.peers import ResourceServer

from ..conftest import Served, assert_clean, make_project, serve

ALICE = "alice-peer-token-0123456789"
BOB = "bob-peer-token-0123456789ab"
OPERATOR = "the-operator-token-0123456789"
TOKENS = [ALICE, BOB, OPERATOR]
NOTES = Path(__file__).resolve().parents[3] / "examples" / "quickstart" / "servers" / "notes_server.py"


def _connections(resource_url: str) -> dict[str, str]:
    head = "from connections import define_connection\n\n"
    return {
        "notes": head + f"connection = define_connection(command={sys.executable!r}, args=[{str(NOTES)!r}], "
        "advertise_tools=True)\n",
        "docs": head + f"connection = define_connection(url={resource_url!r}, oauth=True)\n",
    }


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, resource: ResourceServer) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("roles")
    project = make_project(root / "project", _connections(resource.url), tools=False)
    flags = ("--bearer-token", ALICE, "--bearer-token", BOB)
    server = serve(project, root / "state", *flags, env={"AGENT_SDK_OPERATOR_TOKEN": OPERATOR})
    yield server
    server.stop()
    assert_clean(server.log_text(), TOKENS)


def _opens(served: Served) -> int:
    with served.client(_bearer(OPERATOR)) as http:
        listed = http.get("/v1/connections").json()["connections"]
    return next(c["opens"] for c in listed if c["name"] == "notes")


def _assert_operator_required(answer: httpx2.Response) -> None:
    assert answer.status_code == 403, answer.text
    body = answer.json()
    assert body["error"] == "operator_required"
    assert "peer credential (--bearer-token" in body["message"] and "--operator-token" in body["message"]


def test_a_peer_token_cannot_restart_read_failures_or_metrics_or_start_a_login_and_the_operator_can(
    served: Served,
) -> None:
    with served.client(_bearer(ALICE)) as http:  # the child is up: a peer's own call opened it
        assert http.post("/v1/tools/list_notes", json={"input": {}}).status_code == 200
    opens = _opens(served)
    for peer in (ALICE, BOB):
        with served.client(_bearer(peer)) as http:
            _assert_operator_required(http.post("/v1/connections/notes/restart", json={}))
            _assert_operator_required(http.get("/v1/failures"))
            _assert_operator_required(http.get("/v1/metrics"))
            _assert_operator_required(http.post("/v1/connections/docs/login", json={}))
            looked = http.get("/v1/connections").json()
            assert looked["operator"] is False and looked["principal"] == "bearer"
            # What peers are for still works: tools and sessions.
            assert http.post("/v1/tools/list_notes", json={"input": {}}).json()["ok"] is True
            assert http.get("/v1/sessions").status_code == 200
    assert _opens(served) == opens  # nothing was restarted under anyone's calls

    with served.client(_bearer(OPERATOR)) as http:
        assert http.get("/v1/connections").json()["operator"] is True
        info = http.get("/v1/info")
        assert info.json()["runtime"]["operatorTokens"] == 1 and info.json()["runtime"]["bearerTokens"] == 2
        assert_clean(info.text, TOKENS)
        restarted = http.post("/v1/connections/notes/restart", json={})
        assert restarted.status_code == 200 and restarted.json()["restarted"] is True
        assert http.get("/v1/failures").json()["ok"] is True
        scraped = http.get("/v1/metrics")
        assert scraped.status_code == 200 and "agent_sdk_tool_calls_total" in scraped.text
        assert http.post("/v1/tools/list_notes", json={"input": {}}).json()["ok"] is True  # an operator calls too
    assert _opens(served) == opens + 1


def test_only_the_browser_that_started_a_login_finishes_it(served: Served) -> None:
    callback_uri = f"{served.url}/v1/oauth/callback"
    with served.client(_bearer(OPERATOR)) as operator:
        started = operator.post("/v1/connections/docs/login", json={})
        assert started.status_code == 200, started.text
        authorization_url = started.json()["authorizationUrl"]
        assert dict(parse_qsl(urlsplit(authorization_url).query))["redirect_uri"] == callback_uri

        # A peer the authorization URL leaked to signs in with an account of its own and sends the redirect.
        stolen = authorize(authorization_url, callback_uri)
        with served.client(_bearer(ALICE)) as peer:
            refused = peer.get(stolen[len(served.url) :])
        assert refused.status_code == 400
        assert "matches no login started from the console in this browser" in refused.text
        assert not (served.state_root / "mcp-auth.json").exists()  # no grant stored from it

        # The operator's browser (its cookie jar: `operator`) finishes the same login.
        mine = authorize(authorization_url, callback_uri)
        done = operator.get(mine[len(served.url) :])
        assert done.status_code == 200, done.text
        assert "docs is logged in" in done.text
        assert (served.state_root / "mcp-auth.json").exists()
        assert not operator.cookies  # the login's cookie is cleared with it


def test_one_token_cannot_be_both_a_peer_and_an_operator() -> None:
    with pytest.raises(ValidationError, match="given as --bearer-token and --operator-token"):
        ServeSettings(bearer_tokens=(SecretStr(ALICE),), operator_tokens=(SecretStr(ALICE),))
    parsed = ServeSettings.from_env({"AGENT_SDK_OPERATOR_TOKEN": f"{OPERATOR}, {BOB}"})
    assert [t.get_secret_value() for t in parsed.operator_tokens] == [OPERATOR, BOB]


# In process: the same app over ASGI, its lifespan driven as uvicorn drives it.


@asynccontextmanager
async def _in_process(root: Path) -> AsyncIterator[httpx2.AsyncClient]:
    project = make_project(root / "project", _connections("http://127.0.0.1:9/mcp"), tools=False)
    settings = ServeSettings(
        state_root=root / "state",
        bearer_tokens=(SecretStr(ALICE), SecretStr(BOB)),
        operator_tokens=(SecretStr(OPERATOR),),
    )
    app = create_app(load_project(project), settings)
    state: dict[str, Any] = {}
    to_app, app_inbox = anyio.create_memory_object_stream[Message](4)
    app_outbox, from_app = anyio.create_memory_object_stream[Message](4)

    async def with_state(scope: Scope, receive: Receive, send: Send) -> None:
        await app({**scope, "state": dict(state)}, receive, send)  # as a server copies the lifespan's state

    async with anyio.create_task_group() as tg:
        tg.start_soon(app, {"type": "lifespan", "asgi": {"version": "3.0"}, "state": state}, app_inbox.receive,
                      app_outbox.send)  # fmt: skip
        await to_app.send({"type": "lifespan.startup"})
        assert (await from_app.receive())["type"] == "lifespan.startup.complete"
        transport = httpx2.ASGITransport(app=with_state)
        try:
            async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:3000") as http:
                yield http
        finally:
            await to_app.send({"type": "lifespan.shutdown"})
            assert (await from_app.receive())["type"] == "lifespan.shutdown.complete"


@pytest.mark.anyio
async def test_in_process_the_role_is_the_chains_and_each_operator_route_refuses_a_peer(tmp_path: Path) -> None:
    async with _in_process(tmp_path) as http:
        for peer in (ALICE, BOB):
            for method, path in (
                ("POST", "/v1/connections/notes/restart"),
                ("POST", "/v1/connections/docs/login"),
                ("GET", "/v1/failures"),
                ("GET", "/v1/metrics"),
            ):
                body = {} if method == "POST" else None
                _assert_operator_required(await http.request(method, path, json=body, headers=_bearer(peer)))
        operator = _bearer(OPERATOR)
        assert (await http.post("/v1/connections/notes/restart", json={}, headers=operator)).status_code == 200
        assert (await http.get("/v1/failures", headers=operator)).status_code == 200
        assert (await http.get("/v1/metrics", headers=operator)).status_code == 200
        login = await http.post("/v1/connections/docs/login", json={}, headers=operator)
        assert login.status_code == 502 and login.json()["error"] == "login_failed"  # nothing listens there
        assert (await http.get("/v1/failures", headers=_bearer("not-a-configured-token-0123"))).status_code == 401
