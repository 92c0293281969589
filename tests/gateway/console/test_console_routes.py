"""The console's routes refuse what they must, on a real `agent-sdk serve`: no data and no action without
the chain's credentials, none from a foreign Origin, no action for a non-operator, no login completed by a
redirect the gateway did not start."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from tests.conftest import free_port
from tests.peers import node_bin

from ..conftest import Served, assert_clean, serving

TOKEN = "console-test-token-0123456789"
"""The operator's token (`--operator-token`); a `--bearer-token` is a peer's and acts on nothing here."""


def _everything() -> dict[str, str]:
    command = str(node_bin("mcp-server-everything"))
    return {
        "everything": "from connections import define_connection\n\n"
        f"connection = define_connection(command={command!r}, args=['stdio'], advertise_tools=True)\n",
        "broken": "from connections import define_connection\n\n"
        f"connection = define_connection(url='http://127.0.0.1:{free_port()}/mcp')\n",
        "locked": "from connections import define_connection\n\n"
        f"connection = define_connection(url='http://127.0.0.1:{free_port()}/mcp', oauth=True)\n",
    }


@pytest.fixture(scope="module")
def bearer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(
        tmp_path_factory, "console-bearer", _everything(), "--bearer-token", "console-peer-token-0123456789",
        "--operator-token", TOKEN,
    ) as served:  # fmt: skip
        yield served


@pytest.fixture(scope="module")
def anonymous(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory, "console-anonymous", _everything(), "--allow-anonymous", "--access-log") as served:
        yield served


def _operator(served: Served) -> httpx2.Client:
    """A client that sends the operator's token on every request."""
    return httpx2.Client(base_url=served.url, timeout=30.0, headers={"Authorization": f"Bearer {TOKEN}"})


def _opens(served: Served) -> int:
    with _operator(served) as http:
        data = http.get("/v1/connections").json()
    return next(c["opens"] for c in data["connections"] if c["name"] == "everything")


