"""Step-up on a 403 `insufficient_scope` (RFC 6750 §3.1; the MCP spec's "Step-Up Authorization Flow"; issue 45
item 2): the error says which scope, unredacted, and the next login of that connection asks for the union of the
scopes held and the scopes challenged, so the call then succeeds. Real oidc-provider, real resource server (which
challenges with `insufficient_scope` once told to), the `agent-sdk` CLI as a user runs it."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx2
import pytest

from connections.serving import redact
from oauth import FileTokenStore, InsufficientScope, OAuthConfig, connection_auth, finish_login, start_login

from ..helpers import authorize, call_echo
from ..peers import ResourceServer
from .test_cli import agent_sdk, make_project

pytestmark = pytest.mark.peers


def _claims(state_root: Path) -> dict[str, Any]:
    """The claims of the access token `mcp-auth.json` holds for `docs` (its JWT payload, not verified)."""
    record = next(iter(json.loads((state_root / "mcp-auth.json").read_text())["grants"]["docs"].values()))
    payload = record["tokens"]["access_token"].split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "==="))


ACCESS_TOKEN_TTL = 300  # this module's oidc-provider (tests/oauth/conftest.py): no refresh in the way


@pytest.fixture
def challenging(resource: ResourceServer) -> Iterator[ResourceServer]:
    """The module's resource server; it asks for no extra scope again afterwards."""
    resource.require_scope(None)
    yield resource
    resource.require_scope(None)


def test_a_403_insufficient_scope_names_the_scope_and_the_next_cli_login_asks_for_the_union(
    tmp_path: Path, challenging: ResourceServer
) -> None:
    resource = challenging
    project = make_project(tmp_path / "project", resource.url)
    state_root = project / ".agent-sdk"
    login = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--non-interactive")
    assert login.returncode == 0, login.stderr
    assert _claims(state_root)["scope"].split() == ["mcp:tools"]  # the resource's 401 challenge asked for it
    call = ("mcp", "call", "docs", "echo", "--dir", str(project), "--args", '{"text": "hi"}')
    assert agent_sdk(*call).returncode == 0

    resource.require_scope("mcp:admin")
    refused = agent_sdk(*call)
    assert refused.returncode == 1
    said = refused.stdout + refused.stderr
    assert "'mcp:admin'" in said and "***" not in said, said  # the scope to ask for, not a mask
    assert "agent-sdk mcp oauth docs" in said and "Traceback" not in said

    again = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--non-interactive")
    assert again.returncode == 0, again.stderr
    assert set(_claims(state_root)["scope"].split()) == {"mcp:tools", "mcp:admin"}  # held + challenged
    answered = agent_sdk(*call)
    assert answered.returncode == 0, answered.stdout + answered.stderr
    assert "hi" in answered.stdout


@pytest.mark.parametrize(
    "text",
    [
        "https://docs.example/mcp needs the scope 'mcp:basic mcp:write' for connection 'docs'",
        "needs the scope 'files:bearer files:admin'",
    ],
)
def test_scope_values_are_not_masked_as_credentials(text: str) -> None:
    assert redact(text) == text


def test_a_credential_after_the_scheme_word_is_still_masked() -> None:
    assert redact("Authorization: Basic dXNlcjpwYXNzd29yZA==") == "Authorization: Basic ***"
    assert redact("authorization:Bearer abcdefgh12345") == "authorization:Bearer ***"
    assert redact("sent Bearer abcdefgh12345 upstream") == "sent Bearer *** upstream"


REDIRECT = "http://127.0.0.1:9/v1/oauth/callback"


@pytest.mark.anyio
@pytest.mark.parametrize("principal", ["", "bearer:0123456789ab"])
async def test_the_redirect_login_of_the_console_and_of_a_sign_in_link_asks_for_the_union(
    tmp_path: Path, challenging: ResourceServer, principal: str
) -> None:
    # The console's login (principal "") and a per-user sign-in link (the caller's principal) are both
    # `start_login` / `finish_login`; the step-up a 403 recorded on the grant is what their next login asks for.
    store, config = FileTokenStore(tmp_path), OAuthConfig()
    async with httpx2.AsyncClient(timeout=30.0) as http:

        async def log_in() -> str:
            started = await start_login(
                "docs", challenging.url, config, store, redirect_uri=REDIRECT, http=http, principal=principal
            )
            redirect = authorize(started.authorization_url, REDIRECT)
            await finish_login(started, dict(parse_qsl(urlsplit(redirect).query)), store, http=http)
            return dict(parse_qsl(urlsplit(started.authorization_url).query))["scope"]

        assert await log_in() == "mcp:tools"
        challenging.require_scope("mcp:admin")
        async with connection_auth("docs", challenging.url, config, store, principal=principal) as auth:
            with pytest.raises(BaseExceptionGroup) as raised:  # the SDK client's task group wraps it
                await call_echo(challenging.url, auth, "before")
        refused = raised.value.exceptions[0]
        while isinstance(refused, BaseExceptionGroup):
            refused = refused.exceptions[0]
        assert isinstance(refused, InsufficientScope)
        assert "'mcp:admin'" in str(refused) and "'mcp:tools mcp:admin'" in str(refused)
        assert await log_in() == "mcp:tools mcp:admin"
        async with connection_auth("docs", challenging.url, config, store, principal=principal) as auth:
            assert await call_echo(challenging.url, auth, "after") == "after"
