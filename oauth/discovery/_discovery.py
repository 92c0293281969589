"""Finding the authorization server of an MCP resource (MCP auth spec 2025-11-25, "Authorization Server Discovery").

Hand-written rather than taken from authlib (which has no RFC 9728 client) or the MCP SDK (whose
provider never refuses a server without S256): the order of URLs, the issuer check and the refusals
are the security properties this package promises, so they live here in one readable place.

Order:
1. the `resource_metadata` URL of a 401's `WWW-Authenticate: Bearer` challenge;
2. RFC 9728 §3.1 path-inserted well-known URL (`/.well-known/oauth-protected-resource/<path>`);
3. the root well-known URL (`/.well-known/oauth-protected-resource`).
Then for the first authorization server it lists, RFC 8414 §3.1 / OIDC Discovery in the spec's order
(path-inserted OAuth, path-inserted OIDC, path-appended OIDC; or for a bare origin OAuth then OIDC),
checking `issuer` exactly (RFC 8414 §3.3) and refusing a server that does not list `S256`. A
2025-03-26 server that publishes no metadata at all gets that spec's default endpoints at its origin
(`/authorize`, `/token`, `/register`).

authlib builds the RFC 8414 well-known URLs (`get_well_known_url`) and validates the metadata
(`AuthorizationServerMetadata`); every URL is held to the TLS rule (`_transport.require_secure`)
before it is fetched or used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import cachetools
import httpx2
import pydantic
from authlib.oauth2.rfc8414 import AuthorizationServerMetadata, get_well_known_url

from .._exceptions import DiscoveryError, PkceUnsupported
from .._shared import printable
from ._transport import insecure_transport_allowed, require_secure

__all__ = [
    "Challenge",
    "Discovery",
    "ResourceMetadata",
    "ServerMetadata",
    "parse_www_authenticate",
]

_PARAM = re.compile(r'([A-Za-z_][A-Za-z0-9_-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')


@dataclass(frozen=True, slots=True)
class Challenge:
    """The parameters of a `WWW-Authenticate: Bearer ...` challenge (RFC 6750 §3, RFC 9728 §5.1)."""

    resource_metadata: str | None = None
    scope: str | None = None
    error: str | None = None
    error_description: str | None = None
    dpop: bool = False
    """The header also (or only) challenges the `DPoP` scheme (RFC 9449 §7.1): the resource takes DPoP-bound
    tokens, and asks for them when it challenges nothing else."""
    bearer: bool = True
    """The header challenges the `Bearer` scheme (RFC 6750 §3): the resource takes unbound tokens."""


_DPOP_SCHEME = re.compile(r"(?i)(?:^|,)\s*dpop(?=\s|,|$)")
"""A `DPoP` challenge: the scheme name at the start of the header or after a comma (never inside a quoted
value such as `error="use_dpop_nonce"`)."""


def parse_www_authenticate(header: str | None) -> Challenge | None:
    """The Bearer challenge in a `WWW-Authenticate` value (else its DPoP challenge), or None when there is
    neither."""
    if not header:
        return None
    schemes = _unquoted(header)
    dpop = _DPOP_SCHEME.search(schemes)
    match = _BEARER_SCHEME.search(schemes)
    if match is not None:
        return _challenge(header[match.end() :], dpop=dpop is not None, bearer=True)
    if dpop is not None:
        return _challenge(header[dpop.end() :], dpop=True, bearer=False)
    return None


_BEARER_SCHEME = re.compile(r"(?i)(?:^|,)\s*bearer(?=\s|,|$)")


def _unquoted(header: str) -> str:
    """`header` with its quoted strings blanked (same length), so that a scheme name is never found inside a
    value and positions still match `header`."""
    return re.sub(r'"(?:[^"\\]|\\.)*"', lambda m: '"' + " " * (len(m[0]) - 2) + '"', header)


def _challenge(rest: str, *, dpop: bool, bearer: bool) -> Challenge:
    params: dict[str, str] = {}
    for name, quoted, bare in _PARAM.findall(rest):
        params.setdefault(name.lower(), re.sub(r"\\(.)", r"\1", quoted) if quoted else bare)
    return Challenge(
        resource_metadata=params.get("resource_metadata"),
        scope=params.get("scope"),
        error=params.get("error"),
        error_description=params.get("error_description"),
        dpop=dpop,
        bearer=bearer,
    )


class _PrmWire(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore")
    resource: str
    authorization_servers: list[str] = pydantic.Field(min_length=1)
    scopes_supported: list[str] | None = None
    dpop_bound_access_tokens_required: bool = False


class _AsmWire(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore")
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    registration_endpoint: str | None = None
    revocation_endpoint: str | None = None
    scopes_supported: list[str] | None = None
    token_endpoint_auth_methods_supported: list[str] | None = None
    code_challenge_methods_supported: list[str] | None = None
    client_id_metadata_document_supported: bool = False
    authorization_response_iss_parameter_supported: bool = False
    grant_types_supported: list[str] | None = None
    token_endpoint_auth_signing_alg_values_supported: list[str] | None = None
    dpop_signing_alg_values_supported: list[str] | None = None


@dataclass(frozen=True, slots=True)
class ResourceMetadata:
    """RFC 9728 protected resource metadata, and where it was read."""

    resource: str
    authorization_servers: tuple[str, ...]
    scopes_supported: tuple[str, ...] | None
    url: str
    dpop_bound_access_tokens_required: bool = False
    """RFC 9728 §2: the resource takes DPoP-bound tokens only (RFC 9449): a new grant for it is bound."""


@dataclass(frozen=True, slots=True)
class ServerMetadata:
    """RFC 8414 authorization server metadata (the fields this client uses), and where it was read."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    registration_endpoint: str | None
    revocation_endpoint: str | None
    scopes_supported: tuple[str, ...] | None
    token_endpoint_auth_methods_supported: tuple[str, ...]
    client_id_metadata_document_supported: bool
    iss_parameter_supported: bool
    url: str
    """Where it was read; empty for the 2025-03-26 default endpoints."""
    dpop_signing_alg_values_supported: tuple[str, ...] | None = None
    """RFC 9449 §5.1: the proof algorithms the server takes; a server that lists ES256 gets DPoP-bound grants."""


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


