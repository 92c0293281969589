"""`serve --dpop-nonce`: the gateway as an RFC 9449 §9 resource server that requires its own nonce in every
DPoP proof. oidc-provider (real, npm) binds the token to the client's key; a proof without the nonce, or with
one the deployment did not make, is 401 with `WWW-Authenticate: DPoP error="use_dpop_nonce"` and the nonce to
use in `DPoP-Nonce`; the proof signed again with it is admitted, on this replica and on another one that has
the same state key (nonces are sealed with the deployment's key, not kept anywhere).
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

from gateway.auth.dpop import DpopNonces
from gateway.state.state_key import new_state_key, parse_state_key

from ..conftest import Served, assert_clean
from ..oauth_peers import Issuer, dpop_proof, oauth_gateway, service_token
from ..replicas import STATE_KEY

LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
KEY_ENV = {"AGENT_SDK_STATE_KEY": STATE_KEY}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, idp: Issuer) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("oauth-dpop-nonce")
    with oauth_gateway(folder, idp.url, "--dpop-nonce", env=KEY_ENV) as served:
        yield served
    assert_clean(served.log_text())


def _tools(gateway: Served) -> str:
    return f"{gateway.url}/v1/mcp/tools"


def _bound(idp: Issuer, url: str, key: ECKey) -> str:
    token = service_token(idp.url, url, dpop=key)
    assert json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))["cnf"]["jkt"] == key.thumbprint()
    return token


def _send(url: str, token: str, proof: str) -> httpx2.Response:
    return httpx2.post(url, json=LIST, headers={"authorization": f"DPoP {token}", "dpop": proof}, timeout=30)


def _asks_for_nonce(answer: httpx2.Response) -> str:
    """The nonce a `use_dpop_nonce` refusal hands the client (RFC 9449 §9)."""
    assert answer.status_code == 401, answer.text
    challenges = answer.headers.get_list("www-authenticate")
    dpop = [c for c in challenges if c.startswith("DPoP ")]
    assert len(dpop) == 1 and 'error="use_dpop_nonce"' in dpop[0] and "algs=" in dpop[0], challenges
    assert "nonce" in answer.json()["error"]["message"]
    assert_clean(answer.text)
    nonce = answer.headers.get("dpop-nonce")
    assert nonce, answer.headers
    return nonce


def test_a_proof_without_the_nonce_is_asked_for_it_and_admitted_with_it(idp: Issuer, gateway: Served) -> None:
    key = ECKey.generate_key("P-256")
    url = _tools(gateway)
    token = _bound(idp, url, key)
    nonce = _asks_for_nonce(_send(url, token, dpop_proof(key, "POST", url, token)))
    assert _send(url, token, dpop_proof(key, "POST", url, token, nonce=nonce)).status_code == 200
    assert _send(url, token, dpop_proof(key, "POST", url, token, nonce=nonce)).status_code == 200  # until it rotates


def test_a_nonce_the_deployment_did_not_make_is_refused(idp: Issuer, gateway: Served) -> None:
    key = ECKey.generate_key("P-256")
    url = _tools(gateway)
    token = _bound(idp, url, key)
    foreign = DpopNonces(parse_state_key(new_state_key(), "a test key")).current()
    for nonce in (foreign, "not-a-nonce", "0." + "A" * 22, "é" * 8):
        _asks_for_nonce(_send(url, token, dpop_proof(key, "POST", url, token, nonce=nonce)))


def test_the_first_401_already_carries_a_nonce(gateway: Served) -> None:
    answer = httpx2.post(_tools(gateway), json=LIST, timeout=30)
    assert answer.status_code == 401
    assert answer.headers.get("dpop-nonce")  # a client can sign its first proof with it


def test_a_nonce_from_one_replica_is_good_at_another_with_the_same_state_key(idp: Issuer, tmp_path: Path) -> None:
    with ExitStack() as stack:
        first = stack.enter_context(oauth_gateway(tmp_path / "a", idp.url, "--dpop-nonce", env=KEY_ENV))
        public = ("--dpop-nonce", "--public-url", first.url)  # behind one balancer: one public URL
        second = stack.enter_context(oauth_gateway(tmp_path / "b", idp.url, *public, env=KEY_ENV))
        key = ECKey.generate_key("P-256")
        url = _tools(first)
        token = _bound(idp, url, key)
        nonce = _asks_for_nonce(_send(url, token, dpop_proof(key, "POST", url, token)))
        assert _send(_tools(second), token, dpop_proof(key, "POST", url, token, nonce=nonce)).status_code == 200


def test_nonces_rotate_and_the_previous_one_is_still_taken() -> None:
    nonces = DpopNonces(parse_state_key(STATE_KEY, "the test key"), period=300)
    now = 1_800_000_000.0
    old = nonces.current(now)
    assert nonces.accepts(old, now + 300) and nonces.current(now + 300) != old  # rotated, the old still good
    assert not nonces.accepts(old, now + 600)  # two steps on: refused
