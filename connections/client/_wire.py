"""The outbound wire of a pooled session: one `Wire` protocol, two implementations, one function that stamps.

As uvicorn's `protocols/http/{h11_impl,httptools_impl,auto}.py`: two wires answer the same question
(send this request, give me its result) and one place picks (`client/_clients.py` `open_client`,
through `fast_calls_apply`):

- `FastCalls` (`client/_fast_calls.py`, on the keep-alive HTTP/1.1 connections of
  `client/_transports/_http1.py`): `tools/call` and `tools/list` of a Streamable HTTP session, with
  the result's own bytes where the answer was short enough to hold (`WireAnswer.text`);
- `SdkWire`: the session's own dispatcher, over whatever transport the SDK opened (stdio, legacy
  SSE, its Streamable HTTP transport on `httpx2`), and everything the fast wire does not take.

`stamp` is the one place a request gets the session's envelope (`ClientSession._stamp`: the `_meta`
of 2026-07-28, `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`), for every request
the pool sends that the SDK's client has no method for.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["SdkWire", "Wire", "WireAnswer", "stamp"]


@dataclass(slots=True)
class WireAnswer:
    """A request's result as JSON and, where the wire kept it, the result's JSON text as the upstream wrote it."""

    result: dict[str, Any]
    text: bytes | None = None


class Wire(Protocol):
    """What sends a stamped request of a pooled session and reads its answer."""

    def answer(self, method: str, params: Mapping[str, Any] | None, opts: Mapping[str, Any]) -> Awaitable[WireAnswer]:
        """Send `method` with `params` (and the call options `opts`: headers, `on_progress`); its answer.
        Raises `mcp.shared.exceptions.MCPError` for a JSON-RPC error and the transport's errors."""
        ...  # pragma: no cover - protocol


class SdkWire:
    """The session's own dispatcher as a `Wire`: results as the SDK's transport reads them, never their bytes."""

    __slots__ = ("_session",)

    def __init__(self, session: Any) -> None:
        self._session = session

    async def answer(self, method: str, params: Mapping[str, Any] | None, opts: Mapping[str, Any]) -> WireAnswer:
        return WireAnswer(await self._session._dispatcher.send_raw_request(method, params, opts))


def stamp(session: Any, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`params` and the call options of `method` as the session stamps them (its envelope and headers)."""
    data: dict[str, Any] = {"method": method, "params": params}
    opts: dict[str, Any] = {}
    session._stamp(data, opts)
    return data["params"], opts
