"""What a login leaves behind: the client registration and the tokens, keyed by connection and resource.

`Grant.to_json` / `Grant.from_json` are the one place tokens leave a `Secret`: every store persists
exactly this shape, so a record written by the file store can be upserted into the keyring or Redis.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from ._exceptions import StoreCorrupt
from ._shared import Secret

__all__ = ["ClientRegistration", "Grant", "StoreKey", "TokenSet", "check_holder"]

RECORD_VERSION = 1


class StoreKey(NamedTuple):
    """A record's address: the connection name, the resource URL it was granted for, and whose it is.

    `principal` is empty for the gateway's one grant of a connection, and a principal's id for that
    principal's own grant (`grants="per_principal"`, docs/oauth.md#per-user-grants). Stores file a grant
    under `holder` (`docs`, or `docs@<principal>`: a connection name never holds `@`), so one principal's
    grant can never be read under another's key.
    """

    connection: str
    resource: str
    principal: str = ""

    @property
    def holder(self) -> str:
        """The name a store files this grant under: the connection, or `connection@principal`."""
        return f"{self.connection}@{self.principal}" if self.principal else self.connection

    @classmethod
    def of_holder(cls, holder: str, resource: str) -> StoreKey:
        """The inverse of `holder` (the first `@` splits: a connection name has none)."""
        connection, _, principal = holder.partition("@")
        return cls(connection, resource, principal)

    def parts(self) -> list[str]:
        """The key as an index entry: `[connection, resource]`, plus the principal of a principal's grant."""
        return [self.connection, self.resource, self.principal] if self.principal else [self.connection, self.resource]

    def __str__(self) -> str:
        return f"{self.connection} ({self.resource})" + (f" of principal {self.principal}" if self.principal else "")


def check_holder(grant: Grant, key: StoreKey) -> Grant:
    """`grant`, when it was saved for `key`; a record filed under one key that names another (a principal's
    grant copied under someone else's key) is refused, never used. Raises `StoreCorrupt`."""
    if grant.key != key:
        raise StoreCorrupt(
            f"the grant stored for {key} was issued for another key ({grant.key.connection!r}"
            f"{', another principal' if grant.key.principal != key.principal else ''}); it is refused: delete it "
            f"and sign in again"
        )
    return grant


@dataclass(frozen=True, slots=True)
class ClientRegistration:
    """How this client identifies itself to one authorization server."""

    client_id: str
    client_secret: Secret | None = None
    """The client secret, or for `private_key_jwt` the PEM private key (such a client is never stored)."""
    token_endpoint_auth_method: str = "none"
    """`none`, `client_secret_basic`, `client_secret_post` or (client credentials only) `private_key_jwt`."""
    source: str = "dynamic"
    """`configured` (OAuthConfig), `metadata_document` (a client ID metadata URL) or `dynamic` (RFC 7591)."""
    redirect_uri: str | None = None
    """The loopback redirect registered with RFC 7591 (its port is reused when free)."""
    audience: str | None = None
    """`private_key_jwt`: the assertion's `aud` (the issuer). Not persisted."""
    assertion_alg: str | None = None
    """`private_key_jwt`: the signing algorithm (ES256, RS256, ...). Not persisted."""
    dpop_bound: bool = False
    """The registration response said `dpop_bound_access_tokens: true` (RFC 9449 §5.2): the authorization
    server refuses this client a token without a DPoP proof, so its grants are bound."""


@dataclass(frozen=True, slots=True)
class TokenSet:
    """A token response, with the expiry made absolute so that it survives a restart."""

    access_token: Secret
    refresh_token: Secret | None = None
    token_type: str = "Bearer"
    expires_at: float | None = None
    """Unix time the access token expires; None when the server did not say."""
    scope: str | None = None
    issued_at: float | None = None
    """Unix time the token was issued (lets a refresh margin scale with short-lived tokens)."""

    def expires_within(self, seconds: float, now: float | None = None) -> bool:
        """True when the access token expires within `seconds` (False when the expiry is unknown)."""
        if self.expires_at is None:
            return False
        return self.expires_at - seconds <= (time.time() if now is None else now)


