"""The issuer's JWKS is used for its `Cache-Control: max-age` (bounded 5 to 60 minutes) and fetched again
after it, so a key the issuer removed stops being trusted; an unknown `kid` fetches it again at most once per
interval, so a flood of made-up `kid`s costs the issuer one fetch and delays a newly published key by at most
that interval. The issuer is nginx (Debian's, real) serving the metadata and a JWKS file with `max-age=600`;
the keys rotate by rewriting that file. The `Issuer`'s clock is the test's, so no test waits 10 minutes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest
from joserfc.jwk import RSAKey

from gateway.auth.oauth_issuers import Issuer, jwks_max_age
from gateway.auth.oauth_tokens import TokenRefused, TokenVerifier, token_digest
from tests.conftest import free_port
from tests.nginx import main_conf
from tests.peers import debian_bin
from tests.processes import running

from ..conftest import assert_clean
from ..oauth_peers import claims_for, mint, oauth_gateway

AUDIENCE = "http://127.0.0.1:9/v1/mcp/tools"


@dataclass
class JwksSite:
    url: str
    folder: Path

    def publish(self, *keys: RSAKey) -> None:
        jwks = {"keys": [{**key.as_dict(private=False), "use": "sig", "alg": "RS256"} for key in keys]}
        target = self.folder / "site" / "jwks.json"
        target.with_suffix(".tmp").write_text(json.dumps(jwks))
        target.with_suffix(".tmp").replace(target)

    def fetches(self) -> int:
        log = self.folder / "access.log"
        return sum(" /jwks.json " in line for line in log.read_text().splitlines()) if log.exists() else 0


@contextmanager
def jwks_site(folder: Path) -> Generator[JwksSite]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    (folder / "site" / ".well-known").mkdir(parents=True)
    metadata = {"issuer": url, "jwks_uri": f"{url}/jwks.json", "token_endpoint": f"{url}/token"}
    (folder / "site" / ".well-known" / "oauth-authorization-server").write_text(json.dumps(metadata))
    http = f"""
    access_log {folder}/access.log;
    default_type application/json;
    server {{
        listen 127.0.0.1:{port};
        root {folder}/site;
        location = /jwks.json {{ add_header Cache-Control "public, max-age=600"; }}
    }}
    """
    # As root, nginx's worker would read the (0700) test folder as `nobody`: it runs as the test's user instead.
    (folder / "nginx.conf").write_text("user root;\n" * (os.geteuid() == 0) + main_conf(folder, http))
    with running(
        [debian_bin("nginx"), "-p", str(folder), "-c", str(folder / "nginx.conf"), "-g", "daemon off;"], port=port
    ):
        yield JwksSite(url, folder)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid})


async def _admitted(
    verifier: TokenVerifier, site: JwksSite, key: RSAKey, kid: str | None = None, *, token: str | None = None
) -> bool:
    token = token or mint(key, claims_for(site.url, AUDIENCE), kid=kid or key.kid)
    try:
        await verifier.verify(token, token_digest(token))
    except TokenRefused as exc:
        assert exc.status == 401 and "does not publish" in exc.description, exc.description
        return False
    return True


@pytest.mark.anyio
async def test_a_removed_key_stops_being_trusted_after_max_age_and_a_kid_flood_delays_a_new_key_one_interval(
    tmp_path: Path,
) -> None:
    old, new, later = _key("old"), _key("new"), _key("later")
    with jwks_site(tmp_path) as site:
        site.publish(old)
        clock = Clock()
        issuer = Issuer(site.url, clock=clock)
        verifier = TokenVerifier([issuer])
        await verifier.start()
        first = mint(old, claims_for(site.url, AUDIENCE), kid="old")
        assert site.fetches() == 1 and await _admitted(verifier, site, old, token=first)

        # The issuer rotates: `old` is gone, `new` is in. Within the JWKS's max-age (600 s, not the 300 s floor)
        # the keys held are used, without asking the issuer.
        site.publish(new)
        clock.now += 599
        assert await _admitted(verifier, site, old)
        assert await _admitted(verifier, site, old, token=first)  # from the verifier's cache
        assert site.fetches() == 1
        # Past it, the next token fetches the JWKS again: `old` is no longer trusted, `new` is.
        clock.now += 2
        assert not await _admitted(verifier, site, old)
        assert site.fetches() == 2
        # A token admitted (and cached) before is checked again with the new keys: refused now, not at its expiry.
        assert verifier.cached(token_digest(first)) is None
        assert not await _admitted(verifier, site, old, token=first)
        assert await _admitted(verifier, site, new)
        assert site.fetches() == 2

        # A flood of made-up kids: one fetch for all of them.
        clock.now += issuer.refetch_interval
        stranger = _key("stranger")
        for n in range(40):
            assert not await _admitted(verifier, site, stranger, kid=f"made-up-{n}")
        assert site.fetches() == 3
        # A real key published now is refused while the flood holds the allowance, and found at the next one.
        site.publish(new, later)
        assert not await _admitted(verifier, site, later)
        clock.now += issuer.refetch_interval
        assert await _admitted(verifier, site, later)
        assert site.fetches() == 4


def test_the_max_age_is_bounded_to_five_to_sixty_minutes() -> None:
    assert jwks_max_age("public, max-age=600") == 600
    assert jwks_max_age(None) == jwks_max_age("no-store") == jwks_max_age("max-age=0") == 300
    assert jwks_max_age("max-age=86400") == jwks_max_age("MAX-AGE=86400, must-revalidate") == 3600
    assert jwks_max_age("no-cache, max-age=900") == jwks_max_age("max-age=ten") == 300


def test_a_served_gateway_stops_admitting_a_token_whose_key_a_refresh_no_longer_finds(tmp_path: Path) -> None:
    old, new = _key("old"), _key("new")
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    with jwks_site(tmp_path / "idp") as site:
        site.publish(old)
        with oauth_gateway(tmp_path / "gw", site.url) as gateway:
            tools = f"{gateway.url}/v1/mcp/tools"

            def call(token: str) -> httpx2.Response:
                return httpx2.post(tools, json=listing, headers={"authorization": f"Bearer {token}"}, timeout=30)

            before = mint(old, claims_for(site.url, tools), kid="old")
            assert call(before).status_code == 200
            assert call(before).status_code == 200  # admitted from the gate's memo now
            # The issuer rotates `old` out; the first token signed with `new` makes the gateway fetch the JWKS.
            site.publish(new)
            assert call(mint(new, claims_for(site.url, tools), kid="new")).status_code == 200
            # The token admitted before is checked against the keys now held: refused, though it has not expired.
            refused = call(before)
            assert refused.status_code == 401, refused.text
            assert "does not publish" in refused.json()["error"]["message"]
            assert_clean(refused.text)
