"""`agent-sdk serve`: run the gateway on uvicorn (its flags: `serve_flags.py`)."""

from __future__ import annotations

import argparse
import errno
import logging
import os
import socket
from collections.abc import Callable
from typing import Any, BinaryIO

import anyio

from connections import Project
from connections.serving import RedactingFilter, unset_variables
from oauth import OAuthError

from ..auth.oauth_gate import OAuthGate, oauth_gate
from ..auth.oauth_issuers import IssuerError, introspection_credentials
from ..errors import CliError, StateUnavailable
from ..http.protocol import HttpLimits, limited_protocol
from ..logs import configure_logging, tell
from ..policy import policy_diagnostics
from ..settings import ServeSettings
from ..state._redis import check_reachable
from ..state.state_key import StateKeyInvalid, check_state_key
from ..stores import token_store
from ..telemetry import TelemetryUnavailable, start_telemetry
from .memory import return_large_blocks
from .project import load
from .serve_flags import add_serve_flags, log_format_of, settings_from_args

__all__ = ["register", "serve", "settings_from_args"]


def register(sub: argparse._SubParsersAction[Any]) -> None:  # pyright: ignore[reportPrivateUsage]
    p = sub.add_parser("serve", help="serve the project's tools and sessions over HTTP")
    add_serve_flags(p)
    p.set_defaults(func=serve)


def serve(args: argparse.Namespace) -> int:
    """Refuse to start on error diagnostics; otherwise run until Ctrl-C (which closes every stdio child)."""
    import uvicorn

    from ..app import create_app

    # --stdio: fd 1 is the MCP channel from the first byte; anything we or a library print goes to stderr.
    wire = _claim_stdout() if args.stdio else None
    log_format = log_format_of(args)
    # From here every line on stderr is in the log's format (with json, the CLI's refusal too: logs.tell).
    configure_logging(log_format, level=logging.WARNING if wire is not None else logging.INFO)
    project = load(args.dir)
    errors = [*project.errors, *policy_diagnostics(project.root)]  # a bad agent/policies.cedar refuses too
    if errors:
        for diag in errors:
            print(diag.format(project.root))
        raise CliError(f"{len(errors)} error(s) in the project; fix them (agent-sdk validate) and retry")
    for diag in unset_variables(project, os.environ):  # serving goes on; every use of that connection fails
        tell(diag.format(project.root), event="variable_unset", level=logging.WARNING)
    settings = settings_from_args(args)
    try:  # decided once, before anything is built: off, no call pays for tracing (docs/operations.md)
        start_telemetry(getattr(args, "otlp_endpoint", None) or os.environ.get("AGENT_SDK_OTLP_ENDPOINT"))
    except TelemetryUnavailable as exc:
        raise CliError(str(exc)) from None
    server = getattr(args, "server", None)
    if server is not None and (wire is None or server not in project.servers):
        raise CliError(
            f"--server {server!r}: no curated server of that name in this project (the curated servers are "
            f"{sorted(project.servers)}, one file each under agent/servers/)"
            if wire is not None
            else "--server needs --stdio; over HTTP each curated server is served at /v1/mcp/servers/<name>"
        )
    if wire is not None:
        return _serve_stdio(project, settings, wire, server)
    if not settings.loopback_bound and settings.auth_mode not in ("bearer", "oauth"):
        raise CliError(
            f"--host {settings.host} is not loopback: pass --bearer-token (or AGENT_SDK_BEARER_TOKEN) "
            "so that callers must authenticate"
            if settings.auth_mode == "loopback-strict"
            else f"refusing --allow-anonymous on non-loopback --host {settings.host}"
        )
    if settings.trusted_proxies and settings.auth_mode not in ("bearer", "oauth"):
        raise CliError(
            "--trusted-proxy needs --bearer-token (or AGENT_SDK_BEARER_TOKEN): loopback-strict is for single-host "
            "use, and a gateway behind a proxy must authenticate its callers"
        )
    if settings.state_url is not None:
        try:
            import redis  # noqa: F401  # pyright: ignore[reportUnusedImport]
        except ImportError:
            raise CliError("--state-url needs the redis client: pip install 'agent-sdk[redis]'") from None
    try:
        # Fail here, with a sentence, rather than inside the app's lifespan with a traceback; a state store
        # that does not answer at boot is a refusal too (docs/deploy.md, "Health checks").
        token_store(settings)
        check_state_key(settings)
        if settings.state_url is not None:
            check_reachable(settings.state_url.get_secret_value())
    except (OAuthError, StateKeyInvalid, StateUnavailable) as exc:
        raise CliError(str(exc)) from None
    # Bind before the "serving" line: a busy port is one sentence, not a banner and then uvicorn's
    # Errno 98; and port 0's real port is known before the app starts (printed, and in the account
    # bridge URL handed to stdio children).
    sock = _bind(settings.host, settings.port)
    settings = settings.model_copy(update={"port": sock.getsockname()[1]})
    stopping: list[Callable[[], None]] = []

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            try:
                await super().startup(sockets)  # listens only now (`_bind`)
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    raise
                raise _busy(settings.host, settings.port) from None  # another one bound it and listened first

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            for end in stopping:  # endless streams end first, or uvicorn would wait for them forever
                end()
            await super().shutdown(sockets)

        async def on_tick(self, counter: int) -> bool:
            # The app's lifespan ended while serving (a background task failed: logged with its traceback by
            # the lifespan): its pool, sessions and audit are closed, so every request would fail. Fail closed:
            # stop, exit 1, and let the supervisor (systemd, Kubernetes, the chaos harness) start it again.
            lifespan: Any = getattr(self, "lifespan", None)
            if not self.should_exit and getattr(lifespan, "shutdown_failed", False):
                logging.getLogger("agent_sdk.serve").error(
                    "the app stopped while serving (see the error above); serve exits so that it is restarted"
                )
                self.should_exit = self.lifespan_failed = True
            return await super().on_tick(counter)

        lifespan_failed = False

    oauth = _loaded_oauth(settings)
    try:
        app = create_app(project, settings, stopping=stopping, oauth=oauth)
    except ValueError as exc:
        sock.close()
        raise CliError(str(exc)) from None
    return_large_blocks()  # a large tool result's memory goes back to the system after the call (commands/memory.py)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    # The SDK logs every stateless request at INFO ("Terminating session: None"): noise, and a cost per call.
    logging.getLogger("mcp").setLevel(logging.WARNING)
    # httpx2 logs every request's full URL at INFO: a key in a query string would reach the log.
    for name in ("httpx2", "httpcore2"):
        logging.getLogger(name).setLevel(logging.WARNING)
    url = settings.state_url
    state = "files under --state-root" if url is None else _redacted(url.get_secret_value())
    print(
        f"agent-sdk: serving {project.root.name} on http://{settings.host}:{settings.port} "
        f"(auth: {settings.auth_mode}; state: {state})"
    )
    limits = HttpLimits(
        idle_timeout=settings.idle_timeout_s,
        header_timeout=settings.header_timeout_s,
        body_timeout=settings.body_timeout_s,
        max_header_bytes=settings.max_header_bytes,
        max_connections=settings.max_connections,
        peer_uids=settings.auth_mode == "loopback-strict",
    )
    config = uvicorn.Config(
        app,
        http=limited_protocol(limits),  # uvicorn's httptools protocol plus head/body/idle timeouts and caps
        timeout_keep_alive=settings.idle_timeout_s,  # type: ignore[arg-type]  # call_later takes seconds as a float
        h11_max_incomplete_event_size=settings.max_header_bytes,
        host=settings.host,
        port=settings.port,
        log_level="info",
        log_config=None,  # uvicorn's lines go through our handler: the same format, the request id
        lifespan="on",
        proxy_headers=False,
        access_log=False,  # `http_observer` writes the access line (with latency and the route template)
        server_header=False,  # no `server: uvicorn` on every answer: bytes for every client to parse, and a fingerprint
    )
    # uvicorn's loggers go through the root handler (log_config=None): every handler masks keys, tokens
    # and ${VAR} values (configure_logging installs the filter; this covers any handler added since).
    RedactingFilter.install("uvicorn", "uvicorn.error", "uvicorn.access")
    server = Server(config)
    server.run(sockets=[sock])
    return 1 if server.lifespan_failed else 0


