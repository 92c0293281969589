"""Auth chains and request guards as pure ASGI middleware (in the manner of Uvicorn's `proxy_headers.py`).

`RequestGuard` runs first, on every route (the account routes included): one well-formed `Host`,
an `Origin` (when sent) of this very server, a JSON content type on every request body, no
WebSocket, and, from a `--trusted-proxy` peer, the client address its forwarding header names.

`AuthChain` then admits a request, or answers it itself, and records the admitted `Principal` in
`scope["state"]["principal"]`; routes derive ownership from it, never from the body.

- loopback-strict (default): a process of the same user on this host. The TCP peer must be a
  loopback address whose socket belongs to this process's uid (`peer_credentials`), and any
  proxy-forwarding header (`_asgi.FORWARDING_HEADERS`, `X-Forwarded-*`) is 401: a proxy on the
  same host connects from loopback too, and behind it every caller would look like loopback.
- bearer (`--bearer-token`, repeatable): `Authorization: Bearer <token>`, compared in constant
  time; each token is its own principal.
- anonymous (`--allow-anonymous`): everyone is the one principal `anonymous` (demo only).
- oauth (`--oauth-issuer`, with or without `--bearer-token`): a static token still admits its
  principal; any other token goes to `oauth_gate.OAuthGate` (RFC 9728 metadata, JWT or introspected
  access tokens, DPoP), whose principal is `oauth:<digest of issuer and subject>` with the token's
  `OAuthIdentity` beside it, and a display name (`name`) from its claims: `--principal-claim`, else
  `email`, then `name`, then `sub`. The identity stays the issuer and subject; the name is for people
  reading approvals and audit records (personal data: never a metric label). A browser without
  `Authorization` is admitted by its session cookie, and a page it opens without one leads to the IdP
  (`browser_sessions`).

Roles are decided here, once, and carried on the `Principal` (`role`); routes ask `roles.require_operator`,
never look at credentials themselves. An operator acts on the gateway (the console's actions, logins,
failures, metrics); a peer calls tools and uses sessions (docs/http-api.md, "Roles"):

- `--operator-token` (any mode): `Authorization: Bearer <token>` compared in constant time, as bearer
  tokens are; each token is its own operator principal;
- loopback-strict: the local user is an operator (the single-user default);
- a `--bearer-token` and anonymous are peers.

- an OAuth principal is an operator when its token has a scope (`--operator-scope`) or a claim
  (`--operator-claim NAME=VALUE`) the deployment names (`operator_grants.OperatorGrant`), decided in
  `_oauth_admitted` as the gate admits it; otherwise a peer.

In every mode a server bound to loopback also answers only to a loopback `Host` (421), the
defence against DNS rebinding (MCP spec, Streamable HTTP transport, "Security Warning").
"""

from __future__ import annotations

import functools
import hmac
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import SecretStr
from starlette.types import ASGIApp, Receive, Scope, Send

from oauth._shared import printable

from ..http._asgi import (
    forwarding_header,
    header,
    host_of,
    is_loopback_address,
    is_loopback_name,
    is_mcp_path,
    refuse,
)
from ..http.mcp_checks import content_type_refusal
from ..http.protocol import PEER_UID
from ..http.proxies import PROXIED_BY, TrustedProxies
from ..http.tcp_peers import own_uid, peer_uid
from .browser_sessions import browser_token, to_sign_in, token_page, wants_page
from .oauth_gate import OAuthGate
from .oauth_tokens import OAuthIdentity, token_digest
from .operator_grants import OperatorGrant

__all__ = ["NAME_CLAIMS", "AuthChain", "Principal", "RequestGuard", "Role", "display_name", "scope_peer_uid"]

logger = logging.getLogger("agent_sdk.auth")

Refusal = tuple[int, str, str]
Role = Literal["operator", "peer"]


@dataclass(frozen=True, slots=True)
class Principal:
    """Who the auth chain admitted. `id` is stable for one credential and is what owns sessions; `role`
    is what it may do (module docstring: only the chain decides it)."""

    id: str
    kind: Literal["loopback", "bearer", "anonymous", "metrics", "oauth"]
    role: Role = "peer"
    oauth: OAuthIdentity | None = field(default=None, repr=False, compare=False)
    """For an OAuth principal: the issuer, subject, scopes, client id and claims of its token."""
    name: str | None = field(default=None, repr=False, compare=False)
    """For an OAuth principal: its display name (module docstring); others are shown by their id."""

    @property
    def is_operator(self) -> bool:
        return self.role == "operator"

    @property
    def display(self) -> str:
        """The person as approvals, audit records and the console show them (`loopback`, `bearer:<digest>`)."""
        return self.name or self.id

    @property
    def subject(self) -> str | None:
        """The OAuth subject (`sub`), or None for a principal without a token."""
        return self.oauth.subject if self.oauth is not None else None


