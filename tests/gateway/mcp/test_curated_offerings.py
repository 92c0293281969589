"""A curated server's resources and prompts (`/v1/mcp/servers/<name>`), picked by connection and URI or name
glob out of `server-everything`'s, read by the TypeScript SDK client and the Python SDK client at both
generations: what the server does not pick, and what a Cedar rule on `context.server` hides, gets the very
answer of one no connection offers (hidden equals missing)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from connections.project._pins import digest_of
from tests.gateway.mcp.test_curated_servers import AGENT_SDK
from tests.gateway.mcp.test_offerings_peers import everything_stdio
from tests.gateway.mcp.test_peer_clients import _ts as ts_client  # pyright: ignore[reportPrivateUsage]
from tests.gateway.mcp.test_pinned_tools import agent_sdk

from ..conftest import Served, assert_clean, make_project, serve

DOCS = """\
from connections import define_server

server = define_server(
    title="Everything's documents",
    tools=[{"connection": "everything", "name": "echo"}],
    resources=[
        {"connection": "everything", "name": "demo://resource/static/document/a*"},
        {"connection": "everything", "name": "demo://resource/dynamic/*"},
    ],
    prompts=[{"connection": "everything", "name": "*"}],
)
"""
NARROW = """\
from connections import define_server

server = define_server(
    resources=[{"connection": "everything", "name": "demo://resource/static/document/features.md"}],
    prompts=[{"connection": "everything", "name": "s*"}, {"name": "args-prompt"}],
)
"""
POLICY = """\
@id("everyone")
permit (principal, action, resource);

@id("no-args-prompt-on-narrow")
forbid (principal, action, resource == AgentSdk::Prompt::"args-prompt")
when { context.server == "narrow" };
"""
STATIC = "demo://resource/static/document/"


def _everything_project(root: Path) -> Path:
    """A project advertising server-everything's tools, resources and prompts, with an empty agent/servers/."""
    project = make_project(
        root,
        {"everything": everything_stdio(advertise_tools=True, advertise_resources=True, advertise_prompts=True)},
        tools=False,
    )
    (project / "agent" / "servers").mkdir()
    return project


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("curated-offerings")
    project = _everything_project(root / "project")
    (project / "agent" / "servers" / "docs.py").write_text(DOCS)
    (project / "agent" / "servers" / "narrow.py").write_text(NARROW)
    (project / "agent" / "policies.cedar").write_text(POLICY)
    server = serve(project, root / "state")
    yield server
    server.stop()
    assert_clean(server.log_text())


def test_ts_sdk_client_lists_reads_gets_and_completes_what_the_server_picks(served: Served) -> None:
    out = ts_client(f"{served.url}/v1/mcp/servers/docs", "offerings")
    assert set(out["capabilities"]) >= {"tools", "resources", "prompts", "completions"}
    assert out["resources"] == [f"{STATIC}architecture.md"]  # nothing else of everything's seven
    assert out["templates"] == [
        "demo://resource/dynamic/text/{resourceId}",
        "demo://resource/dynamic/blob/{resourceId}",
    ]
    assert "Resource 7" in out["text"]["contents"][0]["text"]  # read through a picked template
    assert out["static"]["contents"][0]["uri"] == f"{STATIC}architecture.md"
    assert out["prompts"] == ["simple-prompt", "args-prompt", "completable-prompt", "resource-prompt"]
    assert "Lyon" in out["args"]["messages"][0]["content"]["text"]
    assert out["completion"]["completion"]["values"] == ["Engineering"]
    assert out["missing"]["code"] == -32602


async def _narrow(url: str, mode: str) -> dict[str, Any]:
    async def error(work: Any) -> tuple[int, str]:
        try:
            await work
        except MCPError as exc:
            return exc.code, exc.message
        raise AssertionError("answered")

    async with httpx2.AsyncClient(timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, cache=None) as client:
            return {
                "resources": [r.uri for r in (await client.list_resources()).resources],
                "templates": [t.uri_template for t in (await client.list_resource_templates()).resource_templates],
                "prompts": [p.name for p in (await client.list_prompts()).prompts],
                "features": (await client.read_resource(f"{STATIC}features.md")).contents[0].uri,
                "simple": (await client.get_prompt("simple-prompt")).messages[0].content.text,  # type: ignore[union-attr]
                "unpicked": await error(client.read_resource(f"{STATIC}architecture.md")),
                "template": await error(client.read_resource("demo://resource/dynamic/text/3")),
                "missing": await error(client.read_resource(f"{STATIC}nope.md")),
                "hidden_prompt": await error(client.get_prompt("args-prompt", {"city": "Oslo"})),
                "unpicked_prompt": await error(client.get_prompt("completable-prompt")),
                "missing_prompt": await error(client.get_prompt("nope-prompt")),
            }


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_python_client_sees_only_the_picked_and_hidden_equals_missing(served: Served, mode: str) -> None:
    out = anyio.run(_narrow, f"{served.url}/v1/mcp/servers/narrow", mode)
    assert out["resources"] == [f"{STATIC}features.md"] and out["templates"] == []
    assert out["prompts"] == ["simple-prompt"]  # args-prompt picked, but the rule on context.server hides it
    assert out["features"] == f"{STATIC}features.md"
    assert out["simple"] == "This is a simple prompt without arguments."

    def shape(answer: tuple[int, str], key: str) -> tuple[int, str]:
        return answer[0], answer[1].replace(key, "<name>")

    missing = shape(out["missing"], f"{STATIC}nope.md")
    assert missing[0] == -32602
    assert shape(out["unpicked"], f"{STATIC}architecture.md") == missing
    assert shape(out["template"], "demo://resource/dynamic/text/3") == missing
    missing_prompt = shape(out["missing_prompt"], "nope-prompt")
    assert shape(out["hidden_prompt"], "args-prompt") == missing_prompt
    assert shape(out["unpicked_prompt"], "completable-prompt") == missing_prompt


