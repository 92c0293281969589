"""The full MCP hop, measured by the protocol's own conformance suite (0.1.16, server mode, the active suite):
run against our reference upstream directly and against `/v1/mcp/tools` of `agent-sdk serve` with that
upstream behind it (over HTTP and over stdio; speaking both protocol generations, the handshake versions
only, or 2026-07-28 only), compared scenario by scenario.

The scenario groups and the compared set live in tests/conformance.py. #14 and #15 move names from their
groups into `PASSING_THROUGH_GATEWAY` as they make them pass; `python -m tests.conformance` prints the
table (docs/conformance.md).
"""

from __future__ import annotations

import pytest

from tests.conformance import (
    ACTIVE,
    GROUPS,
    PASSING_THROUGH_GATEWAY,
    Outcome,
    assert_gateway_matches,
    compare_all,
    table,
)

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
