"""The conformance comparison: the MCP conformance suite (0.1.16, server mode) against our reference upstream
directly and against `/v1/mcp/tools` of `agent-sdk serve` with that upstream behind it, scenario by scenario.

    direct = run_suite(upstream_url)
    through = run_suite(f"{served.url}/v1/mcp/tools")
    assert_gateway_matches(direct, through, scenarios=PASSING_THROUGH_GATEWAY)

The scenario groups live here, in one place: a developer who makes a group pass through the gateway moves
its names into `PASSING_THROUGH_GATEWAY` (tests/gateway/mcp/test_conformance_hop.py compares exactly that set and
fails when a scenario outside it starts to pass, so the list stays honest). `python -m tests.conformance`
prints the whole table (docs/conformance.md).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Generator, Iterable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tests.conftest import free_port
from tests.peers import node22, node_module
from tests.processes import FIXTURES, running

UPSTREAM = FIXTURES / "upstreams" / "conformance_server.py"
SUITE_VERSION = "0.1.16"

# The active suite's 30 server scenarios, by what the gateway must carry for them to pass through it.
CORE = (
    "server-initialize",
    "ping",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-error",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
)
CONTENT = ("tools-call-image", "tools-call-audio", "tools-call-embedded-resource", "tools-call-mixed-content")
PROGRESS_LOGGING = ("logging-set-level", "tools-call-with-logging", "tools-call-with-progress")  # #14 (i14a)
ELICITATION_SAMPLING = (  # #14 (i14b)
    "tools-call-sampling",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
)
RESOURCES_PROMPTS_COMPLETION = (  # #15 (i15a)
    "completion-complete",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
)
SUBSCRIPTIONS = ("resources-subscribe", "resources-unsubscribe")  # #15 (i15b)
TASKS: tuple[str, ...] = ()  # #15 (i15b): suite 0.1.16 has no server-mode task scenario yet
GROUPS: dict[str, tuple[str, ...]] = {
    "CORE": CORE,
    "CONTENT": CONTENT,
    "PROGRESS_LOGGING": PROGRESS_LOGGING,
    "ELICITATION_SAMPLING": ELICITATION_SAMPLING,
    "RESOURCES_PROMPTS_COMPLETION": RESOURCES_PROMPTS_COMPLETION,
    "SUBSCRIPTIONS": SUBSCRIPTIONS,
    "TASKS": TASKS,
}
ACTIVE = frozenset(name for names in GROUPS.values() for name in names)

# The scenarios that pass through the gateway today, with either upstream transport: the compared set.
# Owners move names in from their group as they make them pass (and never out).
PASSING_THROUGH_GATEWAY = frozenset(
    CORE + CONTENT + PROGRESS_LOGGING + ELICITATION_SAMPLING + RESOURCES_PROMPTS_COMPLETION + SUBSCRIPTIONS
)

# Defined by `define_connection(...)` for the upstream behind the gateway.
ADVERTISED_FIELDS: dict[str, object] = {"advertise_tools": True, "advertise_resources": True, "advertise_prompts": True}


@dataclass(frozen=True, slots=True)
class Outcome:
    """One scenario's result: passed when it wrote checks and none of them is a FAILURE (warnings pass,
    as in the suite's own summary)."""

    passed: bool
    failures: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    """Checks the suite marked WARNING: a pass, but some of a scenario's checks may not have run (e.g.
    `server-sse-multiple-streams` stops early against a stateless endpoint that gives no session id)."""


def run_suite(url: str, *, suite: str = "active", scenarios: Iterable[str] | None = None) -> dict[str, Outcome]:
    """Run the conformance suite against `url` and read its per-scenario JSON (`-o DIR`).

    The whole `suite` in one process, or each of `scenarios` in turn. A scenario that wrote no result
    (the suite crashed on it) is a failure that says so. Raises AssertionError when the suite wrote
    nothing at all, with the end of its output.
    """
    with tempfile.TemporaryDirectory(prefix="conformance-") as tmp:
        out = Path(tmp) / "results"
        runs = [["--suite", suite]] if scenarios is None else [["--scenario", name] for name in scenarios]
        logs = [_suite(url, out, *args) for args in runs]
        results = read_results(out)
        assert results, f"the conformance suite wrote no results for {url}:\n{''.join(logs)[-3000:]}"
        for name in scenarios or ():
            results.setdefault(name, Outcome(False, ("the suite wrote no result for this scenario",)))
        return results


