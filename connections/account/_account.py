"""Account connections (docs/accounts.md): forward the connectors an account linked on a hub.

`define_connection(account=True, servers=[...] | "*")` has no upstream of its own. The hub (another
agent-sdk gateway serving `--hub`, or any service with the same API, docs/accounts.md) answers

- `GET {hub}/v1/hub/connectors` (`Authorization: Bearer <API key>`): the account's linked
  connectors, each with the path of its MCP endpoint;
- `POST {hub}/v1/hub/connectors/{name}/mcp`: a Streamable HTTP MCP endpoint per connector, which
  the hub forwards to the real upstream with the hub's own credentials.

`AccountConnections` serves a project's account connections beside the `ClientPool` (`Broker` owns
both and routes by name). It resolves a connection's connectors (live, on every listing: a revoked
key or an unlinked connector fails the next turn, not one a cache later), lists the selected
connectors through a `ClientPool` of its own (one pooled client per connector, the API key
injected by an `httpx2.Auth`), exposes the union of their tools and routes each call to the
connector that listed the tool. A connector named in `servers` that the account lacks, or one tool name offered
by two connectors, is a typed error: the turn fails closed.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.to_thread
import httpx2
import mcp_types as mt
from pydantic import BaseModel, ConfigDict, ValidationError

from oauth._shared import Secret

from .._exceptions import (
    AccountConnectorMissing,
    AccountError,
    AccountNotConfigured,
    AccountToolCollision,
    AccountUnauthorized,
    ClientError,
    ConnectionUnavailable,
    UnknownConnection,
    UnknownTool,
    UpstreamError,
    UpstreamTimeout,
)
from ..client._clients import shared_ssl_context
from ..client._listing_cache import DEFAULT_LISTING_TTL
from ..client._restart import RestartPolicy
from ..client._session_runner import ConnectionStatus
from ..client._translate import transport_failure
from ..pool._pool import ClientPool
from ..project._definitions import ConnectionDefinition
from ..project._names import is_valid_tool_name
from ._account_login import AccountCredentials, AccountSetupError, load_account_credentials

__all__ = ["HUB_CONNECTORS_PATH", "AccountConnections", "Connector", "parse_connector_list"]

logger = logging.getLogger(__name__)

HUB_CONNECTORS_PATH = "/v1/hub/connectors"
_EXPLAIN_BUDGET = 5.0


class Connector(BaseModel):
    """One linked connector as the hub lists it."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str
    mcp: str
    """The connector's MCP endpoint: a path under the hub's base URL, or an absolute URL on the hub's origin."""
    kind: str | None = None
    description: str | None = None


class _Listing(BaseModel):
    model_config = ConfigDict(extra="ignore")

    connectors: list[Connector]
    account: str | None = None


def parse_connector_list(content: bytes) -> list[Connector]:
    """The connectors of a `GET /v1/hub/connectors` body. Raises `pydantic.ValidationError` for another shape."""
    return _Listing.model_validate_json(content).connectors


class _ApiKeyAuth(httpx2.Auth):
    """Sends `Authorization: Bearer <API key>` on every request to the hub (and nowhere else)."""

    def __init__(self, key: Secret) -> None:
        self._key = key

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        request.headers["Authorization"] = f"Bearer {self._key.reveal()}"
        yield request

    def __repr__(self) -> str:
        return "_ApiKeyAuth('***')"


@dataclass(slots=True)
class _State:
    routes: dict[str, str] = field(default_factory=dict[str, str])
    """tool -> connector, from the last complete listing."""
    connectors: tuple[str, ...] | None = None
    """The connectors the last resolution selected (for `info`)."""


