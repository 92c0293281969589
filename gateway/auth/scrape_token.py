"""`ScrapeToken`: a credential that reads `GET /v1/metrics` and nothing else (`--metrics-token`).

A Prometheus server scraping the gateway needs no token that can call tools, read sessions or
restart connections. A request for `GET /v1/metrics` (or `HEAD`) with `Authorization: Bearer <a
metrics token>` is admitted as the principal `metrics`; every other request goes to the auth chain
as before, where that token is no bearer token (401 in bearer mode). The loopback `Host` guard
still applies: on a loopback-bound server such a request goes to the chain, which answers 421.
Digests only, compared in constant time, as the chain compares its own tokens.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Iterable

from pydantic import SecretStr
from starlette.types import ASGIApp, Receive, Scope, Send

from ..http._asgi import header, host_of, is_loopback_name
from .chain import Principal

__all__ = ["METRICS_PATH", "ScrapeToken"]

METRICS_PATH = "/v1/metrics"
_SCRAPER = Principal("metrics", "metrics")


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode()).digest()


class ScrapeToken:
    """Admit a metrics token on `GET /v1/metrics` straight to `app`; send everything else to `chain`."""

    def __init__(self, chain: ASGIApp, app: ASGIApp, tokens: Iterable[SecretStr], *, loopback_bound: bool) -> None:
        self.chain = chain
        self.app = app
        self._digests = [_digest(t.get_secret_value()) for t in tokens]
        self.loopback_bound = loopback_bound

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        if (
            scope["type"] == "http"
            and scope.get("path") == METRICS_PATH
            and scope.get("method") in ("GET", "HEAD")
            and self._admits(scope)
        ):
            scope.setdefault("state", {})["principal"] = _SCRAPER
            return self.app(scope, receive, send)
        return self.chain(scope, receive, send)

    def _admits(self, scope: Scope) -> bool:
        if self.loopback_bound:
            host = host_of(header(scope, b"host") or "")
            if host is None or not is_loopback_name(host[0]):
                return False
        scheme, _, presented = (header(scope, b"authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or not presented.strip():
            return False
        digest = _digest(presented.strip())
        matched = False
        for known in self._digests:  # every one, no early exit
            matched |= hmac.compare_digest(digest, known)
        return matched