def _suite(url: str, out: Path, *args: str) -> str:
    suite = node_module("@modelcontextprotocol", "conformance", "dist", "index.js")
    done = subprocess.run(
        [str(node22()), str(suite), "server", "--url", url, "-o", str(out), *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=out.parent,
    )
    return done.stdout + done.stderr


_RESULT_DIR = re.compile(r"^server-(?P<name>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


def read_results(out: Path) -> dict[str, Outcome]:
    """{scenario: Outcome} from the suite's `-o` folder: one `server-<scenario>-<time>/checks.json` each."""
    results: dict[str, Outcome] = {}
    for folder in sorted(out.iterdir()) if out.is_dir() else ():
        match = _RESULT_DIR.match(folder.name)
        if match is None or not (folder / "checks.json").is_file():
            continue
        checks = json.loads((folder / "checks.json").read_text())
        failures, warnings = _checks(checks, "FAILURE"), _checks(checks, "WARNING")
        results[match["name"]] = Outcome(bool(checks) and not failures, failures, warnings)
    return results


def _checks(checks: list[dict[str, object]], status: str) -> tuple[str, ...]:
    def why(check: dict[str, object]) -> object:
        details = check.get("details")
        message = details.get("message") if isinstance(details, dict) else None
        return check.get("errorMessage") or message or check.get("description")

    return tuple(f"{c.get('id')}: {why(c)}" for c in checks if c.get("status") == status)


def assert_gateway_matches(
    direct: Mapping[str, Outcome], through: Mapping[str, Outcome], *, scenarios: Iterable[str]
) -> None:
    """Every one of `scenarios` passes through the gateway. Fails naming each scenario that passes directly
    and not through the gateway (with the suite's own reasons), and each that does not even pass directly
    (the reference upstream is broken, so the comparison cannot vouch for it)."""
    wanted = sorted(scenarios)
    unknown = [name for name in wanted if name not in direct]
    broken = [name for name in wanted if name in direct and not direct[name].passed]
    lost = [name for name in wanted if direct.get(name, Outcome(False)).passed and not _passed(through, name)]
    problems: list[str] = []
    if unknown:
        problems.append(f"not run directly (misspelt, or not in this suite): {', '.join(unknown)}")
    for name in broken:
        problems.append(
            f"{name} fails directly, so the upstream cannot vouch for it: {'; '.join(direct[name].failures)}"
        )
    for name in lost:
        why = "; ".join(through[name].failures) if name in through else "no result through the gateway"
        problems.append(f"{name} passes directly but not through the gateway: {why}")
    assert not problems, f"{len(lost)} of {len(wanted)} scenarios lost in the gateway hop:\n" + "\n".join(problems)


def _passed(results: Mapping[str, Outcome], name: str) -> bool:
    return name in results and results[name].passed


def table(runs: Mapping[str, Mapping[str, Outcome]]) -> str:
    """A plain-text table: one row per scenario (grouped), one column per run, and a count per column.
    "pass (warning)" is a pass with a check the suite marked WARNING."""
    names = [name for group in GROUPS.values() for name in group]
    names += sorted({n for results in runs.values() for n in results} - set(names))
    width = max(len(n) for n in names) + 2
    column = max(len(title) for title in runs) + 2
    group_of = {name: group for group, members in GROUPS.items() for name in members}
    header = f"{'scenario':<{width}}{'group':<30}" + "".join(f"{title:<{column}}" for title in runs)
    lines = [header, "-" * len(header)]
    for name in names:
        cells = "".join(f"{_mark(results, name):<{column}}" for results in runs.values())
        lines.append(f"{name:<{width}}{group_of.get(name, '(not in a group)'):<30}{cells}")
    counts = "".join(f"{_count(results, names):<{column}}" for results in runs.values())
    lines.append(f"{'passed':<{width}}{'':<30}{counts}")
    return "\n".join(line.rstrip() for line in lines)


def _mark(results: Mapping[str, Outcome], name: str) -> str:
    if name not in results:
        return "-"
    outcome = results[name]
    return "FAIL" if not outcome.passed else "pass (warning)" if outcome.warnings else "pass"


def _count(results: Mapping[str, Outcome], names: list[str]) -> str:
    return f"{sum(_passed(results, n) for n in names)} of {sum(n in results for n in names)}"


# --- the processes: the upstream and `agent-sdk serve` in front of it ---------------------------------

Transport = Literal["stdio", "http"]
Era = Literal["both", "handshake", "modern"]


def upstream_command(transport: Transport, era: Era = "both", port: int | None = None) -> list[str]:
    """The reference upstream's command line."""
    cmd = [sys.executable, str(UPSTREAM), "--transport", transport, "--era", era]
    return [*cmd, "--port", str(port)] if port is not None else cmd


@contextmanager
def http_upstream(era: Era = "both") -> Generator[str]:
    """The reference upstream over Streamable HTTP until the block ends; yields its URL (endpoint /mcp)."""
    port = free_port()
    with running(upstream_command("http", era, port), port=port, what="the conformance upstream"):
        yield f"http://127.0.0.1:{port}/mcp"


def connection_definition(
    *, url: str | None = None, stdio: Era | None = None, protocol: str = "auto", sandbox: bool = False
) -> str:
    """A definition file for the upstream: over HTTP at `url`, or as a stdio child speaking era `stdio`
    (under bubblewrap with `sandbox`); it advertises what `ADVERTISED_FIELDS` says."""
    if url is not None:
        target = f"url={url!r}"
    else:
        command, *args = upstream_command("stdio", stdio or "both")
        target = f"command={command!r}, args={args!r}" + (", sandbox=True" if sandbox else "")
    fields = "".join(f", {key}={value!r}" for key, value in ADVERTISED_FIELDS.items())
    return (
        "from connections import define_connection\n\n"
        f"connection = define_connection({target}, protocol={protocol!r}{fields})\n"
    )


@contextmanager
def gateway(root: Path, definition: str) -> Generator[str]:
    """`agent-sdk serve` on a project whose one connection, `upstream`, is `definition`, until the block
    ends; yields the URL of its `/v1/mcp/tools`. Its log must be clean (no traceback) afterwards."""
    from tests.gateway.conftest import assert_clean, make_project, serve

    served = serve(make_project(root / "project", {"upstream": definition}, tools=False), root / "state")
    try:
        yield f"{served.url}/v1/mcp/tools"
    finally:
        served.stop()
    assert_clean(served.log_text())


def compare_all(root: Path, eras: Iterable[Era] = ("both", "handshake", "modern")) -> dict[str, dict[str, Outcome]]:
    """Run the suite directly against the HTTP upstream, then through the gateway with the upstream behind
    it over HTTP and over stdio, once per upstream era: {run title: results}.

    The direct run is the first era's (`both`): the suite speaks the handshake versions only, so a
    modern-only upstream cannot be run directly; the same fixtures behind the gateway are compared with
    it (the gateway bridges a handshake peer to a 2026-07-28 upstream)."""
    runs: dict[str, dict[str, Outcome]] = {}
    for era in eras:
        with http_upstream(era) as url:
            if not runs:
                runs["direct (http)"] = run_suite(url)
            with gateway(root / f"http-{era}", connection_definition(url=url)) as through:
                runs[f"gw<-http ({era})"] = run_suite(through)
        with gateway(root / f"stdio-{era}", connection_definition(stdio=era)) as through:
            runs[f"gw<-stdio ({era})"] = run_suite(through)
    return runs


if __name__ == "__main__":
    os.environ.setdefault("PYTHONPATH", str(Path(__file__).resolve().parent.parent))
    with tempfile.TemporaryDirectory(prefix="conformance-hop-") as tmp:
        print(table(compare_all(Path(tmp))))
