"""`agent-sdk hub keys ...` and `agent-sdk login`: what a user sees for good and bad input, and what is stored.

No hub runs here (test_accounts.py has the two-gateway tests); keyring checks use keyrings.alt's
real file backend in a temporary XDG_DATA_HOME.
"""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path

import pytest
from pydantic import ValidationError

from connections import AccountNotConfigured, define_connection
from connections.account._account import AccountConnections
from gateway.accounts.routes import BridgeSecret
from gateway.settings import ServeSettings
from tests.connections.account.test_account_hub_api import _Server  # pyright: ignore[reportPrivateUsage]
from tests.gateway.accounts.test_accounts import cli, write

pytestmark = pytest.mark.anyio


@pytest.fixture
def hub_project(tmp_path: Path) -> Path:
    project = tmp_path / "hub"
    write(project, "mcp-connections", "linear", "connection = define_connection(url='http://127.0.0.1:9/mcp', "
          "linkable=True)")  # fmt: skip
    write(project, "mcp-connections", "private", "connection = define_connection(url='http://127.0.0.1:9/mcp')")
    return project


def test_hub_keys_are_shown_once_and_stored_hashed_in_a_private_file(hub_project: Path) -> None:
    state = hub_project / ".agent-sdk"
    made = cli("hub", "keys", "create", "--dir", str(hub_project), "--account", "team", "--connectors", "linear")
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()
    assert key.startswith("ask_") and len(key) > 40 and "\n" not in key
    assert "created hk_" in made.stderr and "account 'team' (linear)" in made.stderr and key not in made.stderr
    path = state / "hub-keys.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(state.stat().st_mode) == 0o700
    assert key not in path.read_text() and key[4:] not in path.read_text()
    [record] = json.loads(path.read_text())["keys"]
    assert set(record) == {"id", "account", "connectors", "created", "revoked", "sha256"}

    listed = cli("hub", "keys", "list", "--dir", str(hub_project))
    assert record["id"] in listed.stdout and "active" in listed.stdout and key not in listed.stdout
    revoked = cli("hub", "keys", "revoke", record["id"], "--dir", str(hub_project))
    assert revoked.returncode == 0 and f"revoked {record['id']}" in revoked.stdout
    again = cli("hub", "keys", "list", "--json", "--dir", str(hub_project))
    assert json.loads(again.stdout)[0]["revoked"] is not None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--account", "team", "--connectors", "private,nope"],
         "not linkable in hub: private, nope; linkable connections are linear"),
        (["--account", "team two", "--all"], "account name 'team two' must be 1 to 64 letters, digits, '_' or '-'"),
        (["--account", "team", "--connectors", ","], "--connectors names no connection"),
    ],
)  # fmt: skip
def test_hub_keys_create_refuses_bad_input_with_a_sentence(hub_project: Path, args: list[str], message: str) -> None:
    done = cli("hub", "keys", "create", "--dir", str(hub_project), *args)
    assert done.returncode == 1 and message in done.stderr and "Traceback" not in done.stderr
    assert not (hub_project / ".agent-sdk" / "hub-keys.json").exists()


def test_hub_keys_revoke_of_an_unknown_id_says_where_to_look(hub_project: Path) -> None:
    done = cli("hub", "keys", "revoke", "hk_nope", "--dir", str(hub_project))
    assert done.returncode == 1
    assert "no key with id 'hk_nope'; see agent-sdk hub keys list" in done.stderr


def keyring_env(tmp_path: Path) -> dict[str, str]:
    return {
        "PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring",
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }


