"""The full MCP hop, measured by the protocol's own conformance suite (0.1.16, server mode, the active suite):
run against our reference upstream directly and against `/v1/mcp/tools` of `agent-sdk serve` with that
upstream behind it (over HTTP and over stdio; speaking both protocol generations, the handshake versions
only, or 2026-07-28 only), compared scenario by scenario.

The scenario groups and the compared set live in tests/conformance.py. #14 and #15 move names from their
groups into `PASSING_THROUGH_GATEWAY` as they make them pass; `python -m tests.conformance` prints the
table (docs/conformance.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conformance import (
    ACTIVE,
    GROUPS,
    PASSING_THROUGH_GATEWAY,
    Outcome,
    assert_gateway_matches,
    compare_all,
    connection_definition,
    gateway,
    http_upstream,
    table,
)
from tests.fixtures.upstreams import conformance_fixtures as fx

pytestmark = [pytest.mark.peers, pytest.mark.timeout(600)]

DIRECT = "direct (http)"
THROUGH = tuple(
    f"gw<-{transport} ({era})" for era in ("both", "handshake", "modern") for transport in ("http", "stdio")
)
Runs = dict[str, dict[str, Outcome]]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Runs:
    """The suite once per target: directly, then through the gateway for each upstream transport and era."""
    results = compare_all(tmp_path_factory.mktemp("conformance-hop"))
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled():  # the baseline table, on the terminal even without -s
        print("\n" + table(results))
    return results


@pytest.fixture(scope="module")
def hop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(the upstream's URL, the gateway's /v1/mcp/tools with it behind) for the fidelity test."""
    with http_upstream() as url, gateway(tmp_path_factory.mktemp("fidelity"), connection_definition(url=url)) as gw:
        yield url, gw


def test_the_groups_name_every_scenario_of_the_active_suite(runs: Runs) -> None:
    ran = set(runs[DIRECT])
    assert ran == ACTIVE, f"new in the suite: {sorted(ran - ACTIVE)}; gone from it: {sorted(ACTIVE - ran)}"
    assert list(runs) == [DIRECT, *THROUGH]


def test_the_reference_upstream_passes_every_active_scenario_directly(runs: Runs) -> None:
    failed = {name: outcome.failures for name, outcome in runs[DIRECT].items() if not outcome.passed}
    assert not failed, failed


@pytest.mark.parametrize("through", THROUGH)
def test_every_compared_scenario_passes_through_the_gateway(runs: Runs, through: str) -> None:
    assert_gateway_matches(runs[DIRECT], runs[through], scenarios=PASSING_THROUGH_GATEWAY)


@pytest.mark.parametrize("through", THROUGH)
def test_a_scenario_that_passes_through_the_gateway_is_compared(runs: Runs, through: str) -> None:
    """The ratchet: a scenario that starts to pass through the gateway joins the compared set, so that it
    cannot silently regress later."""
    passing = {name for name, outcome in runs[through].items() if outcome.passed}
    unlisted = sorted(passing - PASSING_THROUGH_GATEWAY)
    assert not unlisted, f"move {unlisted} into PASSING_THROUGH_GATEWAY in tests/conformance.py"


def test_the_compared_set_is_made_of_whole_names_of_the_groups() -> None:
    listed = [name for names in GROUPS.values() for name in names]
    assert len(listed) == len(set(listed)), "a scenario is in two groups"
    assert PASSING_THROUGH_GATEWAY <= ACTIVE, sorted(PASSING_THROUGH_GATEWAY - ACTIVE)


def test_assert_gateway_matches_names_every_lost_scenario_with_the_suites_reason() -> None:
    direct = {"ping": Outcome(True), "tools-list": Outcome(True), "prompts-list": Outcome(True)}
    through = {
        "ping": Outcome(True),
        "tools-list": Outcome(False, ("tools-list: Missing tools array",)),
        "prompts-list": Outcome(False, ("prompts-list: Method not found",)),
    }
    assert_gateway_matches(direct, through, scenarios=["ping"])
    with pytest.raises(AssertionError) as lost:
        assert_gateway_matches(direct, through, scenarios=["ping", "tools-list", "prompts-list", "pnig"])
    message = str(lost.value)
    assert "2 of 4 scenarios lost" in message
    assert "tools-list passes directly but not through the gateway: tools-list: Missing tools array" in message
    assert "prompts-list passes directly but not through the gateway: prompts-list: Method not found" in message
    assert "not run directly (misspelt, or not in this suite): pnig" in message
    assert "ping passes" not in message


def test_assert_gateway_matches_refuses_a_scenario_the_upstream_fails_directly() -> None:
    direct = {"ping": Outcome(False, ("ping: timed out",))}
    with pytest.raises(
        AssertionError, match="ping fails directly, so the upstream cannot vouch for it: ping: timed out"
    ):
        assert_gateway_matches(direct, {"ping": Outcome(True)}, scenarios=["ping"])


async def _tools_seen(url: str, mode: str) -> dict[str, Any]:
    def plain(model: Any) -> Any:
        return model.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"meta"})

    async with (
        httpx2.AsyncClient(timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, cache=None) as client,  # pyright: ignore[reportArgumentType]
    ):
        seen: dict[str, Any] = {"tools/list": sorted((plain(t) for t in (await client.list_tools()).tools), key=str)}
        for name in [*fx.CONTENT_TOOLS, "test_error_handling", "json_schema_2020_12_tool"]:
            seen[name] = plain(await client.call_tool(name, {"name": "Ada"} if name.startswith("json") else {}))
        return seen


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_tool_listing_and_results_are_the_same_directly_and_through_the_gateway(
    hop: tuple[str, str], mode: str
) -> None:
    """The suite's content checks are lenient (an image passes with any `data`); here every listed tool (its
    whole input schema, 2020-12 keywords included) and every content tool's result must arrive unchanged."""
    direct, through = (anyio.run(_tools_seen, url, mode) for url in hop)
    assert direct["test_image_content"]["content"] == [fx.image()]  # the upstream answers what the suite asks for
    for key, value in direct.items():
        assert through[key] == value, key
