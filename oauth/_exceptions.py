"""Errors of the oauth package: one root, a wire code on each class, a message that is one sentence.

    OAuthError                       oauth_error
    ├── InsecureTransport            insecure_transport    plain http outside loopback (refused unsent)
    ├── DiscoveryError               discovery_failed      no usable resource / authorization server metadata
    │   └── PkceUnsupported          pkce_unsupported      the server does not list S256 (MCP auth spec: refuse)
    ├── RegistrationError            registration_failed   RFC 7591 registration refused or unusable
    ├── AuthorizationError           authorization_failed  the redirect back from the browser is not acceptable
    │   ├── StateMismatch            state_mismatch        `state` differs from the one we sent
    │   ├── IssuerMismatch           issuer_mismatch       RFC 9207 `iss` differs from the discovered issuer
    │   ├── AuthorizationDenied      access_denied         the user or the server refused (error=... on the redirect)
    │   └── LoginTimeout             login_timeout         no redirect arrived in time
    ├── TokenError                   token_request_failed  the token endpoint refused or answered garbage
    │   ├── InvalidGrant             invalid_grant         the code or refresh token was rejected
    │   ├── InvalidClient            invalid_client        the server no longer knows (or accepts) this client
    │   ├── InvalidTarget            invalid_target        RFC 8693: the IdP issues no token for that resource
    │   ├── AssertionRefused         id_jag_refused        an ID-JAG for another authorization server (never sent)
    │   ├── DpopNonceLoop            dpop_nonce_loop       RFC 9449 §8: a fresh nonce was demanded again and again
    │   └── AuthorizationServerUnreachable  authorization_server_unreachable  the token endpoint did not answer
    ├── LoginRequired                login_required        no usable tokens; the fix is `agent-sdk mcp oauth NAME`
    │   └── CallerTokenRequired      caller_token_required a caller-credential connection called by no OAuth peer
    ├── InsufficientScope            insufficient_scope    step-up authorization did not satisfy the server
    ├── DpopMismatch                 dpop_mismatch         the resource refuses the binding `dpop=` forces
    └── StoreError                   store_error           a token store failed
        ├── StoreCorrupt             store_corrupt         the store holds something that is not ours
        └── KeyringUnavailable       keyring_unavailable   no OS keyring backend on this machine

Messages never contain a token, a client secret or a code: they name URLs, connection names and the
authorization server's own `error` / `error_description` (cut short).
"""

from __future__ import annotations

__all__ = [
    "AssertionRefused",
    "AuthorizationDenied",
    "AuthorizationError",
    "AuthorizationServerUnreachable",
    "CallerTokenRequired",
    "DiscoveryError",
    "DpopMismatch",
    "DpopNonceLoop",
    "InsecureTransport",
    "InsufficientScope",
    "InvalidClient",
    "InvalidGrant",
    "InvalidTarget",
    "IssuerMismatch",
    "KeyringUnavailable",
    "LoginRequired",
    "LoginTimeout",
    "OAuthError",
    "PkceUnsupported",
    "RegistrationError",
    "StateMismatch",
    "StoreCorrupt",
    "StoreError",
    "TokenError",
]


class OAuthError(Exception):
    """Root of the oauth package's errors; `str(exc)` is the sentence a user sees."""

    error = "oauth_error"


class InsecureTransport(OAuthError):
    """A URL this client would send OAuth traffic to is plain http outside loopback; refused before any request."""

    error = "insecure_transport"


class DiscoveryError(OAuthError):
    """Protected-resource or authorization-server metadata is missing, inconsistent or not JSON."""

    error = "discovery_failed"


class PkceUnsupported(DiscoveryError):
    """The authorization server does not advertise `S256` in `code_challenge_methods_supported`."""

    error = "pkce_unsupported"


class RegistrationError(OAuthError):
    """Dynamic client registration (RFC 7591) failed, or no way to identify the client exists."""

    error = "registration_failed"


class AuthorizationError(OAuthError):
    """The authorization redirect could not be accepted."""

    error = "authorization_failed"


class StateMismatch(AuthorizationError):
    """The redirect's `state` is not the one this login sent (a forged or stale redirect)."""

    error = "state_mismatch"


class IssuerMismatch(AuthorizationError):
    """RFC 9207: the redirect's `iss` is missing or differs from the discovered issuer (mix-up attack)."""

    error = "issuer_mismatch"


class AuthorizationDenied(AuthorizationError):
    """The redirect carried `error=...`: the user denied consent or the server refused the request."""

    error = "access_denied"


class LoginTimeout(AuthorizationError):
    """The redirect never came back to the loopback listener within the timeout."""

    error = "login_timeout"


class TokenError(OAuthError):
    """The token endpoint refused the request or answered something that is not a token response."""

    error = "token_request_failed"


class InvalidGrant(TokenError):
    """The authorization code or refresh token was rejected (`invalid_grant`)."""

    error = "invalid_grant"


class InvalidClient(TokenError):
    """The token endpoint refused the client itself (`invalid_client`): a forgotten or revoked registration."""

    error = "invalid_client"


class InvalidTarget(TokenError):
    """RFC 8693 §2.2.2: the identity provider will not issue a token for the requested resource or audience."""

    error = "invalid_target"


class AssertionRefused(TokenError):
    """The identity provider's ID-JAG is not one for the upstream's authorization server: it is never sent there."""

    error = "id_jag_refused"


class DpopNonceLoop(TokenError):
    """RFC 9449 §8/§9: the server demanded a fresh DPoP nonce again right after one was sent: given up, not looped."""

    error = "dpop_nonce_loop"


class AuthorizationServerUnreachable(TokenError):
    """The token endpoint did not answer (refused, unreachable, timed out): an outage, not a refusal.

    The grant is untouched; the same refresh works once the server is back.
    """

    error = "authorization_server_unreachable"


class LoginRequired(OAuthError):
    """No usable tokens for the connection, and this context may not start a browser login.

    `principal` names whose own grant is missing (`StoreKey.principal`); empty for the gateway's one grant."""

    error = "login_required"

    def __init__(self, message: str, principal: str = "") -> None:
        super().__init__(message)
        self.principal = principal


class CallerTokenRequired(LoginRequired):
    """A connection that acts with each caller's own token (token exchange, ID-JAG) was called without one."""

    error = "caller_token_required"


class DpopMismatch(OAuthError):
    """RFC 9449: the resource's 401 is about the token's binding, and the connection's `dpop=` forces that
    binding, so a new login would not help; the message names the setting to change."""

    error = "dpop_mismatch"


class InsufficientScope(OAuthError):
    """The resource answered 403 insufficient_scope and no login may run here (or the step-up limit was reached).

    `principal` names whose own grant lacks the scope (`StoreKey.principal`): that principal signs in again."""

    error = "insufficient_scope"

    def __init__(self, message: str, principal: str = "") -> None:
        super().__init__(message)
        self.principal = principal


class StoreError(OAuthError):
    """A token store could not be read or written."""

    error = "store_error"


class StoreCorrupt(StoreError):
    """The store holds data that is not a valid token record."""

    error = "store_corrupt"


class KeyringUnavailable(StoreError):
    """`keyring` found no usable backend (typical on a headless box)."""

    error = "keyring_unavailable"
