"""DPoP (RFC 9449) at `serve --oauth-issuer`: oidc-provider (real, npm) binds a token to the client's key
(`cnf.jkt`) when the token request carries a proof; the gateway then admits that token only as
`Authorization: DPoP` with a fresh proof for this very request: its method, its URL at the public URL,
this token's hash, and a `jti` never seen before, on any replica sharing the Redis of `--state-url`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx2
import pytest
from joserfc.jwk import ECKey

from oauth import parse_www_authenticate

from ..conftest import Served, assert_clean
from ..oauth_peers import Issuer, dpop_proof, oauth_gateway, service_token
from ..replicas import STATE_KEY, redis_server

LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, idp: Issuer) -> Iterator[Served]:
    with oauth_gateway(tmp_path_factory.mktemp("oauth-dpop"), idp.url) as served:
        yield served
    assert_clean(served.log_text())


@pytest.fixture(scope="module")
def key() -> ECKey:
    return ECKey.generate_key("P-256")


@pytest.fixture(scope="module")
def bound(idp: Issuer, gateway: Served, key: ECKey) -> str:
    token = service_token(idp.url, f"{gateway.url}/v1/mcp/tools", dpop=key)
    payload = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert payload["cnf"]["jkt"] == key.thumbprint()  # the provider bound it to our key
    return token


def _tools(gateway: Served) -> str:
    return f"{gateway.url}/v1/mcp/tools"


def _send(url: str, token: str, proof: str | None, *, scheme: str = "DPoP") -> httpx2.Response:
    headers = {"authorization": f"{scheme} {token}", **({"dpop": proof} if proof is not None else {})}
    return httpx2.post(url, json=LIST, headers=headers, timeout=30)


def _refused(answer: httpx2.Response, error: str) -> str:
    assert answer.status_code == 401, answer.text
    challenges = answer.headers.get_list("www-authenticate")
    bearer = parse_www_authenticate(challenges[0])
    assert bearer is not None and bearer.error == error and bearer.resource_metadata
    assert any(c.startswith("DPoP ") and "algs=" in c for c in challenges)  # RFC 9449 §7.1
    assert_clean(answer.text)
    return answer.json()["error"]["message"]


def test_a_bound_token_with_a_fresh_proof_is_admitted(gateway: Served, bound: str, key: ECKey) -> None:
    url = _tools(gateway)
    assert _send(url, bound, dpop_proof(key, "POST", url, bound)).status_code == 200
    assert _send(url, bound, dpop_proof(key, "POST", url, bound)).status_code == 200  # a new proof each time


def test_a_bound_token_without_a_proof_is_refused(gateway: Served, bound: str) -> None:
    assert "DPoP header with a proof" in _refused(_send(_tools(gateway), bound, None), "invalid_dpop_proof")
    assert "DPoP-bound" in _refused(_send(_tools(gateway), bound, None, scheme="Bearer"), "invalid_token")


def test_a_proof_for_another_url_or_method_is_refused(gateway: Served, bound: str, key: ECKey) -> None:
    url = _tools(gateway)
    elsewhere = dpop_proof(key, "POST", f"{gateway.url}/v1/mcp", bound)
    assert "another URL" in _refused(_send(url, bound, elsewhere), "invalid_dpop_proof")
    wrong_method = dpop_proof(key, "GET", url, bound)
    assert "another HTTP method" in _refused(_send(url, bound, wrong_method), "invalid_dpop_proof")


def test_a_replayed_proof_is_refused(gateway: Served, bound: str, key: ECKey) -> None:
    url = _tools(gateway)
    proof = dpop_proof(key, "POST", url, bound)
    assert _send(url, bound, proof).status_code == 200
    assert "used before" in _refused(_send(url, bound, proof), "invalid_dpop_proof")


def test_a_proof_for_another_token_or_by_another_key_is_refused(gateway: Served, bound: str, key: ECKey) -> None:
    url = _tools(gateway)
    other_ath = dpop_proof(key, "POST", url, bound + "x")
    assert "another access token" in _refused(_send(url, bound, other_ath), "invalid_dpop_proof")
    thief = dpop_proof(ECKey.generate_key("P-256"), "POST", url, bound)
    assert "another key" in _refused(_send(url, bound, thief), "invalid_dpop_proof")


def test_a_proof_replayed_to_another_replica_on_the_same_redis_is_refused(idp: Issuer, tmp_path: Path) -> None:
    with ExitStack() as stack:
        redis = stack.enter_context(redis_server(tmp_path / "redis"))
        key_env = {"AGENT_SDK_STATE_KEY": STATE_KEY}  # replicas share the deployment's state key
        first = stack.enter_context(oauth_gateway(tmp_path / "a", idp.url, "--state-url", redis.url, env=key_env))
        public = ("--state-url", redis.url, "--public-url", first.url)  # behind one balancer: one public URL
        second = stack.enter_context(oauth_gateway(tmp_path / "b", idp.url, *public, env=key_env))
        key = ECKey.generate_key("P-256")
        url = _tools(first)
        token = service_token(idp.url, url, dpop=key)
        proof = dpop_proof(key, "POST", url, token)
        assert _send(url, token, proof).status_code == 200
        assert "used before" in _refused(_send(_tools(second), token, proof), "invalid_dpop_proof")
        assert _send(_tools(second), token, dpop_proof(key, "POST", url, token)).status_code == 200


def test_a_deeply_nested_proof_is_refused_with_a_sentence(gateway: Served, bound: str, key: ECKey) -> None:
    url = _tools(gateway)
    proof = dpop_proof(key, "POST", url, bound)
    head, _payload, signature = proof.split(".")
    nested = b'{"htm": "POST", "x": ' + b"[" * 4800 + b"]" * 4800 + b"}"
    deep = f"{head}.{base64.urlsafe_b64encode(nested).rstrip(b'=').decode()}.{signature}"
    assert "payload nests JSON more than" in _refused(_send(url, bound, deep), "invalid_dpop_proof")
    assert "RecursionError" not in gateway.log_text()
