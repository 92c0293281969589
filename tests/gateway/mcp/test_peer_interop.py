"""What real clients rely on beyond a plain call, through `/v1/mcp/tools` of a real `agent-sdk serve`.

The peers are the TypeScript SDK's client (2025-11-25) and the `mcp` 2.x Python client (2026-07-28);
the upstreams are `asking.py` (an `mcp` 2.x `MCPServer`), `both_eras.py` (its lowlevel sibling, tools
only) and server-everything.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp.types as mt
import pytest
from mcp import Client, UrlElicitationRequiredError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from gateway.mcp.instructions import MAX_PER_CONNECTION, MAX_TOTAL, compose
from tests.conftest import free_port
from tests.gateway.mcp.test_offerings_peers import direct_listing, everything_stdio
from tests.gateway.mcp.test_peer_clients import _ts as ts_client  # pyright: ignore[reportPrivateUsage]
from tests.gateway.mcp.test_subscriptions import counting_stdio
from tests.peers import node20, node_bin, node_module
from tests.processes import running

from ..conftest import Served, assert_clean, make_project, serve, serving, url_connection

ASKING = Path(__file__).resolve().parents[2] / "fixtures" / "upstreams" / "asking.py"
COUNTING = Path(__file__).resolve().parents[2] / "fixtures" / "upstreams" / "counting_server.py"
BOTH_ERAS = Path(__file__).resolve().parents[2] / "fixtures" / "upstreams" / "both_eras.py"
TS_CLIENT = Path(__file__).resolve().parents[2] / "fixtures" / "peers_js" / "ts_interop_client.mjs"
SIGN_IN = {
    "mode": "url",
    "message": "Sign in to the example service",
    "url": "https://example.com/sign-in",
    "elicitationId": "sign-in-1",
}


def direct_instructions() -> str:
    """server-everything's own `instructions`, asked directly."""

    async def run() -> str:
        from connections import ClientPool, HostMcp, define_connection

        defn = define_connection(command=str(node_bin("mcp-server-everything")), args=["stdio"]).named("e", None)
        async with ClientPool({"e": defn}) as pool:
            await HostMcp(pool).list_tools("e")
            said = pool.status("e").instructions
            assert said is not None
            return said

    return anyio.run(run)


