"""Bad access tokens at `serve --oauth-issuer`: each refused with its status and `WWW-Authenticate`,
no traceback, and a log line naming the code only. oidc-provider (real, npm) makes the token where it
can (another audience, another resource, an opaque token it revokes); the rest are signed with its
own key (read from its key file), or with another, for claims it would never issue.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Iterator

import httpx2
import pytest
from joserfc.jwk import RSAKey

from oauth import parse_www_authenticate

from ..conftest import Served, assert_clean
from ..oauth_peers import Issuer, claims_for, mint, oauth_gateway, revoke, service_token

LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
OPERATOR = "the-operator-token-0123456789"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, idp: Issuer) -> Iterator[Served]:
    operator = {"AGENT_SDK_OPERATOR_TOKEN": OPERATOR}
    with oauth_gateway(tmp_path_factory.mktemp("oauth-bad"), idp.url, env=operator) as served:
        yield served
    assert_clean(served.log_text())


def _tools(gateway: Served) -> str:
    return f"{gateway.url}/v1/mcp/tools"


def _call(gateway: Served, token: str, *, query: str = "") -> httpx2.Response:
    return httpx2.post(_tools(gateway) + query, json=LIST, headers={"authorization": f"Bearer {token}"}, timeout=30)


def _refused(answer: httpx2.Response, gateway: Served, *, status: int = 401, error: str = "invalid_token") -> str:
    """The refusal's description, after checking its status, challenge, body and the log."""
    assert answer.status_code == status, answer.text
    challenge = parse_www_authenticate(answer.headers["www-authenticate"])
    assert challenge is not None
    assert challenge.error == error
    assert challenge.resource_metadata == f"{gateway.url}/.well-known/oauth-protected-resource/v1/mcp/tools"
    body = answer.json()
    assert body["error"]["data"]["error"] == error
    assert_clean(answer.text)
    assert f"refused POST /v1/mcp/tools: {error}" in gateway.log_text()
    return challenge.error_description or ""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unsigned(header: dict[str, object], claims: dict[str, object], signature: bytes = b"") -> str:
    head = _b64(json.dumps(header).encode()) + "." + _b64(json.dumps(claims).encode())
    return head + "." + _b64(signature)


def test_a_good_token_is_admitted(gateway: Served, idp: Issuer) -> None:
    assert _call(gateway, service_token(idp.url, _tools(gateway))).status_code == 200
    assert _call(gateway, mint(idp.key, claims_for(idp.url, _tools(gateway)))).status_code == 200


def test_an_expired_token_is_refused(gateway: Served, idp: Issuer) -> None:
    now = int(time.time())
    token = mint(idp.key, claims_for(idp.url, _tools(gateway), iat=now - 900, exp=now - 300))
    assert "expired" in _refused(_call(gateway, token), gateway)


def test_a_token_not_yet_valid_is_refused(gateway: Served, idp: Issuer) -> None:
    token = mint(idp.key, claims_for(idp.url, _tools(gateway), nbf=int(time.time()) + 300))
    assert "not valid yet" in _refused(_call(gateway, token), gateway)


def test_a_token_for_another_audience_is_refused(gateway: Served, idp: Issuer) -> None:
    token = service_token(idp.url, "https://elsewhere.example/mcp")
    assert "another resource" in _refused(_call(gateway, token), gateway)


def test_a_token_for_the_other_endpoint_is_refused_here(gateway: Served, idp: Issuer) -> None:
    # RFC 8707: a token for /v1/mcp is not one for /v1/mcp/tools, though both are this gateway's.
    token = service_token(idp.url, f"{gateway.url}/v1/mcp")
    assert "another resource" in _refused(_call(gateway, token), gateway)


def test_a_token_admitted_before_is_still_refused_at_the_endpoint_it_is_not_for(gateway: Served, idp: Issuer) -> None:
    # Its next requests take the memo (no signature check again): the verdict is still per resource.
    token = service_token(idp.url, _tools(gateway))
    other = f"{gateway.url}/v1/mcp"
    for _ in range(2):
        assert _call(gateway, token).status_code == 200
        answer = httpx2.post(other, json=LIST, headers={"authorization": f"Bearer {token}"}, timeout=30)
        assert answer.status_code == 401, answer.text
        challenge = parse_www_authenticate(answer.headers["www-authenticate"])
        assert challenge is not None and challenge.error == "invalid_token"
        assert "another resource" in (challenge.error_description or "")


def test_a_token_from_another_issuer_is_refused(gateway: Served, idp: Issuer) -> None:
    token = mint(idp.key, claims_for("https://evil.example", _tools(gateway)))
    assert "does not trust" in _refused(_call(gateway, token), gateway)


