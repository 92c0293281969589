"""How a connection asks for OAuth: the `OAuthConfig` a definition file passes as `oauth=`."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["OAuthConfig"]


@dataclass(frozen=True, slots=True)
class OAuthConfig:
    """OAuth settings for one connection; `oauth=True` means `OAuthConfig()`.

    Secrets never live in definition files: a pre-registered confidential client names the
    environment variable that holds its secret (`client_secret_env`), not the secret itself.
    """

    scopes: tuple[str, ...] = ()
    """Scopes to request when the server's 401 / metadata do not say (MCP auth spec scope order)."""
    client_id: str | None = None
    """A pre-registered client id; without it the client uses a metadata document URL or RFC 7591."""
    client_secret_env: str | None = None
    """Environment variable holding the pre-registered client's secret (confidential clients only)."""
    client_metadata_url: str | None = None
    """An HTTPS URL of a client ID metadata document, used when the server supports it."""
    client_name: str = "agent-sdk"
    """The `client_name` sent with dynamic registration."""
    redirect_port: int | None = None
    """A fixed loopback port for the redirect listener; random when None."""
    extra_authorize_params: dict[str, str] = field(default_factory=dict[str, str])
    """Extra parameters for the authorization request (e.g. `prompt`)."""
    grant: str = "authorization_code"
    """`authorization_code` (a person logs in with PKCE), `client_credentials` (the deployment itself,
    machine to machine: needs `client_id` and `client_secret_env` or `private_key_env`), or one of the
    caller's own credential (docs/oauth.md): `token_exchange` (RFC 8693 at the caller's IdP; `client_id` is
    the gateway's client there) and `id_jag` (an ID-JAG from the caller's IdP redeemed at the upstream's
    authorization server; `client_id` is the gateway's client there, `idp_client_id` at the IdP)."""
    private_key_env: str | None = None
    """`client_credentials` with `private_key_jwt` (RFC 7523): the variable holding the PEM private key."""
    assertion_alg: str | None = None
    """The `private_key_jwt` signing algorithm; by default from the key (RS256, ES256, ES384, ES512, EdDSA)."""
    audience: str | None = None
    """`token_exchange`: an RFC 8693 `audience` to ask for beside the upstream's `resource` (default: none)."""
    actor_token_env: str | None = None
    """`token_exchange` / `id_jag`: a variable holding the gateway's own token, sent as RFC 8693 `actor_token`."""
    idp_client_id: str | None = None
    """`id_jag`: the gateway's client at the caller's identity provider."""
    idp_client_secret_env: str | None = None
    """`id_jag`: the variable holding that client's secret."""
    dpop: bool | None = None
    """RFC 9449 binding of new grants: None (default) binds only where the upstream asks for it (its RFC 9728
    `dpop_bound_access_tokens_required`, or a `DPoP` challenge in its 401); True always binds (a Bearer answer
    from the authorization server is refused); False never binds (docs/oauth.md, "DPoP-bound grants")."""
