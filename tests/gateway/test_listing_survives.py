"""A listing that survives one connection (docs/connections.md, "A listing that survives one connection").

A gateway with three advertised connections: `server-everything` (Streamable HTTP), `docs` (a per-user
connection on oidc-provider and the audience-checking MCP server) and `down` (`optional=True`, a URL nobody
listens on). A person who has not signed in to `docs` lists the tools with the `mcp` SDK's own client, in
both protocol generations: everything's tools are there, `docs` is named with the person's sign-in URL in
the result's `_meta`, `down` is left out and named in the log and in `/v1/connections` (so is `imported`,
down too, from `mcp.json` with `"agent-sdk": {"optional": true}`). An unrelated
`get-sum` works; a call of `docs`'s tool answers with the sign-in link. Without `optional=True`, a
connection that is down still fails the listing closed."""

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

from tests.conftest import free_port
from tests.oauth.peers import ResourceServer

from .conftest import Served, Upstream, assert_clean, make_project, serve
from .per_user import OPERATOR, PEERS, call_body, modern_headers, peer_env, sign_in_url_in, text_of

ACCESS_TOKEN_TTL = 3600


def _project(root: Path, everything: str, docs: str, down: str, *, optional: bool) -> Path:
    head = "from connections import define_connection\n\n"
    return make_project(
        root,
        {
            "everything": f"{head}connection = define_connection(url={everything!r}, advertise_tools=True)\n",
            "docs": f"{head}connection = define_connection(url={docs!r}, oauth=True, grants='per_principal', "
            "advertise_tools=True)\n",
            "down": f"{head}connection = define_connection(url={down!r}, advertise_tools=True, "
            f"optional={optional!r})\n",
        },
        tools=False,
    )


@pytest.fixture(scope="module")
def gateway(
    tmp_path_factory: pytest.TempPathFactory, everything: Upstream, resource: ResourceServer
) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("listing-survives")
    down = f"http://127.0.0.1:{free_port()}/mcp"
    project = _project(root / "project", everything.url, resource.url, down, optional=True)
    imported = {"url": f"http://127.0.0.1:{free_port()}/mcp", "agent-sdk": {"advertiseTools": True, "optional": True}}
    (project / "mcp.json").write_text(json.dumps({"mcpServers": {"imported": imported}}))
    served = serve(project, root / "state", env=peer_env())
    try:
        yield served
    finally:
        served.stop()
    assert_clean(served.log_text(), list(PEERS.values()))


async def _listing(gateway: Served, name: str, mode: str) -> tuple[list[str], dict[str, Any]]:
    """`tools/list` on `/v1/mcp/tools` as `name` with the `mcp` SDK's `Client` in `mode`: names and `_meta`."""
    headers = {"authorization": f"Bearer {PEERS[name]}"}
    async with httpx2.AsyncClient(timeout=60, headers=headers) as http:
        with anyio.fail_after(60):
            transport = streamable_http_client(f"{gateway.url}/v1/mcp/tools", http_client=http)
            async with Client(transport, mode=mode, cache=None) as client:  # pyright: ignore[reportArgumentType]
                listed = await client.list_tools()
    return sorted(t.name for t in listed.tools), dict(listed.meta or {})


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_listing_lists_the_others_names_the_missing_sign_in_and_leaves_out_an_optional_connection_down(
    gateway: Served, mode: str
) -> None:
    names, meta = await _listing(gateway, "alice", mode)
    assert "get-sum" in names and "echo" in names  # server-everything's tools
    assert "whoami" not in names  # docs cannot be listed without alice's own grant
    [way_in] = meta["agent-sdk/signIn"]
    assert way_in["connection"] == "docs"
    assert way_in["url"].startswith(f"{gateway.url}/v1/oauth/sign-in?ticket=agent-sdk.signin1.")
    assert meta["agent-sdk/leftOut"] == ["down", "imported"]
    assert "optional connection 'down' left out of the listing" in gateway.log_text()
    assert "optional connection 'imported' left out of the listing" in gateway.log_text()

    with httpx2.Client(timeout=30.0, headers={"authorization": f"Bearer {OPERATOR}"}) as operator:
        listed = operator.get(f"{gateway.url}/v1/connections").json()["connections"]
    down = next(c for c in listed if c["name"] == "down")
    assert (down["optional"], down["state"], down.get("leftOut")) == (True, "failing", True)
    assert next(c for c in listed if c["name"] == "everything")["optional"] is False
    imported = next(c for c in listed if c["name"] == "imported")
    assert (imported["optional"], imported["state"], imported.get("leftOut")) == (True, "failing", True)


def _call(gateway: Served, name: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    body = call_body(tool)
    body["params"]["arguments"] = arguments
    with httpx2.Client(timeout=30.0) as http:
        answer = http.post(f"{gateway.url}/v1/mcp/tools", json=body, headers=modern_headers(name, tool))
    assert answer.status_code == 200, answer.text
    return answer.json()["result"]


def test_a_call_never_depends_on_another_connections_state(gateway: Served) -> None:
    added = _call(gateway, "bob", "get-sum", {"a": 2, "b": 3})  # docs not signed in, down is down
    assert not added.get("isError") and "5" in text_of(added), added
    asked = _call(gateway, "bob", "whoami", {})  # docs's own tool: the way in, for bob
    assert asked["isError"] is True and "sign_in_required" in text_of(asked)
    assert sign_in_url_in(text_of(asked)).startswith(f"{gateway.url}/v1/oauth/sign-in?ticket=")


def test_a_required_connection_that_is_down_still_fails_the_listing_closed(
    tmp_path: Path, everything: Upstream, resource: ResourceServer
) -> None:
    down = f"http://127.0.0.1:{free_port()}/mcp"
    served = serve(_project(tmp_path / "project", everything.url, resource.url, down, optional=False),
                   tmp_path / "state", env=peer_env())  # fmt: skip
    body = {**call_body("x"), "method": "tools/list", "params": {"_meta": call_body("x")["params"]["_meta"]}}
    headers = {**modern_headers("carol"), "mcp-method": "tools/list"}
    del headers["mcp-name"]
    try:
        with httpx2.Client(timeout=60.0) as http:
            answer = http.post(f"{served.url}/v1/mcp/tools", json=body, headers=headers).json()
    finally:
        served.stop()
    assert "result" not in answer
    message = answer["error"]["message"]
    assert "tools/list failed closed: connection(s) docs, down" in message
    assert "sign in to docs at" in message  # the refusal still carries carol's way in
