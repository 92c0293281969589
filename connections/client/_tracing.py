"""Whether OpenTelemetry tracing is on, cheaply: the fast paths skip the SDK's spans when it is not."""

from __future__ import annotations

import time

from opentelemetry import trace

__all__ = ["tracing_enabled"]

_checked_at = -1.0
_enabled = False


def tracing_enabled() -> bool:
    """Whether an OpenTelemetry tracer provider is installed (re-checked at most once a second until one is).

    Without one, every span the SDK opens is non-recording: about 10 µs per call that records
    nothing. `trace.get_tracer_provider()` reads the environment on every call, hence the
    throttle; a provider, once installed, cannot be replaced, so `True` is final.
    """
    global _checked_at, _enabled
    if not _enabled:
        now = time.monotonic()
        if now - _checked_at >= 1.0:
            _checked_at = now
            _enabled = not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    return _enabled
