"""Tracing of upstream requests: whether it is on (decided once), and the dispatcher that marks each request.

`tracing_enabled()` is decided once: by `set_tracing` (the gateway calls it at start-up, after it set up
or found a tracer provider), else at the first call (a library user's provider, installed before the
first request). Off, nothing here runs on a call: no span, no attribute dict, no clock.

On, `TracedDispatcher` sits on every pooled session (`client/_clients.py`), the one place every upstream
request leaves from (the SDK's dispatcher on stdio and on its HTTP transport, the fast wire below it).
For each request it names the upstream in `UPSTREAM` (read by the gateway's span processor, which puts
`agent_sdk.connection`, `network.transport` and the session id on the request's client span: the span
the SDK's dispatcher, or the fast wire, opens around the request and whose context it writes into
`params._meta`), puts `traceparent` / `tracestate` / `baggage` headers on an HTTP request the SDK
transport sends (the fast wire writes its own, inside its span), and reports the request's duration to
`client_observer` (the gateway's `mcp.client.operation.duration`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

from opentelemetry import trace
from opentelemetry.propagate import inject

__all__ = [
    "UPSTREAM",
    "ClientObserver",
    "TracedDispatcher",
    "Upstream",
    "client_span_attributes",
    "set_client_observer",
    "set_tracing",
    "tracing_enabled",
]

_enabled: bool | None = None

Transport = Literal["pipe", "tcp"]
ClientObserver = Callable[["Upstream", str, float, str | None], None]
"""`(upstream, method, seconds, error_type or None)`, once per finished upstream request."""
_observer: list[ClientObserver] = []
_FAST_METHODS = frozenset({"tools/call", "tools/list"})
_CONNECTION = "agent_sdk.connection"


def tracing_enabled() -> bool:
    """Whether an OpenTelemetry tracer provider is installed, decided once (module docstring)."""
    global _enabled
    if _enabled is None:
        _enabled = not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    return _enabled


def set_tracing(on: bool) -> None:
    """Decide `tracing_enabled()` (the gateway does, once, at start-up)."""
    global _enabled
    _enabled = on


def set_client_observer(observer: ClientObserver | None) -> None:
    """Report every traced upstream request's duration to `observer` (None: to nobody)."""
    _observer[:] = [observer] if observer is not None else []


@dataclass(frozen=True, slots=True)
class Upstream:
    """The upstream a request goes to, as its client span names it."""

    connection: str
    transport: Transport
    version: str
    session_id: str | None = None


UPSTREAM: ContextVar[Upstream | None] = ContextVar("agent_sdk_upstream", default=None)
"""The upstream of the request being sent, for the span processor that labels its client span."""


def client_span_attributes(upstream: Upstream, method: str, target: str | None) -> dict[str, str]:
    """The labels of a request's client span to `upstream` (`{method} {target}`) besides the SDK's own:
    `agent_sdk.connection`, `network.transport`, `mcp.protocol.version`, `mcp.session.id` and, for
    `tools/call` and `prompts/get`, the tool's or prompt's conventions attributes. The gateway's span
    processor puts them on a span the SDK's dispatcher opens; the fast wire opens its span with them."""
    attributes = {
        "agent_sdk.connection": upstream.connection,
        "network.transport": upstream.transport,
        "mcp.protocol.version": upstream.version,
    }
    if upstream.session_id:
        attributes["mcp.session.id"] = upstream.session_id
    if method == "tools/call" and target:
        attributes["gen_ai.tool.name"] = target
        attributes["gen_ai.operation.name"] = "execute_tool"
    elif method == "prompts/get" and target:
        attributes["gen_ai.prompt.name"] = target
    return attributes


class TracedDispatcher:
    """A session's dispatcher or wire (`client/_wire.py`), each request marked for tracing (module
    docstring); the rest passes through."""

    def __init__(self, inner: Any, upstream: Upstream, *, fast: bool) -> None:
        self._inner = inner
        self._upstream = upstream
        self._http = upstream.transport == "tcp"
        self._fast = fast
        """`tools/call` and `tools/list` go over the fast wire, which writes its own trace headers."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> Awaitable[dict[str, Any]]:
        """The SDK dispatcher's entry."""
        return self._send(self._inner.send_raw_request, method, params, opts, kwargs)

    def answer(self, method: str, params: Mapping[str, Any] | None, opts: Mapping[str, Any]) -> Awaitable[Any]:
        """`Wire.answer`."""
        return self._send(self._inner.answer, method, params, opts, None)

    async def _send(
        self,
        send: Callable[..., Awaitable[Any]],
        method: str,
        params: Mapping[str, Any] | None,
        opts: Mapping[str, Any] | None,
        kwargs: dict[str, Any] | None,
    ) -> Any:
        server_span: Any = trace.get_current_span()
        connection = self._upstream.connection
        # The peer's request this one serves: which connection answered it (unless its span says so already).
        if server_span.is_recording() and getattr(server_span, "attributes", {}).get(_CONNECTION) != connection:
            server_span.set_attribute(_CONNECTION, connection)
        if self._http and not (self._fast and method in _FAST_METHODS):
            carrier: dict[str, str] = {}
            inject(carrier)
            if carrier:
                opts = {**(opts or {}), "headers": {**((opts or {}).get("headers") or {}), **carrier}}
        token = UPSTREAM.set(self._upstream)
        started = time.perf_counter()
        error: str | None = None
        try:
            if kwargs is None:
                return await send(method, params, opts or {})
            return await send(method, params, opts, **kwargs)
        except BaseException as exc:
            code = getattr(getattr(exc, "error", None), "code", None)
            error = str(code) if code is not None else type(exc).__qualname__
            raise
        finally:
            UPSTREAM.reset(token)
            for observe in _observer:
                observe(self._upstream, method, time.perf_counter() - started, error)
