"""`create_app`: the one place the gateway's routes, middleware and lifespan are assembled.

Request path, outermost first: `RequestGuard` (one well-formed Host, a same-origin Origin, JSON
bodies, trusted proxies; every route) -> `AccountGate` (the hub and bridge routes authenticate
for themselves) -> `AuthChain` (loopback Host, then loopback | bearer | anonymous; `/v1/health`
is public) -> `BodyLimit` (413) -> the routing table (`_routes`): its `Direct` route straight to
its endpoint, every other route through Starlette's router. The lifespan owns
every resource: the broker (client pool, stdio children), the session service (turns), and the
two MCP session managers; leaving it (Ctrl-C) closes them in reverse order.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import AsyncGenerator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from connections import Broker, Project
from connections.serving import Offerings, tracing_enabled

from .accounts.routes import AccountGate, AccountServices, BridgeSecret, account_managers, account_routes
from .audit import guard_counters, serving_guard
from .auth.browser_sessions import SIGN_OUT_PATH as BROWSER_SIGN_OUT
from .auth.browser_sessions import START_PATH as BROWSER_START
from .auth.chain import AuthChain, RequestGuard
from .auth.oauth_gate import OAuthGate, oauth_gate
from .auth.operator_grants import OperatorGrant
from .auth.scrape_token import ScrapeToken
from .console import CALLBACK_PATH, SHELL_PATHS, ConsoleServices, console_routes
from .http._asgi import json_error
from .http.body_limit import BodyLimit
from .http.proxies import TrustedProxies
from .http.request_ids import RequestIds
from .http_observer import HttpObserver, RouteTemplates
from .limits import load_limit_rules
from .mcp.endpoints import McpEndpoint, agent_server, curated_managers, session_manager
from .mcp.peers.caps import stream_cap
from .mcp.peers.streams import PeerStreams
from .mcp.sign_in import SignInLinks
from .mcp.subscriptions import Subscriptions
from .mcp.tools import tools_server
from .mcp.toolsets import BrokerLike, ToolCatalog
from .metrics import Metrics, metrics_routes
from .policy import PolicyGate, turn_toolset
from .reloads import serving_reloads
from .rest.discovery_routes import discovery_routes
from .rest.session_routes import session_routes
from .rest.tool_routes import tool_routes
from .runners import TurnRunner
from .runners._select import make_runner
from .runtime import Runtime
from .sessions import SessionService
from .settings import ServeSettings
from .stores import serving_hub_keys, serving_request_states, serving_task_owners, session_store, token_store
from .telemetry import app_durations

__all__ = ["BrokerFactory", "create_app", "default_broker"]

logger = logging.getLogger("agent_sdk.app")

BrokerFactory = Callable[[Project], AbstractAsyncContextManager[BrokerLike]]


@asynccontextmanager
async def default_broker(
    project: Project, settings: ServeSettings, *, child_env: dict[str, str] | None = None
) -> AsyncGenerator[BrokerLike]:
    """`connections.Broker` with the serving token store (`state.token_store`): the client pool,
    host registry and turn builder; oauth connections read (and refresh) the tokens
    `agent-sdk mcp oauth` stored. `child_env` goes to the stdio children that opt in with `bridge=True`
    (the account bridge's URL and secret); pooled calls take the fast wire unless `serve --no-fast-calls`;
    at most `serve --start-limit` stdio children start at once; `--warm` starts every connection now."""
    store = token_store(settings)
    try:
        async with Broker(
            project,
            environ=os.environ,
            token_store=store,
            child_env=child_env,
            fast_calls=settings.fast_calls,
            start_limit=settings.start_limit,
            sandbox_hidden=[str(p.resolve()) for p in (settings.state_root, settings.state_key_file) if p is not None],
        ) as broker:
            if settings.warm:
                broker.warm()
            yield broker
    finally:
        await store.aclose()


@dataclass(frozen=True, slots=True)
class Direct:
    """A route of the table answered before Starlette's middleware and router: exactly `path`, any
    method (the endpoint answers 405 itself). For the hottest route, `/v1/mcp/tools`: Starlette's two
    middlewares and its router cost a request more than the endpoint's own dispatch (docs/performance.md)."""

    path: str
    endpoint: ASGIApp


def _routes() -> list[BaseRoute | Direct]:
    """The gateway's one routing table."""
    return [
        Direct("/v1/mcp/tools", McpEndpoint("tools", lane=True)),  # tools/call and tools/list: `mcp_lane`
        # `Route` with an ASGI app endpoint passes every method through, so McpEndpoint answers 405 itself.
        Route("/v1/mcp", McpEndpoint("agent")),
        Route("/v1/mcp/servers/{name}", McpEndpoint("servers", curated=True)),  # docs/curated-servers.md
        *discovery_routes(),
        *tool_routes(),
        *session_routes(),
        *account_routes(),
        *metrics_routes(),
        *console_routes(),
    ]


class _Front:
    """Serves the table's `Direct` routes itself and hands every other request to `app` (Starlette,
    built from the rest of the table).

    An exception before the response started is answered as `ServerErrorMiddleware` answers it
    (`_internal_error`: a JSON 500, no detail) and re-raised for the server's log, as there.
    """

    def __init__(self, app: ASGIApp, direct: dict[str, ASGIApp]) -> None:
        self.app = app
        self.direct = direct

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = self.direct.get(scope["path"]) if scope["type"] == "http" else None
        if endpoint is None:
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            await endpoint(scope, receive, tracked)
        except Exception as exc:
            if not started:
                response = await _internal_error(Request(scope), exc)
                await response(scope, receive, send)
            raise


async def _http_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    return JSONResponse(json_error(code, str(exc.detail)), status_code=exc.status_code, headers=exc.headers)


async def _internal_error(_request: Request, exc: Exception) -> Response:
    # No traceback or exception text on the wire: a message may carry a secret.
    logger.error("unhandled %s while serving a request", type(exc).__name__)
    return JSONResponse(json_error("internal_error", "the server failed; see its log"), status_code=500)


def create_app(
    project: Project,
    settings: ServeSettings | None = None,
    *,
    state_root: Path | None = None,
    broker: BrokerFactory | None = None,
    runner: TurnRunner | None = None,
    stopping: list[Callable[[], None]] | None = None,
    oauth: OAuthGate | None = None,
) -> ASGIApp:
    """The gateway app for a loaded project. `broker` defaults to `connections.Broker`; `runner` to `settings.runner`.
    The lifespan adds to `stopping` what the server must call when it starts shutting down, before it waits
    for open connections: ending the endless streams (handshake-era peers' GET streams, `gateway/mcp/peers/streams.py`).

    `oauth`: the OAuth step of the auth chain (`serve` passes one it loaded; else one is made from
    `settings.oauth_issuers` and loaded in the lifespan).

    Raises `ValueError` for an unknown runner name.
    """
    settings = settings or ServeSettings()
    if state_root is not None:
        settings = settings.model_copy(update={"state_root": state_root})
    chosen = runner or make_runner(settings.runner)
    bridge = BridgeSecret.create(settings)  # per boot; never logged, never in /v1/info

    def _serving_broker(p: Project) -> AbstractAsyncContextManager[BrokerLike]:
        return default_broker(p, settings, child_env=bridge.child_env())

    open_broker = broker or _serving_broker
    load_limit_rules(project.root)  # a bad agent/limits.toml is a ValueError here: `serve` refuses to start
    metrics = Metrics()
    if tracing_enabled():  # the MCP conventions' histograms on /v1/metrics too (gateway/telemetry/durations.py)
        app_durations(metrics.registry)
    policy = PolicyGate.for_project(project.root)  # raises PolicyError naming each bad line (serve checks first)
    if oauth is None and settings.oauth_issuers:
        oauth = oauth_gate(settings)

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncGenerator[dict[str, Any]]:
        if oauth is not None and not oauth.started:
            await oauth.start()
        try:
            async with _serving(_app) as state:
                yield state
        except Exception:  # a background task failed and took the app down: say what, whole (serve then exits)
            logger.exception("the app stopped: a background task failed")
            raise

    @asynccontextmanager
    async def _serving(_app: Starlette) -> AsyncGenerator[dict[str, Any]]:
        async with AsyncExitStack() as stack:
            brk = await stack.enter_async_context(open_broker(project))
            builder = brk.builder
            metrics.watch(brk)
            builder.observer = metrics
            sessions = await stack.enter_async_context(
                SessionService.running(session_store(settings), builder, chosen, lease_s=settings.turn_lease_s)
            )
            sessions.on_turn_end = metrics.turn_finished
            guard = await serving_guard(settings, project, stack)  # audit, limits, approvals (docs/audit.md)
            guard_counters(guard, metrics.counted)
            if stopping is not None:  # a held call is answered (not run) as the server stops, not left hanging
                stopping.append(guard.approvals.abandon_all)
            sessions.wrap_toolset = lambda toolset, caller: guard.toolset(toolset, "session", caller)
            offerings: Offerings | None = getattr(brk, "offerings", None)
            pool = getattr(brk, "pool", None)  # a test's broker may have none
            host = getattr(brk, "host", None)
            subscriptions = (
                Subscriptions(
                    project.connections,
                    host.mcp if host is not None else None,
                    offerings,
                    max_streams=stream_cap(settings.max_connections),  # gateway/mcp/peers/caps.py
                ).watching(pool.listing_cache, stack)
                if pool is not None
                else None
            )
            has_server_tools = bool(project.tools) or any(
                d.advertise_tools and d.auth is None and not d.host_only for d in project.connections.values()
            )
            managers = {
                "agent": session_manager(agent_server(with_call_tool=has_server_tools), settings.max_body_bytes),
                "tools": session_manager(
                    tools_server(offerings=offerings, subscriptions=subscriptions is not None), settings.max_body_bytes
                ),
                **account_managers(settings),
                **curated_managers(project, settings.max_body_bytes, offerings),
            }
            for manager in managers.values():
                await stack.enter_async_context(manager.run())
            runtime = Runtime(
                settings=settings,
                project=project,
                builder=builder,
                catalog=ToolCatalog(builder, ttl=settings.toolset_ttl_s),
                sessions=sessions,
                runner=chosen,
                host=getattr(brk, "host", None),
                started_at=datetime.now(UTC).isoformat(timespec="seconds"),
                mcp=managers,
                request_states=await serving_request_states(settings, stack),
                offerings=offerings,
                subscriptions=subscriptions,
                policy=policy,
                guard=guard,
            )
            if runtime.host is not None:
                runtime.task_owners = await serving_task_owners(settings, runtime.host.mcp.task_request, stack)
            sessions.narrow = functools.partial(turn_toolset, policy)
            guard.policy = policy  # each audit record names the policies that decided it
            policy.on_denied_call = guard.policy_refused
            watcher = await stack.enter_async_context(anyio.create_task_group())
            watcher.start_soon(
                serving_reloads(settings.policy_reload_s, policy.reload, project, brk, runtime).run
            )  # gateway/reloads.py
            stack.callback(watcher.cancel_scope.cancel)
            sessions.sign_in_links = SignInLinks(settings, runtime.request_states).for_problems  # per-user grants
            if pool is not None:  # a changed upstream's tools are checked against mcp.lock before the next call
                stack.callback(pool.listing_cache.watch(runtime.catalog.changed))
            if subscriptions is not None:
                runtime.streams = PeerStreams(subscriptions, runtime.request_states)
                stack.callback(runtime.streams.close)
                if stopping is not None:
                    stopping.append(runtime.streams.end_streams)
            accounts = AccountServices(
                project=project,
                host=runtime.host.mcp if runtime.host is not None else None,
                bridge=bridge,
                keys=await serving_hub_keys(settings, stack),
                pool=brk,
            )
            console = await stack.enter_async_context(ConsoleServices.running(settings, runtime.request_states))
            console.forget_tokens = getattr(brk, "forget_tokens", None)
            yield {"runtime": runtime, "accounts": accounts, "metrics": metrics, "console": console}

    table = _routes()
    app = Starlette(
        routes=[r for r in table if not isinstance(r, Direct)],
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error, Exception: _internal_error},
    )
    # No route answers a trailing slash with a redirect: Starlette builds that `Location` from the
    # request's `Host`, and the hub and bridge paths are not behind the Host guard (docs/accounts.md).
    app.router.redirect_slashes = False
    front = _Front(app, {r.path: r.endpoint for r in table if isinstance(r, Direct)})
    limited = BodyLimit(front, settings.max_body_bytes)
    chained = AuthChain(
        limited,
        mode=settings.auth_mode,
        bearer_tokens=settings.bearer_tokens,
        operator_tokens=settings.operator_tokens,
        oauth=oauth,
        operator_grant=OperatorGrant.of(settings.operator_scopes, settings.operator_claims),
        principal_claim=settings.principal_claim,
        loopback_bound=settings.loopback_bound,
        # The console's shell is static code with no data in it; in bearer mode the page asks for the
        # token and sends it on every data route (docs/console.md). The OAuth callback is reached by the
        # authorization server's redirect and is bound to a login an operator started (its `state`).
        public_paths=(
            "/v1/health",
            "/v1/ready",
            CALLBACK_PATH,
            *(SHELL_PATHS if settings.auth_mode == "bearer" else ()),
            # A browser's sign-in with the IdP starts here; the shell's script and style carry no data.
            *((BROWSER_START, BROWSER_SIGN_OUT, *SHELL_PATHS[1:]) if settings.oauth_issuers else ()),
        ),
    )
    # The hub API (API keys) and the account bridge (per-boot secret) authenticate for themselves;
    # the request guard (Host, Origin, content type, trusted proxies) runs before every route, and
    # the bridge also passes the loopback Host guard a loopback-bound server's routes pass.
    bridge_guard = AuthChain(limited, mode="anonymous", loopback_bound=True)
    # A scrape credential opens GET /v1/metrics only (gateway/auth/scrape_token.py).
    admitted: ASGIApp = (
        ScrapeToken(chained, limited, settings.metrics_tokens, loopback_bound=settings.loopback_bound)
        if settings.metrics_tokens
        else chained
    )
    gated = AccountGate(admitted, limited, hub=settings.hub, bridge=bridge_guard)
    guarded = RequestGuard(gated, trusted=TrustedProxies(settings.trusted_proxies))
    templates = RouteTemplates((r.path for r in table if isinstance(r, Direct)), app.routes)
    observed = HttpObserver(guarded, templates, metrics, access_log=settings.access_log)
    # Outermost: every answer, the guard's and the auth chain's refusals included, carries its request
    # id (X-Request-Id), and every log line it causes names it.
    return RequestIds(observed, on_refusal=metrics.refused)
