"""Real clients answer `server-everything`'s elicitation and sampling tools through the gateway.

`server-everything` (handshake era only, Streamable HTTP) lists `trigger-elicitation-request` and
`trigger-sampling-request` only to a client that declared the capability: the pool's client declares
both, and each request it sends mid-call is asked of the peer that made the call, on that call's
SSE answer, or held open for a 2026-07-28 peer's retry. Peers: the TypeScript SDK client and the
`mcp` 2.x `Client` in both modes. Each call is made directly and through discovery mode's `call_tool`
(`serve --discovery`, docs/discovery.md): the questions reach the peer the same way.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp.types as mt
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client

from tests.peers import node20, node_module

from ..conftest import Served, Upstream, sent_as, serving, url_connection

TS_CLIENT = Path(__file__).resolve().parents[2] / "fixtures" / "peers_js" / "ts_asking_client.mjs"
ELICIT, SAMPLE = "trigger-elicitation-request", "trigger-sampling-request"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, everything: Upstream) -> Iterator[Served]:
    with serving(tmp_path_factory, "asking-everything", {"everything": url_connection(everything.url)}) as served:
        yield served


@pytest.fixture(scope="module")
def found_gateway(tmp_path_factory: pytest.TempPathFactory, everything: Upstream) -> Iterator[Served]:
    connections = {"everything": url_connection(everything.url)}
    with serving(tmp_path_factory, "asking-found", connections, "--discovery") as served:
        yield served


def _front(request: pytest.FixtureRequest, through: str) -> Served:
    return request.getfixturevalue("gateway" if through == "direct" else "found_gateway")


def _ts(url: str, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    env = {**os.environ, "MCP_SDK_DIR": str(node_module("@modelcontextprotocol", "sdk", "package.json").parent)}
    argv = [node20(), str(TS_CLIENT), url, json.dumps(calls)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("through", ["direct", "call_tool"])
def test_the_ts_sdk_client_answers_server_everythings_elicitation_and_sampling(
    request: pytest.FixtureRequest, through: str
) -> None:
    calls = [sent_as(through, ELICIT, {}), sent_as(through, SAMPLE, {"prompt": "the sea", "maxTokens": 20})]
    out = _ts(f"{_front(request, through).url}/v1/mcp/tools", calls)
    assert out["protocolVersion"] == "2025-11-25"
    assert out["asked"] == ["elicitation/create", "sampling/createMessage"]
    elicited, sampled = ("".join(c["text"] for c in r["content"] if c["type"] == "text") for r in out["results"])
    assert '"name": "Ada"' in elicited and '"action": "accept"' in elicited
    assert '"text": "waves"' in sampled and '"model": "ts-model"' in sampled


async def _elicit(context: ClientRequestContext, params: mt.ElicitRequestParams) -> mt.ElicitResult:
    assert params.message == "Please provide inputs for the following fields:"
    return mt.ElicitResult(action="accept", content={"name": "Grace", "check": True, "email": "grace@example.com"})


async def _sample(context: ClientRequestContext, params: mt.CreateMessageRequestParams) -> mt.CreateMessageResult:
    first = params.messages[0].content
    assert isinstance(first, mt.TextContent) and first.text.endswith("context: the sea")
    return mt.CreateMessageResult(role="assistant", content=mt.TextContent(type="text", text="tides"), model="py")


@pytest.mark.anyio
@pytest.mark.parametrize("through", ["direct", "call_tool"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_python_sdk_client_answers_server_everythings_elicitation_and_sampling(
    request: pytest.FixtureRequest, mode: str, through: str
) -> None:
    gateway = _front(request, through)
    # legacy: asked mid-call on the SSE answer. auto (2026-07-28): the call is held open and each question
    # reaches the peer as an `InputRequiredResult`; its retry carries the answer to the waiting request.
    async with httpx2.AsyncClient(timeout=30) as http:
        with anyio.fail_after(60):
            transport = streamable_http_client(f"{gateway.url}/v1/mcp/tools", http_client=http)
            async with Client(
                transport, mode=mode, elicitation_callback=_elicit, sampling_callback=_sample, cache=None
            ) as client:  # pyright: ignore[reportArgumentType]
                assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
                elicited = await client.call_tool(*sent_as(through, ELICIT, {}))
                sampled = await client.call_tool(*sent_as(through, SAMPLE, {"prompt": "the sea", "maxTokens": 20}))
    elicited_text = "".join(c.text for c in elicited.content if isinstance(c, mt.TextContent))
    sampled_text = "".join(c.text for c in sampled.content if isinstance(c, mt.TextContent))
    assert '"name": "Grace"' in elicited_text
    assert '"text": "tides"' in sampled_text
