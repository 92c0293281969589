"""The TLS rule: every URL this package sends a request to is https, except loopback.

authlib's `is_secure_transport` decides (https, or http to `localhost` / a loopback address, RFC 8252
§7.3). It applies to the resource, its metadata, the authorization server's metadata and every
endpoint (authorization, token, registration, revocation), and it runs *before* the request, so a
plain-HTTP server elsewhere never sees a code, a verifier, a refresh token or a client secret.

The escape hatch for test rigs (`AGENT_SDK_OAUTH_INSECURE_TRANSPORT=1`, or authlib's own
`AUTHLIB_INSECURE_TRANSPORT`) is off by default and loud when on: each URL it lets through is logged
as a warning (once per URL and process).
"""

from __future__ import annotations

import functools
import logging
import os

from authlib.common.security import is_secure_transport

from .._exceptions import InsecureTransport
from .._shared import printable

__all__ = ["INSECURE_ENV", "insecure_transport_allowed", "insecure_transport_warning", "require_secure"]

INSECURE_ENV = "AGENT_SDK_OAUTH_INSECURE_TRANSPORT"
_log = logging.getLogger(__name__)
_warned: set[str] = set()


def insecure_transport_allowed() -> bool:
    """True when the test-rig escape hatch is on (either variable set to a non-empty value)."""
    return bool(os.environ.get(INSECURE_ENV) or os.environ.get("AUTHLIB_INSECURE_TRANSPORT"))


def insecure_transport_warning() -> str | None:
    """The sentence a command prints when the escape hatch is on, else None."""
    if not insecure_transport_allowed():
        return None
    return f"warning: {INSECURE_ENV} is set: OAuth may use plain http outside loopback"


@functools.lru_cache(maxsize=512)
def _secure(url: str) -> bool:
    # Cached: the bearer check runs on every request of an oauth connection, to a handful of URLs.
    return bool(is_secure_transport(url))


def require_secure(url: str, what: str) -> str:
    """`url` when it is https or loopback; raises `InsecureTransport` naming it (and `what` it is) otherwise."""
    hatch = insecure_transport_allowed()
    if not hatch and _secure(url):  # only asked with the hatch off, so authlib's own hatch cannot be cached
        return url
    shown = printable(url.split("?", 1)[0], 300)
    if not hatch:
        raise InsecureTransport(
            f"refusing the {what} {shown}: OAuth needs https except on loopback (127.0.0.1, ::1, localhost); "
            f"use the server's https URL ({INSECURE_ENV}=1 allows plain http for test rigs only)"
        )
    if not url.lower().startswith("https://") and shown not in _warned:
        _warned.add(shown)
        _log.warning("the OAuth TLS rule is off (%s): %s %s is used without TLS", INSECURE_ENV, what, shown)
    return url
