"""The authorization server forgets: restarted with its registrations wiped, or down at logout.
oidc-provider keeps clients in memory, so a restart on the same port (same signing key) is exactly
"the AS forgot this client"."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from oauth import FileTokenStore, OAuthConfig, connection_auth, follow_redirects
from tests.conftest import free_port
from tests.oauth.flows.test_cli import agent_sdk, make_project

from ..helpers import call_echo
from ..peers import AuthServer, ResourceServer, oidc_provider, resource_server

pytestmark = pytest.mark.peers


class Rig:
    """An oidc-provider that can be restarted (or stopped) as the same server, and its resource."""

    def __init__(self, tmp: Path) -> None:
        self.port = free_port()
        self.key = tmp / "as-key.json"
        self._as = ExitStack()
        self.server = self.start()

    def start(self) -> AuthServer:
        return self._as.enter_context(oidc_provider(4, port=self.port, key_file=self.key))

    def stop(self) -> None:
        self._as.close()

    def restart(self) -> AuthServer:
        self.stop()
        self.server = self.start()
        return self.server


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[tuple[Rig, ResourceServer]]:
    setup = Rig(tmp_path)
    try:
        with resource_server(setup.server.issuer) as resource:
            yield setup, resource
    finally:
        setup.stop()


def _client(project: Path, url: str) -> dict[str, str]:
    data = json.loads((project / ".agent-sdk" / "mcp-auth.json").read_text())
    return data["grants"]["docs"][url]["client"]


def test_a_login_after_the_server_forgot_its_clients_registers_again(
    tmp_path: Path, rig: tuple[Rig, ResourceServer]
) -> None:
    setup, resource = rig
    project = make_project(tmp_path / "project", resource.url)
    first = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--non-interactive")
    assert first.returncode == 0, first.stderr
    before = _client(project, resource.url)

    # A second login keeps the registration and its redirect URI (the port is reusable at once).
    again = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--non-interactive")
    assert again.returncode == 0, again.stderr
    assert _client(project, resource.url) == before
    assert setup.server.stats()["registrations"] == 1

    setup.restart()  # every registration is gone
    healed = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--non-interactive", "--timeout", "30")
    assert healed.returncode == 0, healed.stderr
    assert "no longer knows client" in healed.stderr and "registering again" in healed.stderr
    assert _client(project, resource.url)["client_id"] != before["client_id"]
    assert setup.server.stats()["registrations"] == 1


@pytest.mark.anyio
async def test_the_next_call_after_the_server_forgot_its_clients_registers_again(
    tmp_path: Path, rig: tuple[Rig, ResourceServer]
) -> None:
    setup, resource = rig
    store = FileTokenStore(tmp_path)
    config = OAuthConfig()
    async with connection_auth("docs", resource.url, config, store, interaction=follow_redirects()) as auth:
        assert await call_echo(resource.url, auth, "before") == "before"
    setup.restart()
    async with connection_auth("docs", resource.url, config, store, interaction=follow_redirects()) as auth:
        grant = await store.load(auth.key)
        assert grant is not None
        assert await auth.refresh(stale=grant.tokens) is None  # invalid_client: the grant is dead
        assert await call_echo(resource.url, auth, "after") == "after"  # one new registration and login
    assert auth.stats.logins == 1
    assert setup.server.stats()["registrations"] == 1


def test_logout_while_the_server_is_down_says_revocation_failed(
    tmp_path: Path, rig: tuple[Rig, ResourceServer]
) -> None:
    setup, resource = rig
    project = make_project(tmp_path / "project", resource.url)
    assert agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--non-interactive").returncode == 0
    setup.stop()
    out = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--logout")
    assert out.returncode == 1
    assert "revocation FAILED" in out.stdout and "may still be valid at the server" in out.stdout
    assert "deleted from" in out.stdout and "Traceback" not in out.stderr
    data = json.loads((project / ".agent-sdk" / "mcp-auth.json").read_text())
    assert data["grants"] == {}  # no copy left here either way
