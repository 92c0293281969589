"""Who may do what: Cedar policy over every MCP method the gateway answers (docs/policy.md).

A project's `agent/policies.cedar`, checked against the schema shipped here (`agent_sdk.cedarschema`),
compiled once and reloaded when it changes. `PolicyGate.decide(principal, action, resource)` is the
one decision point; the surfaces call it where each method resolves its target.
"""

from ._decide import Decision, PolicyGate, Refusal
from ._enforce import (
    as_principal,
    callable_tool,
    hidden,
    may_call,
    refused,
    tools_shown,
    turn_toolset,
    visible_items,
    visible_tools,
)
from ._entities import (
    GATEWAY,
    STDIO,
    Target,
    caller_of,
    connection_target,
    named_tool_target,
    prompt_target,
    resource_target,
    tool_target,
)
from ._require import require
from ._source import POLICY_FILE, PolicyError, policy_diagnostics, schema_text

__all__ = [
    "GATEWAY",
    "POLICY_FILE",
    "STDIO",
    "Decision",
    "PolicyError",
    "PolicyGate",
    "Refusal",
    "Target",
    "as_principal",
    "callable_tool",
    "caller_of",
    "connection_target",
    "hidden",
    "may_call",
    "named_tool_target",
    "policy_diagnostics",
    "prompt_target",
    "refused",
    "require",
    "resource_target",
    "schema_text",
    "tool_target",
    "tools_shown",
    "turn_toolset",
    "visible_items",
    "visible_tools",
]
