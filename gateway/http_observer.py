"""`HttpObserver`: times every HTTP request, counts it by route template, method and status
(`agent_sdk_http_request_duration_seconds`), and with `--access-log` writes its access line.

The route is the routing table's template (`/v1/session/{session_id}/events`), never the raw path,
so a scrape stays bounded whatever paths clients send; a path no route matches is `other`, and a
method outside HTTP's own is `OTHER`. The duration runs until the answer's last byte (a stream's
whole life). The access line keeps uvicorn's shape (`client - "METHOD /path?query HTTP/1.1" status`,
the query masked by the one redaction rule) and carries `method`, `path` (the template), `status`
and `latency_ms` as fields, which `--log-format json` writes as keys.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .metrics import Metrics

__all__ = ["HttpObserver", "RouteTemplates"]

access_log = logging.getLogger("agent_sdk.access")

_METHODS = frozenset(("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"))
_CACHE_SIZE = 4096


class RouteTemplates:
    """The template of the route a path reaches: `direct` paths as they are, else the first route matching it."""

    def __init__(self, direct: Iterable[str], routes: Iterable[BaseRoute]) -> None:
        self.direct = frozenset(direct)
        self.routes = list(routes)
        self._cache: dict[str, str] = {}

    def __call__(self, path: str) -> str:
        if path in self.direct:
            return path
        found = self._cache.get(path)
        if found is not None:
            return found
        found = "other"
        probe: Scope = {"type": "http", "path": path, "root_path": "", "method": "GET"}
        for route in self.routes:
            match, _ = route.matches(probe)
            if match is not Match.NONE:
                found = str(getattr(route, "path", "other"))
                break
        if len(self._cache) >= _CACHE_SIZE:  # paths with ids in them: bounded, simply
            self._cache.clear()
        self._cache[path] = found
        return found


class HttpObserver:
    """Around the request guard and the auth chain: their refusals are counted and logged too."""

    def __init__(self, app: ASGIApp, templates: RouteTemplates, metrics: Metrics, *, access_log: bool) -> None:
        self.app = app
        self.templates = templates
        self.metrics = metrics
        self.access_log = access_log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # an app that raised before answering is answered 500 by the layer outside

        async def observed(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, observed)
        finally:
            seconds = time.perf_counter() - started
            method = scope.get("method", "GET")
            method = method if method in _METHODS else "OTHER"
            route = self.templates(scope.get("path", ""))
            self.metrics.http_finished(route, method, status, seconds)
            if self.access_log:
                self._log(scope, method, route, status, seconds)

    @staticmethod
    def _log(scope: Scope, method: str, route: str, status: int, seconds: float) -> None:
        client = scope.get("client")
        who = f"{client[0]}:{client[1]}" if client else "-"
        query = scope.get("query_string", b"").decode("latin-1")
        target = scope.get("path", "") + (f"?{query}" if query else "")
        access_log.info(
            '%s - "%s %s HTTP/%s" %d',
            who,
            scope.get("method", ""),
            target,
            scope.get("http_version", "1.1"),
            status,
            extra={
                "event": "http_request",
                "method": method,
                "path": route,
                "status": status,
                "latency_ms": round(seconds * 1000, 3),
            },
        )
