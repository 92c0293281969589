"""The status surfaces name only what the policy shows the caller (issue 42 finding 3): `GET /v1/connections`
(the console's data) and `GET /v1/info`, on a real `agent-sdk serve` in front of server-everything, under the
three-principal policy of `test_policy_surfaces`. A tool hidden from a principal appears nowhere in its
answers (name, description, schema); an operator sees every tool. The attached-connection meta-tools of a
session turn list and call only the tools the policy lets the turn's principal call.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from ..conftest import Served, Upstream, assert_clean, make_project, serve
from .test_policy_surfaces import (
    ALICE,
    AUTHORED,
    BOB,
    CAROL,
    DAVE,
    RESEARCH,
    _event,  # pyright: ignore[reportPrivateUsage]
    policy,
    served,
)

__all__ = ["served"]  # the module's gateway: the same policy and project, started for this module


def _get(served: Served, token: str, path: str) -> httpx2.Response:
    with served.client({"Authorization": f"Bearer {token}"}) as http:
        answer = http.get(path)
    assert answer.status_code == 200, answer.text
    return answer


def _connection_tools(served: Served, token: str) -> tuple[set[str], str]:
    answer = _get(served, token, "/v1/connections")
    ev = next(c for c in answer.json()["connections"] if c["name"] == "ev")
    assert ev["tools"] is not None, ev  # listed (the connection is open)
    return {t["name"] for t in ev["tools"]}, answer.text


def _info_tools(served: Served, token: str) -> tuple[set[str], dict[str, Any], str]:
    answer = _get(served, token, "/v1/info")
    doc = answer.json()
    return {t["name"] for t in doc["tools"]}, doc, answer.text


def test_v1_connections_and_v1_info_show_each_caller_only_what_the_policy_shows_it(served: Served) -> None:
    upstream = {t["name"] for t in _get(served, ALICE, "/v1/tools").json()["tools"]} - AUTHORED  # opens `ev`
    assert RESEARCH in upstream
    everything, _ = _connection_tools(served, ALICE)
    assert everything == upstream
    assert _info_tools(served, ALICE)[0] == AUTHORED

    # Carol may call the authored tools only: `ev` is listed with no tool, and nothing of them shows.
    carol, text = _connection_tools(served, CAROL)
    assert carol == set()
    assert RESEARCH not in text and "inputSchema" not in text
    assert _info_tools(served, CAROL)[0] == AUTHORED

    # Bob may call `ev`'s tools only: the authored tools are gone from /v1/info (names and schemas).
    assert _connection_tools(served, BOB)[0] == upstream
    bob, doc, text = _info_tools(served, BOB)
    assert bob == set() and doc["tools"] == []
    for name in AUTHORED:
        assert f'"{name}"' not in text

    # Dave, an operator the policy permits only console/login, sees every tool on both.
    assert _connection_tools(served, DAVE)[0] == upstream
    assert _info_tools(served, DAVE)[0] == AUTHORED


@pytest.fixture(scope="module")
def attached(tmp_path_factory: pytest.TempPathFactory, everything: Upstream) -> Iterator[Served]:
    """server-everything as an attached connection (neither advertised nor host-only: the meta-tools reach it)."""
    root = tmp_path_factory.mktemp("policy-attached")
    definition = (
        f"from connections import define_connection\n\nconnection = define_connection(url={everything.url!r})\n"
    )
    project = make_project(root / "project", {"ev": definition})
    (project / "agent" / "policies.cedar").write_text(policy())
    server = serve(project, root / "state", "--bearer-token", ALICE, "--bearer-token", CAROL)
    yield server
    server.stop()
    assert_clean(server.log_text(), secrets=[ALICE, CAROL])


def _turn(served: Served, token: str, message: str) -> str:
    with served.client({"Authorization": f"Bearer {token}"}) as http:
        created = http.post("/v1/session", json={"message": message})
        assert created.status_code == 200, created.text
        return _event(http, created.json()["sessionId"], "turn.completed")["data"]["reply"]


def test_the_meta_tools_list_and_call_only_the_attached_tools_the_policy_shows(attached: Served) -> None:
    listing = 'call mcp_list_tools {"connection": "ev"}'
    echo = 'call mcp_call_tool {"connection": "ev", "tool": "echo", "arguments": {"message": "meta-echo"}}'
    # Alice may call everything: the meta-tools reach every tool of `ev`.
    assert RESEARCH in _turn(attached, ALICE, listing)
    assert "meta-echo" in _turn(attached, ALICE, echo)
    # Carol may call the authored tools (the meta-tools look authored): through them, none of `ev`'s.
    listed = json.loads(_turn(attached, CAROL, listing))
    assert listed == {"connection": "ev", "tools": []}
    refused = _turn(attached, CAROL, echo)
    assert "tool 'echo' is not allowed on connection 'ev'" in refused and "meta-echo" not in refused
