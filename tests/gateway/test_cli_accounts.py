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

from connections import AccountNotConfigured, ClientPool, define_connection
from gateway.accounts import BridgeSecret
from gateway.settings import ServeSettings

from .test_accounts import cli, write

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
    async with ClientPool({"hub": defn}, environ=env) as pool:
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


def test_the_hub_is_switched_on_by_flag_or_environment() -> None:
    assert ServeSettings.from_env({}).hub is False
    assert ServeSettings.from_env({"AGENT_SDK_HUB": "1"}).hub is True
    assert ServeSettings.from_env({}, hub=True).hub is True