NAME_CLAIMS = ("email", "name", "sub")
"""The claims a principal's display name comes from, first present first (`--principal-claim` puts its own first)."""


def display_name(claims: Mapping[str, Any], order: tuple[str, ...] = NAME_CLAIMS) -> str | None:
    """The first of `order` that `claims` hold as a non-empty string, made one printable line."""
    for claim in order:
        value = claims.get(claim)
        if isinstance(value, str) and value.strip():
            return printable(value.strip(), 200)
    return None


_ANONYMOUS = Principal("anonymous", "anonymous")
_LOOPBACK = Principal("loopback", "loopback", "operator")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_JSON_TYPES = ("application/json",)
_MISDIRECTED = (421, "misdirected_request", "this server answers only to a loopback Host (DNS rebinding guard)")


def _refuse(scope: Scope, send: Send, refusal: Refusal, headers: Iterable[tuple[bytes, bytes]] = ()) -> Awaitable[None]:
    status, code, message = refusal
    return refuse(scope, send, status, code, message, headers)


class _OAuthPrincipals:
    """Records an admitted identity's principal in the scope: made once per identity (its role from the
    operator grant), then the same one for each of the token's requests."""

    def __init__(self, grant: OperatorGrant | None, most: int = 10_000, names: tuple[str, ...] = NAME_CLAIMS) -> None:
        self.grant = grant
        self.names = names
        self.most = most
        self._made: dict[OAuthIdentity, Principal] = {}

    def __call__(self, scope: Scope, identity: OAuthIdentity) -> None:
        principal = self._made.get(identity)
        if principal is None:
            if len(self._made) >= self.most:
                self._made.clear()
            role: Role = "operator" if self.grant is not None and self.grant.admits(identity) else "peer"
            name = display_name(identity.claims, self.names) or identity.subject
            principal = self._made[identity] = Principal(identity.id, "oauth", role, oauth=identity, name=name)
        state: dict[str, Any] = scope.setdefault("state", {})
        state["principal"] = principal


async def _refuse_websocket(receive: Receive, send: Send) -> None:
    # ASGI: take the handshake, then close it (the server answers 403); no route takes WebSockets.
    message = await receive()
    if message["type"] == "websocket.connect":
        await send({"type": "websocket.close", "code": 1008, "reason": "no WebSocket route"})


@functools.lru_cache(maxsize=64)  # a client sends the same Content-Type every time
def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media in _JSON_TYPES or (media.startswith("application/") and media.endswith("+json"))


def _not_json(scope: Scope, content_type: bytes | None) -> str:
    if is_mcp_path(scope.get("path", "")):  # the MCP endpoints' own sentence (`mcp_request_checks`)
        return content_type_refusal(content_type.decode("latin-1") if content_type is not None else None)
    return "send the body as JSON, with Content-Type: application/json"


