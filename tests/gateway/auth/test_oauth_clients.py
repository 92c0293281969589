"""Real MCP clients sign in to `serve --oauth-issuer` against oidc-provider (real, npm) and call an
advertised tool through `/v1/mcp/tools`: each finds the authorization server from the gateway's 401
(RFC 9728), registers (RFC 7591), runs PKCE with `resource` (RFC 8707), and comes back with a token
the gateway admits. oidc-provider's login and consent pages are posted headlessly, as a browser would.

- the `mcp` 2.x Python `Client` with its `OAuthClientProvider`, on both protocol generations;
- the TypeScript SDK's `Client` with an `OAuthClientProvider` (`ts_oauth_client.mjs`);
- the MCP Inspector's CLI with the token as a bearer header;
- `mcp-remote` as a stdio bridge: it runs its own browser login (the URL it prints is followed, and
  the redirect delivered to its callback server), then the Python SDK's stdio client calls through it.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from tests.oauth.helpers import authorize
from tests.peers import ROOT, node22, node_bin, node_module

from ..conftest import Served, assert_clean
from ..oauth_peers import Issuer, oauth_gateway, person_token

HERE = Path(__file__).resolve().parents[1]
REDIRECT = "http://127.0.0.1:1/callback"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, idp: Issuer) -> Iterator[Served]:
    with oauth_gateway(tmp_path_factory.mktemp("oauth-clients"), idp.url, "--oauth-scope", "mcp:tools") as served:
        yield served
    assert_clean(served.log_text())


class _Memory(TokenStorage):
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class _HeadlessBrowser:
    """The redirect and callback handlers of the SDK's provider: the login and consent pages posted
    in a worker thread, the code handed back as the redirect URI would have carried it."""

    def __init__(self, login: str) -> None:
        self.login = login
        self.back: str | None = None
        self.visited: list[str] = []

    async def redirect(self, url: str) -> None:
        self.visited.append(url)
        self.back = await anyio.to_thread.run_sync(lambda: authorize(url, REDIRECT, login=self.login))

    async def callback(self) -> AuthorizationCodeResult:
        assert self.back is not None
        query = parse_qs(urlsplit(self.back).query)
        return AuthorizationCodeResult(code=query["code"][0], state=query["state"][0], iss=query.get("iss", [None])[0])


async def _python_client(url: str, login: str, mode: str) -> tuple[list[str], str, list[str]]:
    browser = _HeadlessBrowser(login)
    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            redirect_uris=[REDIRECT],  # pyright: ignore[reportArgumentType]
            client_name="mcp python client",
            grant_types=["authorization_code", "refresh_token"],
            token_endpoint_auth_method="none",
        ),
        storage=_Memory(),
        redirect_handler=browser.redirect,
        callback_handler=browser.callback,
    )
    async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
        with anyio.fail_after(90):
            async with Client(streamable_http_client(url, http_client=http), mode=mode, cache=None) as client:  # pyright: ignore[reportArgumentType]
                tools = await client.list_tools()
                result = await client.call_tool("echo", {"text": f"hello from {login}"})
    block = result.content[0]
    assert block.type == "text"
    return sorted(t.name for t in tools.tools), block.text, browser.visited


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_python_sdk_client_signs_in_and_calls_a_tool(gateway: Served, idp: Issuer, mode: str) -> None:
    url = f"{gateway.url}/v1/mcp/tools"
    names, text, visited = await _python_client(url, f"py-{mode}", mode)
    assert "echo" in names
    assert f"hello from py-{mode}" in text
    [authorization] = visited
    query = parse_qs(urlsplit(authorization).query)
    assert authorization.startswith(f"{idp.url}/auth?")
    assert query["resource"] == [url]  # RFC 8707: the endpoint's own resource, from the metadata
    assert query["code_challenge_method"] == ["S256"]
    assert "mcp:tools" in query["scope"][0].split()  # from the 401's challenge (scopes_supported)


def _node_env(home: Path) -> dict[str, str]:
    return {
        "PATH": f"{node22().parent}:/usr/bin:/bin",
        "HOME": str(home),
        "NODE_PATH": str(node_module("@modelcontextprotocol/sdk", "package.json").parent.parent.parent),
    }


def test_the_typescript_sdk_client_signs_in_and_calls_a_tool(gateway: Served, tmp_path: Path) -> None:
    url = f"{gateway.url}/v1/mcp/tools"
    sdk = node_module("@modelcontextprotocol/sdk", "package.json").parent
    proc = subprocess.Popen(
        [str(node22()), str(HERE / "ts_oauth_client.mjs"), url, str(sdk), REDIRECT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=_node_env(tmp_path),
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        line = proc.stdout.readline()  # the provider's redirectToAuthorization: the URL a browser would open
        assert line.startswith("authorize "), line + (proc.stderr.read() if proc.stderr else "")
        authorization = line.split(" ", 1)[1].strip()
        assert parse_qs(urlsplit(authorization).query)["resource"] == [url]
        proc.stdin.write(authorize(authorization, REDIRECT, login="ts-person") + "\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-3000:]
    report = json.loads(out.strip().splitlines()[-1])
    assert "echo" in report["tools"]
    assert "hello from ts" in report["text"]


def test_the_inspector_cli_calls_a_tool_with_a_bearer_header(gateway: Served, idp: Issuer, tmp_path: Path) -> None:
    url = f"{gateway.url}/v1/mcp/tools"
    token = person_token(idp.url, url, "inspector-person")
    base = [str(node_bin("mcp-inspector")), "--cli", url, "--transport", "http"]
    call = [*base, "--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text=inspected", "--format", "json"]
    env = {**_node_env(tmp_path), "PATH": f"{node22().parent}:{os.environ['PATH']}"}
    done = subprocess.run(
        [*call, "--header", f"Authorization: Bearer {token}"], capture_output=True, text=True, timeout=90, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "inspected" in done.stdout
    refused = subprocess.run(
        [*call, "--header", "Authorization: Bearer not-a-token"], capture_output=True, text=True, timeout=90, env=env
    )
    assert refused.returncode != 0


class _StderrWatch:
    """mcp-remote's stderr, read in a thread: it prints the authorization URL where it would open a browser."""

    def __init__(self) -> None:
        read, write = os.pipe()
        self.reader = os.fdopen(read, "r")
        self.writer = os.fdopen(write, "w")
        self.lines: list[str] = []

    def authorization_url(self) -> str:
        for line in self.reader:
            self.lines.append(line)
            if line.startswith("http") and "/auth?" in line:
                return line.strip()
        raise AssertionError("mcp-remote printed no authorization URL:\n" + "".join(self.lines)[-3000:])


