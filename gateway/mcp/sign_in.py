"""Sign-in through the peer: what a caller gets when a `grants="per_principal"` connection needs its own grant.

A call, listing or turn that needs a principal's grant it lacks (`connections.SignInRequired`) fails closed,
with a way in (docs/oauth.md#per-user-grants): the sign-in URL, `<gateway>/v1/oauth/sign-in?ticket=...`,
whose ticket is sealed with the deployment's key for that principal and connection, expires after
`SIGN_IN_TTL_S` and opens once (`RequestStates.seal_sign_in`). How it reaches the caller, per peer:

- a 2025-11-25 peer that declared `elicitation.url`: the JSON-RPC error -32042 (`URLElicitationRequiredError`,
  the spec's answer for a request that cannot wait), its `data.elicitations` holding the URL;
- a 2026-07-28 peer that declared it: an `InputRequiredResult` whose `inputRequests` hold the URL
  elicitation (key `SIGN_IN_KEY`) and whose `requestState` is sealed as any other; the retry (after the
  sign-in) runs the call again;
- any other peer: an error result whose text holds the URL;
- a session turn: `turn.failed` naming the connection, with `signIn: [{connection, url}]`.

The URL starts at `--public-url` when set, else at this server's own `http://host:port`.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

import mcp_types as mt
from mcp.shared.exceptions import MCPError

from connections import ConnectionDefinition, TurnProblem
from connections.serving import SignInRequired

from ..auth.browser_sessions import SIGN_IN_PATH
from ..policy import STDIO
from ..settings import ServeSettings
from ..state.request_state import RequestStates, SealedState

__all__ = ["LEFT_OUT_META", "SIGN_IN_KEY", "SIGN_IN_META", "SIGN_IN_PATH", "SignInLinks", "set_aside", "sign_in_answer"]

SIGN_IN_KEY = "agent-sdk/sign-in"
"""The `inputRequests` key of a sign-in elicitation (a retry's answer under it is not forwarded upstream)."""
SIGN_IN_META = "agent-sdk/signIn"
"""A `tools/list` result's `_meta` key: `[{connection, url}]`, the per-user connections its caller has not
signed in to (their tools are not in the listing; a call of one answers with the same way in)."""
LEFT_OUT_META = "agent-sdk/leftOut"
"""A `tools/list` result's `_meta` key: the `optional=True` connections left out because they are down."""


def set_aside(problem: TurnProblem, connections: Mapping[str, ConnectionDefinition]) -> bool:
    """Whether a listing problem leaves its connection out of `tools/list` instead of failing it closed
    (docs/connections.md, "A listing that survives one connection"): a per-user connection the caller has not
    signed in to, or an `optional=True` connection that cannot be listed (not a problem of one of its tools)."""
    if problem.connection is None:
        return False
    if problem.code == SignInRequired.code:
        return True
    defn = connections.get(problem.connection)
    return defn is not None and defn.optional and problem.tool is None


class SignInLinks:
    """Makes a principal's sign-in URLs: the deployment's sealer and where the gateway is reached."""

    __slots__ = ("_base", "_sealer")

    def __init__(self, settings: ServeSettings, sealer: RequestStates) -> None:
        self._base = settings.resource_url()
        self._sealer = sealer

    def url(self, connection: str, principal: str) -> str:
        """A fresh sign-in URL for `principal`'s own grant of `connection` (sealed, expiring, single-use)."""
        return f"{self._base}{SIGN_IN_PATH}?{urlencode({'ticket': self._sealer.seal_sign_in(connection, principal)})}"

    def for_problems(self, problems: list[TurnProblem], principal: str) -> list[dict[str, str]]:
        """`[{connection, url}]` for each connection whose listing failed for want of `principal`'s sign-in."""
        names = sorted({p.connection for p in problems if p.code == SignInRequired.code and p.connection})
        if principal == STDIO.id:  # `serve --stdio`: the command to run instead of a URL nobody listens on
            return [{"connection": name, "command": stdio_sign_in(name)} for name in names]
        return [{"connection": name, "url": self.url(name, principal)} for name in names]


def stdio_sign_in(connection: str) -> str:
    """What a `serve --stdio` peer is told to do for its own grant of `connection` (no port is open for a link)."""
    return (
        f"serve --stdio opens no sign-in page: run `agent-sdk mcp oauth {connection} --principal {STDIO.id}` in the "
        "project's folder (or with --dir), then call again"
    )


def _message(connection: str) -> str:
    return f"Sign in to connection {connection!r} with your own account to continue"


def sign_in_answer(
    links: SignInLinks,
    sealer: RequestStates,
    exc: SignInRequired,
    *,
    tool: str,
    capabilities: Mapping[str, Any],
    modern: bool,
) -> dict[str, Any]:
    """The answer to a `tools/call` that failed with `exc` (module docstring): a `CallToolResult` or an
    `InputRequiredResult`, as JSON. Raises `MCPError` -32042 for a 2025-11-25 peer that can open a URL."""
    if exc.principal == STDIO.id:  # `serve --stdio` listens on no port: a URL would lead nowhere
        text = f"{exc.code}: {exc}; {stdio_sign_in(exc.connection)}"
        return {"content": [{"type": "text", "text": text}], "isError": True, "resultType": "complete"}
    url = links.url(exc.connection, exc.principal)
    elicitation = capabilities.get("elicitation")
    can_open = isinstance(elicitation, Mapping) and isinstance(elicitation.get("url"), Mapping)
    if can_open and not modern:
        asked = {"mode": "url", "message": _message(exc.connection), "url": url, "elicitationId": secrets.token_hex(16)}
        raise MCPError(mt.URL_ELICITATION_REQUIRED, f"{exc}; sign in at {url}", data={"elicitations": [asked]})
    if can_open:
        state = sealer.seal(SealedState(principal=exc.principal, tool=tool, connection=exc.connection))
        request = {
            "method": "elicitation/create",
            "params": {"mode": "url", "message": _message(exc.connection), "url": url},
        }
        return {"resultType": "input_required", "inputRequests": {SIGN_IN_KEY: request}, "requestState": state}
    text = f"{exc.code}: {exc}; sign in at {url} and call again"
    return {"content": [{"type": "text", "text": text}], "isError": True, "resultType": "complete"}
