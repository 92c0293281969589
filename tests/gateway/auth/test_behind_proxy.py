"""A real nginx in front of `agent-sdk serve`: loopback-strict never trusts a proxy (even a stock
`proxy_pass` that announces nothing), and `--trusted-proxy` takes the client address from the
proxy's `X-Forwarded-For` for a bearer-chain replica."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from tests.connections.client.test_fast_calls import nginx

from ..conftest import BASIC, Served, assert_clean, serve

TOKEN = "proxy-token-0123456789abcdef"


def _worker_uids(pid_file: Path) -> set[int]:
    master = pid_file.read_text().strip()
    uids: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("PPid", "").strip() == master:
            uids.add(int(fields["Uid"].split()[1]))
    return uids


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    served = serve(BASIC, tmp_path_factory.mktemp("strict") / "state")
    yield served
    served.stop()
    assert_clean(served.log_text())


def test_loopback_strict_refuses_a_stock_proxy_pass_that_announces_nothing(
    strict: Served, tmp_path_factory: pytest.TempPathFactory
) -> None:
    tmp = tmp_path_factory.mktemp("nginx-stock")
    # The stock front of the issue: no forwarding header, a loopback Host, from a loopback address.
    with nginx(tmp, f"location / {{ proxy_pass http://127.0.0.1:{strict.port}; }}") as port:
        uids = _worker_uids(tmp / "nginx.pid")
        assert uids and os.geteuid() not in uids, f"nginx's worker must run as another user here: {uids}"
        via_proxy = httpx2.get(f"http://127.0.0.1:{port}/v1/tools", timeout=30)
        write_via_proxy = httpx2.post(f"http://127.0.0.1:{port}/v1/tools/bump", json={"input": {}}, timeout=30)
    direct = httpx2.get(f"{strict.url}/v1/tools", timeout=30)
    assert via_proxy.status_code == 401, via_proxy.text
    assert "not a process of this user" in via_proxy.json()["message"]
    assert write_via_proxy.status_code == 401
    assert direct.status_code == 200


@pytest.mark.parametrize(
    "header",
    [
        "Via",
        "X-Client-IP",
        "True-Client-IP",
        "CF-Connecting-IP",
        "Client-IP",
        "Fastly-Client-IP",
        "X-Cluster-Client-IP",
    ],
)
def test_loopback_strict_refuses_every_forwarding_header(strict: Served, header: str) -> None:
    answer = httpx2.get(f"{strict.url}/v1/tools", headers={header: "203.0.113.9"}, timeout=30)
    assert answer.status_code == 401, answer.text


@pytest.fixture(scope="module")
def replica(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    # nginx connects from 127.0.0.2 (`proxy_bind`), the one trusted proxy; clients come from 127.0.0.1.
    served = serve(
        BASIC, tmp_path_factory.mktemp("replica") / "state",
        "--bearer-token", TOKEN, "--trusted-proxy", "127.0.0.2/32", "--access-log",
    )  # fmt: skip
    yield served
    served.stop()
    assert_clean(served.log_text(), secrets=[TOKEN])


def test_a_trusted_proxy_names_the_client_and_the_bearer_chain_admits(
    replica: Served, tmp_path_factory: pytest.TempPathFactory
) -> None:
    tmp = tmp_path_factory.mktemp("nginx-trusted")
    front = f"""
        location / {{
            proxy_pass http://127.0.0.1:{replica.port};
            proxy_bind 127.0.0.2;
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        }}"""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with nginx(tmp, front) as port:
        # The client forges a first hop; nginx appends the address it saw (127.0.0.1).
        through = httpx2.get(
            f"http://127.0.0.1:{port}/v1/tools?via=proxy",
            headers={**auth, "X-Forwarded-For": "203.0.113.7"},
            timeout=30,
        )
        anonymous = httpx2.get(f"http://127.0.0.1:{port}/v1/tools", timeout=30)
    # A peer that is not a trusted proxy: its forwarding header names no one.
    direct = httpx2.get(f"{replica.url}/v1/tools?via=direct", headers={**auth, "X-Forwarded-For": "203.0.113.8"})
    assert through.status_code == 200 and direct.status_code == 200, through.text
    assert anonymous.status_code == 401
    log = replica.log_text()
    assert '127.0.0.1:0 - "GET /v1/tools?via=proxy' in log, log
    assert "203.0.113.7" not in log and "203.0.113.8" not in log and "127.0.0.2" not in log
    assert '127.0.0.1:0 - "GET /v1/tools?via=direct' not in log  # the direct peer's own port is logged


def test_trusted_proxy_needs_the_bearer_chain(tmp_path: Path) -> None:
    from tests.gateway.http.test_hardening import _cli  # pyright: ignore[reportPrivateUsage]

    done = _cli("serve", "--dir", str(BASIC), "--state-root", str(tmp_path), "--trusted-proxy", "10.0.0.0/8")
    assert done.returncode != 0 and "--trusted-proxy needs --bearer-token" in done.stderr, done.stderr
    bad = _cli("serve", "--dir", str(BASIC), "--state-root", str(tmp_path), "--trusted-proxy", "not-a-network")
    assert bad.returncode != 0 and "is not an IP address or CIDR network" in bad.stderr, bad.stderr
    assert "Traceback" not in done.stderr + bad.stderr