def test_without_the_bearer_token_the_console_serves_its_shell_but_no_data_and_no_action(bearer: Served) -> None:
    with bearer.client() as http:
        shell = http.get("/")
        assert shell.status_code == 200
        assert "script-src 'self'" in shell.headers["content-security-policy"]
        assert "everything" not in shell.text  # the shell carries no data
        assert http.get("/v1/connections").status_code == 401
        assert http.get("/v1/info").status_code == 401
        opens = _opens(bearer)
        for path in ("/v1/connections/everything/restart", "/v1/connections/everything/login"):
            refused = http.post(path, json={})
            assert refused.status_code == 401, path
            assert refused.json()["error"] == "unauthorized"
        wrong = http.post("/v1/connections/everything/restart", json={}, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
    assert _opens(bearer) == opens  # nothing was restarted


def test_a_foreign_origin_cannot_read_the_console_data_or_act_even_with_the_token(bearer: Served) -> None:
    opens = _opens(bearer)
    other_port = f"http://127.0.0.1:{bearer.port + 1}"
    with _operator(bearer) as http:
        for origin in ("https://evil.example", other_port, "null"):
            data = http.get("/v1/connections", headers={"Origin": origin})
            assert data.status_code == 403, origin
            assert data.json()["error"] == "forbidden_origin"
            action = http.post("/v1/connections/everything/restart", json={}, headers={"Origin": origin})
            assert action.status_code == 403, origin
        # A form post (not JSON) is refused even from the gateway's own origin.
        form = http.post(
            "/v1/connections/everything/restart",
            content=b"a=1",
            headers={"Origin": bearer.url, "Content-Type": "application/x-www-form-urlencoded"},
        )
        assert form.status_code == 415
        same = http.get("/v1/connections", headers={"Origin": bearer.url})
        assert same.status_code == 200 and same.json()["operator"] is True
    assert _opens(bearer) == opens


def test_an_operator_restarts_a_connection_and_it_reopens_on_the_next_look(bearer: Served) -> None:
    with _operator(bearer) as http:
        before = next(c for c in http.get("/v1/connections").json()["connections"] if c["name"] == "everything")
        assert before["state"] == "ready" and before["pid"]
        done = http.post("/v1/connections/everything/restart", json={})
        assert done.status_code == 200 and done.json() == {"ok": True, "connection": "everything", "restarted": True}
        after = next(c for c in http.get("/v1/connections").json()["connections"] if c["name"] == "everything")
        assert after["state"] == "ready"
        assert after["opens"] == before["opens"] + 1
        assert after["pid"] != before["pid"]  # a new child process
        missing = http.post("/v1/connections/nope/restart", json={})
        assert missing.status_code == 404 and missing.json()["error"] == "unknown_connection"
        not_oauth = http.post("/v1/connections/everything/login", json={})
        assert not_oauth.status_code == 400
        assert "oauth=True" in not_oauth.json()["message"]


def test_an_anonymous_principal_may_look_but_not_act(anonymous: Served) -> None:
    with anonymous.client() as http:
        look = http.get("/v1/connections")
        assert look.status_code == 200
        assert look.json()["operator"] is False and look.json()["principal"] == "anonymous"
        for path in (
            "/v1/connections/everything/restart",
            "/v1/connections/everything/login",
            "/v1/connections/everything/logout",
        ):
            refused = http.post(path, json={})
            assert refused.status_code == 403, path
            assert refused.json()["error"] == "operator_required"
        for path in ("/v1/failures", "/v1/log", "/v1/principals"):
            assert http.get(path).json()["error"] == "operator_required", path


def test_a_redirect_the_gateway_did_not_start_completes_no_login(bearer: Served) -> None:
    with bearer.client() as http:
        forged = http.get("/v1/oauth/callback", params={"code": "stolen", "state": "forged"})
    assert forged.status_code == 400
    assert "matches no login started from the console" in forged.text
    assert "default-src 'none'" in forged.headers["content-security-policy"]
    assert not (bearer.state_root / "mcp-auth.json").exists()


def test_looking_at_a_failing_connection_does_not_retry_it_but_a_restart_does(bearer: Served) -> None:
    def broken(http: httpx2.Client) -> dict[str, Any]:
        return next(c for c in http.get("/v1/connections").json()["connections"] if c["name"] == "broken")

    with _operator(bearer) as http:
        first = broken(http)
        assert first["state"] == "failing"
        assert "cannot connect" in first["cause"]
        for _ in range(3):
            again = broken(http)
            assert (again["state"], again["opens"], again["cause"]) == ("failing", first["opens"], first["cause"])
        assert http.post("/v1/connections/broken/restart", json={}).status_code == 200
        retried = broken(http)
        assert retried["state"] == "failing"
        assert retried["opens"] == first["opens"] + 1


def test_a_login_to_an_unreachable_server_is_one_sentence(bearer: Served) -> None:
    with _operator(bearer) as http:
        status = next(c for c in http.get("/v1/connections").json()["connections"] if c["name"] == "locked")
        assert status["state"] == "needs_login"
        assert status["oauth"]["loggedIn"] is False
        failed = http.post("/v1/connections/locked/login", json={})
    assert failed.status_code == 502
    assert failed.json()["error"] == "login_failed"
    assert "cannot reach http://127.0.0.1:" in failed.json()["message"]
    assert_clean(failed.text)


def test_the_callback_query_never_reaches_the_access_log(anonymous: Served) -> None:
    code, state = "an-authorization-code-4f9c2e", "a-login-state-value-7d1a3b"
    with anonymous.client() as http:
        answer = http.get("/v1/oauth/callback", params={"code": code, "state": state})
        assert answer.status_code == 400
        http.get("/v1/health")  # a later line, so the callback's access line has surely been written
    log = anonymous.log_text()
    assert "/v1/oauth/callback" in log
    assert code not in log and state not in log


def test_the_last_failures_are_what_the_log_says_newest_first(bearer: Served) -> None:
    with bearer.client() as anonymous:
        refused = anonymous.get("/v1/sessions", headers={"X-Request-Id": "console-trace-1"})
        assert refused.status_code == 401  # a refusal: logged as a warning, with the request id
    with _operator(bearer) as http:
        failures = http.get("/v1/failures").json()["failures"]
    assert failures
    newest = failures[0]
    assert newest["level"] == "warning"
    assert "/v1/sessions" in newest["message"] and "unauthorized" in newest["message"]
    assert newest["requestId"] == "console-trace-1" == refused.json()["requestId"]
    log = bearer.log_text()
    assert "console-trace-1" in log  # the id the log line carries
    assert all(f["message"] in log for f in failures)  # the very lines of the log
    assert [f["at"] for f in failures] == sorted((f["at"] for f in failures), reverse=True)


def test_the_shell_has_no_inline_script_style_or_handler_and_a_strict_policy(bearer: Served) -> None:
    with bearer.client() as http:
        page = http.get("/")
        script = http.get("/console/console.js")
        style = http.get("/console/console.css")
    assert [r.status_code for r in (page, script, style)] == [200, 200, 200]
    assert script.headers["content-type"].startswith("text/javascript")
    assert style.headers["content-type"].startswith("text/css")
    html = page.text
    assert re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", html) == []  # every script is a file of this origin
    assert re.findall(r"\son[a-z]+\s*=", html) == []  # no inline event handler
    assert "<style" not in html and "style=" not in html
    assert re.findall(r"(?:src|href)=\"(?!/)[^\"]*\"", html) == []  # nothing from another origin
    policy = page.headers["content-security-policy"]
    for directive in ("default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'"):
        assert directive in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert page.headers["x-content-type-options"] == "nosniff"
