"""Every MCP method the gateway answers is covered by a policy decision, or named here as plumbing.

The methods come from the gateway's own servers (the SDK servers of `/v1/mcp/tools` and `/v1/mcp`, with
every handler they can hold) and the task lanes in front of them. Each decided one is then sent to a
real `agent-sdk serve` (server-everything behind it) by a principal the policy permits everything and
by one it permits nothing (Tina: tool calls only, so she owns the task whose methods are refused): the
first gets the item, the second the refusal or an empty listing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from connections.serving import TASK_METHODS
from gateway.mcp.endpoints import agent_server
from gateway.mcp.task_ext import _METHODS as TASK_EXTENSION_METHODS  # pyright: ignore[reportPrivateUsage]
from gateway.mcp.tools import tools_server

from ..conftest import Served, Upstream, assert_clean, make_project, serve

ALICE, EVE, TINA = "alice-token-0123456789abcdef", "eve-token-0123456789abcdef", "tina-token-0123456789abcdef"
ARCH = "demo://resource/static/document/architecture.md"
TOOLS, AGENT = "/v1/mcp/tools", "/v1/mcp"

PLUMBING = {
    (TOOLS, "initialize"): "the handshake: names no tool, resource or prompt",
    (TOOLS, "ping"): "liveness",
    (TOOLS, "server/discover"): "the server's own description (2026-07-28)",
    (TOOLS, "logging/setLevel"): "the peer's own log level for its own calls",
    (TOOLS, "resources/unsubscribe"): "ends the caller's own subscription (subscribing was decided)",
    (TOOLS, "tasks/list"): "not served: -32601 for every caller",
    (TOOLS, "tasks/update"): "not relayed: -32601 for every caller",
    (AGENT, "initialize"): "the handshake",
    (AGENT, "ping"): "liveness",
    (AGENT, "server/discover"): "the server's own description (2026-07-28)",
}


class _Offers:
    """Stands for an `Offerings` that offers everything, so that the server is built with every handler."""

    def offers(self, _kind: str) -> bool:
        return True


def answered() -> set[tuple[str, str]]:
    tools = tools_server(offerings=_Offers(), subscriptions=True)  # pyright: ignore[reportArgumentType]
    agent = agent_server(with_call_tool=True)
    found = {(TOOLS, m) for m in tools._request_handlers} | {(AGENT, m) for m in agent._request_handlers}  # pyright: ignore[reportPrivateUsage]
    found |= {(TOOLS, m) for m in (*TASK_METHODS, *TASK_EXTENSION_METHODS)}
    return found | {(TOOLS, "initialize"), (AGENT, "initialize")}


def pid(token: str) -> str:
    return "bearer:" + hashlib.sha256(token.encode()).hexdigest()[:12]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, everything: Upstream) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("policy-methods")
    definition = (
        "from connections import define_connection\n\n"
        f"connection = define_connection(url={everything.url!r}, advertise_tools=True, advertise_resources=True,"
        " advertise_prompts=True)\n"
    )
    project = make_project(root / "project", {"ev": definition})
    (project / "agent" / "policies.cedar").write_text(
        f'permit(principal == AgentSdk::Principal::"{pid(ALICE)}", action, resource);\n'
        f'permit(principal == AgentSdk::Principal::"{pid(TINA)}",'
        ' action == AgentSdk::Action::"tools/call", resource);\n'
    )
    server = serve(project, root / "state", "--bearer-token", ALICE, "--bearer-token", EVE, "--bearer-token", TINA)
    yield server
    server.stop()
    assert_clean(server.log_text(), secrets=[ALICE, EVE, TINA])


HANDSHAKE = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
INITIALIZE = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


def rpc(served: Served, token: str, method: str, params: dict[str, Any], path: str = TOOLS, session: str = "") -> Any:
    headers = {**HANDSHAKE, "Authorization": f"Bearer {token}", **({"Mcp-Session-Id": session} if session else {})}
    with served.client(headers) as http:
        answer = http.post(path, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    assert answer.status_code == 200, answer.text
    return answer.json()


def _listed(field: str, method: str, path: str = TOOLS) -> Callable[[Served, str], Any]:
    return lambda served, token: len(rpc(served, token, method, {}, path)["result"][field])


def _ok(method: str, params: dict[str, Any]) -> Callable[[Served, str], Any]:
    return lambda served, token: "result" in rpc(served, token, method, params)


def _subscribe(served: Served, token: str) -> Any:
    session = _session(served, token)
    return "result" in rpc(served, token, "resources/subscribe", {"uri": ARCH}, session=session)


def _session(served: Served, token: str) -> str:
    headers = {**HANDSHAKE, "Authorization": f"Bearer {token}"}
    with served.client(headers) as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE}
        return http.post(TOOLS, json=body).headers["mcp-session-id"]


def _listen(served: Served, token: str) -> Any:
    async def run() -> bool:
        async with httpx2.AsyncClient(timeout=30, headers={"Authorization": f"Bearer {token}"}) as http:
            client = Client(streamable_http_client(f"{served.url}{TOOLS}", http_client=http), cache=None)  # pyright: ignore[reportArgumentType]
            async with client:
                with anyio.fail_after(30):
                    try:
                        async with client.listen(resource_subscriptions=[ARCH]):
                            return True
                    except MCPError:
                        return False

    return anyio.run(run)


def _task(method: str) -> Callable[[Served, str], Any]:
    """`method` on a task of the caller's own (Tina may create one but nothing else; Alice may do all)."""

    def probe(served: Served, token: str) -> Any:
        created = rpc(
            served, token, "tools/call", {"name": "simulate-research-query", "arguments": {"topic": "t"}, "task": {}}
        )
        task_id = created["result"]["task"]["taskId"]
        return "result" in rpc(served, token, method, {"taskId": task_id})

    return probe