def test_the_default_endpoint_still_serves_everything(served: Served) -> None:
    async def run() -> tuple[int, list[str]]:
        async with Client(f"{served.url}/v1/mcp/tools", mode="legacy", cache=None) as client:
            resources = (await client.list_resources()).resources
            return len(resources), [p.name for p in (await client.list_prompts()).prompts]

    count, prompts = anyio.run(run)
    assert count == 7 and "args-prompt" in prompts  # the rule on context.server is for narrow only


PINNED = """\
from connections import define_server

server = define_server(
    tools=[
        {"connection": "everything", "name": "get-sum", "rename": "add_ten", "set": {"b": 10}, "hide": ["b"]},
        {"connection": "everything", "name": "echo", "rename": "say", "description": "Says it back."},
    ],
    prompts=[{"connection": "everything", "name": "*"}],
)
"""


@pytest.fixture(scope="module")
def tampered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A gateway whose `mcp.lock` was reviewed with another description for `get-sum` and `simple-prompt`
    (the upstream's real tool and prompt differ from it); the curated server renames and redescribes."""
    root = tmp_path_factory.mktemp("curated-pinned")
    project = make_project(
        root / "project",
        {"everything": everything_stdio(advertise_tools=True, advertise_prompts=True)},
        tools=False,
    )
    (project / "agent" / "servers").mkdir()
    (project / "agent" / "servers" / "pinned.py").write_text(PINNED)
    assert agent_sdk("pin", "--dir", str(project)).returncode == 0
    path = project / "mcp.lock"
    lock = json.loads(path.read_text())
    entry = lock["connections"]["everything"]
    for kind, name in (("tools", "get-sum"), ("prompts", "simple-prompt")):
        reviewed = {**lock["definitions"][entry[kind][name]], "description": "reviewed last week"}
        entry[kind][name] = digest_of(reviewed)
        lock["definitions"][digest_of(reviewed)] = reviewed
    path.write_text(json.dumps(lock, indent=2))
    server = serve(project, root / "state")
    yield server
    server.stop()


async def _pinned(url: str, mode: str) -> dict[str, Any]:
    async with httpx2.AsyncClient(timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, cache=None) as client:
            out: dict[str, Any] = {
                "tools": sorted(t.name for t in (await client.list_tools()).tools),
                "prompts": [p.name for p in (await client.list_prompts()).prompts],
                "say": (await client.call_tool("say", {"message": "hi"})).content[0].text,  # type: ignore[union-attr]
            }
            for key, work in (
                ("add_ten", client.call_tool("add_ten", {"a": 1})),
                ("simple", client.get_prompt("simple-prompt")),
            ):
                try:
                    out[key] = await work
                except MCPError as exc:
                    out[key] = exc.message
            return out


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_pinning_checks_the_upstreams_definition_not_the_curated_one(tampered: Served, mode: str) -> None:
    out = anyio.run(_pinned, f"{tampered.url}/v1/mcp/servers/pinned", mode)
    # get-sum differs from the lock: add_ten is held back; echo's curated rename and description are no drift.
    assert out["tools"] == ["say"] and out["say"] == "Echo: hi"
    assert isinstance(out["add_ten"], str) and "held back" in out["add_ten"], out["add_ten"]
    assert "simple-prompt" not in out["prompts"] and "args-prompt" in out["prompts"]
    assert isinstance(out["simple"], str) and "held back" in out["simple"], out["simple"]


def test_serve_stdio_server_serves_what_the_curated_server_picks(tmp_path: Path) -> None:
    project = _everything_project(tmp_path / "project")
    (project / "agent" / "servers" / "narrow.py").write_text(NARROW)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_SDK_", "PYTEST_"))}
    env["AGENT_SDK_STATE_ROOT"] = str(tmp_path / "state")
    argv = ["serve", "--stdio", "--server", "narrow", "--dir", str(project)]
    params = StdioServerParameters(command=str(AGENT_SDK), args=argv, env=env)

    async def run() -> tuple[list[str], list[str], str]:
        with anyio.fail_after(90):
            async with Client(stdio_client(params), mode="legacy", cache=None) as client:
                resources = [r.uri for r in (await client.list_resources()).resources]
                prompts = [p.name for p in (await client.list_prompts()).prompts]
                with pytest.raises(MCPError) as refused:
                    await client.read_resource(f"{STATIC}architecture.md")
                return resources, prompts, refused.value.message

    resources, prompts, refused = anyio.run(run)
    assert resources == [f"{STATIC}features.md"]
    assert prompts == ["simple-prompt", "args-prompt"]  # no policy file here
    assert f"{STATIC}architecture.md" in refused