def ts_peer(url: str, *args: str) -> dict[str, Any]:
    """Run `ts_interop_client.mjs` against `url`; its JSON document."""
    env = {**os.environ, "MCP_SDK_DIR": str(node_module("@modelcontextprotocol", "sdk", "package.json").parent)}
    done = subprocess.run(
        [node20(), str(TS_CLIENT), url, *args], env=env, capture_output=True, text=True, timeout=90, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def asking_gateways(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Served]]:
    """One `asking.py` upstream behind two gateways: one reaches it at 2026-07-28, the other at 2025-11-25."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with running([sys.executable, str(ASKING), "--port", str(port)], port=port, what="asking upstream"):
        with (
            serving(tmp_path_factory, "interop-modern", {"asking": url_connection(url, protocol="modern")}) as modern,
            serving(tmp_path_factory, "interop-legacy", {"asking": url_connection(url, protocol="legacy")}) as legacy,
        ):
            yield {"modern": modern, "legacy": legacy}


@pytest.mark.parametrize("upstream", ["modern", "legacy"])
def test_a_url_elicitation_required_error_reaches_the_ts_sdk_client_as_that_error(
    asking_gateways: dict[str, Served], upstream: str
) -> None:
    out = ts_peer(f"{asking_gateways[upstream].url}/v1/mcp/tools", "call", "open_url")
    assert out["protocolVersion"] == "2025-11-25"
    assert "result" not in out  # not an `isError` result: the URL would be lost
    error = out["error"]
    assert error["code"] == -32042 and error["name"] == "UrlElicitationRequiredError"
    assert error["data"] == {"elicitations": [SIGN_IN]}


@pytest.mark.anyio
@pytest.mark.parametrize("upstream", ["modern", "legacy"])
async def test_a_url_elicitation_required_error_reaches_a_2026_07_28_peer_as_the_sdk_sends_it(
    asking_gateways: dict[str, Served], upstream: str
) -> None:
    # `mcp` 2.x answers -32042 at 2026-07-28 too (the tool's `UrlElicitationRequiredError` as is): the
    # gateway passes on what the upstream said, so the peer sees what it would have seen directly.
    async with httpx2.AsyncClient(timeout=30) as http:
        transport = streamable_http_client(f"{asking_gateways[upstream].url}/v1/mcp/tools", http_client=http)
        with anyio.fail_after(60):
            async with Client(transport, mode="2026-07-28", cache=None) as client:  # pyright: ignore[reportArgumentType]
                assert client.protocol_version == "2026-07-28"
                with pytest.raises(MCPError) as raised:
                    await client.call_tool("open_url", {})
    error = UrlElicitationRequiredError.from_error(raised.value.error)
    assert [e.url for e in error.elicitations] == ["https://example.com/sign-in"]
    assert raised.value.error.data == {"elicitations": [SIGN_IN]}


def _tools_only(url: str, protocol: str, tools: list[str]) -> str:
    """`both_eras.py` (an `mcp` 2.x lowlevel server with tools only: no resources, no prompts, no
    completions) with resources and prompts offered anyway, and of its tools only `tools`."""
    return (
        "from connections import define_connection\n\n"
        f"connection = define_connection(url={url!r}, protocol={protocol!r}, advertise_tools={bool(tools)!r},"
        f" allow_tools={tools or None!r}, advertise_resources=True, advertise_prompts=True)\n"
    )


@pytest.fixture(scope="module")
def offering_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """server-everything beside three connections (one per protocol setting) to a tools-only server and
    the reference server-filesystem (which answers -32601 to `resources/list`), all offering resources
    and prompts."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    shared = tmp_path_factory.mktemp("interop-filesystem-root")
    connections = {
        "everything": everything_stdio(advertise_tools=True, advertise_resources=True, advertise_prompts=True),
        **{f"tools_{p}": _tools_only(url, p, []) for p in ("auto", "legacy")},
        "tools_modern": _tools_only(url, "modern", ["meta"]),
        "filesystem": (
            "from connections import define_connection\n\n"
            f"connection = define_connection(command={str(node_bin('mcp-server-filesystem'))!r},"
            f" args=[{str(shared)!r}], advertise_resources=True, advertise_prompts=True)\n"
        ),
    }
    with (
        running([sys.executable, str(BOTH_ERAS), "--port", str(port)], port=port, what="both-eras upstream"),
        serving(tmp_path_factory, "interop-offerings", connections) as served,
    ):
        yield served


def test_a_server_without_resources_offers_none_and_fails_nobody_for_the_ts_sdk_client(
    offering_gateway: Served,
) -> None:
    out = ts_client(f"{offering_gateway.url}/v1/mcp/tools", "offerings")
    direct = direct_listing()
    assert out["resources"] == direct["resources"] and out["templates"] == direct["templates"]
    assert out["prompts"] == direct["prompts"]
    assert out["completion"]["completion"]["values"] == ["Engineering"]
    assert out["text"]["contents"][0]["uri"] == "demo://resource/dynamic/text/7"
    # What the gateway relays on the GET stream, it declares (the SDK client refreshes only then).
    assert out["capabilities"]["resources"]["listChanged"] is True
    assert out["capabilities"]["prompts"] == {"listChanged": True}
    log = offering_gateway.log_text()
    for name in ("tools_auto", "tools_legacy", "tools_modern"):
        for kind in ("resources", "prompts"):
            said = f"connection {name!r}: advertise_{kind} is set, but its server does not offer {kind}"
            assert log.count(said) == 1
    said = "connection 'filesystem': advertise_resources is set, but its server does not offer resources"
    assert log.count(said) == 1