@dataclass(frozen=True, slots=True)
class Grant:
    """Everything needed to call a resource and refresh without a new login, even after a restart."""

    key: StoreKey
    issuer: str
    token_endpoint: str
    client: ClientRegistration
    tokens: TokenSet | None = None
    resource_indicator: str = ""
    """The RFC 8707 `resource` value sent to the authorization server (the PRM `resource`)."""
    revocation_endpoint: str | None = None
    updated_at: float = field(default_factory=time.time)
    dead: str | None = None
    """Why the server refused this grant (`invalid_grant`, `invalid_client`); None while it is alive.
    A dead grant keeps no tokens: nothing is spent twice, and the next step is a new login."""
    dpop_key: Secret | None = None
    """RFC 9449: the private JWK this grant's tokens are bound to (`flows/_dpop.py`), kept like the tokens."""
    step_up: str | None = None
    """The scopes the next login must ask for (space-separated): those held and those a 403 `insufficient_scope`
    challenged (RFC 6750 §3.1, the MCP spec's step-up), kept until that login replaces this grant."""

    def with_tokens(self, tokens: TokenSet | None) -> Grant:
        """A copy holding `tokens` (alive again), stamped now."""
        return replace(self, tokens=tokens, dead=None, updated_at=time.time())

    def killed(self, reason: str) -> Grant:
        """A copy marked dead for `reason` (the server's error code), without tokens, stamped now."""
        return replace(self, tokens=None, dead=reason, updated_at=time.time())

    def __repr__(self) -> str:
        state = f"dead ({self.dead})" if self.dead else "tokens" if self.tokens else "registration only"
        return f"Grant({self.key!s}, issuer={self.issuer!r}, client_id={self.client.client_id!r}, {state})"

    def to_json(self) -> dict[str, Any]:
        """The persisted shape; secrets are revealed here and only here."""
        tokens = self.tokens
        return {
            "version": RECORD_VERSION,
            "connection": self.key.connection,
            "resource": self.key.resource,
            **({"principal": self.key.principal} if self.key.principal else {}),
            "resource_indicator": self.resource_indicator,
            "issuer": self.issuer,
            "token_endpoint": self.token_endpoint,
            "revocation_endpoint": self.revocation_endpoint,
            "updated_at": self.updated_at,
            "dead": self.dead,
            "dpop_key": self.dpop_key.reveal() if self.dpop_key else None,
            **({"step_up": self.step_up} if self.step_up else {}),
            "client": client_json(self.client),
            "tokens": None
            if tokens is None
            else {
                "access_token": tokens.access_token.reveal(),
                "refresh_token": tokens.refresh_token.reveal() if tokens.refresh_token else None,
                "token_type": tokens.token_type,
                "expires_at": tokens.expires_at,
                "scope": tokens.scope,
                "issued_at": tokens.issued_at,
            },
        }

    @classmethod
    def from_json(cls, data: object, where: str) -> Grant:
        """Parse a persisted record; raises `StoreCorrupt` naming `where` (never echoing the data)."""
        try:
            if not isinstance(data, dict):
                raise TypeError("not an object")
            record: dict[str, Any] = data
            if record.get("version") != RECORD_VERSION:
                raise ValueError("unknown version")
            client = client_from_json(record["client"])
            tokens_data = record.get("tokens")
            tokens: TokenSet | None = None
            if tokens_data is not None:
                if not isinstance(tokens_data, dict):
                    raise TypeError("tokens is not an object")
                td: dict[str, Any] = tokens_data
                refresh = td.get("refresh_token")
                expires_at = td.get("expires_at")
                if expires_at is not None and not isinstance(expires_at, int | float):
                    raise TypeError("expires_at is not a number")
                tokens = TokenSet(
                    access_token=Secret(text_field(td["access_token"])),
                    refresh_token=Secret(text_field(refresh)) if refresh else None,
                    token_type=text_field(td.get("token_type", "Bearer")),
                    expires_at=float(expires_at) if expires_at is not None else None,
                    scope=optional_text(td.get("scope")),
                    issued_at=float(td["issued_at"]) if isinstance(td.get("issued_at"), int | float) else None,
                )
            updated_at = record.get("updated_at", 0.0)
            return cls(
                key=StoreKey(
                    text_field(record["connection"]),
                    text_field(record["resource"]),
                    text_field(record.get("principal", "")),
                ),
                issuer=text_field(record["issuer"]),
                token_endpoint=text_field(record["token_endpoint"]),
                client=client,
                tokens=tokens,
                resource_indicator=text_field(record.get("resource_indicator", "")),
                revocation_endpoint=optional_text(record.get("revocation_endpoint")),
                updated_at=float(updated_at) if isinstance(updated_at, int | float) else 0.0,
                dead=optional_text(record.get("dead")),
                dpop_key=Secret(text_field(record["dpop_key"])) if record.get("dpop_key") else None,
                step_up=optional_text(record.get("step_up")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise StoreCorrupt(
                f"the token record in {where} is not valid ({type(exc).__name__}); "
                "delete it and log in again with `agent-sdk mcp oauth NAME`"
            ) from None


def client_json(client: ClientRegistration) -> dict[str, Any]:
    """A client registration as persisted (its secret revealed; the `private_key_jwt` fields are not kept)."""
    return {
        "client_id": client.client_id,
        "client_secret": client.client_secret.reveal() if client.client_secret else None,
        "token_endpoint_auth_method": client.token_endpoint_auth_method,
        "source": client.source,
        "redirect_uri": client.redirect_uri,
        **({"dpop_bound_access_tokens": True} if client.dpop_bound else {}),
    }


def client_from_json(data: object) -> ClientRegistration:
    """The inverse of `client_json`; raises `KeyError`, `TypeError` or `ValueError` for a malformed record."""
    if not isinstance(data, dict):
        raise TypeError("client is not an object")
    record: dict[str, Any] = data
    secret = record.get("client_secret")
    return ClientRegistration(
        client_id=text_field(record["client_id"]),
        client_secret=Secret(text_field(secret)) if secret else None,
        token_endpoint_auth_method=text_field(record.get("token_endpoint_auth_method", "none")),
        source=text_field(record.get("source", "dynamic")),
        redirect_uri=optional_text(record.get("redirect_uri")),
        dpop_bound=record.get("dpop_bound_access_tokens") is True,
    )


def text_field(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError("expected a string")
    return value


def optional_text(value: object) -> str | None:
    return None if value is None else text_field(value)
