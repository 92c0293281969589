"""`LoginStart` to and from JSON: a login started against oidc-provider, carried as JSON (as the gateway
carries it between replicas), is finished by the copy; secrets are `Secret` again once read back."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import httpx2
import pytest

from oauth import (
    ClientRegistration,
    FileTokenStore,
    LoginStart,
    OAuthConfig,
    ServerMetadata,
    StoreCorrupt,
    StoreKey,
    connection_auth,
    finish_login,
    start_login,
)
from oauth._shared import Secret

from ..helpers import authorize, call_echo
from ..peers import AuthServer, ResourceServer

pytestmark = [pytest.mark.peers]

REDIRECT = "http://127.0.0.1:9/v1/oauth/callback"


@pytest.mark.anyio
async def test_a_login_carried_as_json_is_finished_by_the_copy(
    tmp_path: Path, auth_server: AuthServer, resource: ResourceServer
) -> None:
    store = FileTokenStore(tmp_path)
    async with httpx2.AsyncClient(timeout=30.0) as http:
        started = await start_login("docs", resource.url, OAuthConfig(), store, redirect_uri=REDIRECT, http=http)
        text = json.dumps(started.to_json())
        copy = LoginStart.from_json(json.loads(text), "the test")
        assert copy == started
        assert isinstance(copy.verifier, Secret) and isinstance(copy.state, Secret)
        assert copy.verifier.reveal() in text  # to_json reveals: the caller seals it (the gateway does)
        assert copy.verifier.reveal() not in repr(copy) and copy.state.reveal() not in repr(copy)

        redirect = authorize(started.authorization_url, REDIRECT)
        params = dict(parse_qsl(urlsplit(redirect).query))
        grant = await finish_login(copy, params, store, http=http)
    assert grant.tokens is not None and grant.resource_indicator == resource.url
    async with connection_auth("docs", resource.url, OAuthConfig(), store) as auth:
        assert await call_echo(resource.url, auth, "carried") == "carried"


def test_a_client_secret_survives_the_trip_and_bad_records_are_one_sentence() -> None:
    server = ServerMetadata(
        "https://as.example", "https://as.example/auth", "https://as.example/token", None, None, ("a", "b"),
        ("client_secret_basic",), False, True, "https://as.example/.well-known/oauth-authorization-server",
    )  # fmt: skip
    client = ClientRegistration("cid", Secret("s3cret-value"), "client_secret_basic", "configured", REDIRECT)
    start = LoginStart(
        StoreKey("docs", "https://mcp.example/mcp"), server, client, REDIRECT, "https://mcp.example/mcp",
        Secret("the-state"), Secret("the-verifier"), "https://as.example/auth?x=1",
    )  # fmt: skip
    back = LoginStart.from_json(json.loads(json.dumps(start.to_json())), "the test")
    assert back == start
    assert back.client.client_secret == Secret("s3cret-value")
    assert "s3cret-value" not in repr(back)

    broken = {**start.to_json(), "verifier": 42}
    for bad in (broken, {**start.to_json(), "version": 9}, "not an object", {"server": {}}):
        with pytest.raises(StoreCorrupt) as caught:
            LoginStart.from_json(bad, "the Redis key x")
        message = str(caught.value)
        assert message.startswith("the pending login in the Redis key x is not valid") and "start the login" in message
        assert "the-verifier" not in message and "s3cret" not in message