def test_login_stores_the_key_in_the_keyring_and_the_url_in_a_private_file(tmp_path: Path) -> None:
    env = keyring_env(tmp_path)
    key = "ask_" + "k" * 43
    done = cli("login", "--url", "http://127.0.0.1:9/", "--no-check", env=env, stdin=key + "\n")
    assert done.returncode == 0, done.stderr
    assert "user 'account-api-key:http://127.0.0.1:9'" in done.stdout and key not in done.stdout + done.stderr
    account = tmp_path / "config" / "agent-sdk" / "account.json"
    assert stat.S_IMODE(account.stat().st_mode) == 0o600
    assert json.loads(account.read_text())["url"] == "http://127.0.0.1:9" and key not in account.read_text()
    stored = list((tmp_path / "data").rglob("*.cfg"))
    encoded = base64.b64encode(key.encode()).decode()
    assert stored and encoded in stored[0].read_text()  # the plaintext backend's own file (base64): it lives there

    status = cli("login", "--status", env=env)
    assert "hub http://127.0.0.1:9" in status.stdout and key not in status.stdout
    out = cli("login", "--logout", env=env)
    assert "forgot the API key and URL of http://127.0.0.1:9" in out.stdout
    assert not account.exists() and encoded not in stored[0].read_text()


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        ([], {}, "pass --url HUB (the hub's base URL); no hub was saved before"),
        (["--url", "ftp://hub"], {}, "the hub URL must be an http:// or https:// URL, got 'ftp://hub'"),
        (["--url", "http://127.0.0.1:9"], {},
         "cannot reach the hub at http://127.0.0.1:9 (connection refused or unreachable)"),
        (["--url", "http://127.0.0.1:9", "--no-check"], {"PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"},
         "no OS keyring backend is available on this machine"),
    ],
)  # fmt: skip
def test_login_refuses_bad_input_with_a_sentence(
    tmp_path: Path, args: list[str], env: dict[str, str], message: str
) -> None:
    key = "ask_" + "s" * 43
    done = cli("login", *args, env={**keyring_env(tmp_path), **env}, stdin=key + "\n")
    assert done.returncode == 1 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and key not in done.stderr
    assert not (tmp_path / "config" / "agent-sdk" / "account.json").exists()


async def test_half_an_environment_override_is_a_sentence_not_a_fallback(tmp_path: Path) -> None:
    defn = define_connection(account=True).named("hub", None)
    env = {"HOME": str(tmp_path), "AGENT_SDK_ACCOUNT_URL": "http://127.0.0.1:9"}
    async with AccountConnections({"hub": defn}, environ=env) as pool:
        with pytest.raises(AccountNotConfigured) as caught:
            await pool.list_tools("hub")
    assert str(caught.value) == (
        "connection 'hub': AGENT_SDK_ACCOUNT_URL is set but AGENT_SDK_API_KEY is not; set both, or neither "
        "and use agent-sdk login"
    )


def test_the_bridge_secret_is_new_on_every_boot_and_never_shown() -> None:
    settings = ServeSettings(port=4321)
    first, second = BridgeSecret.create(settings), BridgeSecret.create(settings)
    assert first.secret != second.secret and len(first.secret.reveal()) >= 43
    assert first.url == "http://127.0.0.1:4321/v1/account"
    assert first.secret.reveal() not in repr(first) + str(first)
    assert first.admits(first.secret.reveal()) and not first.admits(second.secret.reveal())
    assert BridgeSecret.create(ServeSettings(host="0.0.0.0", port=1)).url == "http://127.0.0.1:1/v1/account"
    assert BridgeSecret.create(ServeSettings(host="::1", port=1)).url == "http://[::1]:1/v1/account"


def test_the_hub_is_switched_on_by_flag_or_environment_and_needs_a_bearer_token() -> None:
    token = {"AGENT_SDK_BEARER_TOKEN": "t" * 32}
    assert ServeSettings.from_env({}).hub is False
    assert ServeSettings.from_env({"AGENT_SDK_HUB": "1", **token}).hub is True
    assert ServeSettings.from_env(token, hub=True).hub is True
    for env in ({"AGENT_SDK_HUB": "1"}, {"AGENT_SDK_HUB": "1", "AGENT_SDK_ALLOW_ANONYMOUS": "1"}):
        with pytest.raises(ValidationError, match=r"a hub \(--hub\) needs --bearer-token"):
            ServeSettings.from_env(env)


# -- what login, info and validate print of a hub's text; plain http; --status; where the key comes from --------

HOSTILE_NAME = "linear\x1b[2J\u202eevil\r\nforged"
HOSTILE_ACCOUNT = "team\x1b]0;owned\x07"


def test_connector_names_from_a_hub_are_printable_in_login_info_and_validate(tmp_path: Path) -> None:
    listing = {"ok": True, "account": HOSTILE_ACCOUNT, "connectors": [{"name": HOSTILE_NAME, "mcp": "/x"}]}
    hub = _Server({"/v1/hub/connectors": (200, listing)})
    try:
        project = tmp_path / "project"
        write(project, "mcp-connections", "work", "connection = define_connection(account=True, servers=['nope'])")
        write(project, "mcp-connections", "every", "connection = define_connection(account=True)")
        key = "ask_" + "p" * 43
        env = {"AGENT_SDK_ACCOUNT_URL": hub.url, "AGENT_SDK_API_KEY": key}
        outputs = [
            cli("login", "--url", hub.url, env=keyring_env(tmp_path), stdin=key + "\n"),
            cli("info", "--dir", str(project), env=env),
            cli("validate", "--dir", str(project), env=env),
        ]
    finally:
        hub.close()
    for done in outputs:
        text = done.stdout + done.stderr
        assert done.returncode == 0, text
        assert "\ufffd" in text, text  # the name was printed, made safe
        for raw in ("\x1b", "\u202e", "\r", "\x07", "\nforged"):
            assert raw not in text, (raw, text)


