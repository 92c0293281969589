"""Fixtures of the oauth tests: one oidc-provider and one resource server per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .peers import AuthServer, ResourceServer, oidc_provider, resource_server

# Access tokens live 4 s: long enough for a login and a call, short enough that a test can let one
# expire for real (the resource server checks `exp`) instead of pretending.
ACCESS_TOKEN_TTL = 4


@pytest.fixture(scope="module")
def auth_server(request: pytest.FixtureRequest) -> Iterator[AuthServer]:
    """oidc-provider for this module; a module may set its own `ACCESS_TOKEN_TTL`."""
    with oidc_provider(getattr(request.module, "ACCESS_TOKEN_TTL", ACCESS_TOKEN_TTL)) as server:
        yield server


@pytest.fixture(scope="module")
def resource(auth_server: AuthServer) -> Iterator[ResourceServer]:
    with resource_server(auth_server.issuer) as server:
        yield server