@pytest.mark.anyio
async def test_a_server_without_resources_offers_none_and_fails_nobody_at_2026_07_28(
    offering_gateway: Served,
) -> None:
    async with httpx2.AsyncClient(timeout=30) as http:
        transport = streamable_http_client(f"{offering_gateway.url}/v1/mcp/tools", http_client=http)
        with anyio.fail_after(60):
            async with Client(transport, mode="2026-07-28", cache=None) as client:  # pyright: ignore[reportArgumentType]
                resources = await client.list_resources()
                prompts = await client.list_prompts()
                got = await client.get_prompt("simple-prompt")
                done = await client.complete(
                    mt.PromptReference(type="ref/prompt", name="completable-prompt"),
                    {"name": "department", "value": "Eng"},
                )
    assert resources.resources and prompts.prompts and got.messages
    assert done.completion.values == ["Engineering"]


@pytest.mark.anyio
async def test_v1_info_names_a_connection_whose_server_declares_no_resources_once_listed(
    offering_gateway: Served,
) -> None:
    async with httpx2.AsyncClient(timeout=30) as http:
        transport = streamable_http_client(f"{offering_gateway.url}/v1/mcp/tools", http_client=http)
        with anyio.fail_after(60):
            async with Client(transport, mode="2026-07-28", cache=None) as client:  # pyright: ignore[reportArgumentType]
                await client.list_resources()
                await client.list_prompts()
        info = await http.get(f"{offering_gateway.url}/v1/info", headers=offering_gateway.headers)
    assert info.status_code == 200, info.text
    entries = {c["name"]: c for c in info.json()["connections"]}
    (warning,) = entries["filesystem"]["warnings"]
    assert warning["code"] == "undeclared-capability"
    assert warning["message"].startswith("connection 'filesystem': advertise_resources and advertise_prompts are set")
    assert entries["tools_legacy"]["warnings"][0]["code"] == "undeclared-capability"  # a tools-only mcp 2.x server
    assert "warnings" not in entries["everything"]  # it declares both