class AccountConnections:
    """A project's account connections: `names()`, `list_tools(name)`, `call_tool(name, tool, args)`.

    Use as `async with AccountConnections(connections, environ=...) as accounts`, in one task.
    """

    def __init__(
        self,
        connections: Mapping[str, ConnectionDefinition],
        *,
        environ: Mapping[str, str],
        listing_ttl: float = DEFAULT_LISTING_TTL,
        restart_policy: RestartPolicy | None = None,
        fast_calls: bool = True,
    ) -> None:
        self._defns = dict(connections)
        self._environ = environ
        self._credentials: AccountCredentials | None = None
        self._auth: _ApiKeyAuth | None = None
        self._pool = ClientPool(
            {},
            environ=environ,
            auth_for=self._auth_for,
            listing_ttl=listing_ttl,
            restart_policy=restart_policy,
            fast_calls=fast_calls,
        )
        self._http: httpx2.AsyncClient | None = None
        self._state = {name: _State() for name in self._defns}
        self._lock = anyio.Lock()

    async def __aenter__(self) -> AccountConnections:
        await self._pool.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connector clients and the hub HTTP client."""
        try:
            await self._pool.aclose()
        finally:
            if self._http is not None:
                await self._http.aclose()
                self._http = None

    def names(self) -> list[str]:
        """Every account connection's name, sorted."""
        return sorted(self._defns)

    def serves(self, name: str) -> bool:
        return name in self._defns

    def definition(self, name: str) -> ConnectionDefinition:
        """The definition of account connection `name`. Raises `UnknownConnection`."""
        defn = self._defns.get(name)
        if defn is None:
            raise UnknownConnection(name, f"no such account connection (defined: {', '.join(self.names()) or 'none'})")
        return defn

    def status(self, name: str) -> ConnectionStatus:
        """An account connection has no session of its own (its connectors' live in this object's pool):
        idle until its connectors were resolved, open after. Raises `UnknownConnection`."""
        state = "idle" if self.resolved(self.definition(name).name) is None else "open"
        return ConnectionStatus(name, state, 0, 0, None, None, None)

    def resolved(self, name: str) -> tuple[str, ...] | None:
        """The connectors the last resolution of `name` selected, or None before the first one."""
        state = self._state.get(name)
        return state.connectors if state is not None else None

    # -- credentials and the hub's listing ---------------------------------------------------

    def _auth_for(self, _defn: ConnectionDefinition) -> httpx2.Auth | None:
        return self._auth

    async def _credentials_for(self, defn: ConnectionDefinition) -> AccountCredentials:
        if self._credentials is not None:
            return self._credentials
        async with self._lock:
            if self._credentials is None:
                try:
                    creds = await anyio.to_thread.run_sync(load_account_credentials, self._environ)
                except AccountSetupError as exc:
                    raise AccountNotConfigured(defn.name, str(exc)) from None
                # Read once per process: connector clients keep the URL; a new login needs a restart.
                self._credentials = creds
                self._auth = _ApiKeyAuth(creds.api_key)
            return self._credentials

    async def connectors(self, defn: ConnectionDefinition) -> list[Connector]:
        """Every connector the account has linked, as the hub lists it now.

        Raises `AccountNotConfigured`, `AccountUnauthorized`, `ConnectionUnavailable`, `UpstreamError`,
        `UpstreamTimeout`.
        """
        creds = await self._credentials_for(defn)
        if self._http is None:
            self._http = httpx2.AsyncClient(
                verify=shared_ssl_context(), timeout=httpx2.Timeout(None, connect=defn.timeouts.connect)
            )
        url = creds.url + HUB_CONNECTORS_PATH
        try:
            with anyio.fail_after(defn.timeouts.connect + defn.timeouts.list):
                response = await self._http.get(url, auth=self._auth, headers={"Accept": "application/json"})
        except TimeoutError:
            raise UpstreamTimeout(defn.name, f"the account hub {creds.url} did not list connectors in time") from None
        except httpx2.TransportError as exc:
            raise ConnectionUnavailable(
                defn.name, f"cannot reach the account hub {creds.url} ({transport_failure(exc)})"
            ) from None
        if response.status_code == 401:
            raise AccountUnauthorized(
                defn.name,
                f"the account hub {creds.url} refused the API key (wrong or revoked); ask the hub's operator for "
                "a new key and run agent-sdk login again (or update AGENT_SDK_API_KEY)",
            )
        if response.status_code != 200:
            raise UpstreamError(
                defn.name, f"the account hub {creds.url} answered HTTP {response.status_code} to the connector list"
            )
        try:
            listing = _Listing.model_validate_json(response.content)
        except ValidationError:
            raise UpstreamError(
                defn.name, f"the account hub {creds.url} answered a connector list that is not agent-sdk's hub API"
            ) from None
        return [c for c in listing.connectors if is_valid_tool_name(c.name)]

    async def resolve(self, defn: ConnectionDefinition) -> list[Connector]:
        """The connectors `defn.servers` selects (all for `"*"`), in the hub's order.

        Raises `AccountConnectorMissing` naming every selected name the account lacks, and what
        `connectors` raises.
        """
        linked = await self.connectors(defn)
        by_name = {c.name: c for c in linked}
        if defn.servers == "*":
            chosen = linked
        else:
            missing = [s for s in defn.servers if s not in by_name]
            if missing:
                raise AccountConnectorMissing(defn.name, missing, sorted(by_name))
            chosen = [by_name[s] for s in defn.servers]
        self._state[defn.name].connectors = tuple(c.name for c in chosen)
        return chosen

    def _connector_definition(self, defn: ConnectionDefinition, connector: Connector) -> ConnectionDefinition:
        assert self._credentials is not None
        hub = self._credentials.url
        # A path is under the hub's base URL (which may carry a prefix, behind a proxy); an absolute
        # URL must stay on the hub's origin.
        url = connector.mcp if "://" in connector.mcp else f"{hub}/{connector.mcp.lstrip('/')}"
        hub_origin, target = urlsplit(hub), urlsplit(url)
        if (target.scheme, target.netloc) != (hub_origin.scheme, hub_origin.netloc):
            # The API key goes wherever this URL points: never off the hub's own origin.
            raise UpstreamError(
                defn.name, f"the hub lists connector {connector.name!r} on another origin; refusing to send the key"
            )
        sub = ConnectionDefinition(url=url, timeouts=defn.timeouts, protocol=defn.protocol, description=None)
        return sub.named(f"{defn.name}/{connector.name}", defn.source)

    # -- tools ---------------------------------------------------------------------------------

    async def list_tools(self, name: str, *, use_cache: bool = False) -> list[mt.Tool]:
        """The union of the selected connectors' tools (allow/deny lists applied), listed in parallel.

        The connector list is asked live every time; each connector's tool listing may come from
        the pool's cache when `use_cache`. Raises `UnknownConnection`, the `AccountError`s,
        `UpstreamError`, `UpstreamTimeout`, `ConnectionUnavailable`.
        """
        defn = self.definition(name)
        chosen = await self.resolve(defn)
        listings: dict[str, list[mt.Tool]] = {}
        errors: list[ClientError] = []

        async def one(connector: Connector) -> None:
            try:
                sub = self._connector_definition(defn, connector)
                self._pool.add(sub)
                listings[connector.name] = await self._pool.list_tools(sub.name, use_cache=use_cache)
            except ClientError as exc:
                errors.append(_rename(defn.name, connector.name, exc))

        async with anyio.create_task_group() as tg:
            for connector in chosen:
                tg.start_soon(one, connector)
        if errors:
            raise sorted(errors, key=str)[0]
        routes: dict[str, str] = {}
        tools: list[mt.Tool] = []
        for connector in chosen:
            for tool in listings[connector.name]:
                if not defn.allows_tool(tool.name):
                    continue
                owner = routes.get(tool.name)
                if owner is not None:
                    raise AccountToolCollision(defn.name, tool.name, (owner, connector.name))
                routes[tool.name] = connector.name
                tools.append(tool)
        self._state[defn.name].routes = routes
        return tools

    async def call_tool(self, name: str, tool: str, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """Call `tool` on the connector that listed it (listing first when it is not known yet).

        Raises `UnknownConnection`, `UnknownTool`, the `AccountError`s, `UpstreamError`,
        `UpstreamTimeout`, `ConnectionUnavailable`.
        """
        defn = self.definition(name)
        if not defn.allows_tool(tool):
            raise UnknownTool(defn.name, tool, f"tool {tool!r} is not allowed by the connection's allow/deny lists")
        connector = self._state[defn.name].routes.get(tool)
        if connector is None:
            await self.list_tools(name, use_cache=True)
            connector = self._state[defn.name].routes.get(tool)
        if connector is None:
            raise UnknownTool(defn.name, tool, f"no selected connector of the account offers tool {tool!r}")
        try:
            return await self._pool.call_tool(f"{defn.name}/{connector}", tool, dict(arguments or {}))
        except ClientError as exc:
            raise await self._explain(defn, connector, exc) from None

    async def _explain(self, defn: ConnectionDefinition, connector: str, exc: ClientError) -> ClientError:
        """After a failed call, ask the hub once whether the key or the link is the cause (a clearer error)."""
        if isinstance(exc, UnknownTool):
            return _rename(defn.name, connector, exc)
        with anyio.move_on_after(_EXPLAIN_BUDGET):
            try:
                await self.resolve(defn)
            except AccountError as verdict:
                return verdict
            except ClientError:
                pass
        return _rename(defn.name, connector, exc)


def _rename(connection: str, connector: str, exc: ClientError) -> ClientError:
    """`exc` re-raised under the account connection's name, saying which connector failed."""
    if isinstance(exc, AccountError):
        return exc
    detail = f"connector {connector!r}: {exc.detail}"
    if isinstance(exc, UnknownTool):
        return UnknownTool(connection, exc.tool, detail)
    out = type(exc)(connection, detail)
    return out
