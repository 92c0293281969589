"""What the Cedar policy costs per call: CPU time of one decision on a tool call, warm (the decision kept
since the policy was compiled) and cold (a Cedar evaluation: a new principal or tool, or the first call
after a reload), and of a filtered listing of 100 tools, against a policy of 30 statements.

    .venv/bin/python bench/bench_policy.py [--calls 20000]

In-process, no upstream: `may_call` is what every `tools/call` surface asks (`gateway/policy/_enforce.py`),
with the tool's entity built from its name, connection and annotations as on a call. CPU time
(`time.process_time`), so another process on the box does not count; the budget is 50 µs per call.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from connections import Toolset, TurnTool  # noqa: E402
from gateway.auth.chain import Principal  # noqa: E402
from gateway.auth.oauth_tokens import OAuthIdentity  # noqa: E402
from gateway.policy import PolicyGate, may_call, visible_tools  # noqa: E402
from gateway.policy._entities import principal_json, tool_target  # noqa: E402  # pyright: ignore[reportPrivateUsage]


def policy_text() -> str:
    lines = [
        'permit(principal, action == AgentSdk::Action::"tools/list", resource);',
        '@id("readers")\npermit(principal, action == AgentSdk::Action::"tools/call", resource is AgentSdk::Tool)\n'
        'when { principal.groups.contains("readers") && resource.readOnly };',
        '@id("tenant")\npermit(principal, action == AgentSdk::Action::"tools/call", resource is AgentSdk::Tool)\n'
        'when { principal.hasTag("tenant") && resource.connection == principal.getTag("tenant") };',
        '@id("no-destruction")\n'
        'forbid(principal, action == AgentSdk::Action::"tools/call", resource is AgentSdk::Tool)\n'
        'when { resource.destructive && !principal.scopes.contains("tools:write") };',
    ]
    for i in range(26):  # a bearer token each, as a deployment with many clients writes them
        lines.append(
            f'permit(principal == AgentSdk::Principal::"bearer:{i:012x}", action == AgentSdk::Action::"tools/call",'
            f' resource) when {{ resource.connection == "conn{i}" }};'
        )
    return "\n".join(lines) + "\n"


def oauth_principal() -> Principal:
    identity = OAuthIdentity(
        issuer="https://idp.example",
        subject="alice",
        scopes=frozenset({"openid", "tools:read"}),
        client_id="cli",
        claims={"tenant": "crm", "groups": ["readers", "staff"], "email": "alice@example.com"},
        audiences=frozenset(),
        expires=0.0,
    )
    return Principal(identity.id, "oauth", oauth=identity)


def tool(name: str, connection: str) -> TurnTool:
    async def invoke(_arguments: object) -> object:
        raise NotImplementedError

    annotations = {"readOnlyHint": True, "destructiveHint": False, "title": name}
    schema = {"type": "object"}
    return TurnTool(name, "a tool", schema, "advertised", invoke, annotations=annotations, connection=connection)  # pyright: ignore[reportArgumentType]


def per_call_us(work: object, count: int) -> float:
    started = time.process_time()
    for _ in range(count):
        work()  # pyright: ignore[reportCallIssue]
    return (time.process_time() - started) / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "agent").mkdir()
        (root / "agent" / "policies.cedar").write_text(policy_text())
        gate = PolicyGate.for_project(root)
        who = oauth_principal()
        echo = tool("echo", "crm")
        assert may_call(gate, who, echo)
        compiled = gate._compiled  # pyright: ignore[reportPrivateUsage]
        assert compiled is not None
        target = tool_target(echo)
        text = principal_json(who)
        warm = per_call_us(lambda: may_call(gate, who, echo), args.calls)
        cold = per_call_us(lambda: gate.evaluate(compiled, who, text, "tools/call", target), args.calls // 4)
        tools = {f"t{i}": tool(f"t{i}", "crm" if i % 2 else "billing") for i in range(100)}
        toolset = Toolset(session=None, tools=tools)
        listing_warm = per_call_us(lambda: visible_tools(gate, who, toolset), max(1, args.calls // 100))

        def listing_cold() -> None:
            gate._decisions.clear()  # pyright: ignore[reportPrivateUsage]
            visible_tools(gate, who, toolset)

        listing = per_call_us(listing_cold, max(1, args.calls // 200))
    print(f"policy statements: 30; calls: {args.calls}")
    print(f"tools/call decision, warm (kept):        {warm:8.1f} us CPU")
    print(f"tools/call decision, cold (Cedar):        {cold:8.1f} us CPU")
    print(f"listing of 100 tools, warm:               {listing_warm:8.1f} us CPU")
    print(f"listing of 100 tools, cold (one batch):   {listing:8.1f} us CPU")


if __name__ == "__main__":
    main()
