"""Resources, prompts and completion of `server-everything` through `/v1/mcp/tools`, read by peers we did
not write: the TypeScript SDK client, the MCP Inspector CLI and the `mcp` 2.x client at both protocol
generations. The gateway pages with 3 items a page here, so every listing crosses pages."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as mt
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.gateway.mcp.test_peer_clients import _inspector as inspector  # pyright: ignore[reportPrivateUsage]
from tests.gateway.mcp.test_peer_clients import _ts as ts_client  # pyright: ignore[reportPrivateUsage]
from tests.peers import node_bin

from ..conftest import Served, assert_clean, make_project, serve

PAGE = 3


def everything_stdio(**fields: object) -> str:
    extra = "".join(f", {k}={v!r}" for k, v in fields.items())
    return (
        "from connections import define_connection\n\n"
        f"connection = define_connection(command={str(node_bin('mcp-server-everything'))!r}, args=['stdio']{extra})\n"
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("offerings")
    project = make_project(
        root / "project",
        {"everything": everything_stdio(advertise_resources=True, advertise_prompts=True)},
        tools=False,
    )
    server = serve(project, root / "state", env={"AGENT_SDK_PAGE_SIZE": str(PAGE)})
    yield server
    server.stop()
    assert_clean(server.log_text())


def direct_listing() -> dict[str, Any]:
    """What server-everything lists when asked directly (the same stdio child the gateway starts)."""

    async def run() -> dict[str, Any]:
        from connections import ClientPool, HostMcp, define_connection

        defn = define_connection(command=str(node_bin("mcp-server-everything")), args=["stdio"]).named("e", None)
        async with ClientPool({"e": defn}) as pool:
            host = HostMcp(pool)
            return {
                "resources": [r.uri for r in await host.list_resources("e")],
                "templates": [t.uri_template for t in await host.list_resource_templates("e")],
                "prompts": [p.name for p in await host.list_prompts("e")],
            }

    return anyio.run(run)


@pytest.fixture(scope="module")
def direct() -> dict[str, Any]:
    return direct_listing()


def test_ts_sdk_client_lists_reads_and_gets_through_the_gateway(served: Served, direct: dict[str, Any]) -> None:
    out = ts_client(f"{served.url}/v1/mcp/tools", "offerings")
    assert set(out["capabilities"]) >= {"tools", "resources", "prompts", "completions"}
    assert out["resources"] == direct["resources"] and len(out["resources"]) > PAGE
    assert out["resourcePages"] == -(-len(direct["resources"]) // PAGE)
    assert out["templates"] == direct["templates"]
    assert out["prompts"] == direct["prompts"]
    assert out["text"]["contents"][0]["uri"] == "demo://resource/dynamic/text/7"
    assert "Resource 7" in out["text"]["contents"][0]["text"]
    assert base64.b64decode(out["blob"]["contents"][0]["blob"]).startswith(b"Resource 7")
    assert out["static"]["contents"][0]["uri"] == direct["resources"][0]
    assert out["simple"]["messages"][0]["content"]["text"] == "This is a simple prompt without arguments."
    assert "Lyon" in out["args"]["messages"][0]["content"]["text"]
    embedded = [m["content"] for m in out["embedded"]["messages"] if m["content"]["type"] == "resource"]
    assert embedded and embedded[0]["resource"]["uri"] == "demo://resource/dynamic/text/2"
    assert out["completion"]["completion"]["values"] == ["Engineering"]
    assert out["missing"]["code"] == -32602 and "nope://missing" in out["missing"]["message"]


def _inspector(tmp_path: Path, url: str, *args: str) -> Any:
    done = inspector(tmp_path, url, *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["result"]


def test_inspector_cli_lists_reads_and_gets_through_the_gateway(
    served: Served, direct: dict[str, Any], tmp_path: Path
) -> None:
    url = f"{served.url}/v1/mcp/tools"
    listed = _inspector(tmp_path, url, "--method", "resources/list")  # the Inspector follows nextCursor itself
    assert [r["uri"] for r in listed["resources"]] == direct["resources"]
    templates = _inspector(tmp_path, url, "--method", "resources/templates/list")
    assert [t["uriTemplate"] for t in templates["resourceTemplates"]] == direct["templates"]
    read = _inspector(tmp_path, url, "--method", "resources/read", "--uri", "demo://resource/dynamic/text/4")
    assert "Resource 4" in read["contents"][0]["text"]
    prompts = _inspector(tmp_path, url, "--method", "prompts/list")
    assert [p["name"] for p in prompts["prompts"]] == direct["prompts"]
    got = _inspector(
        tmp_path, url, "--method", "prompts/get", "--prompt-name", "args-prompt", "--prompt-args", "city=Oslo"
    )
    assert "Oslo" in got["messages"][0]["content"]["text"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_mcp_client_pages_through_every_listing_at_both_generations(
    served: Served, direct: dict[str, Any], mode: str
) -> None:
    async def run() -> None:
        async with Client(f"{served.url}/v1/mcp/tools", mode=mode) as client:  # type: ignore[arg-type]
            uris: list[str] = []
            cursor: str | None = None
            while True:
                page = await client.list_resources(cursor=cursor, cache_mode="bypass")
                assert len(page.resources) <= PAGE
                uris += [r.uri for r in page.resources]
                cursor = page.next_cursor
                if not cursor:
                    break
            assert uris == direct["resources"]
            read = await client.read_resource("demo://resource/dynamic/blob/5", cache_mode="bypass")
            blob = read.contents[0]
            assert isinstance(blob, mt.BlobResourceContents)
            assert base64.b64decode(blob.blob).startswith(b"Resource 5")
            got = await client.get_prompt("resource-prompt", {"resourceType": "Blob", "resourceId": "1"})
            assert any(m.content.type == "resource" for m in got.messages)
            with pytest.raises(MCPError) as stale:
                await client.list_prompts(cursor="eyJvIjozLCJoIjoiMDAwMCJ9", cache_mode="bypass")
            assert stale.value.code == mt.INVALID_PARAMS and "list again without a cursor" in stale.value.message

    anyio.run(run)
