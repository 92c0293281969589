"""Each bad input ends in one `OAuthError` sentence: no traceback text, no token, the fix where there is one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import httpx2
import pytest

from oauth import (
    AuthorizationDenied,
    CallbackListener,
    FileTokenStore,
    IssuerMismatch,
    LoginRequired,
    LoginTimeout,
    OAuthConfig,
    OAuthError,
    PkceUnsupported,
    StateMismatch,
    StoreCorrupt,
    StoreKey,
    connection_auth,
    follow_redirects,
    login,
)
from oauth._exceptions import DiscoveryError, InsecureTransport, TokenError
from oauth.discovery._transport import require_secure
from tests.peers import ROOT

from ..helpers import call_echo
from ..peers import AuthServer, ResourceServer, bad_server

pytestmark = [pytest.mark.anyio, pytest.mark.peers]


def assert_sentence(exc: BaseException, *secrets: str) -> str:
    """One line, no traceback, no secret."""
    text = str(exc)
    assert text and "\n" not in text and "Traceback" not in text, text
    for secret in secrets:
        assert secret not in text
    return text


@pytest.fixture(scope="module")
def bad_as() -> Iterator[str]:
    with bad_server() as base:
        yield base


def _state_of(url: str) -> str:
    return parse_qs(urlsplit(url).query)["state"][0]


async def test_a_forged_state_is_refused(tmp_path: Path, auth_server: AuthServer, resource: ResourceServer) -> None:
    async def attacker(url: str, listener: CallbackListener) -> None:
        async with httpx2.AsyncClient() as client:
            await client.get(
                f"{listener.redirect_uri}?{urlencode({'code': 'x', 'state': 'forged', 'iss': auth_server.issuer})}"
            )

    with pytest.raises(StateMismatch) as caught:
        await login("s", resource.url, OAuthConfig(), FileTokenStore(tmp_path), interaction=attacker)
    assert "different state" in assert_sentence(caught.value)


async def test_a_wrong_iss_is_refused(tmp_path: Path, auth_server: AuthServer, resource: ResourceServer) -> None:
    async def mixup(url: str, listener: CallbackListener) -> None:
        params = {"code": "x", "state": _state_of(url), "iss": "https://evil.example"}
        async with httpx2.AsyncClient() as client:
            await client.get(f"{listener.redirect_uri}?{urlencode(params)}")

    with pytest.raises(IssuerMismatch) as caught:
        await login("s", resource.url, OAuthConfig(), FileTokenStore(tmp_path), interaction=mixup)
    assert "RFC 9207" in assert_sentence(caught.value)


async def test_a_server_without_s256_is_refused(tmp_path: Path, bad_as: str) -> None:
    with pytest.raises(PkceUnsupported) as caught:
        await login(
            "s", f"{bad_as}/nos256/mcp", OAuthConfig(), FileTokenStore(tmp_path), interaction=follow_redirects()
        )
    assert "S256" in assert_sentence(caught.value)


async def test_metadata_that_is_not_json_is_a_sentence(tmp_path: Path, bad_as: str) -> None:
    with pytest.raises(DiscoveryError) as caught:
        await login(
            "s",
            f"{bad_as}/garbage-metadata/mcp",
            OAuthConfig(),
            FileTokenStore(tmp_path),
            interaction=follow_redirects(),
        )
    assert "not JSON" in assert_sentence(caught.value)


async def test_a_token_endpoint_answering_garbage_is_a_sentence(tmp_path: Path, bad_as: str) -> None:
    with pytest.raises(TokenError) as caught:
        await login(
            "s", f"{bad_as}/garbage-token/mcp", OAuthConfig(), FileTokenStore(tmp_path), interaction=follow_redirects()
        )
    assert "not an OAuth token response" in assert_sentence(caught.value, "c0de")


async def test_denied_consent_is_a_sentence(tmp_path: Path, auth_server: AuthServer, resource: ResourceServer) -> None:
    async def user_who_says_no(url: str, listener: CallbackListener) -> None:
        # A person at oidc-provider's pages: signs in, then presses "cancel" on the consent page.
        async with httpx2.AsyncClient(follow_redirects=False) as browser:
            for _ in range(20):
                if url.startswith(listener.redirect_uri):
                    await browser.get(url)
                    return
                response = await browser.get(url)
                if response.is_redirect:
                    url = urljoin(url, response.headers["location"])
                    continue
                if 'name="prompt" value="login"' in response.text:
                    posted = await browser.post(url, data={"prompt": "login", "login": "bob", "password": "x"})
                    url = urljoin(url, posted.headers["location"])
                    continue
                abort = re.search(r'href="([^"]*/abort)"', response.text)
                assert abort is not None, "no cancel link on the consent page"
                url = urljoin(url, abort.group(1))

    with pytest.raises(AuthorizationDenied) as caught:
        await login("s", resource.url, OAuthConfig(), FileTokenStore(tmp_path), interaction=user_who_says_no)
    assert "access_denied" in assert_sentence(caught.value)


async def test_a_callback_that_never_comes_times_out(
    tmp_path: Path, auth_server: AuthServer, resource: ResourceServer
) -> None:
    async def user_who_walked_away(url: str, listener: CallbackListener) -> None:
        return None

    with pytest.raises(LoginTimeout) as caught:
        await login(
            "s",
            resource.url,
            OAuthConfig(),
            FileTokenStore(tmp_path),
            interaction=user_who_walked_away,
            login_timeout=0.5,
        )
    assert "no login redirect" in assert_sentence(caught.value)


async def test_a_corrupt_mcp_auth_json_is_a_sentence_naming_the_file(tmp_path: Path, resource: ResourceServer) -> None:
    (tmp_path / "mcp-auth.json").write_text('{"version": 1, "grants": {"s": {"x": ')
    store = FileTokenStore(tmp_path)
    with pytest.raises(StoreCorrupt) as caught:
        await store.load(StoreKey("s", resource.url))
    assert "mcp-auth.json" in assert_sentence(caught.value)

    (tmp_path / "mcp-auth.json").write_text('{"version": 1, "grants": {"s": {"u": {"version": 1, "tokens": 5}}}}')
    with pytest.raises(StoreCorrupt) as caught:
        await store.load(StoreKey("s", "u"))
    assert_sentence(caught.value)


async def test_serving_without_tokens_names_the_login_command(tmp_path: Path, resource: ResourceServer) -> None:
    auth = connection_auth("nologin", resource.url, OAuthConfig(), FileTokenStore(tmp_path))
    with pytest.raises(BaseException) as caught:
        await call_echo(resource.url, auth, "x")
    error = caught.value
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]  # the MCP client wraps transport errors in groups
    assert isinstance(error, LoginRequired)
    assert "agent-sdk mcp oauth nologin" in assert_sentence(error)


def test_a_keyring_without_a_backend_names_the_fix(tmp_path: Path) -> None:
    # keyring's own "no backend" (what a headless box gets), selected explicitly in a fresh process.
    script = (
        "import anyio, oauth\n"
        "async def main():\n"
        "    try:\n"
        "        await oauth.KeyringTokenStore().load(oauth.StoreKey('c', 'http://x/mcp'))\n"
        "    except oauth.KeyringUnavailable as exc:\n"
        "        print(exc)\n"
        "anyio.run(main)\n"
    )
    env = {**os.environ, "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    assert (
        "no OS keyring backend" in out.stdout and "keyrings.alt" in out.stdout and "AGENT_SDK_SECRETS_URL" in out.stdout
    )
    assert "Traceback" not in out.stderr


def test_every_error_class_has_a_wire_code() -> None:
    import oauth

    codes = {cls.error for cls in vars(oauth).values() if isinstance(cls, type) and issubclass(cls, OAuthError)}
    assert len(codes) == len([c for c in vars(oauth).values() if isinstance(c, type) and issubclass(c, OAuthError)])


@pytest.mark.parametrize(
    ("mode", "named"),
    [
        ("plain-as", "http://as.example.test/plain-as"),
        ("plain-prm", "http://metadata.example.test/.well-known/oauth-protected-resource/plain-prm/mcp"),
        ("plain-token", "http://token.example.test/plain-token/token"),
    ],
)
async def test_plain_http_outside_loopback_is_refused_before_any_request(
    tmp_path: Path, bad_as: str, mode: str, named: str
) -> None:
    # The names do not resolve to this machine: "refused before any request" is the only outcome
    # that is not a connection error, and no registration or authorization request was made.
    with pytest.raises(InsecureTransport) as caught:
        await login(
            "s", f"{bad_as}/{mode}/mcp", OAuthConfig(), FileTokenStore(tmp_path), interaction=follow_redirects()
        )
    text = assert_sentence(caught.value)
    assert named in text and "https" in text
    hits = httpx2.get(f"{bad_as}/_hits").json()
    mine = [path for path in hits if path.startswith(f"/{mode}/")]
    assert mine == [f"/{mode}/mcp"], hits  # the unauthenticated probe only: no registration, no login


def test_the_tls_rule_is_authlibs_loopback_rule_and_its_escape_hatch_is_loud(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for url in ("https://as.example.com/token", "http://127.0.0.1:9/token", "http://localhost/x", "http://[::1]:8/x"):
        assert require_secure(url, "token endpoint") == url
    for url in ("http://as.example.com/token", "http://10.0.0.1/token", "ftp://127.0.0.1/x"):
        with pytest.raises(InsecureTransport, match="refusing the token endpoint"):
            require_secure(url, "token endpoint")
    monkeypatch.setenv("AGENT_SDK_OAUTH_INSECURE_TRANSPORT", "1")
    with caplog.at_level("WARNING", logger="oauth"):
        assert require_secure("http://rig.example.test/token", "token endpoint")
    assert "TLS rule is off" in caplog.text and "http://rig.example.test/token" in caplog.text


def test_a_parent_path_resource_and_a_trailing_slash_issuer_are_other_identities() -> None:
    from oauth.discovery._discovery import resource_matches

    url = "https://mcp.example.com/tenant/mcp"
    assert resource_matches("https://MCP.example.com/tenant/mcp", url)
    assert not resource_matches("https://mcp.example.com/tenant", url)  # a parent path
    assert not resource_matches("https://mcp.example.com/", url)  # the origin, from path metadata
    assert not resource_matches("https://mcp.example.com", url, "https://mcp.example.com/.well-known/x")
    # RFC 9728 §3.1: metadata at the root well-known URL describes the origin.
    assert resource_matches(
        "https://mcp.example.com", url, "https://mcp.example.com/.well-known/oauth-protected-resource"
    )


async def test_an_issuer_differing_by_a_trailing_slash_is_refused(tmp_path: Path, bad_as: str) -> None:
    from oauth.discovery._discovery import Discovery

    async with httpx2.AsyncClient() as http:
        with pytest.raises(DiscoveryError, match="names the issuer"):
            await Discovery(http).server_metadata(f"{bad_as}/garbage-token/")


async def test_a_bearer_token_is_never_sent_to_a_plain_http_server_outside_loopback(tmp_path: Path) -> None:
    from oauth import ClientRegistration, Grant, TokenSet
    from oauth._shared import Secret

    url = "http://mcp.example.test/mcp"  # not this machine: a request would be a connection error
    store = FileTokenStore(tmp_path)
    tokens = TokenSet(Secret("at-" + "a" * 30), None, "Bearer", None, None, None)
    await store.save(
        Grant(
            StoreKey("s", url),
            "https://as.example.test",
            "https://as.example.test/token",
            ClientRegistration("c"),
            tokens,
            url,
        )
    )
    async with connection_auth("s", url, OAuthConfig(), store) as auth, httpx2.AsyncClient(auth=auth) as http:
        with pytest.raises(
            InsecureTransport, match=re.escape("refusing the MCP server URL http://mcp.example.test/mcp")
        ):
            await http.post(url, json={})
