"""Machine-to-machine: the client credentials grant (RFC 6749 §4.4) for a connection that logs in as
the deployment itself, no person and no browser.

`OAuthConfig(grant="client_credentials", client_id=..., client_secret_env=...)` authenticates with
the secret (`client_secret_basic`, or `client_secret_post` when that is all the server takes);
`private_key_env=...` instead signs an RFC 7523 assertion (`private_key_jwt`, the key a PEM in that
variable, its algorithm from the key or `assertion_alg`). The secret and the key come from the
environment every time and are never written to a store: the stored grant holds the token only.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace

import httpx2
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from .._config import OAuthConfig
from .._exceptions import RegistrationError
from .._grant import ClientRegistration, Grant, StoreKey
from .._shared import Secret
from ..discovery._discovery import Challenge, Discovery, ServerMetadata
from ..stores._store import TokenStore
from ._dpop import binding, bound_key, new_key
from ._login import choose_scopes, probe_challenge
from ._tokens import client_credentials_token

__all__ = ["machine_client", "machine_login"]

_CURVES = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}


def _env(name: str, what: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise RegistrationError(f"the {what} variable {name} is not set; export it before the connection is used")
    return value


def _alg_of(pem: str, name: str) -> str:
    try:
        key = load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError):
        raise RegistrationError(f"{name} does not hold an unencrypted PEM private key") from None
    if isinstance(key, rsa.RSAPrivateKey):
        return "RS256"
    if isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name in _CURVES:
        return _CURVES[key.curve.name]
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return "EdDSA"
    raise RegistrationError(f"the key in {name} is of a kind private_key_jwt cannot sign with; use RSA, EC or Ed25519")


def machine_client(config: OAuthConfig, asm: ServerMetadata) -> ClientRegistration:
    """The deployment's own client from the definition and the environment; raises `RegistrationError`."""
    if not config.client_id:
        raise RegistrationError(f"grant={config.grant!r} needs client_id=... (the client registered for it)")
    if config.private_key_env:
        pem = _env(config.private_key_env, "private key")
        alg = config.assertion_alg or _alg_of(pem, config.private_key_env)
        return ClientRegistration(
            config.client_id, Secret(pem), "private_key_jwt", "configured", audience=asm.issuer, assertion_alg=alg
        )
    if config.client_secret_env:
        secret = Secret(_env(config.client_secret_env, "client secret"))
        supported = asm.token_endpoint_auth_methods_supported
        method = (
            "client_secret_post"
            if "client_secret_basic" not in supported and ("client_secret_post" in supported)
            else "client_secret_basic"
        )
        return ClientRegistration(config.client_id, secret, method, "configured")
    raise RegistrationError(
        f"grant={config.grant!r} needs client_secret_env=... or private_key_env=... (the variable holding the "
        "client's secret or PEM private key)"
    )


async def machine_login(
    connection: str,
    resource_url: str,
    config: OAuthConfig,
    store: TokenStore,
    *,
    http: httpx2.AsyncClient,
    discovery: Discovery,
    challenge: Challenge | None = None,
    scopes: Sequence[str] | None = None,
) -> Grant:
    """Discover the authorization server as a login does, then ask for a client credentials token and
    save it (without the client's secret). Raises `OAuthError` subclasses."""
    if challenge is None:
        challenge = await probe_challenge(http, resource_url)
    prm = await discovery.resource_metadata(resource_url, challenge)
    issuer = prm.authorization_servers[0] if prm else resource_url
    asm = await discovery.server_metadata(issuer, legacy=prm is None)
    resource = prm.resource if prm else resource_url
    client = machine_client(config, asm)
    scope = choose_scopes(scopes, challenge, prm, config)
    dpop = new_key(binding(config.dpop, challenge, prm, client))  # RFC 9449: a key of this grant's own, if asked
    tokens = await client_credentials_token(http, asm.token_endpoint, client, scope=scope, resource=resource, dpop=dpop)
    kept = replace(client, client_secret=None, audience=None, assertion_alg=None)
    grant = Grant(
        StoreKey(connection, resource_url),
        asm.issuer,
        asm.token_endpoint,
        kept,
        tokens,
        resource,
        dpop_key=bound_key(tokens.token_type, dpop),
    )
    await store.save(grant)
    return grant
