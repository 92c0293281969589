"""The files in `deploy/` run as shipped: the systemd unit passes `systemd-analyze verify` with a low
exposure score, and `deploy/nginx.conf` (real nginx, its TLS example lines switched on) serves the
gateway over TLS and never writes an OAuth callback's `code` or `state` into its access log."""

from __future__ import annotations

import re
import shlex
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from gateway.cli import build_parser
from gateway.settings import ServeSettings
from tests.conftest import free_port
from tests.gateway.conftest import Served, make_project, serve
from tests.nginx import main_conf
from tests.peers import debian_bin
from tests.processes import running

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "deploy" / "agent-sdk.service"
NGINX = ROOT / "deploy" / "nginx.conf"
CODE, STATE = "an-authorization-code-51f0", "a-login-state-9c3e"
BEARER = "deploy-files-bearer-token-7a2c"
AUTH = {"Authorization": f"Bearer {BEARER}"}


def test_the_systemd_unit_verifies_and_is_hardened(tmp_path: Path) -> None:
    text = UNIT.read_text()
    for option in ("NoNewPrivileges=yes", "ProtectSystem=strict", "PrivateTmp=yes", "StateDirectory=agent-sdk"):
        assert f"\n{option}\n" in text, option
    exec_start = re.search(r"^ExecStart=(.+)$", text, re.M)
    assert exec_start is not None
    argv = shlex.split(exec_start[1])
    assert argv[0] == "/opt/agent-sdk/.venv/bin/agent-sdk"
    build_parser().parse_args(argv[1:])  # every flag it passes exists
    # verify checks that the command exists: point it at this checkout's console script.
    unit = tmp_path / "agent-sdk.service"
    unit.write_text(text.replace(argv[0], str(Path(sys.executable).parent / "agent-sdk")))
    analyze = debian_bin("systemd-analyze")
    verified = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60, check=False)
    assert verified.returncode == 0 and verified.stdout + verified.stderr == "", verified.stdout + verified.stderr
    security = subprocess.run(
        [analyze, "security", "--offline=yes", str(unit)], capture_output=True, text=True, timeout=60, check=False
    )
    exposure = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", security.stdout)
    assert exposure is not None, security.stdout + security.stderr
    assert float(exposure[1]) <= 2.0, security.stdout  # systemd calls up to 2.0 "OK" (10.0: unprotected)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("deploy-gateway")
    # Replicas behind nginx run the bearer chain (docs/deploy.md): nginx's workers are not our user.
    served = serve(make_project(root / "project"), root / "state", env={"AGENT_SDK_BEARER_TOKEN": BEARER})
    try:
        yield served
    finally:
        served.stop()


def _tls_config(gateway_port: int, port: int, folder: Path, cert: Path, key: Path) -> str:
    """deploy/nginx.conf with its replicas pointed at `gateway_port`, its TLS lines on (instead of
    `listen 8080;`) and its access log in `folder`."""
    text = NGINX.read_text()
    text, n = re.subn(
        r"(# replicas: begin\n).*?(\s*# replicas: end)",
        rf"\g<1>    server 127.0.0.1:{gateway_port};\g<2>",
        text,
        flags=re.S,
    )
    assert n == 1
    text, n = re.subn(r"\n    listen 8080;[^\n]*", "", text)
    assert n == 1
    tls = re.search(r"\n    # listen 443 ssl http2;\n(    # ssl_[^\n]*\n)+", text)
    assert tls is not None, "deploy/nginx.conf lost its TLS example"
    lines = tls[0].replace("    # ", "    ")
    lines = lines.replace("listen 443 ssl http2;", f"listen 127.0.0.1:{port} ssl http2;")
    lines = re.sub(r"ssl_certificate\s+\S+;", f"ssl_certificate {cert};", lines)
    lines = re.sub(r"ssl_certificate_key\s+\S+;", f"ssl_certificate_key {key};", lines)
    text = text.replace(tls[0], lines)
    text, n = re.subn(r"/var/log/nginx/", f"{folder}/", text)
    assert n == 1
    return text


@pytest.fixture(scope="module")
def tls_front(gateway: Served, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path]]:
    folder = tmp_path_factory.mktemp("deploy-nginx")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    port = free_port()
    (folder / "agent-sdk.conf").write_text(_tls_config(gateway.port, port, folder, cert, key))
    main = folder / "nginx.conf"
    main.write_text(main_conf(folder, f"include {folder}/agent-sdk.conf;", error_log="warn"))
    with running([debian_bin("nginx"), "-p", str(folder), "-c", str(main), "-g", "daemon off;"], port=port):
        yield f"https://127.0.0.1:{port}", cert, folder / "agent-sdk.access.log"


def _logged(log: Path, last: str) -> str:
    """The access log once nginx has written the line of the last request: nginx logs a request after
    its answer is sent, so a client that reads the file at once can be ahead of it (CI saw that)."""
    deadline = time.monotonic() + 10
    while last not in (text := log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return text


def test_the_tls_example_serves_the_gateway(tls_front: tuple[str, Path, Path]) -> None:
    base, cert, _log = tls_front
    with httpx2.Client(base_url=base, verify=ssl.create_default_context(cafile=str(cert)), timeout=30) as http:
        assert http.get("/v1/health").json() == {"ok": True}
        tools = http.get("/v1/tools", headers=AUTH)
        assert tools.status_code == 200 and tools.json()["ok"] is True, tools.text


def test_the_access_log_holds_no_callback_code_or_state(tls_front: tuple[str, Path, Path]) -> None:
    base, cert, log = tls_front
    callback = f"/v1/oauth/callback?code={CODE}&state={STATE}"
    with httpx2.Client(base_url=base, verify=ssl.create_default_context(cafile=str(cert)), timeout=30) as http:
        http.get(callback)  # whatever the gateway answers (no login is pending), nginx logs the request
        # The page the callback answers may send the browser on: its Referer carries the query.
        http.get("/v1/health?probe=1", headers={"Referer": f"{base}{callback}"})
        http.get("/v1/tools?cursor=kept", headers=AUTH)
    text = _logged(log, "/v1/tools?cursor=kept")
    assert '"GET /v1/oauth/callback HTTP/1.1"' in text, text
    assert "/v1/tools?cursor=kept" in text, text  # other queries are logged as they came
    assert CODE not in text and STATE not in text, text


def test_nginx_drops_an_idle_replica_connection_before_the_replica_does() -> None:
    # A replica closing an idle keep-alive connection just as nginx sends a POST on it fails that POST, and
    # nginx never resends a POST (docs/deploy.md): nginx's upstream keepalive_timeout must be the shorter one.
    upstream = NGINX.read_text().split("upstream agent_sdk {", 1)[1].split("}", 1)[0]
    found = re.search(r"^\s*keepalive_timeout\s+(\d+)s;", upstream, re.MULTILINE)
    assert found is not None, "deploy/nginx.conf's upstream block sets no keepalive_timeout (nginx's default is 60 s)"
    assert int(found.group(1)) < ServeSettings().idle_timeout_s  # the replicas' default --timeout-keep-alive
