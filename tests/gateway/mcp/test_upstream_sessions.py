"""`upstream_sessions="per_principal"` against the real server-everything, through a real `agent-sdk serve`
with two bearer principals.

server-everything keeps `toggle-simulated-logging` per upstream session (per `Mcp-Session-Id` over
Streamable HTTP, per process over stdio): the first toggle of a session answers "Started", the next one
"Stopped". With the shared default both principals use the gateway's one pooled session, so B's first
toggle stops what A started; with `per_principal` each principal has an upstream session (and, over
stdio, a child) of its own, on every surface: `POST /v1/tools/{name}`, `/v1/mcp/tools` and a turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from connections import Broker, ConnectionUnavailable, Project, acting_for, define_connection
from tests.peers import node_bin

from ..conftest import Served, Upstream, everything_upstream, serving

TOKEN_A = "principal-a-token-0123456789"
TOKEN_B = "principal-b-token-0123456789"
TOGGLE = "toggle-simulated-logging"
FLAGS = ("--bearer-token", TOKEN_A, "--bearer-token", TOKEN_B)


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    # Its own server-everything: simulated logging started here never reaches another module's sessions.
    with everything_upstream() as started:
        yield started


def _definition(target: str, sessions: str | None) -> str:
    setting = f", upstream_sessions={sessions!r}" if sessions is not None else ""
    return (
        "from connections import define_connection\n\n"
        f"connection = define_connection({target}, advertise_tools=True, allow_tools=[{TOGGLE!r}]{setting})\n"
    )


def _target(upstream: Upstream, transport: str) -> str:
    if transport == "stdio":
        return f"command={str(node_bin('mcp-server-everything'))!r}, args=['stdio']"
    return f"url={upstream.url!r}"


def _toggle(served: Served, token: str) -> str:
    """`POST /v1/tools/toggle-simulated-logging` as the principal of `token`: "started" or "stopped"."""
    with served.client({"authorization": f"Bearer {token}"}) as http:
        response = http.post(f"/v1/tools/{TOGGLE}", json={"input": {}})
    assert response.status_code == 200, response.text
    return _verdict(json.dumps(response.json()["result"]))


def _verdict(text: str) -> str:
    if "Started simulated" in text:
        return "started"
    if "Stopped simulated" in text:
        return "stopped"
    raise AssertionError(f"not a toggle answer: {text[:300]}")


async def _toggle_over_mcp(served: Served, token: str) -> str:
    """`tools/call` on `/v1/mcp/tools` from the `mcp` 2.x client, as the principal of `token`."""
    headers = {"authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(timeout=30, headers=headers) as http:
        with anyio.fail_after(30):
            transport = streamable_http_client(f"{served.url}/v1/mcp/tools", http_client=http)
            async with Client(transport, cache=None) as client:  # pyright: ignore[reportArgumentType]
                result = await client.call_tool(TOGGLE, {})
    return _verdict(result.model_dump_json())


async def _toggle_in_a_turn(served: Served, token: str) -> str:
    """A session turn (the deterministic runner) that calls the tool, as the principal of `token`."""
    headers = {"authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(base_url=served.url, timeout=30, headers=headers) as http:
        created = await http.post("/v1/session", json={"message": f"call {TOGGLE} {{}}"})
        assert created.status_code == 200, created.text
        with anyio.fail_after(30):
            async with http.stream("GET", f"/v1/session/{created.json()['sessionId']}/stream") as response:
                async for line in response.aiter_lines():
                    event: dict[str, Any] = json.loads(line) if line else {}
                    if event.get("type") == "action.result":
                        return _verdict(json.dumps(event["data"]["result"]))
    raise AssertionError("the turn ended without a tool result")


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_shared_by_default_one_principal_toggles_the_others_session(
    tmp_path_factory: pytest.TempPathFactory, upstream: Upstream, transport: str
) -> None:
    connections = {"everything": _definition(_target(upstream, transport), None)}
    with serving(tmp_path_factory, f"shared-{transport}", connections, *FLAGS) as served:
        assert _toggle(served, TOKEN_A) == "started"
        # Today's behaviour, kept: one pooled upstream session, so B finds A's logging on and stops it.
        assert _toggle(served, TOKEN_B) == "stopped"


@pytest.mark.anyio
@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_per_principal_each_principal_has_its_own_upstream_session_on_every_surface(
    tmp_path_factory: pytest.TempPathFactory, upstream: Upstream, transport: str
) -> None:
    connections = {"everything": _definition(_target(upstream, transport), "per_principal")}
    with serving(tmp_path_factory, f"own-{transport}", connections, *FLAGS) as served:
        assert _toggle(served, TOKEN_A) == "started"
        assert _toggle(served, TOKEN_B) == "started"  # B's session is untouched by A's toggle
        # The same principal on another surface reaches its own session again: /v1/mcp/tools, then a turn.
        assert await _toggle_over_mcp(served, TOKEN_A) == "stopped"
        assert await _toggle_in_a_turn(served, TOKEN_B) == "stopped"
        assert await _toggle_in_a_turn(served, TOKEN_A) == "started"


@pytest.mark.anyio
async def test_per_principal_sessions_are_bounded_and_a_call_without_a_principal_is_refused(tmp_path: Path) -> None:
    """In-process, on server-everything over stdio: the cap closes the least recently used principal's
    session (its state goes with it), and a call no surface made for a principal fails closed."""
    defn = define_connection(
        command=str(node_bin("mcp-server-everything")),
        args=["stdio"],
        advertise_tools=True,
        allow_tools=[TOGGLE],
        upstream_sessions="per_principal",
        max_identities=1,
    ).named("everything", None)
    async with Broker(Project(root=tmp_path, connections={"everything": defn})) as broker:
        with anyio.fail_after(60):
            toolset = await broker.builder.build(None)
            toggle = toolset.get(TOGGLE)
            assert toggle is not None
            with pytest.raises(ConnectionUnavailable, match="names none; call it through the gateway"):
                await toggle.call({})

            async def as_(principal: str) -> str:
                with acting_for(principal):
                    return _verdict(json.dumps((await toggle.call({})).mcp_result()))

            assert await as_("bearer:a") == "started"
            assert await as_("bearer:a") == "stopped"
            assert await as_("bearer:a") == "started"
            assert await as_("bearer:b") == "started"  # the cap of 1: a's session (and child) is closed
            assert broker.identities.identity_counts("everything").live == 1
            assert await as_("bearer:a") == "started"  # a fresh session: what a had set is gone
            counts = broker.identities.identity_counts("everything")
        assert (counts.live, counts.opened, counts.closed, counts.shared) == (1, 3, 2, False)
        # The listing came from the shared session: it is the only one the connection pool opened.
        assert broker.pool.status("everything").opens == 1
