"""The console's actions through the nginx front of docs/accounts.md (real nginx, the block as the doc
has it, TLS left out): a browser's action from the public origin is served, a foreign origin's is
still refused. Before the doc's `map`, every action got 403 `forbidden_origin` there."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from tests.conftest import free_port
from tests.gateway.conftest import Served, make_project, serve, url_connection
from tests.nginx import main_conf
from tests.peers import debian_bin
from tests.processes import running

ROOT = Path(__file__).resolve().parents[3]
BEARER = "console-front-token-5b1e"
OPERATOR = "console-front-operator-7c2d"
PUBLIC = "https://hub.example.com"


def documented_front(gateway_port: int, port: int) -> str:
    """The ```nginx block of docs/accounts.md, listening on `port` without TLS, passing to `gateway_port`."""
    text = (ROOT / "docs" / "accounts.md").read_text()
    block = re.search(r"```nginx\n(.*?)```", text, re.S)
    assert block is not None, "docs/accounts.md has no nginx block"
    conf = block[1]
    conf = re.sub(r"listen 443 ssl;", f"listen 127.0.0.1:{port};", conf)
    conf = re.sub(r"\s*ssl_certificate(_key)? [^;]+;", "", conf)
    assert "proxy_pass http://127.0.0.1:3000;" in conf
    return conf.replace("proxy_pass http://127.0.0.1:3000;", f"proxy_pass http://127.0.0.1:{gateway_port};")


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("console-front")
    project = make_project(root / "project", {"remote": url_connection(f"http://127.0.0.1:{free_port()}/mcp")})
    served = serve(
        project, root / "state", "--hub", env={"AGENT_SDK_BEARER_TOKEN": BEARER, "AGENT_SDK_OPERATOR_TOKEN": OPERATOR}
    )
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture(scope="module")
def front(hub: Served, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("nginx")
    port = free_port()
    conf = tmp / "nginx.conf"
    conf.write_text(main_conf(tmp, f"access_log off;\n{documented_front(hub.port, port)}"))
    with running([debian_bin("nginx"), "-p", str(tmp), "-c", str(conf), "-g", "daemon off;"], port=port):
        yield f"http://127.0.0.1:{port}"


def _restart(front: str, origin: str) -> httpx2.Response:
    # What the console page sends: the operator's token, the public Host, the page's Origin.
    headers = {"Authorization": f"Bearer {OPERATOR}", "Host": "hub.example.com", "Origin": origin}
    return httpx2.post(f"{front}/v1/connections/remote/restart", json={}, headers=headers, timeout=30)


def test_a_console_action_from_the_public_origin_is_served(front: str) -> None:
    done = _restart(front, PUBLIC)
    assert done.status_code == 200, done.text  # before: 403 forbidden_origin
    assert done.json() == {"ok": True, "connection": "remote", "restarted": True}


def test_a_foreign_origin_is_still_refused_through_the_front(front: str) -> None:
    refused = _restart(front, "https://attacker.example")
    assert refused.status_code == 403 and refused.json()["error"] == "forbidden_origin", refused.text