def _path(url: str) -> str:
    return urlsplit(url).path.rstrip("/")


def resource_metadata_urls(resource_url: str, challenge: Challenge | None) -> list[str]:
    """Where to look for protected resource metadata, in the spec's order."""
    urls: list[str] = []
    if challenge is not None and challenge.resource_metadata:
        urls.append(challenge.resource_metadata)
    path = _path(resource_url)
    if path:
        urls.append(f"{_origin(resource_url)}/.well-known/oauth-protected-resource{path}")
    urls.append(f"{_origin(resource_url)}/.well-known/oauth-protected-resource")
    return list(dict.fromkeys(urls))


def server_metadata_urls(issuer: str) -> list[str]:
    """Where to look for authorization server metadata, in the MCP spec's order (RFC 8414 §3.1, OIDC)."""
    oauth = get_well_known_url(issuer, external=True)
    oidc_inserted = get_well_known_url(issuer, external=True, suffix="openid-configuration")
    if _path(issuer):
        return [oauth, oidc_inserted, f"{issuer.rstrip('/')}/.well-known/openid-configuration"]
    return [oauth, oidc_inserted]


def resource_matches(advertised: str, resource_url: str, metadata_url: str = "") -> bool:
    """RFC 9728 §3.3: the metadata's `resource` must be the resource identifier its well-known URL was
    derived from: this very URL (scheme and host compared without case, an empty path as `/`), or,
    for metadata read at the origin's root well-known URL, the origin itself. Any other parent path
    is another resource."""
    a, r = urlsplit(advertised), urlsplit(resource_url)
    if (a.scheme.lower(), a.netloc.lower()) != (r.scheme.lower(), r.netloc.lower()):
        return False
    if (a.path or "/", a.query) == (r.path or "/", r.query):
        return True
    at_root = metadata_url == f"{_origin(resource_url)}/.well-known/oauth-protected-resource"
    return at_root and a.path in ("", "/") and not a.query