def test_login_refuses_plain_http_to_a_hub_elsewhere_unless_asked(tmp_path: Path) -> None:
    key = "ask_" + "h" * 43
    refused = cli("login", "--url", "http://hub.example.com", "--no-check", env=keyring_env(tmp_path), stdin=key)
    assert refused.returncode == 1, refused.stderr
    assert "http://hub.example.com is plain http:// to a hub that is not on this machine" in refused.stderr
    assert "use https://, or pass --allow-http" in refused.stderr
    assert not (tmp_path / "config" / "agent-sdk" / "account.json").exists()
    allowed = cli("login", "--url", "http://hub.example.com", "--no-check", "--allow-http",
                  env=keyring_env(tmp_path), stdin=key)  # fmt: skip
    assert allowed.returncode == 0 and "WARNING: the API key goes to http://hub.example.com in clear" in allowed.stderr
    loopback = cli("login", "--url", "http://localhost:9", "--no-check", env=keyring_env(tmp_path), stdin=key)
    assert loopback.returncode == 0 and "WARNING" not in loopback.stderr, loopback.stderr


def test_login_status_says_which_setting_wins_and_whether_the_keyring_holds_the_key(tmp_path: Path) -> None:
    env = keyring_env(tmp_path)
    key = "ask_" + "q" * 43
    assert cli("login", "--url", "http://127.0.0.1:9", "--no-check", env=env, stdin=key).returncode == 0
    saved = cli("login", "--status", env=env)
    assert saved.returncode == 0 and "in use: hub http://127.0.0.1:9, from the saved login" in saved.stdout
    half = cli("login", "--status", env={**env, "AGENT_SDK_API_KEY": key})
    assert half.returncode == 1, half.stdout
    assert "AGENT_SDK_API_KEY is set but AGENT_SDK_ACCOUNT_URL is not: account connections fail" in half.stdout
    assert "the saved login is not used while it is set" in half.stdout and "not usable" in half.stdout
    both = cli("login", "--status", env={**env, "AGENT_SDK_API_KEY": key, "AGENT_SDK_ACCOUNT_URL": "http://h:1"})
    assert both.returncode == 0 and "in use: hub http://h:1, from the environment" in both.stdout
    for stored in (tmp_path / "data").rglob("*.cfg"):
        stored.unlink()  # the keyring lost the key; the URL file is still there
    lost = cli("login", "--status", env=env)
    assert lost.returncode == 1 and "saved login: hub http://127.0.0.1:9" in lost.stdout
    assert "not usable: no API key for http://127.0.0.1:9 in the OS keyring" in lost.stdout
    for done in (saved, half, both, lost):
        assert key not in done.stdout + done.stderr


def test_login_takes_the_key_from_a_file_and_refuses_it_on_the_command_line(tmp_path: Path) -> None:
    env = keyring_env(tmp_path)
    key = "ask_" + "f" * 43
    key_file = tmp_path / "key"
    key_file.write_text(key + "\n")
    done = cli("login", "--url", "http://127.0.0.1:9", "--no-check", "--key-file", str(key_file), env=env)
    assert done.returncode == 0, done.stderr
    assert cli("login", "--status", env=env).returncode == 0
    missing = cli("login", "--url", "http://127.0.0.1:9", "--key-file", str(tmp_path / "nope"), env=env)
    assert missing.returncode == 1 and "cannot read --key-file" in missing.stderr
    for argv in (["--key", key], [f"--key={key}"], ["--token", key], [key]):
        refused = cli("login", "--url", "http://127.0.0.1:9", *argv, env=env)
        assert refused.returncode != 0 and key not in refused.stdout + refused.stderr, argv
        assert key[4:12] not in refused.stderr
    said = cli("login", "--key", key, env=env).stderr
    assert "login takes no --key" in said and "--key-file FILE" in said
