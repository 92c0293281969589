"""Bounds on a JWT before anything parses it: its size, and how deeply its header and payload nest.

Python's `json` decoder recurses once per nesting level, so a token whose payload is `[[[[...` a few
thousand levels deep makes it raise `RecursionError` (a 500 and a traceback, before any signature is
checked). Access tokens (`oauth_tokens`) and DPoP proofs (`dpop`) are measured here first: a token over
`MAX_TOKEN_CHARS`, or a header or payload nesting over `MAX_JSON_DEPTH` levels, is refused with a
sentence. The depth is `json_depth`'s (the request bodies' measure: strings dropped, brackets counted,
no recursion); a segment that is not base64url is left for the JWS parser to refuse as it does.
"""

from __future__ import annotations

import base64
import binascii

from ..http._asgi import json_depth

__all__ = ["MAX_JSON_DEPTH", "MAX_TOKEN_CHARS", "jwt_too_large"]

MAX_TOKEN_CHARS = 16 * 1024
"""The longest token (or DPoP proof) parsed: well above any issuer's access token, below a header flood."""

MAX_JSON_DEPTH = 16
"""The deepest nesting of objects and arrays accepted in a JWT's header or payload (claims nest 2 or 3)."""


def jwt_too_large(token: str, what: str) -> str | None:
    """Why `token` (`what`: "the token", "the DPoP proof") is too large or too deeply nested to be parsed,
    or None when it may be. Not a JWS at all (no three segments, not base64url) is not this check's call."""
    if len(token) > MAX_TOKEN_CHARS:
        return (
            f"{what} is {len(token)} characters long; at most {MAX_TOKEN_CHARS} are accepted "
            "(ask its issuer for a smaller one)"
        )
    segments = token.split(".")
    if len(segments) != 3:
        return None
    for part, segment in zip(("header", "payload"), segments[:2], strict=False):
        try:
            raw = base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
        except (binascii.Error, ValueError):
            return None
        if raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH and json_depth(raw) > MAX_JSON_DEPTH:
            return f"{what}'s {part} nests JSON more than {MAX_JSON_DEPTH} levels deep; it is not a token we accept"
    return None
