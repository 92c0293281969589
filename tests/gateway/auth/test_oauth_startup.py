"""`serve --oauth-issuer` with an issuer it cannot use says which and exits; an issuer that goes away
later gets its tokens refused (503, retry later) unless they can still be checked with the keys held.

The issuers are real: oidc-provider (npm), and Python's own `http.server` serving a metadata document
and a JWKS from files (a JWKS holding only a shared secret, which no access token may be checked with).
"""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

import httpx2
from joserfc.jwk import RSAKey

from oauth import parse_www_authenticate
from tests.conftest import free_port
from tests.processes import running

from ..conftest import ROOT, assert_clean, make_project
from ..oauth_peers import INTROSPECTOR, claims_for, issuer, mint, oauth_gateway, service_token

LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


def _serve_fails(tmp_path: Path, *flags: str) -> str:
    """Run `agent-sdk serve` expecting it to refuse to start; its output."""
    project = make_project(tmp_path / "project")
    places = ["--dir", str(project), "--port", str(free_port()), "--state-root", str(tmp_path / "state")]
    done = subprocess.run(
        [sys.executable, "-c", "from gateway.cli import entrypoint; entrypoint()", "serve", *places, *flags],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path), **INTROSPECTOR},
        check=False,
    )
    assert done.returncode != 0, done.stdout
    out = done.stdout + done.stderr
    assert_clean(out, [INTROSPECTOR["AGENT_SDK_OAUTH_CLIENT_SECRET"]])
    assert "serving" not in done.stdout
    return out


def test_an_unreachable_issuer_at_start_is_named_and_serve_exits(tmp_path: Path) -> None:
    gone = f"http://127.0.0.1:{free_port()}"
    out = _serve_fails(tmp_path, "--oauth-issuer", gone)
    assert f"--oauth-issuer: the metadata of issuer {gone} cannot be read" in out
    assert "cannot be reached" in out


def test_a_public_url_that_is_not_https_is_refused(tmp_path: Path) -> None:
    out = _serve_fails(tmp_path, "--oauth-issuer", "https://idp.example", "--public-url", "http://gateway.example")
    assert "--public-url: " in out
    assert "must be an absolute https URL" in out
    relative = _serve_fails(tmp_path, "--oauth-issuer", "https://idp.example", "--public-url", "/mcp")
    assert "must be an absolute https URL" in relative


def test_an_issuer_over_plain_http_elsewhere_is_refused(tmp_path: Path) -> None:
    out = _serve_fails(tmp_path, "--oauth-issuer", "http://idp.example")
    assert "--oauth-issuer: the issuer http://idp.example must be an absolute https URL" in out


def test_a_jwks_with_no_usable_key_is_named_and_serve_exits(tmp_path: Path) -> None:
    port = free_port()
    site = tmp_path / "site"
    (site / ".well-known").mkdir(parents=True)
    iss = f"http://127.0.0.1:{port}"
    metadata = {"issuer": iss, "jwks_uri": f"{iss}/jwks.json", "token_endpoint": f"{iss}/token"}
    (site / ".well-known" / "oauth-authorization-server").write_text(json.dumps(metadata))
    (site / "jwks.json").write_text(json.dumps({"keys": [{"kty": "oct", "k": "c2VjcmV0LXNlY3JldA", "kid": "mac"}]}))
    cmd = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(site)]
    with running(cmd, port=port, what="http.server"):
        out = _serve_fails(tmp_path, "--oauth-issuer", iss)
    assert f"the JWKS of issuer {iss} has no usable signing key" in out


def _call(url: str, token: str) -> httpx2.Response:
    return httpx2.post(url, json=LIST, headers={"authorization": f"Bearer {token}"}, timeout=30)


def test_an_issuer_that_goes_away_gets_503_for_tokens_its_held_keys_cannot_check(tmp_path: Path) -> None:
    with ExitStack() as serving:
        with issuer(tmp_path / "idp") as idp:
            gateway = serving.enter_context(oauth_gateway(tmp_path / "gw", idp.url))
            tools = f"{gateway.url}/v1/mcp/tools"
            signed = service_token(idp.url, tools)
            opaque = service_token(idp.url, tools, client="opaque-service")
        # oidc-provider has stopped. A JWT its held key signed is still checked (and admitted) ...
        assert _call(tools, signed).status_code == 200
        # ... but a key it may have rotated to, or an opaque token, cannot be checked now: 503, never admitted.
        rotated = mint(RSAKey.generate_key(2048), claims_for(idp.url, tools), kid="rotated-in")
        for token in (rotated, opaque):
            answer = _call(tools, token)
            assert answer.status_code == 503, answer.text
            assert answer.headers["retry-after"] == "30"
            challenge = parse_www_authenticate(answer.headers["www-authenticate"])
            assert challenge is not None and challenge.resource_metadata
            assert "cannot be checked now" in answer.json()["error"]["message"]
            assert_clean(answer.text, [token])
        # Within the refetch interval a second unknown key does not knock on the issuer again: refused outright.
        another = mint(RSAKey.generate_key(2048), claims_for(idp.url, tools), kid="rotated-again")
        assert _call(tools, another).status_code == 401
        assert "refused POST /v1/mcp/tools: temporarily_unavailable" in gateway.log_text()
