"""`send_request`: a request the SDK's client has no method for (or none without a deprecation warning)."""

from __future__ import annotations

from typing import Any

from mcp import Client

from ._wire import stamp

__all__ = ["send_request"]


async def send_request(client: Client, method: str, params: dict[str, Any]) -> Any:
    """`method` with `params` on the client's session, stamped by the session (the `_meta` envelope and the
    version's headers) and sent by its dispatcher: the answer's `result` as the wire has it, unvalidated."""
    session = client.session
    stamped, opts = stamp(session, method, params)
    return await session._dispatcher.send_raw_request(method, stamped, opts)  # pyright: ignore[reportPrivateUsage, reportArgumentType]
