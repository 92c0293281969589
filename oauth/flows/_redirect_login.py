"""A login whose redirect comes back to a web route instead of a loopback listener, in two steps.

`start_login` runs discovery, picks the client (the definition's, a stored registration made for
this same redirect URI, or a new registration) and answers a `LoginStart`: the authorization URL to
send the browser to, and what `finish_login` needs when the redirect arrives. Keep it on the server:
it holds the PKCE verifier. `LoginStart.to_json` / `from_json` carry it between the replicas of a
deployment (the gateway seals that JSON with its deployment key before it leaves the process).
`finish_login` checks the redirect (`state`, RFC 9207 `iss`, an error),
exchanges the code and saves the grant. The CLI's `login` runs the same pieces (`_login.py`) with a
loopback listener in between.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import httpx2
from authlib.common.security import generate_token

from .._config import OAuthConfig
from .._exceptions import StoreCorrupt
from .._grant import ClientRegistration, Grant, StoreKey, client_from_json, client_json, optional_text, text_field
from .._shared import Secret
from ..discovery._discovery import Challenge, ServerMetadata
from ..stores._store import TokenStore
from ._dpop import Binding, binding
from ._login import authorization_url, check_redirect, choose_scopes, declared_client, discover, redeem
from ._registration import register_client

__all__ = ["LoginStart", "finish_login", "start_login"]


@dataclass(frozen=True, slots=True)
class LoginStart:
    """One started login, to find again by its `state` when the redirect arrives (never shown to anyone)."""

    key: StoreKey
    server: ServerMetadata
    client: ClientRegistration
    redirect_uri: str
    resource: str
    state: Secret
    verifier: Secret
    authorization_url: str = field(repr=False)
    """Where to send the browser: PKCE S256, `state`, RFC 8707 `resource`, the chosen scopes."""
    bind: Binding = "off"
    """Whether the grant's tokens are to be DPoP-bound (`_dpop.binding`, decided at discovery)."""

    def to_json(self) -> dict[str, Any]:
        """Everything `finish_login` needs, as JSON; the verifier, `state` and any client secret are revealed
        here, so seal or encrypt it before it leaves the process."""
        server = self.server
        return {
            "version": _LOGIN_VERSION,
            "connection": self.key.connection,
            "resource_url": self.key.resource,
            "principal": self.key.principal,
            "server": {
                "issuer": server.issuer,
                "authorization_endpoint": server.authorization_endpoint,
                "token_endpoint": server.token_endpoint,
                "registration_endpoint": server.registration_endpoint,
                "revocation_endpoint": server.revocation_endpoint,
                "scopes_supported": None if server.scopes_supported is None else list(server.scopes_supported),
                "token_endpoint_auth_methods_supported": list(server.token_endpoint_auth_methods_supported),
                "client_id_metadata_document_supported": server.client_id_metadata_document_supported,
                "iss_parameter_supported": server.iss_parameter_supported,
                "url": server.url,
                "dpop_signing_alg_values_supported": None
                if server.dpop_signing_alg_values_supported is None
                else list(server.dpop_signing_alg_values_supported),
            },
            "client": {
                **client_json(self.client),
                "audience": self.client.audience,
                "assertion_alg": self.client.assertion_alg,
            },
            "redirect_uri": self.redirect_uri,
            "resource": self.resource,
            "state": self.state.reveal(),
            "verifier": self.verifier.reveal(),
            "authorization_url": self.authorization_url,
            "bind": self.bind,
        }

    @classmethod
    def from_json(cls, data: object, where: str) -> LoginStart:
        """The inverse of `to_json`, secrets wrapped in `Secret` again; raises `StoreCorrupt` naming `where`
        (never echoing the data)."""
        try:
            record = _object(data)
            if record.get("version") != _LOGIN_VERSION:
                raise ValueError("unknown version")
            server = _object(record["server"])
            scopes = server["scopes_supported"]
            dpop_algs = server.get("dpop_signing_alg_values_supported")
            client = _object(record["client"])
            return cls(
                key=StoreKey(
                    text_field(record["connection"]),
                    text_field(record["resource_url"]),
                    text_field(record.get("principal", "")),
                ),
                server=ServerMetadata(
                    issuer=text_field(server["issuer"]),
                    authorization_endpoint=text_field(server["authorization_endpoint"]),
                    token_endpoint=text_field(server["token_endpoint"]),
                    registration_endpoint=optional_text(server["registration_endpoint"]),
                    revocation_endpoint=optional_text(server["revocation_endpoint"]),
                    scopes_supported=None if scopes is None else _texts(scopes),
                    token_endpoint_auth_methods_supported=_texts(server["token_endpoint_auth_methods_supported"]),
                    client_id_metadata_document_supported=_flag(server["client_id_metadata_document_supported"]),
                    iss_parameter_supported=_flag(server["iss_parameter_supported"]),
                    url=text_field(server["url"]),
                    # Absent in a login started by an older version: no DPoP binding for it.
                    dpop_signing_alg_values_supported=None if dpop_algs is None else _texts(dpop_algs),
                ),
                client=replace(
                    client_from_json(client),
                    audience=optional_text(client.get("audience")),
                    assertion_alg=optional_text(client.get("assertion_alg")),
                ),
                redirect_uri=text_field(record["redirect_uri"]),
                resource=text_field(record["resource"]),
                state=Secret(text_field(record["state"])),
                verifier=Secret(text_field(record["verifier"])),
                authorization_url=text_field(record["authorization_url"]),
                bind=_binding(record.get("bind", "off")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise StoreCorrupt(
                f"the pending login in {where} is not valid ({type(exc).__name__}); start the login again"
            ) from None


_LOGIN_VERSION = 1


def _object(value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError("expected an object")
    return value


def _texts(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise TypeError("expected a list")
    return tuple(text_field(item) for item in value)


def _binding(value: object) -> Binding:
    if value not in ("off", "asked", "required"):
        raise ValueError("unknown DPoP binding")
    return value  # one of the three, checked above


def _flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError("expected true or false")
    return value


async def start_login(
    connection: str,
    resource_url: str,
    config: OAuthConfig,
    store: TokenStore,
    *,
    redirect_uri: str,
    http: httpx2.AsyncClient,
    challenge: Challenge | None = None,
    principal: str = "",
    authorization_server: str | None = None,
) -> LoginStart:
    """Discovery and the client for a login that comes back to `redirect_uri`; with `principal`, a login
    for that principal's own grant (`StoreKey.principal`), which `finish_login` saves under its key.
    `authorization_server`: skip the resource's discovery and log in at this issuer (`discover`).

    Raises `InsecureTransport`, `DiscoveryError`, `PkceUnsupported`, `RegistrationError`, `StoreError`."""
    found = await discover(http, resource_url, challenge, authorization_server=authorization_server)
    asm = found.asm
    key = StoreKey(connection, resource_url, principal)
    client = declared_client(config, asm)
    previous = await store.load(key)
    if client is None:
        if (
            previous is not None
            and previous.issuer == asm.issuer
            and previous.client.source == "dynamic"
            and previous.client.redirect_uri == redirect_uri
            and previous.dead != "invalid_client"
        ):
            client = previous.client
    if client is None:
        client = await register_client(http, asm, redirect_uri, config)
    state, verifier = generate_token(32), generate_token(64)
    scope = choose_scopes(None, found.challenge, found.prm, config, previous)
    url = authorization_url(asm, client, redirect_uri, state, verifier, found.resource, scope, config)
    bind = binding(config.dpop, found.challenge, found.prm, client)
    return LoginStart(key, asm, client, redirect_uri, found.resource, Secret(state), Secret(verifier), url, bind)


async def finish_login(
    start: LoginStart, params: dict[str, str], store: TokenStore, *, http: httpx2.AsyncClient
) -> Grant:
    """Check the redirect's query `params` against `start`, exchange the code and save the grant.

    Raises `StateMismatch`, `IssuerMismatch`, `AuthorizationDenied`, `TokenError`, `StoreError`."""
    code = check_redirect(params, start.state.reveal(), start.server)
    return await redeem(
        http,
        store,
        start.key,
        start.server,
        start.client,
        code,
        start.redirect_uri,
        start.verifier.reveal(),
        start.resource,
        start.bind,
    )
