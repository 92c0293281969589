"""RFC 7591 dynamic client registration: a public native client with a loopback redirect URI."""

from __future__ import annotations

from typing import Any

import httpx2
import pydantic

from .._config import OAuthConfig
from .._exceptions import RegistrationError
from .._grant import ClientRegistration
from .._shared import Secret, printable
from ..discovery._discovery import ServerMetadata
from ..discovery._transport import require_secure

__all__ = ["register_client"]


class _RegistrationWire(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore")
    client_id: str = pydantic.Field(min_length=1)
    client_secret: str | None = None
    token_endpoint_auth_method: str | None = None
    dpop_bound_access_tokens: bool | None = None


async def register_client(
    http: httpx2.AsyncClient, asm: ServerMetadata, redirect_uri: str, config: OAuthConfig
) -> ClientRegistration:
    """Register this client; raises `RegistrationError` when the server cannot or will not, and
    `InsecureTransport` (before sending) for a plain-http endpoint outside loopback."""
    if asm.registration_endpoint is None:
        raise RegistrationError(
            f"{printable(asm.issuer)} does not offer dynamic client registration; register a client there and set "
            "OAuthConfig(client_id=..., client_secret_env=...) in the connection definition"
        )
    body: dict[str, Any] = {
        "client_name": config.client_name,
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        # OIDC Registration: a native app's loopback redirect may use any port (RFC 8252 §7.3), so a
        # stored registration survives the next login picking another free port.
        "application_type": "native",
    }
    require_secure(asm.registration_endpoint, "registration endpoint")
    try:
        response = await http.post(asm.registration_endpoint, json=body, headers={"Accept": "application/json"})
    except httpx2.HTTPError as exc:
        raise RegistrationError(f"cannot reach {asm.registration_endpoint} ({type(exc).__name__})") from None
    try:
        data: Any = response.json()
    except ValueError:
        data = None
    if response.status_code not in (200, 201):
        code = data.get("error") if isinstance(data, dict) else None
        described = data.get("error_description") if isinstance(data, dict) else None
        detail = f": {printable(code, 60)}" + (f" ({printable(described)})" if described else "") if code else ""
        raise RegistrationError(
            f"{asm.registration_endpoint} refused the registration with HTTP {response.status_code}{detail}"
        )
    try:
        wire = _RegistrationWire.model_validate(data)
    except pydantic.ValidationError:
        raise RegistrationError(
            f"{asm.registration_endpoint} answered the registration with something that is not a client registration"
        ) from None
    if wire.token_endpoint_auth_method:
        method = wire.token_endpoint_auth_method
    elif wire.client_secret:
        supported = asm.token_endpoint_auth_methods_supported
        method = "client_secret_basic" if "client_secret_basic" in supported else "client_secret_post"
    else:
        method = "none"
    if method not in ("none", "client_secret_basic", "client_secret_post"):
        raise RegistrationError(
            f"{printable(asm.issuer)} assigned the unsupported token endpoint auth method {printable(method, 40)!r}"
        )
    return ClientRegistration(
        client_id=wire.client_id,
        client_secret=Secret(wire.client_secret) if wire.client_secret else None,
        token_endpoint_auth_method=method,
        source="dynamic",
        redirect_uri=redirect_uri,
        dpop_bound=wire.dpop_bound_access_tokens is True,
    )