def _loaded_oauth(settings: ServeSettings) -> OAuthGate | None:
    """The OAuth gate with every issuer's metadata and keys loaded; `CliError` naming the issuer that
    cannot be used (serve exits before the banner rather than refuse every token later)."""
    if not settings.oauth_issuers:
        return None
    seen = None
    if settings.state_url is not None:
        from ..auth.dpop import RedisJtis
        from ..state._redis import redis_client

        seen = RedisJtis(redis_client(settings.state_url.get_secret_value()))
    gate = oauth_gate(settings, introspection=introspection_credentials(os.environ), seen=seen)
    try:
        anyio.run(gate.start)
    except IssuerError as exc:
        raise CliError(f"--oauth-issuer: {exc}") from None
    return gate


def _redacted(url: str) -> str:
    from ..state._redis import safe_url

    return safe_url(url)


def _claim_stdout() -> BinaryIO:
    from ..mcp.stdio import claim_protocol_stdout

    return claim_protocol_stdout()


def _serve_stdio(project: Project, settings: ServeSettings, wire: BinaryIO, server: str | None = None) -> int:
    """`serve --stdio` (`--server`: a curated server): stdout is the protocol's, so everything we say goes to
    stderr."""
    from ..mcp.stdio import serve_stdio

    tell(f"agent-sdk: serving {project.root.name}'s tools over stdio", event="serving")
    try:
        serve_stdio(project, settings, wire, server)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    return 0


def _bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to `host`:`port` (0: a free port); raises `CliError` when it cannot be bound.

    Not listening yet: uvicorn's server calls `listen()` once the app's lifespan has started. Until then a
    connect is refused, so a proxy in front (nginx's `proxy_next_upstream error`) sends the request to another
    replica at once, rather than a restarting replica's kernel accepting it into a backlog nobody reads
    while the app still starts (docs/deploy.md, "Failure figures")."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise _busy(host, port) from None
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror}; pass a --host this machine has") from None
    return sock


def _busy(host: str, port: int) -> CliError:
    return CliError(
        f"port {port} on {host} is already in use by another process; stop it, or pass --port N "
        "(--port 0 picks a free one)"
    )
