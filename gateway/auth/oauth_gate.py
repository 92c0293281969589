"""The OAuth step of the auth chain: admit a request by its access token, or refuse it as RFC 6750 says.

`AuthChain` (`gateway/auth/chain.py`) hands a request here when `serve --oauth-issuer` is set and no static
bearer token matched. In order:

1. the RFC 9728 metadata documents are answered (they are public: discovery starts there);
2. a token in the query string is 400 `invalid_request` (MCP spec, "Token Handling": header only);
3. no `Authorization` is 401 with `WWW-Authenticate: Bearer resource_metadata="…"`;
4. the token is checked (`oauth_tokens.TokenVerifier`: signature, issuer, expiry; or introspection),
   then its audience against the route's resource (RFC 8707), then the route's scopes (403
   `insufficient_scope` with the scopes, so a client can step up), then, for a DPoP-bound token,
   its proof (`gateway/auth/dpop.py`; with `serve --dpop-nonce` its nonce, every 401 carrying the
   current one in `DPoP-Nonce`).

A Bearer token admitted before is found by its digest in the gate's memo (`_Admission`: its identity,
the token as the request presents it downstream, and its verdict for each resource it was sent to),
so its next requests cost a digest, a dictionary lookup and an expiry check: no I/O, no signature
check, no claim or scope comparison again (the cost of an OAuth call over a bearer one,
docs/performance.md). The memo holds at most as many tokens as the verifier's cache, each until it
expires; past that the oldest is dropped (and checked again, from the verifier's cache, when it returns).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from oauth import PresentedToken, present
from oauth._shared import Secret

from ..http._asgi import header, refuse, send_error
from ..settings import ServeSettings
from ..state.state_key import state_key
from .browser_sessions import SIGN_IN_PATH
from .dpop import DpopChecker, DpopNonces, MemoryJtis, SeenJtis
from .oauth_issuers import Issuer
from .oauth_resource import METADATA_PATH, ProtectedResource, Route
from .oauth_tokens import ALGORITHMS, OAuthIdentity, TokenRefused, TokenVerifier, token_digest

__all__ = ["Admitted", "OAuthGate", "oauth_gate"]

Admitted = Callable[[Scope, OAuthIdentity], None]
"""What the chain does with an admitted identity (records its principal in the scope)."""


_UNSEEN = TokenRefused(500, "unseen", "")
"""A resource the memo has no verdict for yet (`None` is the verdict "fits")."""


@dataclass(slots=True, eq=False)
class _Admission:
    """A Bearer token admitted before: what each of its next requests needs, worked out once."""

    identity: OAuthIdentity
    presented: PresentedToken
    verdicts: dict[tuple[str, tuple[str, ...]], TokenRefused | None] = field(
        default_factory=dict[tuple[str, tuple[str, ...]], "TokenRefused | None"]
    )
    """By the route's resource and scopes (what decides the verdict): None when the token fits (audience and
    scopes), else the refusal."""


class OAuthGate:
    """Admits requests that carry an access token from a trusted issuer for this resource."""

    def __init__(self, resource: ProtectedResource, verifier: TokenVerifier, dpop: DpopChecker | None = None) -> None:
        self.resource = resource
        self.verifier = verifier
        self.dpop = dpop
        self._admissions: dict[bytes, _Admission] = {}

    @property
    def started(self) -> bool:
        return self.verifier.started

    async def start(self) -> None:
        """Load every issuer (`TokenVerifier.start`; raises `IssuerError`); DPoP is offered when one binds tokens."""
        await self.verifier.start()
        if self.dpop is not None:
            algs = {a for i in self.verifier.issuers.values() for a in i.dpop_algs}
            self.resource.accept_dpop(sorted(a for a in algs if a in ALGORITHMS))

    def admit(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        app: ASGIApp,
        admitted: Admitted,
        presented: tuple[str, str, bytes] | None = None,
    ) -> Awaitable[None]:
        """`presented`: the Authorization header's scheme (lower case), token and `token_digest`, when the
        chain has read them already (it compares the digest with its static tokens first)."""
        path: str = scope.get("path", "")
        if path.startswith(METADATA_PATH):
            return self._metadata(scope, receive, send)
        route = self.resource.route(path)
        if b"access_token=" in scope.get("query_string", b""):
            return self._refuse(
                scope,
                send,
                route,
                TokenRefused(
                    400, "invalid_request", "send the access token in the Authorization header, never in the URL"
                ),
            )
        if presented is None:
            scheme, _, token = (header(scope, b"authorization") or "").partition(" ")
            scheme, token = scheme.lower(), token.strip()
            digest = token_digest(token) if token else b""
        else:
            scheme, token, digest = presented
        if scheme == "bearer" and (known := self._admissions.get(digest)) is not None:
            # The hot path: a Bearer token admitted before, no I/O, no signature or claim check.
            if known.identity.expires > time.time() and self.verifier.current(known.identity):
                verdict = known.verdicts.get(key := (route.resource, route.scopes), _UNSEEN)
                if verdict is _UNSEEN:
                    verdict = known.verdicts[key] = self._fits(known.identity, route)
                if verdict is not None:
                    return self._refuse(scope, send, route, verdict)
                admitted(scope, known.identity)
                present(known.presented)
                return app(scope, receive, send)
            del self._admissions[digest]
        if scheme not in ("bearer", "dpop") or not token:
            return refuse(
                scope,
                send,
                401,
                "unauthorized",
                "sign in: send Authorization: Bearer <access token>",
                [*self.resource.challenge(route), *self._nonce()],
            )
        return self._checked(scope, receive, send, app, admitted, route, scheme, token, digest)

    async def _checked(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        app: ASGIApp,
        admitted: Admitted,
        route: Route,
        scheme: str,
        token: str,
        digest: bytes,
    ) -> None:
        try:
            identity = await self.verifier.verify(token, digest)
            refusal = self._fits(identity, route)
            if refusal is not None:
                raise refusal
            newer = await self._bound(scope, identity, scheme, token)
        except TokenRefused as exc:
            await self._refuse(scope, send, route, exc)
            return
        # The admitted token is the request's `subject_token` for connections that exchange it (docs/oauth.md):
        # a context variable of this request's task, gone with it.
        token_of = PresentedToken(identity.id, identity.issuer, Secret(token), identity.expires)
        if identity.jkt is None:  # a Bearer token: its next requests take the hot path (`admit`)
            if len(self._admissions) >= self.verifier.max_cached:
                del self._admissions[next(iter(self._admissions))]
            self._admissions[digest] = _Admission(identity, token_of, {(route.resource, route.scopes): None})
        admitted(scope, identity)
        present(token_of)
        await app(scope, receive, send if newer is None else _with_nonce(send, newer))

    async def _bound(self, scope: Scope, identity: OAuthIdentity, scheme: str, token: str) -> str | None:
        """RFC 9449 §7: a DPoP-bound token comes as `Authorization: DPoP` with a proof; an unbound one as Bearer."""
        if identity.jkt is None:
            if scheme == "dpop":
                raise TokenRefused(
                    401, "invalid_token", "the token is not DPoP-bound; send it as Authorization: Bearer"
                )
            return None
        if self.dpop is None:
            raise TokenRefused(
                401,
                "invalid_token",
                "the token is DPoP-bound, and this gateway does not accept DPoP; get a Bearer token",
            )
        if scheme != "dpop":
            raise TokenRefused(
                401, "invalid_token", "the token is DPoP-bound: send it as Authorization: DPoP with a DPoP proof"
            )
        return await self.dpop.check(scope, token, identity.jkt)

    @staticmethod
    def _fits(identity: OAuthIdentity, route: Route) -> TokenRefused | None:
        if route.audiences.isdisjoint(identity.audiences):
            return TokenRefused(
                401,
                "invalid_token",
                f"the token is for another resource, not {route.resource}; sign in again for this one (RFC 8707 "
                "resource, as the resource_metadata of this 401 names it)",
            )
        missing = [s for s in route.scopes if s not in identity.scopes]
        if missing:
            return TokenRefused(
                403,
                "insufficient_scope",
                f"the token lacks the scope {' '.join(missing)}; sign in again asking for it",
                scope=" ".join(route.scopes),
            )
        return None

    def _refuse(self, scope: Scope, send: Send, route: Route, exc: TokenRefused) -> Awaitable[None]:
        headers = self.resource.challenge(route, error=exc.error, description=exc.description, scope=exc.scope)
        if exc.status == 503:
            headers.append((b"retry-after", b"30"))
        if exc.status == 401:
            headers.extend(self._nonce())
        return refuse(scope, send, exc.status, exc.error, exc.description, headers)

    def _nonce(self) -> list[tuple[bytes, bytes]]:
        """`DPoP-Nonce` for a 401 when proofs need one (RFC 9449 §9), so the next proof can carry it."""
        if not self.resource.dpop_algs or self.dpop is None or self.dpop.nonces is None:
            return []
        return [(b"dpop-nonce", self.dpop.nonces.current().encode())]

    async def _metadata(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not await self.resource.serve_metadata(scope, receive, send):
            await send_error(scope, send, 404, "not_found", "no protected resource metadata at this path")


def _with_nonce(send: Send, nonce: str) -> Send:
    """`send` with `DPoP-Nonce: nonce` on the answer (RFC 9449 §9.1: a new nonce before the client's expires)."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), (b"dpop-nonce", nonce.encode())]}
        await send(message)

    return sending


def oauth_gate(
    settings: ServeSettings, *, introspection: tuple[str, str] | None = None, seen: SeenJtis | None = None
) -> OAuthGate:
    """The gate `serve --oauth-issuer` runs: its issuers (not loaded yet: `gate.start()`), the resource at
    `settings.resource_url()`, the scopes of `--oauth-scope`, and with `--dpop-nonce` nonces made from the
    deployment's state key (raises `StateKeyInvalid` with a sentence when it cannot be read). `introspection`:
    the client credentials for RFC 7662 (`oauth_issuers.introspection_credentials`); `seen`: where DPoP proof
    ids are kept (default: this process's memory; `dpop.RedisJtis` with `--state-url`)."""
    issuers = [Issuer(url, introspection=introspection) for url in settings.oauth_issuers]
    everywhere = [s for s in settings.oauth_scopes if "=" not in s]
    per_route: dict[str, list[str]] = {}
    for entry in settings.oauth_scopes:
        if "=" in entry:
            path, _, scope = entry.rpartition("=")
            per_route.setdefault(path, []).append(scope)
    resource = ProtectedResource(
        settings.resource_url(),
        settings.oauth_issuers,
        scopes=everywhere,
        route_scopes=per_route,
        audiences=settings.oauth_audiences,
        # A per-user sign-in link is opened with whatever token the peer holds: the one its 401 named.
        any_resource=(SIGN_IN_PATH,),
    )
    nonces = DpopNonces(state_key(settings)) if settings.dpop_nonce else None
    dpop = DpopChecker(settings.resource_url(), seen or MemoryJtis(), nonces=nonces)
    return OAuthGate(resource, TokenVerifier(issuers), dpop)