@pytest.mark.anyio
async def test_mcp_remote_bridges_stdio_after_its_browser_login(gateway: Served, tmp_path: Path) -> None:
    url = f"{gateway.url}/v1/mcp/tools"
    watch = _StderrWatch()
    server = StdioServerParameters(
        command=str(node_bin("mcp-remote")),
        args=[url],
        env={**_node_env(tmp_path), "BROWSER": "true"},  # no browser here: `open` runs true; we post the pages
    )

    def sign_in() -> None:
        authorization = watch.authorization_url()
        query = parse_qs(urlsplit(authorization).query)
        assert query["resource"] == [url]
        back = authorize(authorization, query["redirect_uri"][0], login="remote-person")
        httpx2.get(back, timeout=30)  # what the browser does: deliver the code to mcp-remote's callback server
        for line in watch.reader:  # keep draining: a full pipe would stall mcp-remote
            watch.lines.append(line)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(anyio.to_thread.run_sync, sign_in)
        with anyio.fail_after(120):
            async with Client(stdio_client(server, errlog=watch.writer), mode="legacy") as client:
                tools = await client.list_tools()
                result = await client.call_tool("echo", {"text": "through mcp-remote"})
        watch.writer.close()
    assert "echo" in [t.name for t in tools.tools]
    block = result.content[0]
    assert block.type == "text" and "through mcp-remote" in block.text
