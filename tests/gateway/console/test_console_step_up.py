"""Step-up through the console (issue 45 item 2): after a 403 `insufficient_scope`, the error the console shows
for a call names the scope (unmasked) and the login to run, and the console's "Log in" asks for the scopes held and
the scope challenged, after which the call works. Real oidc-provider, the test resource server, `agent-sdk serve`
with operator and peer tokens; the console's own routes, as its page calls them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx2
import pytest

from tests.oauth.helpers import authorize
from tests.oauth.peers import ResourceServer

from ..conftest import Served, assert_clean, serve
from ..replicas import BEARER, OPERATOR, oauth_project

pytestmark = pytest.mark.peers


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, resource: ResourceServer) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("console-step-up")
    env = {"AGENT_SDK_BEARER_TOKEN": BEARER, "AGENT_SDK_OPERATOR_TOKEN": OPERATOR}
    server = serve(oauth_project(root / "project", resource.url), root / "state", env=env)
    try:
        yield server
    finally:
        server.stop()
        resource.require_scope(None)
    assert_clean(server.log_text(), [BEARER, OPERATOR])


def _console_login(served: Served) -> str:
    """The console's "Log in" for `docs`, consented at oidc-provider and brought back; the scope it asked for."""
    headers = {"Authorization": f"Bearer {OPERATOR}", "Origin": served.url}
    with httpx2.Client(base_url=served.url, headers=headers, timeout=30.0) as http:
        started = http.post("/v1/connections/docs/login", json={})
        assert started.status_code == 200, started.text
        authorization_url = started.json()["authorizationUrl"]
        redirect = authorize(authorization_url, f"{served.url}/v1/oauth/callback")
        browser = {"Cookie": "; ".join(f"{k}={v}" for k, v in started.cookies.items())}
        done = http.get(redirect, headers=browser)
        assert done.status_code in (200, 302, 303), done.text
    return dict(parse_qsl(urlsplit(authorization_url).query))["scope"]


def _echo(served: Served, text: str) -> dict[str, Any]:
    """`POST /v1/tools/echo`, as the console's "Run" sends it; the envelope the console renders."""
    with served.client({"Authorization": f"Bearer {OPERATOR}"}) as http:
        answer = http.post("/v1/tools/echo", json={"input": {"text": text}})
    return answer.json()


def test_the_console_names_the_scope_and_its_login_asks_for_the_union(served: Served, resource: ResourceServer) -> None:
    assert _console_login(served) == "mcp:tools"  # what the resource's 401 challenge names
    assert _echo(served, "before")["isError"] is False
    resource.require_scope("mcp:admin")
    refused = _echo(served, "refused")
    said = f"{refused.get('error')}: {refused.get('message')} {refused}"
    assert refused["isError"] is True and "'mcp:admin'" in said and "'mcp:tools mcp:admin'" in said, refused
    assert "***" not in said
    assert _console_login(served) == "mcp:tools mcp:admin"
    after = _echo(served, "after")
    assert after["isError"] is False, after["result"]  # the new grant, not the one held in memory
