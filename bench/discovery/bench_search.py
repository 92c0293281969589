"""Discovery mode's search, measured (docs/performance.md, "Tool search"): recall@5 and MRR on a labelled query
set, the bytes of `tools/list` in discovery mode against the full list, and the CPU of one search.

The catalog (`catalog`) is built from the reference servers' own definitions (`reference_tools.json`, written by
`fetch_reference_tools.py`): every team (`DOMAINS`) runs its own copy of each of the four servers, so a tool
exists once per team, named `<team>_<tool>` (or `<team>-<tool>`, `<team>.<tool>`: the style varies by server) and
described with the reference description, reworded (`_SYNONYMS`) and followed by the team's sentence. 26 teams x
4 servers = 104 servers and 1,066 tools; `--teams 260` makes 10,660.

The queries (`queries.json`) were written before any tuning, two or three per reference tool, with `{d}` for the
team; each is asked for two teams (seeded). `--split tune` is the first query of each tool (what the weights were
tuned on); `--split report` the others (reported). Run:

    .venv/bin/python bench/discovery/bench_search.py --split report
    .venv/bin/python bench/discovery/bench_search.py --split report --teams 260 --cpu-only
"""

from __future__ import annotations

import argparse
import json
import random
import re
import time
from pathlib import Path
from typing import Any

from connections import ToolOutcome, Toolset, TurnTool
from gateway.mcp.discovery import DiscoveryView, definition
from gateway.mcp.tool_search import ToolIndex

HERE = Path(__file__).parent
DOMAINS = (
    "billing payroll marketing support legal research design security analytics mobile frontend backend infra "
    "data sales hr finance ops docs qa platform growth compliance partners devrel ml"
).split()
_SYNONYMS = {
    "Read": ("Read", "Load", "Fetch"),
    "Shows": ("Shows", "Displays", "Prints"),
    "Returns": ("Returns", "Gives back", "Produces"),
    "Get": ("Get", "Obtain", "Fetch"),
    "Create": ("Create", "Make"),
    "List": ("List", "Enumerate"),
}
_STYLES = ("{d}_{n}", "{d}-{n}", "{d}.{n}")


async def _never(_arguments: Any) -> ToolOutcome:
    raise AssertionError("the bench calls no tool")


def _team_name(index: int) -> str:
    base = DOMAINS[index % len(DOMAINS)]
    return base if index < len(DOMAINS) else f"{base}{index // len(DOMAINS)}"


def catalog(teams: int = len(DOMAINS), seed: int = 7) -> tuple[list[TurnTool], dict[tuple[str, str], str]]:
    """The tools, and (team, reference tool) -> the catalog's name for it."""
    rng = random.Random(seed)
    reference = json.loads((HERE / "reference_tools.json").read_text())
    tools: list[TurnTool] = []
    names: dict[tuple[str, str], str] = {}
    for t in range(teams):
        team = _team_name(t)
        for kind, listed in reference.items():
            server = f"{team}-{kind}"
            style = _STYLES[rng.randrange(len(_STYLES))]
            for tool in listed:
                name = style.format(d=team, n=tool["name"])
                words = re.split(r"(\W+)", tool.get("description", ""))
                words = [rng.choice(_SYNONYMS[w]) if w in _SYNONYMS else w for w in words]
                description = "".join(words) + f" Runs against the {team} team's {kind} server."
                names[(team, tool["name"])] = name
                tools.append(
                    TurnTool(
                        name=name,
                        description=description,
                        input_schema=tool["inputSchema"],
                        source="advertised",
                        invoke=_never,
                        title=tool.get("title"),
                        annotations=tool.get("annotations"),
                        connection=server,
                    )
                )
    return tools, names


def queries(split: str, seed: int = 11) -> list[tuple[str, str, str]]:
    """(query, team, reference tool) for `split`: `tune`, `report` or `all`."""
    rng = random.Random(seed)
    out: list[tuple[str, str, str]] = []
    for tool, templates in json.loads((HERE / "queries.json").read_text()).items():
        for i, template in enumerate(templates):
            if (split == "tune" and i > 0) or (split == "report" and i == 0):
                continue
            for team in rng.sample(DOMAINS, 2):
                out.append((template.format(d=team), team, tool))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="discovery mode's search, measured")
    parser.add_argument("--split", choices=("tune", "report", "all"), default="report")
    parser.add_argument("--teams", type=int, default=len(DOMAINS))
    parser.add_argument("--cpu-only", action="store_true")
    args = parser.parse_args()
    tools, names = catalog(args.teams)
    servers = {t.connection for t in tools}
    started = time.process_time()
    index = ToolIndex(tools)
    built = time.process_time() - started
    print(f"catalog: {len(tools)} tools from {len(servers)} servers; index built in {built * 1000:.0f} ms CPU")
    asked = queries(args.split)
    if not args.cpu_only:
        hits, reciprocal = 0, 0.0
        for query, team, tool in asked:
            found = [t.name for t in index.search(query, 5)]
            want = names[(team, tool)]
            if want in found:
                hits += 1
                reciprocal += 1 / (found.index(want) + 1)
        recall, mrr = hits / len(asked), reciprocal / len(asked)
        print(f"queries ({args.split}): {len(asked)}; recall@5 {recall:.3f}; MRR@5 {mrr:.3f}")
        full = json.dumps({"tools": [definition(t) for t in tools]}).encode()
        toolset = Toolset(session=None, tools={t.name: t for t in tools})
        small = json.dumps({"tools": DiscoveryView().listed(toolset)}).encode()
        ratio = len(full) / len(small)
        print(f"tools/list: full {len(full):,} bytes; discovery {len(small):,} bytes ({ratio:.0f}x smaller)")
    rounds = 3
    started = time.process_time()
    for _ in range(rounds):
        for query, _team, _tool in asked:
            index.search(query, 5)
    per = (time.process_time() - started) / (rounds * len(asked))
    print(f"one search: {per * 1000:.3f} ms CPU (mean of {rounds * len(asked)} searches at {len(tools)} tools)")


if __name__ == "__main__":
    main()
