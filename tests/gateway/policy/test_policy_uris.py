"""One canonical form for every resource URI the gateway decides on (docs/policy.md, "Resource URIs"), and
hidden resources and prompts answered as ones that do not exist, against a real `agent-sdk serve` in front of
server-everything (which normalizes the URIs it receives, as a WHATWG URL parser does).

Bob may read every offering but one document (a Cedar `forbid`), and no instance of the dynamic text
template (a `forbid` on the template); the connection denies another document to everyone (`deny_resources`).
Each spelling of those URIs the red team found (case of the scheme and host, `.` and `..` segments,
percent-encoded dots and letters) is refused as the canonical URI is, on both protocol generations, on the
handshake era's `resources/subscribe` and 2026-07-28's `subscriptions/listen`, and over `serve --stdio`.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as mt
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from ..conftest import HERE, Served, Upstream, assert_clean, make_project, serve

ALICE, BOB = "alice-token-0123456789abcdef", "bob-token-0123456789abcdef"
ARCH = "demo://resource/static/document/architecture.md"
DENIED = "demo://resource/static/document/extension.md"
TEXT = "demo://resource/dynamic/text/{resourceId}"
MODES = ["auto", "legacy"]


def spellings(uri: str) -> list[str]:
    """The spellings of `uri` the red team read past the policy with, and percent-encoded ones."""
    base, name = uri.rsplit("/", 1)
    return [
        uri.replace("demo://", "DEMO://"),
        uri.replace("demo://", "Demo://"),
        uri.replace("//resource/", "//RESOURCE/"),
        f"{base}/./{name}",
        uri.replace("/static/", "/static/x/../"),
        uri.replace("/static/", "/dynamic/text/../../static/"),
        uri.replace("/static/", "/static/x/%2E%2E/"),
        uri.replace("/static/", "/static/x/%2e%2E/"),
        f"{base}/%{ord(name[0]):02x}{name[1:]}",
        uri.replace("/document/", "/docum%65nt/"),
        # what a WHATWG URL parser (the upstream's `new URL`) drops: an empty port or userinfo, spaces, tabs
        uri.replace("//resource/", "//resource:/"),
        uri.replace("//resource/", "//@resource/"),
        f" {uri}\n",
        uri.replace("document", "docu\tment"),
    ]


def pid(token: str) -> str:
    return "bearer:" + hashlib.sha256(token.encode()).hexdigest()[:12]


def policy(bob: str) -> str:
    return f"""\