def fallback_metadata(issuer: str) -> ServerMetadata:
    """2025-03-26 "Fallbacks for Servers without Metadata Discovery": the default endpoints at the origin."""
    origin = _origin(issuer)
    return ServerMetadata(
        issuer=origin,
        authorization_endpoint=require_secure(f"{origin}/authorize", "authorization endpoint"),
        token_endpoint=require_secure(f"{origin}/token", "token endpoint"),
        registration_endpoint=f"{origin}/register",
        revocation_endpoint=None,
        scopes_supported=None,
        token_endpoint_auth_methods_supported=("client_secret_basic",),
        client_id_metadata_document_supported=False,
        iss_parameter_supported=False,
        url="",
    )


_RFC8414_CHECKS = (
    "validate_issuer",
    "validate_authorization_endpoint",
    "validate_token_endpoint",
    "validate_registration_endpoint",
    "validate_revocation_endpoint",
    "validate_scopes_supported",
    "validate_token_endpoint_auth_methods_supported",
    "validate_code_challenge_methods_supported",
)


def _validate_rfc8414(data: dict[str, object], url: str) -> None:
    """authlib's RFC 8414 field checks; our TLS rule (already applied) decides about http."""
    metadata = AuthorizationServerMetadata(data)
    for check in _RFC8414_CHECKS:
        try:
            getattr(metadata, check)()
        except ValueError as exc:
            if "https" in str(exc) and insecure_transport_allowed():
                continue
            raise DiscoveryError(f"the authorization server metadata at {url} is not valid: {printable(exc)}") from None