def test_alg_none_is_refused(gateway: Served, idp: Issuer) -> None:
    token = _unsigned({"alg": "none", "typ": "at+jwt"}, claims_for(idp.url, _tools(gateway)))
    assert "alg" in _refused(_call(gateway, token), gateway)


def test_hs256_signed_with_the_issuers_public_key_is_refused(gateway: Served, idp: Issuer) -> None:
    # The classic key-confusion attack: the RSA public key (public: the JWKS) used as an HMAC secret.
    header = {"alg": "HS256", "typ": "at+jwt", "kid": "test-rs256"}
    claims = claims_for(idp.url, _tools(gateway))
    secret = idp.key.as_pem(private=False)
    signing_input = _unsigned(header, claims).rsplit(".", 1)[0].encode()
    token = _unsigned(header, claims, hmac.new(secret, signing_input, hashlib.sha256).digest())
    assert "alg" in _refused(_call(gateway, token), gateway)


def test_a_token_signed_by_a_key_the_issuer_does_not_publish_is_refused(gateway: Served, idp: Issuer) -> None:
    stranger = RSAKey.generate_key(2048)
    token = mint(stranger, claims_for(idp.url, _tools(gateway)), kid="rotated-away")
    assert "does not publish" in _refused(_call(gateway, token), gateway)
    forged = mint(stranger, claims_for(idp.url, _tools(gateway)))  # the issuer's kid, another key
    assert "signature" in _refused(_call(gateway, forged), gateway)


def test_a_token_in_the_query_string_is_refused(gateway: Served, idp: Issuer) -> None:
    token = service_token(idp.url, _tools(gateway))
    answer = httpx2.post(f"{_tools(gateway)}?access_token={token}", json=LIST, timeout=30)
    assert "Authorization header" in _refused(answer, gateway, status=400, error="invalid_request")
    assert token not in gateway.log_text()


def test_an_opaque_token_is_introspected_and_refused_once_revoked(gateway: Served, idp: Issuer) -> None:
    live = service_token(idp.url, _tools(gateway), client="opaque-service")
    assert "." not in live  # opaque, not a JWT
    assert _call(gateway, live).status_code == 200
    revoked = service_token(idp.url, _tools(gateway), client="opaque-service")
    revoke(idp.url, revoked)
    assert "not active" in _refused(_call(gateway, revoked), gateway)
    # Replayed, it is refused from memory: the issuer is not asked again for each request.
    asked = idp.server.stats()["introspections"]
    assert "not active" in _refused(_call(gateway, revoked), gateway)
    assert idp.server.stats()["introspections"] == asked


def _failures(gateway: Served) -> list[dict[str, object]]:
    answer = httpx2.get(f"{gateway.url}/v1/failures", headers={"authorization": f"Bearer {OPERATOR}"}, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()["failures"]


def test_oversized_and_deeply_nested_tokens_are_refused_with_a_sentence_not_a_traceback(
    gateway: Served, idp: Issuer
) -> None:
    failures = len(_failures(gateway))
    claims = claims_for(idp.url, _tools(gateway))
    nested = "[" * 4800 + "]" * 4800  # 13 KB of JSON that makes a recursive parser overflow
    deep_payload = _b64(json.dumps(claims).encode()[:-1] + b', "x": ' + nested.encode() + b"}")
    header = _b64(json.dumps({"alg": "RS256", "typ": "at+jwt", "kid": "test-rs256"}).encode())
    token = f"{header}.{deep_payload}.{_b64(b'sig')}"
    assert 12_000 < len(token) < 16_000
    assert "payload nests JSON more than" in _refused(_call(gateway, token), gateway)
    deep_header = _b64(b'{"alg": "RS256", "x": ' + nested.encode() + b"}")
    token = f"{deep_header}.{_b64(json.dumps(claims).encode())}.{_b64(b'sig')}"
    assert "header nests JSON more than" in _refused(_call(gateway, token), gateway)
    # A signed token whose claim nests deep is refused before its signature is checked.
    signed = mint(idp.key, {**claims, "x": json.loads("[" * 40 + "]" * 40)})
    assert "payload nests JSON more than" in _refused(_call(gateway, signed), gateway)
    huge = mint(idp.key, {**claims, "padding": "x" * 20_000})
    assert "characters long; at most" in _refused(_call(gateway, huge), gateway)
    log = gateway.log_text()
    assert "RecursionError" not in log and " ERROR " not in log
    assert_clean(log)
    # A bad token is the caller's error: /v1/failures shows the refusals (warnings naming the code), no error.
    now = _failures(gateway)
    added = now[: len(now) - failures]
    refused = "refused POST /v1/mcp/tools: invalid_token"
    assert added and all(f["level"] == "warning" and f["message"] == refused for f in added), added