@pytest.fixture(scope="module")
def changing_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`counting_server.py` (an `mcp` 2.x `MCPServer` whose `add_tool` changes its listing) at 2025-11-25."""
    connections = {"counting": counting_stdio("legacy", ["add_tool", "late_legacy"])}
    with serving(tmp_path_factory, "interop-changes", connections) as served:
        yield served


def test_the_ts_sdk_clients_auto_refresh_refetches_the_tools_when_an_upstream_adds_one(
    changing_gateway: Served,
) -> None:
    out = ts_peer(f"{changing_gateway.url}/v1/mcp/tools", "refresh", "add_tool", json.dumps({"name": "late_legacy"}))
    assert out["protocolVersion"] == "2025-11-25"
    assert out["capabilities"]["tools"] == {"listChanged": True}
    assert "late_legacy" not in out["before"]
    assert out["refresh"]["error"] is None and "late_legacy" in out["refresh"]["tools"]


@pytest.mark.anyio
async def test_the_handshake_capabilities_declare_every_change_the_gateway_relays(changing_gateway: Served) -> None:
    async with httpx2.AsyncClient(timeout=30) as http:
        transport = streamable_http_client(f"{changing_gateway.url}/v1/mcp/tools", http_client=http)
        with anyio.fail_after(60):
            async with Client(transport, mode="legacy", cache=None) as client:  # pyright: ignore[reportArgumentType]
                caps = client.server_capabilities
    assert caps.tools is not None and caps.tools.list_changed


@pytest.mark.anyio
async def test_call_tool_on_v1_mcp_does_not_pass_off_the_upstreams_server_info_stamp(offering_gateway: Served) -> None:
    # `meta` answers with a `_meta` of its own beside the SDK's `io.modelcontextprotocol/serverInfo` stamp
    # (2026-07-28): the tool's key is passed on, the upstream's stamp is not the gateway's to repeat.
    async with httpx2.AsyncClient(timeout=30) as http:
        transport = streamable_http_client(f"{offering_gateway.url}/v1/mcp", http_client=http)
        with anyio.fail_after(60):
            async with Client(transport, mode="2026-07-28", cache=None) as client:  # pyright: ignore[reportArgumentType]
                answer = await client.call_tool("call_tool", {"name": "meta", "input": {}})
    envelope = answer.structured_content
    assert envelope is not None and envelope["ok"] is True
    assert envelope["result"]["_meta"] == {"example.com/trace": "t-1"}
    assert envelope["result"]["content"] == [{"type": "text", "text": "with meta"}]


def test_a_tools_description_shows_the_upstreams_task_requirement(offering_gateway: Served) -> None:
    with offering_gateway.client() as http:
        research = http.get("/v1/tools/simulate-research-query").json()["tool"]
        echo = http.get("/v1/tools/echo").json()["tool"]
        authored = http.get("/v1/tools/lookup").json()["tool"]
    assert research["execution"] == {"taskSupport": "required"}  # server-everything's listing says so
    assert echo["execution"] == {"taskSupport": "forbidden"}
    assert authored["execution"] is None and authored["source"] == "authored"


def _counting(instructions: str, **fields: object) -> str:
    extra = "".join(f", {k}={v!r}" for k, v in fields.items())
    return (
        "from connections import define_connection\n\n"
        f"connection = define_connection(command={sys.executable!r}, args=[{str(COUNTING)!r}, 'stdio'], "
        f"env={{'INSTRUCTIONS': {instructions!r}}}{extra})\n"
    )


LONG = "Call pid first. " * 400  # 6,400 bytes: over the 2,048-byte bound of one connection


@pytest.fixture(scope="module")
def instructed_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """server-everything (instructions of its own, 1.5 KB), a server with long ones, and a host-only one."""
    root = tmp_path_factory.mktemp("interop-instructions")
    connections = {
        "everything": everything_stdio(advertise_tools=True, allow_tools=["echo"]),
        "wordy": _counting(LONG, advertise_tools=True, allow_tools=["pid"]),
    }
    project = make_project(root / "project", connections, tools=False)
    (project / "agent" / "host-connections").mkdir()
    (project / "agent" / "host-connections" / "private.py").write_text(_counting("Secret advice."))
    served = serve(project, root / "state")
    try:
        yield served
    finally:
        served.stop()
    assert_clean(served.log_text())


def test_the_upstreams_instructions_reach_both_generations_each_under_its_connection(
    instructed_gateway: Served,
) -> None:
    url = f"{instructed_gateway.url}/v1/mcp/tools"
    handshake = ts_peer(url, "hello")["instructions"]

    async def modern() -> str | None:
        async with httpx2.AsyncClient(timeout=30) as http:
            with anyio.fail_after(60):
                async with Client(streamable_http_client(url, http_client=http), cache=None) as client:  # pyright: ignore[reportArgumentType]
                    assert client.protocol_version == "2026-07-28"  # `server/discover`
                    return client.instructions

    assert anyio.run(modern) == handshake
    assert handshake is not None and len(handshake.encode()) <= MAX_TOTAL
    sections = dict(re.findall(r'<connection name="([^"]+)">\n(.*?)\n</connection>', handshake, re.DOTALL))
    assert list(sections) == ["everything", "wordy"]
    assert "several MCP servers" in handshake.split("<connection", 1)[0]
    assert sections["everything"] == direct_instructions().strip()
    wordy = sections["wordy"]
    assert wordy.startswith("Call pid first.") and wordy.endswith("[…cut]")
    assert len(wordy.encode()) <= MAX_PER_CONNECTION
    assert "Secret advice" not in handshake  # a host-only connection's tools are not offered there


def test_the_gateways_instructions_stay_within_their_bound_and_name_what_was_left_out() -> None:
    parts = [(f"server{i}", f"Advice {i}. " * 300) for i in range(8)]  # 8 x 3.6 KB
    said = compose([("quiet", None), ("blank", "  "), *parts])
    assert said is not None and len(said.encode()) <= MAX_TOTAL
    shown = re.findall(r'<connection name="([^"]+)">', said)
    assert shown == ["server0", "server1", "server2"]  # 3 x 2 KB fit in 8 KB with the note
    assert said.endswith(f"the instructions of {', '.join(f'server{i}' for i in range(3, 8))}.)")
    assert compose([("quiet", None)]) is None
