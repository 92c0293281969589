"""`host.mcp` resources, prompts and completion, and `Offerings` filtering and routing, against
server-everything over stdio (an upstream we did not write)."""

from __future__ import annotations

import mcp.types as mt
import pytest

from connections import (
    ClientPool,
    ConnectionDefinition,
    HostMcp,
    NotOffered,
    TurnBuildError,
    UnknownConnection,
    UpstreamError,
    define_connection,
)
from connections.account._account import AccountConnections
from connections.serving import Offerings
from tests.peers import node_bin

pytestmark = [pytest.mark.anyio, pytest.mark.peers]


def everything(name: str, **fields: object) -> ConnectionDefinition:
    return define_connection(command=str(node_bin("mcp-server-everything")), args=["stdio"], **fields).named(name, None)


async def test_host_mcp_lists_reads_gets_and_completes_with_typed_errors() -> None:
    async with ClientPool({"ev": everything("ev")}) as pool:
        host = HostMcp(
            pool, AccountConnections({"team": define_connection(account=True).named("team", None)}, environ={})
        )
        resources = await host.list_resources("ev")
        assert all(isinstance(r, mt.Resource) for r in resources) and len(resources) >= 7
        templates = await host.list_resource_templates("ev")
        assert "demo://resource/dynamic/text/{resourceId}" in [t.uri_template for t in templates]
        read = await host.read_resource("ev", "demo://resource/dynamic/text/1")
        assert isinstance(read.contents[0], mt.TextResourceContents) and "Resource 1" in read.contents[0].text
        prompts = {p.name: p for p in await host.list_prompts("ev")}
        assert [a.name for a in prompts["args-prompt"].arguments or []] == ["city", "state"]
        got = await host.get_prompt("ev", "args-prompt", {"city": "Rome"})
        assert isinstance(got.messages[0].content, mt.TextContent) and "Rome" in got.messages[0].content.text
        ref = mt.PromptReference(type="ref/prompt", name="completable-prompt")
        assert (await host.complete("ev", ref, {"name": "department", "value": "Sa"})).values == ["Sales"]

        with pytest.raises(UpstreamError) as refused:
            await host.read_resource("ev", "nope://missing")
        assert refused.value.rpc_code == mt.INVALID_PARAMS and "nope://missing" in refused.value.rpc_message
        assert str(refused.value).startswith("connection 'ev': resources/read failed: upstream error -32602")
        with pytest.raises(UnknownConnection):
            await host.list_prompts("nowhere")
        with pytest.raises(ValueError, match="'team' is an account connection"):
            await host.list_resources("team")


async def test_offerings_offer_only_the_listed_uris_and_templates_and_route_by_them() -> None:
    docs = everything("docs", advertise_resources=["demo://resource/static/document/{name}"], advertise_prompts=True)
    dynamic = everything(
        "dynamic",
        advertise_resources=["demo://resource/dynamic/text/{resourceId}"],
        advertise_prompts=["args-prompt"],
        deny_prompts=["simple-prompt"],
    )
    connections = {"docs": docs, "dynamic": dynamic}
    async with ClientPool(connections) as pool:
        offerings = Offerings(connections, pool)
        listed = await offerings.listing("resources/list")
        assert listed.items and all(r["uri"].startswith("demo://resource/static/document/") for r in listed.items)
        templates = await offerings.listing("resources/templates/list")
        assert [t["uriTemplate"] for t in templates.items] == ["demo://resource/dynamic/text/{resourceId}"]
        body, hint = await offerings.read("demo://resource/dynamic/text/4")
        assert "Resource 4" in body["contents"][0]["text"] and (hint.ttl_ms, hint.private) == (0, True)
        with pytest.raises(
            NotOffered, match="no advertised connection offers resource 'demo://resource/dynamic/blob/4'"
        ):
            await offerings.read("demo://resource/dynamic/blob/4")
        # Both offer args-prompt by their lists, so the listing fails closed, naming both connections.
        with pytest.raises(TurnBuildError, match="also offered by connection 'docs'") as collided:
            await offerings.listing("prompts/list")
        assert "connection 'dynamic', prompt 'args-prompt'" in str(collided.value)
        with pytest.raises(
            NotOffered, match="prompt 'args-prompt' is offered by both connections 'docs' and 'dynamic'"
        ):
            await offerings.get_prompt("args-prompt", {"city": "Oslo"})
        simple = await offerings.get_prompt("simple-prompt", None)  # denied on dynamic: docs owns it alone
        assert simple["messages"][0]["content"]["text"] == "This is a simple prompt without arguments."