def _ask(served: Served, token: str) -> Any:
    called = rpc(served, token, "tools/call", {"name": "ask", "arguments": {"message": "hi", "waitMs": 0}}, AGENT)
    return called["result"]["isError"] is False


COMPLETE = {
    "ref": {"type": "ref/prompt", "name": "completable-prompt"},
    "argument": {"name": "department", "value": "E"},
}
DECIDED: dict[tuple[str, str], Callable[[Served, str], Any]] = {
    (TOOLS, "tools/list"): _listed("tools", "tools/list"),
    (TOOLS, "tools/call"): _ok("tools/call", {"name": "echo", "arguments": {"message": "m"}}),
    (TOOLS, "resources/list"): _listed("resources", "resources/list"),
    (TOOLS, "resources/templates/list"): _listed("resourceTemplates", "resources/templates/list"),
    (TOOLS, "resources/read"): _ok("resources/read", {"uri": ARCH}),
    (TOOLS, "resources/subscribe"): _subscribe,
    (TOOLS, "subscriptions/listen"): _listen,
    (TOOLS, "prompts/list"): _listed("prompts", "prompts/list"),
    (TOOLS, "prompts/get"): _ok("prompts/get", {"name": "simple-prompt"}),
    (TOOLS, "completion/complete"): _ok("completion/complete", COMPLETE),
    (TOOLS, "tasks/get"): _task("tasks/get"),
    (TOOLS, "tasks/result"): _task("tasks/result"),
    (TOOLS, "tasks/cancel"): _task("tasks/cancel"),
    (AGENT, "tools/list"): _listed("tools", "tools/list", AGENT),
    (AGENT, "tools/call"): _ask,
}


def test_every_answered_method_is_decided_or_named_as_plumbing() -> None:
    found = answered()
    uncovered = found - DECIDED.keys() - PLUMBING.keys()
    assert uncovered == set(), f"answered but covered by no policy decision: {sorted(uncovered)}"
    stale = (DECIDED.keys() | PLUMBING.keys()) - found
    assert stale == set(), f"listed here but not answered any more: {sorted(stale)}"


@pytest.mark.parametrize("method", sorted(DECIDED), ids=lambda m: f"{m[0]} {m[1]}")
def test_each_decided_method_gives_the_permitted_and_refuses_the_others(
    served: Served, method: tuple[str, str]
) -> None:
    probe = DECIDED[method]
    assert probe(served, ALICE), f"{method}: the principal the policy permits everything was refused"
    refused = probe(served, TINA if method[1].startswith("tasks/") else EVE)
    assert not refused, f"{method}: a principal the policy permits nothing was answered"