@id("alice-all")
permit(principal == AgentSdk::Principal::"{pid(ALICE)}", action, resource);
@id("stdio-all")
permit(principal == AgentSdk::Principal::"stdio", action, resource);
@id("bob-all")
permit(principal == AgentSdk::Principal::"{bob}", action, resource);
@id("no-architecture")
forbid(principal == AgentSdk::Principal::"{bob}", action, resource == AgentSdk::Resource::"{ARCH}");
@id("no-dynamic-text")
forbid(principal == AgentSdk::Principal::"{bob}", action, resource == AgentSdk::Resource::"{TEXT}");
@id("no-args-prompt")
forbid(principal == AgentSdk::Principal::"{bob}", action, resource == AgentSdk::Prompt::"args-prompt");
"""


def definition(everything: Upstream) -> str:
    return (
        "from connections import define_connection\n\n"
        f"connection = define_connection(url={everything.url!r}, advertise_tools=True, advertise_resources=True,"
        f" advertise_prompts=True, deny_resources=[{DENIED!r}])\n"
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, everything: Upstream) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("uris")
    project = make_project(root / "project", {"ev": definition(everything)})
    (project / "agent" / "policies.cedar").write_text(policy(pid(BOB)))
    server = serve(project, root / "state", "--bearer-token", ALICE, "--bearer-token", BOB)
    yield server
    server.stop()
    assert_clean(server.log_text(), secrets=[ALICE, BOB])


def _run(work: Callable[[], Awaitable[None]], within: float) -> None:
    async def bounded() -> None:
        with anyio.fail_after(within):
            await work()

    anyio.run(bounded)


def _client(served: Served, token: str, mode: str) -> tuple[httpx2.AsyncClient, Client]:
    http = httpx2.AsyncClient(timeout=30, headers={"Authorization": f"Bearer {token}"})
    url = f"{served.url}/v1/mcp/tools"
    return http, Client(streamable_http_client(url, http_client=http), mode=mode, cache=None)


async def _refusal(attempt: Awaitable[Any]) -> tuple[int, str, Any]:
    with pytest.raises(MCPError) as caught:
        await attempt
    return caught.value.code, caught.value.message, caught.value.data


def _offers_none(uri: str, what: str = "resource") -> tuple[int, str, Any]:
    return mt.INVALID_PARAMS, f"no advertised connection offers {what} {uri!r}", {"error": "not_offered"}


def _same(hidden: tuple[int, str, Any], missing: tuple[int, str, Any], name: str, instead: str) -> None:
    """Two refusals word for word and code for code, `name` read as `instead`."""
    assert json.loads(json.dumps(hidden).replace(name, instead)) == json.loads(json.dumps(missing)), (hidden, missing)


@pytest.mark.parametrize("mode", MODES)
def test_every_spelling_of_a_forbidden_uri_is_decided_as_the_canonical_uri(served: Served, mode: str) -> None:
    async def run() -> None:
        http, bob = _client(served, BOB, mode)
        async with http, bob:
            for spelled in spellings(ARCH):
                assert await _refusal(bob.read_resource(spelled, cache_mode="bypass")) == _offers_none(ARCH), spelled
            for spelled in [DENIED, *spellings(DENIED)]:  # deny_resources: for everyone
                assert await _refusal(bob.read_resource(spelled, cache_mode="bypass")) == _offers_none(DENIED)
            for instance in ("demo://resource/dynamic/text/1", "DEMO://resource/dynamic/text/./2"):
                canonical = instance.replace("DEMO", "demo").replace("/./", "/")
                refused = await _refusal(bob.read_resource(instance, cache_mode="bypass"))
                assert refused == _offers_none(canonical), "a template forbidden forbids reads of its instances"
            blob = await bob.read_resource("demo://resource/dynamic/blob/1", cache_mode="bypass")
            assert blob.contents, "another template's instance is still read"
        http, alice = _client(served, ALICE, mode)
        async with http, alice:
            for spelled in spellings(ARCH):  # forwarded in the canonical form: the upstream finds the document
                read = await alice.read_resource(spelled, cache_mode="bypass")
                assert [c.uri for c in read.contents] == [ARCH], spelled
            assert await _refusal(alice.read_resource(spellings(DENIED)[0])) == _offers_none(DENIED)
            assert (await alice.read_resource("Demo://resource/dynamic/text/3", cache_mode="bypass")).contents

    _run(run, 120)


HANDSHAKE = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
INITIALIZE = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


def _rpc(served: Served, token: str, method: str, params: dict[str, Any], session: str | None = None) -> Any:
    headers = {**HANDSHAKE, "Authorization": f"Bearer {token}", **({"Mcp-Session-Id": session} if session else {})}
    with served.client(headers) as http:
        return http.post("/v1/mcp/tools", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})


def test_subscriptions_of_every_spelling_are_decided_as_the_canonical_uri(served: Served) -> None:
    session = _rpc(served, BOB, "initialize", INITIALIZE).headers["mcp-session-id"]
    for spelled in [ARCH, *spellings(ARCH)]:
        refused = _rpc(served, BOB, "resources/subscribe", {"uri": spelled}, session).json()
        assert refused["error"] == {"code": -32602, "message": f"no advertised connection offers resource {ARCH!r}"}
    for spelled in spellings(DENIED):
        refused = _rpc(served, BOB, "resources/subscribe", {"uri": spelled}, session).json()
        assert refused["error"]["message"] == f"no advertised connection offers resource {DENIED!r}", spelled
    instance = "demo://resource/dynamic/text/7"  # an instance of a template the policy forbids
    refused = _rpc(served, BOB, "resources/subscribe", {"uri": instance.replace("demo", "DEMO")}, session).json()
    assert refused["error"]["message"] == f"no advertised connection offers resource {instance!r}"

    async def listen() -> None:
        http, bob = _client(served, BOB, "auto")
        async with http, bob:
            for spelled, canonical in [
                *((s, ARCH) for s in spellings(ARCH)),
                ("Demo://resource/dynamic/text/7", instance),
            ]:
                with pytest.raises(MCPError) as caught:
                    async with bob.listen(resource_subscriptions=[spelled]):
                        pass
                assert caught.value.message == f"no advertised connection offers resource {canonical!r}", spelled

    _run(listen, 60)


@pytest.mark.parametrize("mode", MODES)
def test_serve_stdio_decides_every_spelling_as_the_canonical_uri(
    tmp_path: Path, everything: Upstream, mode: str
) -> None:
    project = make_project(tmp_path / "project", {"ev": definition(everything)})
    (project / "agent" / "policies.cedar").write_text(policy("stdio").replace('@id("stdio-all")', "// none", 1))
    argv = ["-m", "gateway", "serve", "--stdio", "--dir", str(project), "--state-root", str(tmp_path / "state")]
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(HERE.parent.parent)}
    params = StdioServerParameters(command=sys.executable, args=argv, env=env)

    async def run() -> None:
        async with Client(stdio_client(params), mode=mode, cache=None) as client:
            for spelled in spellings(ARCH):
                assert await _refusal(client.read_resource(spelled)) == _offers_none(ARCH), spelled
            for spelled in spellings(DENIED):
                assert await _refusal(client.read_resource(spelled)) == _offers_none(DENIED), spelled
            assert await _refusal(client.read_resource("DEMO://resource/dynamic/text/1")) == _offers_none(
                "demo://resource/dynamic/text/1"
            )
            assert (await client.read_resource("demo://resource/static/document/features.md")).contents
            missing = ARCH.replace("architecture", "architectura")  # hidden and missing answer alike here too
            _same(
                await _refusal(client.read_resource(ARCH)), await _refusal(client.read_resource(missing)), ARCH, missing
            )
            hidden_prompt = await _refusal(client.get_prompt("args-prompt", {"city": "Oslo"}))
            _same(
                hidden_prompt,
                await _refusal(client.get_prompt("args-prompx", {"city": "Oslo"})),
                "args-prompt",
                "args-prompx",
            )

    _run(run, 90)


@pytest.mark.parametrize("mode", MODES)
def test_hidden_and_missing_resources_and_prompts_answer_the_same(served: Served, mode: str) -> None:
    missing_uri = ARCH.replace("architecture", "architectura")
    completion = {"name": "city", "value": "O"}

    async def run() -> None:
        http, bob = _client(served, BOB, mode)
        async with http, bob:
            _same(
                await _refusal(bob.read_resource(ARCH, cache_mode="bypass")),
                await _refusal(bob.read_resource(missing_uri, cache_mode="bypass")),
                ARCH,
                missing_uri,
            )
            _same(
                await _refusal(bob.get_prompt("args-prompt", {"city": "Oslo"})),
                await _refusal(bob.get_prompt("args-prompx", {"city": "Oslo"})),
                "args-prompt",
                "args-prompx",
            )
            _same(
                await _refusal(bob.complete(mt.PromptReference(type="ref/prompt", name="args-prompt"), completion)),
                await _refusal(bob.complete(mt.PromptReference(type="ref/prompt", name="args-prompx"), completion)),
                "args-prompt",
                "args-prompx",
            )
            missing_template = TEXT.replace("text", "texx")
            _same(
                await _refusal(bob.complete(mt.ResourceTemplateReference(type="ref/resource", uri=TEXT), completion)),
                await _refusal(
                    bob.complete(mt.ResourceTemplateReference(type="ref/resource", uri=missing_template), completion)
                ),
                TEXT,
                missing_template,
            )
            if mode == "auto":  # 2026-07-28's subscriptions/listen
                listened = []
                for uri in (ARCH, missing_uri):
                    with pytest.raises(MCPError) as caught:
                        async with bob.listen(resource_subscriptions=[uri]):
                            pass
                    listened.append((caught.value.code, caught.value.message, caught.value.data))
                _same(listened[0], listened[1], ARCH, missing_uri)

    _run(run, 90)
    session = _rpc(served, BOB, "initialize", INITIALIZE).headers["mcp-session-id"]
    hidden = _rpc(served, BOB, "resources/subscribe", {"uri": ARCH}, session).json()
    missing = _rpc(served, BOB, "resources/subscribe", {"uri": missing_uri}, session).json()
    _same(hidden, missing, ARCH, missing_uri)
    hidden = _rpc(served, BOB, "resources/unsubscribe", {"uri": ARCH}, session).json()
    missing = _rpc(served, BOB, "resources/unsubscribe", {"uri": missing_uri}, session).json()
    _same(hidden, missing, ARCH, missing_uri)


def _audit(served: Served, principal: str, method: str, target: str, within: float = 30) -> list[dict[str, Any]]:
    path = served.state_root / "audit" / "audit.jsonl"
    deadline = time.monotonic() + within
    while True:
        lines = path.read_text().splitlines() if path.exists() else []
        found = [
            r
            for r in map(json.loads, lines)
            if (r["principal"], r["method"], r["target"]) == (principal, method, target)
        ]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


@pytest.mark.parametrize("mode", MODES)
def test_the_audit_trail_records_unknown_tools_and_refused_resources_and_prompts(served: Served, mode: str) -> None:
    unknown = f"no-such-tool-{mode}"

    async def run() -> None:
        http, bob = _client(served, BOB, mode)
        async with http, bob:
            await _refusal(bob.call_tool(unknown, {}))
            await _refusal(bob.read_resource(spellings(ARCH)[0], cache_mode="bypass"))
            await _refusal(bob.get_prompt("args-prompt", {"city": "Oslo"}))
            await _refusal(bob.read_resource("demo://resource/static/document/nothing.md", cache_mode="bypass"))

    _run(run, 60)
    bob = pid(BOB)
    for method, target, reason, policies in (
        ("tools/call", unknown, "unknown_tool", []),
        ("resources/read", ARCH, "policy_denied", ["no-architecture"]),
        ("prompts/get", "args-prompt", "policy_denied", ["no-args-prompt"]),
        ("resources/read", "demo://resource/static/document/nothing.md", "not_offered", []),
    ):
        found = _audit(served, bob, method, target)
        assert found, f"no audit record of {method} {target}"
        assert method != "tools/call" or len(found) == 1, found  # one record per refused call
        record = found[-1]
        assert (record["decision"], record["outcome"], record["reason"], record["policies"]) == (
            "deny",
            "refused",
            reason,
            policies,
        ), record