class Discovery:
    """Discovery with a TTL cache (cachetools) so a refresh or step-up does not refetch metadata."""

    def __init__(self, http: httpx2.AsyncClient, *, ttl: float = 300.0) -> None:
        self._http = http
        self._cache: cachetools.TTLCache[tuple[str, str, str], object] = cachetools.TTLCache(maxsize=256, ttl=ttl)

    async def resource_metadata(self, resource_url: str, challenge: Challenge | None) -> ResourceMetadata | None:
        """The resource's metadata, or None when it publishes none (a 2025-03-26 style server)."""
        cache_key = (
            "prm",
            resource_url,
            challenge.resource_metadata if challenge and challenge.resource_metadata else "",
        )
        cached = self._cache.get(cache_key)
        if isinstance(cached, ResourceMetadata):
            return cached
        problems: list[str] = []
        for url in resource_metadata_urls(resource_url, challenge):
            data = await self._get_json(url, problems)
            if data is None:
                continue
            try:
                wire = _PrmWire.model_validate(data)
            except pydantic.ValidationError:
                problems.append(f"{url} is not protected resource metadata")
                continue
            if not resource_matches(wire.resource, resource_url, url):
                raise DiscoveryError(
                    f"the protected resource metadata at {url} is for {printable(wire.resource)}, not "
                    f"{resource_url}; refusing to authorize for a different resource"
                )
            for server in wire.authorization_servers:
                require_secure(server, "authorization server")
            found = ResourceMetadata(
                resource=wire.resource,
                authorization_servers=tuple(wire.authorization_servers),
                scopes_supported=tuple(wire.scopes_supported) if wire.scopes_supported is not None else None,
                url=url,
                dpop_bound_access_tokens_required=wire.dpop_bound_access_tokens_required,
            )
            self._cache[cache_key] = found
            return found
        if any("not protected resource metadata" in p or "not JSON" in p for p in problems):
            raise DiscoveryError(f"no usable protected resource metadata for {resource_url}: {'; '.join(problems)}")
        return None

    async def server_metadata(self, issuer: str, *, legacy: bool = False) -> ServerMetadata:
        """The authorization server's metadata; raises `InsecureTransport`, `DiscoveryError`, `PkceUnsupported`.

        `legacy`: a 2025-03-26 server without resource metadata, whose authorization server is found
        at its origin; its metadata may name another issuer (e.g. `<origin>/oauth`), so the RFC 8414
        §3.3 equality check does not apply, and when it publishes no metadata at all (every URL
        answers 404) its default endpoints are used. S256 is still required where metadata exists.
        """
        cached = self._cache.get(("asm", issuer, ""))
        if isinstance(cached, ServerMetadata):
            return cached
        problems: list[str] = []
        for url in server_metadata_urls(issuer):
            data = await self._get_json(url, problems)
            if data is None:
                continue
            try:
                wire = _AsmWire.model_validate(data)
            except pydantic.ValidationError:
                problems.append(f"{url} is not authorization server metadata")
                continue
            if not legacy and wire.issuer != issuer:
                raise DiscoveryError(
                    f"the metadata at {url} names the issuer {printable(wire.issuer)}, not {issuer} (RFC 8414 "
                    "§3.3); refusing a server that does not identify as itself"
                )
            for name in ("issuer", "authorization_endpoint", "token_endpoint"):
                require_secure(getattr(wire, name), name.replace("_", " "))
            for name in ("registration_endpoint", "revocation_endpoint"):
                if getattr(wire, name):
                    require_secure(getattr(wire, name), name.replace("_", " "))
            _validate_rfc8414(data, url)  # pyright: ignore[reportArgumentType]
            if "S256" not in (wire.code_challenge_methods_supported or []):
                raise PkceUnsupported(
                    f"the authorization server {printable(issuer)} does not list S256 in "
                    "code_challenge_methods_supported; "
                    "the MCP authorization spec requires PKCE with S256, so this client refuses it"
                )
            found = ServerMetadata(
                issuer=wire.issuer,
                authorization_endpoint=wire.authorization_endpoint,
                token_endpoint=wire.token_endpoint,
                registration_endpoint=wire.registration_endpoint,
                revocation_endpoint=wire.revocation_endpoint,
                scopes_supported=tuple(wire.scopes_supported) if wire.scopes_supported is not None else None,
                token_endpoint_auth_methods_supported=tuple(
                    wire.token_endpoint_auth_methods_supported or ("client_secret_basic",)
                ),
                client_id_metadata_document_supported=wire.client_id_metadata_document_supported,
                iss_parameter_supported=wire.authorization_response_iss_parameter_supported,
                url=url,
                dpop_signing_alg_values_supported=tuple(wire.dpop_signing_alg_values_supported)
                if wire.dpop_signing_alg_values_supported is not None
                else None,
            )
            self._cache[("asm", issuer, "")] = found
            return found
        if legacy and problems and all(p.endswith("HTTP 404") for p in problems):
            found = fallback_metadata(issuer)
            self._cache[("asm", issuer, "")] = found
            return found
        detail = f": {'; '.join(problems)}" if problems else ""
        raise DiscoveryError(f"found no authorization server metadata for {issuer}{detail}")

    async def _get_json(self, url: str, problems: list[str]) -> object | None:
        require_secure(url, "metadata URL")
        try:
            response = await self._http.get(url, headers={"Accept": "application/json"})
        except httpx2.HTTPError as exc:
            raise DiscoveryError(f"cannot reach {url} ({type(exc).__name__})") from None
        if response.status_code != 200:
            problems.append(f"{url} answered HTTP {response.status_code}")
            return None
        try:
            return response.json()
        except ValueError:
            problems.append(f"{url} answered something that is not JSON")
            return None