class RequestGuard:
    """Checks every HTTP request must pass before any route, whatever its auth:

    - exactly one `Host`, of the form `name[:port]` (400 otherwise: no userinfo, no second port);
    - an `Origin`, when sent, is this server's own (same host and port as `Host`), else 403: a page
      on another local port is another origin, and must not drive the agent;
    - a request with a body is `application/json` (or `+json`), else 415: a browser sends such a
      request cross-site only after a CORS preflight, which this server never grants;
    - WebSocket scopes are refused (no route takes them; none may skip the auth chain);
    - from a peer in `trusted` (`--trusted-proxy`), the forwarding headers name the client: the
      scope's `client` becomes that address (for logs and decisions), and the proxy's own address
      is kept in `scope["extensions"]["agent_sdk.proxied_by"]`.
    """

    def __init__(self, app: ASGIApp, *, trusted: TrustedProxies | None = None) -> None:
        self.app = app
        self.rewrite = trusted.rewrite if trusted else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # `async def`: an app's outermost layer (here, or under `RequestIds`), which servers tell from an
        # ASGI 2 app by this.
        if scope["type"] == "websocket":
            await _refuse_websocket(receive, send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._check(scope)
        if refusal is not None:
            await _refuse(scope, send, refusal)
            return
        if self.rewrite is not None:
            self.rewrite(scope)
        await self.app(scope, receive, send)

    def _check(self, scope: Scope) -> Refusal | None:
        # One pass over the headers: this runs before every request on every route.
        hosts: list[bytes] = []
        origin = content_type = length = chunked = None
        for key, value in scope.get("headers", ()):
            if key == b"host":
                hosts.append(value)
            elif key == b"origin":
                origin = origin or value
            elif key == b"content-type":
                content_type = content_type or value
            elif key == b"content-length":
                length = length or value
            elif key == b"transfer-encoding":
                chunked = value
        if len(hosts) > 1:
            return 400, "invalid_request", "the request has more than one Host header; send one"
        parsed = host_of(hosts[0].decode("latin-1")) if hosts else None
        if hosts and parsed is None:
            return 400, "invalid_request", "the Host header is not of the form name[:port]"
        if origin is not None and not self._same_origin(origin.decode("latin-1"), parsed):
            return 403, "forbidden_origin", "a request from another origin is refused"
        has_body = length.strip() not in (b"", b"0") if length is not None else chunked is not None
        if has_body and scope.get("method") not in ("GET", "HEAD", "OPTIONS"):
            if not _is_json((content_type or b"").decode("latin-1")):
                return 415, "unsupported_media_type", _not_json(scope, content_type)
        return None

    @staticmethod
    def _same_origin(origin: str, host: tuple[str, int | None] | None) -> bool:
        if host is None:
            return False
        try:
            parts = urlsplit(origin)
            origin_port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
        except ValueError:
            return False
        if parts.scheme not in _DEFAULT_PORTS or parts.hostname is None:
            return False
        name, port = host
        # A Host without a port names the default port of the scheme the client used, which only
        # the client (or a TLS-terminating proxy in front) knows: the Origin's scheme says it.
        if origin_port != (port or _DEFAULT_PORTS[parts.scheme]):
            return False
        name, other = name.lower().rstrip("."), parts.hostname.lower().rstrip(".")
        # The loopback names all reach this server on this port: one origin for this purpose.
        return name == other or (is_loopback_name(name) and is_loopback_name(other))


def _fingerprint(token: SecretStr) -> str:
    """What names a token's principal (`bearer:<12 hex>`): a digest prefix, never the token."""
    return token_digest(token.get_secret_value()).hex()[:12]


PeerUid = Callable[[Scope], int | None]


def scope_peer_uid(scope: Scope) -> int | None:
    """The uid owning the peer's socket: from the connection (`http_protocol`), else looked up now."""
    extensions: dict[str, Any] = scope.get("extensions") or {}
    if PEER_UID in extensions:
        return extensions[PEER_UID]
    client, server = scope.get("client"), scope.get("server")
    return peer_uid(tuple(client) if client else None, tuple(server) if server else None)


class AuthChain:
    """Admit or refuse each HTTP request before `app` sees it; `public_paths` skip the chain."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        mode: Literal["loopback-strict", "bearer", "anonymous", "oauth"],
        bearer_tokens: Iterable[SecretStr] = (),
        operator_tokens: Iterable[SecretStr] = (),
        oauth: OAuthGate | None = None,
        operator_grant: OperatorGrant | None = None,
        principal_claim: str | None = None,
        loopback_bound: bool = True,
        public_paths: Iterable[str] = (),
        peer_uid_of: PeerUid = scope_peer_uid,
    ) -> None:
        self.app = app
        self.mode = mode
        # Keep only digests: the chain compares digests, so the tokens never sit here in clear.
        self._tokens: list[tuple[bytes, str, Role]] = [
            *((token_digest(t.get_secret_value()), _fingerprint(t), "peer") for t in bearer_tokens),
            *((token_digest(t.get_secret_value()), _fingerprint(t), "operator") for t in operator_tokens),
        ]
        self._operators = any(role == "operator" for _, _, role in self._tokens)
        # One principal object per token, made once: a request's caches (the policy's decision memo, the
        # audit's guarded tools) know a caller by its object.
        self._principals = {digest: Principal(f"bearer:{fp}", "bearer", role) for digest, fp, role in self._tokens}
        if mode == "bearer" and not self._tokens:
            raise ValueError("bearer mode needs at least one token")
        if (mode == "oauth") != (oauth is not None):
            raise ValueError("oauth mode needs an OAuthGate, and only oauth mode takes one")
        self.oauth = oauth
        names = NAME_CLAIMS if principal_claim is None else (principal_claim, "sub")
        self._oauth_admitted = _OAuthPrincipals(operator_grant, names=names)
        self.loopback_bound = loopback_bound
        self.public_paths = frozenset(public_paths)
        self.peer_uid_of = peer_uid_of
        self._uid = own_uid()

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Decides synchronously and hands back the coroutine to await (the app's, or the refusal's):
        # no frame of its own for every resume of the request to pass through. (Only inner layers
        # can: servers tell an ASGI 3 app from an ASGI 2 one by an `async def __call__`, so the
        # outermost app keeps one.)
        if scope["type"] != "http":
            return self.app(scope, receive, send)
        if self.loopback_bound:
            host = host_of(header(scope, b"host") or "")
            if host is None or not is_loopback_name(host[0]):
                return _refuse(scope, send, _MISDIRECTED)
        if scope.get("path") in self.public_paths:
            return self.app(scope, receive, send)
        if self.oauth is not None:
            return self._admit_oauth(scope, receive, send, self.oauth)
        principal, refusal = self._admit(scope)
        if principal is None:
            assert refusal is not None
            extra = [(b"www-authenticate", b'Bearer realm="agent-sdk"')] if self.mode == "bearer" else []
            return _refuse(scope, send, refusal, extra)
        state: dict[str, Any] = scope.setdefault("state", {})
        state["principal"] = principal
        return self.app(scope, receive, send)

    def _admit_oauth(self, scope: Scope, receive: Receive, send: Send, oauth: OAuthGate) -> Awaitable[None]:
        # A service's static token first (one digest compare), then a person's access token: the header
        # is read and the token digested once for both.
        scheme, _, token = (header(scope, b"authorization") or "").partition(" ")
        scheme, token = scheme.lower(), token.strip()
        if not token and (token := browser_token(scope) or ""):
            scheme = "bearer"  # a signed-in browser's session cookie (`browser_sessions`): its sealed token
        elif not token and token_page(scope):
            return self.app(scope, receive, send)  # the shell, whose page asks for a static operator token
        elif not token and wants_page(scope):
            return to_sign_in(scope, send)  # a page opened without a credential: sign the person in
        digest = token_digest(token) if token else b""
        if self._tokens and scheme == "bearer" and token and (principal := self._static(digest)) is not None:
            state: dict[str, Any] = scope.setdefault("state", {})
            state["principal"] = principal
            return self.app(scope, receive, send)
        return oauth.admit(scope, receive, send, self.app, self._oauth_admitted, (scheme, token, digest))

    def _admit(self, scope: Scope) -> tuple[Principal | None, Refusal | None]:
        if self.mode == "bearer":
            return self._admit_bearer(scope)
        if self._operators and (operator := self._admit_bearer(scope)[0]) is not None:
            return operator, None  # an operator token, beside loopback-strict or anonymous
        if self.mode == "anonymous":
            return _ANONYMOUS, None
        if forwarding_header(scope) is not None or PROXIED_BY in (scope.get("extensions") or {}):
            return None, (401, "unauthorized", "proxy-forwarded requests are refused in loopback-strict mode")
        client = scope.get("client")
        if client is None or not is_loopback_address(client[0]):
            return None, (401, "unauthorized", "only direct loopback peers are admitted; use --bearer-token")
        if self.peer_uid_of(scope) != self._uid:
            # A proxy or another user's process on this host: loopback-strict means this user only.
            return None, (401, "unauthorized", "the loopback peer is not a process of this user; use --bearer-token")
        return _LOOPBACK, None

    def _admit_bearer(self, scope: Scope) -> tuple[Principal | None, Refusal | None]:
        value = header(scope, b"authorization") or ""
        scheme, _, presented = value.partition(" ")
        if scheme.lower() != "bearer" or not presented.strip():
            return None, (401, "unauthorized", "send Authorization: Bearer <token>")
        principal = self._static(token_digest(presented.strip()))
        if principal is None:
            return None, (401, "unauthorized", "the bearer token is not valid")
        return principal, None

    def _static(self, presented_digest: bytes) -> Principal | None:
        """The principal of the static token with this digest, if one has it."""
        matched: bytes | None = None
        # Compare against every token, without an early exit, so timing says nothing about which.
        for digest, _, _ in self._tokens:
            if hmac.compare_digest(presented_digest, digest):
                matched = digest
        return None if matched is None else self._principals[matched]
