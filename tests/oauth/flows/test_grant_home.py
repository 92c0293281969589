"""One grant, one home, and a dead grant is dead at once: against oidc-provider with refresh-token
rotation (reuse revokes the whole grant), a real Redis, the real CLI and a real `serve`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx2
import pytest
import redis

from oauth import FileTokenStore, LoginRequired, OAuthConfig, StoreKey, connection_auth, follow_redirects, login
from tests.conftest import free_port
from tests.oauth.flows.test_cli import agent_sdk, stored_tokens
from tests.oauth.stores.test_stores import redis_url as redis_url  # the module's real redis-server
from tests.processes import wait_for_port

from ..helpers import call_echo
from ..peers import AuthServer, ResourceServer

pytestmark = pytest.mark.peers

CLI = Path(sys.executable).parent / "agent-sdk"


def _project(root: Path, url: str) -> Path:
    folder = root / "agent" / "mcp-connections"
    folder.mkdir(parents=True)
    (folder / "docs.py").write_text(
        "from connections import define_connection\n\n"
        f"connection = define_connection(url={url!r}, oauth=True, advertise_tools=True)\n"
    )
    return root


def _invalid_grants(server: AuthServer) -> int:
    return server.stats()["errors"].get("invalid_grant", 0)


@pytest.mark.anyio
async def test_a_grant_refused_with_invalid_grant_is_dead_at_once(
    tmp_path: Path, auth_server: AuthServer, resource: ResourceServer
) -> None:
    # The old failure: two copies of one grant. One rotates; the other spends the old refresh token,
    # the server revokes the whole grant, and that copy must stop at once.
    first = FileTokenStore(tmp_path / "a")
    grant = await login("docs", resource.url, OAuthConfig(), first, interaction=follow_redirects())
    (tmp_path / "b").mkdir()
    shutil.copy(tmp_path / "a" / "mcp-auth.json", tmp_path / "b" / "mcp-auth.json")
    second = FileTokenStore(tmp_path / "b")
    before = _invalid_grants(auth_server)

    async with connection_auth("docs", resource.url, OAuthConfig(), first) as auth_a:
        assert await auth_a.refresh(stale=grant.tokens) is not None
    async with connection_auth("docs", resource.url, OAuthConfig(), second) as auth_b:
        assert await auth_b.refresh(stale=grant.tokens) is None
    assert _invalid_grants(auth_server) - before == 1

    dead = await second.load(StoreKey("docs", resource.url))
    assert dead is not None and dead.dead == "invalid_grant" and dead.tokens is None

    # Later calls spend nothing and say what to do.
    for _ in range(2):
        async with connection_auth("docs", resource.url, OAuthConfig(), second) as auth:
            with pytest.raises(BaseException) as caught:
                await call_echo(resource.url, auth, "x")
        error = caught.value
        while isinstance(error, BaseExceptionGroup):
            error = error.exceptions[0]
        assert isinstance(error, LoginRequired)
        assert "dead grant" in str(error) and "agent-sdk mcp oauth docs" in str(error)
    assert _invalid_grants(auth_server) - before == 1


def test_status_shows_a_dead_grant(tmp_path: Path, auth_server: AuthServer, resource: ResourceServer) -> None:
    project = _project(tmp_path / "project", resource.url)
    assert agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--non-interactive").returncode == 0
    path = project / ".agent-sdk" / "mcp-auth.json"
    data = json.loads(path.read_text())
    record = data["grants"]["docs"][resource.url]
    record["tokens"]["refresh_token"] = "spent-long-ago"  # a refresh token the server refuses
    record["tokens"]["expires_at"] = time.time() - 10
    path.write_text(json.dumps(data))

    call = agent_sdk("mcp", "call", "docs", "echo", "--dir", str(project), "--args", '{"text": "x"}')
    assert call.returncode != 0 and "log in with `agent-sdk mcp oauth docs`" in call.stderr
    status = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--status")
    assert status.returncode == 1
    assert "dead: the authorization server refused it (invalid_grant)" in status.stdout


def _serve(project: Path, port: int, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(CLI), "serve", "--dir", str(project), "--port", str(port)],
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3]), **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def test_login_with_store_then_cli_and_redis_serve_refresh_in_any_order(
    tmp_path: Path, auth_server: AuthServer, resource: ResourceServer, redis_url: str
) -> None:
    project = _project(tmp_path / "project", resource.url)
    env = {"AGENT_SDK_SECRETS_URL": redis_url}
    before = auth_server.stats()
    done = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--non-interactive", "--store", env=env)
    assert done.returncode == 0, done.stderr
    assert stored_tokens(project / ".agent-sdk") == []  # a pointer, not a second copy

    port = free_port()
    proc = _serve(project, port, env, tmp_path / "serve.log")
    try:
        wait_for_port(port, proc)
        with httpx2.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            # CLI, serve, serve, CLI: each after the access token (4 s) expired, so each refreshes.
            for turn, who in enumerate(("cli", "serve", "serve", "cli")):
                time.sleep(4.5)
                if who == "cli":
                    call = agent_sdk(
                        "mcp",
                        "call",
                        "docs",
                        "echo",
                        "--dir",
                        str(project),
                        "--args",
                        f'{{"text": "t{turn}"}}',
                        env=env,
                    )
                    assert call.returncode == 0, call.stderr
                    assert f"t{turn}" in call.stdout
                else:
                    answer = http.post("/v1/tools/echo", json={"input": {"text": f"t{turn}"}})
                    assert answer.status_code == 200, answer.text
                    assert f"t{turn}" in str(answer.json()["result"])
            sequential = auth_server.stats()
            assert sequential["grants"].get("refresh_token", 0) - before["grants"].get("refresh_token", 0) == 4
            # Both at once, after another expiry: one spends the refresh token under the Redis lock,
            # the other finds the rotated tokens and uses them (a second spend of the same refresh
            # token would be an invalid_grant and kill the grant).
            time.sleep(4.5)
            text = json.dumps({"text": "both"})
            with ThreadPoolExecutor(1) as pool:
                cli = pool.submit(
                    agent_sdk, "mcp", "call", "docs", "echo", "--dir", str(project), "--args", text, env=env
                )
                answer = http.post("/v1/tools/echo", json={"input": {"text": "both"}})
                call = cli.result(timeout=120)
            assert answer.status_code == 200, answer.text
            assert call.returncode == 0, call.stderr
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    after = auth_server.stats()
    assert after["codes"] - before["codes"] == 1  # one login
    assert after["errors"].get("invalid_grant", 0) == before["errors"].get("invalid_grant", 0)
    assert after["grants"].get("refresh_token", 0) > sequential["grants"].get("refresh_token", 0)
    keys = redis.Redis.from_url(redis_url).keys("agent-sdk:mcp-oauth:docs:*")
    assert len(keys) == 1  # one grant, in its one home
    assert stored_tokens(project / ".agent-sdk") == []

    out = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--logout", "--store", env=env)
    assert out.returncode == 0, out.stderr
    assert "revoked at the authorization server" in out.stdout
    assert redis.Redis.from_url(redis_url).keys("agent-sdk:mcp-oauth:docs:*") == []
    data = json.loads((project / ".agent-sdk" / "mcp-auth.json").read_text())
    assert data["grants"] == {}
