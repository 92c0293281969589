"""The gateway as an OAuth 2.1 protected resource: what it tells clients (RFC 9728, RFC 6750 §3).

`ProtectedResource` knows, for a request path, the resource a token must be for (the MCP spec's
canonical server URI: `<public-url>/v1/mcp/tools` for that endpoint, `<public-url>/v1/mcp` for the
agent endpoint, the public URL itself for the JSON API), the scopes that route requires, and the
metadata document a client discovers it by:

- `/.well-known/oauth-protected-resource` describes the public URL;
- `/.well-known/oauth-protected-resource/v1/mcp` and `.../v1/mcp/tools` describe those endpoints
  (RFC 9728 §3.1: the well-known segment goes before the resource's path).

`challenge` writes the `WWW-Authenticate` value of a refusal: `Bearer resource_metadata="…"`
always (the MCP spec's discovery starts there), `error`, `error_description` and `scope` where RFC
6750 §3 asks for them, and a `DPoP` challenge beside it when an issuer binds tokens (RFC 9449 §7.1).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from starlette.types import Receive, Scope, Send

__all__ = ["METADATA_PATH", "ProtectedResource"]

METADATA_PATH = "/.well-known/oauth-protected-resource"
_ENDPOINTS = ("/v1/mcp/tools", "/v1/mcp")
"""The MCP endpoints, each a resource of its own (longest first: a prefix match picks the nearest)."""


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True, slots=True)
class Route:
    """What a request path is, as a protected resource."""

    resource: str
    audiences: frozenset[str]
    scopes: tuple[str, ...]
    metadata_url: str


class ProtectedResource:
    """`public_url`: the gateway's external base URL. `scopes`: required on every route; `route_scopes`:
    path prefix -> scopes also required there. `dpop_algs`: the DPoP algorithms accepted (empty: none).
    `audiences`: further `aud` values accepted on every route; `any_resource`: paths where a token for any of the
    gateway's resources fits."""

    def __init__(
        self,
        public_url: str,
        issuers: Sequence[str],
        *,
        scopes: Sequence[str] = (),
        route_scopes: Mapping[str, Sequence[str]] | None = None,
        dpop_algs: Sequence[str] = (),
        audiences: Sequence[str] = (),
        any_resource: Sequence[str] = (),
    ) -> None:
        self.public_url = public_url.rstrip("/")
        self.audiences = frozenset(audiences)
        self.any_resource = frozenset(any_resource)
        """Paths a token for any of the gateway's resources fits (a sign-in link opened with a peer's own token)."""
        self.issuers = tuple(issuers)
        self.scopes = tuple(scopes)
        self.route_scopes = dict(route_scopes or {})
        self._routes: dict[str, Route] = {}
        self.documents: dict[str, bytes] = {}
        self.accept_dpop(dpop_algs)

    def accept_dpop(self, algs: Sequence[str]) -> None:
        """Say in the metadata and challenges that DPoP proofs with `algs` are accepted (none: not)."""
        self.dpop_algs = tuple(algs)
        self.documents = {METADATA_PATH: self._document("")}
        for path in _ENDPOINTS:
            self.documents[METADATA_PATH + path] = self._document(path)

    def _scopes_for(self, path: str) -> tuple[str, ...]:
        extra = [s for prefix, scopes in self.route_scopes.items() if path.startswith(prefix) for s in scopes]
        return tuple(dict.fromkeys((*self.scopes, *extra)))

    def _document(self, path: str) -> bytes:
        # RFC 9728 §2; bearer_methods_supported: the header only (a token in a URL ends up in logs).
        doc: dict[str, object] = {
            "resource": self.public_url + path,
            "authorization_servers": list(self.issuers),
            "bearer_methods_supported": ["header"],
            "resource_name": "agent-sdk gateway",
        }
        if scopes := self._scopes_for(path or "/"):
            doc["scopes_supported"] = list(scopes)
        if self.dpop_algs:
            doc["dpop_signing_alg_values_supported"] = list(self.dpop_algs)
        return json.dumps(doc).encode()

    def route(self, path: str) -> Route:
        """The resource `path` belongs to (cached per path: a handful of paths take every request)."""
        found = self._routes.get(path)
        if found is not None:
            return found
        endpoint = next((e for e in _ENDPOINTS if path == e or path.startswith(e + "/")), "")
        base = {self.public_url, self.public_url + "/", *self.audiences}
        audiences = frozenset({*base, self.public_url + endpoint} if endpoint else base)
        if path in self.any_resource:
            audiences = audiences | {self.public_url + e for e in _ENDPOINTS}
        found = Route(
            self.public_url + endpoint, audiences, self._scopes_for(path), self.public_url + METADATA_PATH + endpoint
        )
        if len(self._routes) < 1024:  # paths with ids in them (sessions) are not worth keeping
            self._routes[path] = found
        return found

    def challenge(
        self, route: Route, *, error: str | None = None, description: str | None = None, scope: str | None = None
    ) -> list[tuple[bytes, bytes]]:
        """The `WWW-Authenticate` header(s) of a 401/403 for `route`."""
        params = [f"resource_metadata={_quoted(route.metadata_url)}"]
        nonce = error == "use_dpop_nonce"  # RFC 9449 §9: the DPoP challenge's error alone
        if error is not None and not nonce:
            params.append(f"error={_quoted(error)}")
        if description is not None and not nonce:
            params.append(f"error_description={_quoted(description)}")
        wanted = scope if scope is not None else " ".join(route.scopes)
        if wanted:
            params.append(f"scope={_quoted(wanted)}")
        headers = [(b"www-authenticate", ("Bearer " + ", ".join(params)).encode("latin-1", "replace"))]
        if self.dpop_algs:
            dpop = [f"algs={_quoted(' '.join(self.dpop_algs))}"]
            if error is not None:
                dpop.append(f"error={_quoted(error)}")
            if nonce and description is not None:
                dpop.append(f"error_description={_quoted(description)}")
            headers.append((b"www-authenticate", ("DPoP " + ", ".join(dpop)).encode("latin-1", "replace")))
        return headers

    async def serve_metadata(self, scope: Scope, _receive: Receive, send: Send) -> bool:
        """Answer a GET of one of the metadata documents; False when `scope` is not one."""
        body = self.documents.get(scope.get("path", ""))
        if body is None:
            return False
        status = 200 if scope.get("method") in ("GET", "HEAD") else 405
        payload = body if status == 200 else b'{"ok": false, "error": "method_not_allowed"}'
        headers: Iterable[tuple[bytes, bytes]] = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode()),
            (b"cache-control", b"max-age=300"),
        ]
        await send({"type": "http.response.start", "status": status, "headers": list(headers)})
        await send({"type": "http.response.body", "body": payload if scope.get("method") != "HEAD" else b""})
        return True
