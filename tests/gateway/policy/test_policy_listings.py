"""The status surfaces name only what the policy shows the caller (issue 42 finding 3): `GET /v1/connections`
(the console's data) and `GET /v1/info`, on a real `agent-sdk serve` in front of server-everything, under the
three-principal policy of `test_policy_surfaces`. A tool hidden from a principal appears nowhere in its
answers (name, description, schema); an operator sees every tool.
"""

from __future__ import annotations

from typing import Any

import httpx2

from ..conftest import Served
from .test_policy_surfaces import ALICE, AUTHORED, BOB, CAROL, DAVE, RESEARCH, served

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
