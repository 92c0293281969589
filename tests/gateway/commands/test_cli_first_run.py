"""What a new user meets first on the command line: `--version`, a busy port, conflicting flags,
`--status` exit codes, and where the login key really went (issue #19 items 3, 7, 10, 11)."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.gateway.accounts.test_accounts import cli
from tests.gateway.accounts.test_cli_accounts import keyring_env
from tests.gateway.conftest import serve

ROOT = Path(__file__).resolve().parents[3]
QUICKSTART = str(ROOT / "examples" / "quickstart")


def test_version_prints_the_installed_version() -> None:
    done = cli("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "agent-sdk 0.1.0"


def test_serve_on_a_busy_port_says_so_in_one_sentence_before_any_banner(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        done = cli("serve", "--dir", QUICKSTART, "--port", str(port), "--state-root", str(tmp_path))
    assert done.returncode == 1
    assert "serving" not in done.stdout and "Errno" not in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.strip() == (
        f"agent-sdk: error: port {port} on 127.0.0.1 is already in use by another process; stop it, or pass "
        "--port N (--port 0 picks a free one)"
    )


def test_a_damaged_request_state_key_is_one_sentence_before_any_banner(tmp_path: Path) -> None:
    key = tmp_path / "request-state.key"
    key.write_text("not a key\n")
    done = cli("serve", "--dir", QUICKSTART, "--port", "0", "--state-root", str(tmp_path))
    assert done.returncode == 1
    assert "serving" not in done.stdout and "Traceback" not in done.stderr
    assert done.stderr.strip() == (
        f"agent-sdk: error: {key} does not hold a request-state key (64 hex digits); delete it and start again to "
        "make a new one (elicitation retries and task ids sealed with the old key are then refused)"
    )


def test_allow_anonymous_beside_a_bearer_token_is_refused_not_dropped(tmp_path: Path) -> None:
    token = "t" * 32
    done = cli(
        "serve", "--dir", QUICKSTART, "--bearer-token", token, "--allow-anonymous", "--state-root", str(tmp_path)
    )
    assert done.returncode == 1
    assert (
        "--allow-anonymous (AGENT_SDK_ALLOW_ANONYMOUS) and --bearer-token (AGENT_SDK_BEARER_TOKEN) exclude each other"
        in done.stderr
    )
    assert token not in done.stderr


def test_a_bad_setting_is_named_by_its_flag_without_pydantic_wording(tmp_path: Path) -> None:
    done = cli("serve", "--dir", QUICKSTART, "--bearer-token", "short", "--state-root", str(tmp_path))
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "agent-sdk: error: invalid serve settings: --bearer-token: a bearer token must be at least 16 characters "
        "(use a random value)"
    )
    assert "Value error" not in done.stderr and "bearer_tokens" not in done.stderr


def test_login_status_and_mcp_oauth_status_both_exit_1_when_logged_out(tmp_path: Path) -> None:
    project = tmp_path / "p"
    conn = project / "agent" / "mcp-connections" / "linear.py"
    conn.parent.mkdir(parents=True)
    conn.write_text(
        "from connections import define_connection\n\n"
        "connection = define_connection(url='http://127.0.0.1:9/mcp', oauth=True)\n"
    )
    env = keyring_env(tmp_path)
    login = cli("login", "--status", env=env)
    oauth = cli("mcp", "oauth", "linear", "--status", "--dir", str(project), env=env)
    assert (login.returncode, oauth.returncode) == (1, 1), (login.stdout, oauth.stdout)
    assert "no saved account login" in login.stdout and "not logged in" in oauth.stdout


def test_login_says_the_key_is_in_a_plaintext_file_when_keyrings_alt_put_it_there(tmp_path: Path) -> None:
    env = keyring_env(tmp_path)
    key = "ask_" + "k" * 43
    done = cli("login", "--url", "http://127.0.0.1:9/", "--no-check", env=env, stdin=key + "\n")
    assert done.returncode == 0, done.stderr
    stored = next((tmp_path / "data").rglob("*.cfg"))
    assert "OS keyring" not in done.stdout
    assert f"keyrings.alt's PlaintextKeyring, a file at {stored} (base64, NOT encrypted" in done.stdout
    status = cli("login", "--status", env=env)
    assert status.returncode == 0 and f"a file at {stored} (base64, NOT encrypted" in status.stdout
    assert key not in done.stdout + status.stdout


def test_serve_says_which_variables_are_unset_when_it_starts(tmp_path: Path) -> None:
    project = tmp_path / "p"
    conn = project / "agent" / "mcp-connections" / "api.py"
    conn.parent.mkdir(parents=True)
    conn.write_text(
        "from connections import define_connection\n\n"
        "connection = define_connection(url='http://127.0.0.1:9/mcp', headers={'X-Key': '${UNSET_KEY_19}'})\n"
    )
    served = serve(project, tmp_path / "state")
    served.stop()
    assert (
        "agent/mcp-connections/api.py:3: warning: connection 'api': header 'X-Key' reads ${UNSET_KEY_19}, which is "
        "not set in this environment; export UNSET_KEY_19 before agent-sdk serve (until then every use of 'api' fails)"
    ) in served.log_text()
