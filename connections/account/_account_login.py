"""Where an edge finds its account hub: the hub URL and the API key (docs/accounts.md).

In order:

1. `AGENT_SDK_ACCOUNT_URL` + `AGENT_SDK_API_KEY` in the environment (servers and CI; both or neither);
2. what `agent-sdk login` saved: the URL in `<config dir>/account.json` (mode 0600) and the key in
   the OS keyring, service `agent-sdk`, user name `account-api-key:<hub URL>`.

The config dir is `AGENT_SDK_CONFIG_DIR`, else `$XDG_CONFIG_HOME/agent-sdk`, else
`~/.config/agent-sdk`. The key is never written to a file, and never leaves this module
except as an `oauth._shared.Secret`.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import filelock
import keyring
import keyring.errors

from oauth._shared import Secret, printable, write_private

from .._exceptions import ConnectionsError
from .._redact import redact, remember_secret

__all__ = [
    "ACCOUNT_URL_ENV",
    "API_KEY_ENV",
    "CONFIG_DIR_ENV",
    "KEYRING_SERVICE",
    "AccountCredentials",
    "AccountSetupError",
    "account_file",
    "forget_account_login",
    "keyring_user",
    "load_account_credentials",
    "normalize_hub_url",
    "save_account_login",
    "saved_hub_url",
]

ACCOUNT_URL_ENV = "AGENT_SDK_ACCOUNT_URL"
API_KEY_ENV = "AGENT_SDK_API_KEY"
CONFIG_DIR_ENV = "AGENT_SDK_CONFIG_DIR"
KEYRING_SERVICE = "agent-sdk"

_NO_KEYRING = (
    "no OS keyring backend is available on this machine (typical on a headless server); on a server set "
    f"{ACCOUNT_URL_ENV} and {API_KEY_ENV} instead, or install and select a backend (e.g. keyrings.alt with "
    "PYTHON_KEYRING_BACKEND=keyrings.alt.file.PlaintextKeyring)"
)


class AccountSetupError(ConnectionsError):
    """The account hub cannot be configured or read; the message is one sentence with the fix (redacted)."""

    code = "account_setup"

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


@dataclass(frozen=True, slots=True)
class AccountCredentials:
    """A hub base URL (no trailing slash) and the API key for it."""

    url: str
    api_key: Secret
    source: Literal["environment", "login"]


def normalize_hub_url(url: str) -> str:
    """`https://hub.example.com/` -> `https://hub.example.com`. Raises `AccountSetupError` for a non-HTTP URL."""
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        if redact(url) != url:  # e.g. the API key where the URL belongs: never echo it
            raise AccountSetupError(
                f"the hub URL must be an http:// or https:// URL, and this one looks like an API key; were "
                f"{ACCOUNT_URL_ENV} and {API_KEY_ENV} (or --url and the key) swapped?"
            )
        raise AccountSetupError(f"the hub URL must be an http:// or https:// URL, got {printable(url, 100)!r}")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise AccountSetupError("the hub URL must not carry a user name, password, query or fragment")
    return url.rstrip("/")


def keyring_user(url: str) -> str:
    """The keyring user name holding the API key for hub `url`."""
    return f"account-api-key:{url}"


def _config_dir(environ: Mapping[str, str]) -> Path:
    if environ.get(CONFIG_DIR_ENV):
        return Path(environ[CONFIG_DIR_ENV]).expanduser()
    if environ.get("XDG_CONFIG_HOME"):
        return Path(environ["XDG_CONFIG_HOME"]).expanduser() / "agent-sdk"
    home = environ.get("HOME") or str(Path.home())
    return Path(home) / ".config" / "agent-sdk"


def account_file(environ: Mapping[str, str] | None = None) -> Path:
    """`<config dir>/account.json`: the hub URL `agent-sdk login` saved (never the key)."""
    return _config_dir(os.environ if environ is None else environ) / "account.json"


def saved_hub_url(environ: Mapping[str, str] | None = None) -> str | None:
    """The hub URL `agent-sdk login` saved, or None. Raises `AccountSetupError` for a damaged file."""
    path = account_file(environ)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        raise AccountSetupError(f"{path} is not valid JSON; run agent-sdk login --url HUB again") from None
    url = data.get("url") if isinstance(data, dict) else None
    if not isinstance(url, str):
        raise AccountSetupError(f"{path} has no hub URL; run agent-sdk login --url HUB again")
    return url


def _keyring_get(url: str) -> str | None:
    try:
        return keyring.get_password(KEYRING_SERVICE, keyring_user(url))
    except keyring.errors.NoKeyringError:
        raise AccountSetupError(_NO_KEYRING) from None
    except keyring.errors.KeyringError as exc:
        raise AccountSetupError(f"the OS keyring cannot be read ({type(exc).__name__})") from None


def load_account_credentials(environ: Mapping[str, str] | None = None) -> AccountCredentials:
    """The hub and key to use: the environment override, else the saved login. Blocking (keyring).

    Raises `AccountSetupError` with the fix when nothing (or only half) is configured.
    """
    env = os.environ if environ is None else environ
    url, key = env.get(ACCOUNT_URL_ENV, "").strip(), env.get(API_KEY_ENV, "").strip()
    if key:
        remember_secret(key)
    if url and not url.lower().startswith(("http://", "https://")):
        remember_secret(url)  # not a URL: perhaps the key, with the two variables swapped; never echo it
    if url and key:
        return AccountCredentials(normalize_hub_url(url), Secret(key), "environment")
    if url or key:
        present, absent = (ACCOUNT_URL_ENV, API_KEY_ENV) if url else (API_KEY_ENV, ACCOUNT_URL_ENV)
        raise AccountSetupError(f"{present} is set but {absent} is not; set both, or neither and use agent-sdk login")
    saved = saved_hub_url(env)
    if saved is None:
        raise AccountSetupError(
            f"no account hub is configured; run agent-sdk login --url HUB (or set {ACCOUNT_URL_ENV} and {API_KEY_ENV})"
        )
    stored = _keyring_get(saved)
    if not stored:
        raise AccountSetupError(f"no API key for {saved} in the OS keyring; run agent-sdk login --url {saved} again")
    remember_secret(stored)
    return AccountCredentials(saved, Secret(stored), "login")


def save_account_login(url: str, api_key: Secret, environ: Mapping[str, str] | None = None) -> Path:
    """Store the key in the OS keyring and the URL in `account.json` (0600, atomic); returns the file.

    Raises `AccountSetupError` (no keyring backend, a bad URL, an unwritable config dir).
    """
    url = normalize_hub_url(url)
    try:
        keyring.set_password(KEYRING_SERVICE, keyring_user(url), api_key.reveal())
    except keyring.errors.NoKeyringError:
        raise AccountSetupError(_NO_KEYRING) from None
    except keyring.errors.KeyringError as exc:
        raise AccountSetupError(f"the OS keyring refused the key ({type(exc).__name__})") from None
    path = account_file(environ)
    _write_private(path, {"version": 1, "url": url, "keyring": {"service": KEYRING_SERVICE, "user": keyring_user(url)}})
    return path


def forget_account_login(environ: Mapping[str, str] | None = None) -> str | None:
    """Delete the saved key and URL; returns the hub URL that was saved (None when there was none)."""
    path = account_file(environ)
    url = saved_hub_url(environ)
    if url is None:
        return None
    with contextlib.suppress(keyring.errors.KeyringError):
        keyring.delete_password(KEYRING_SERVICE, keyring_user(url))
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    return url


def _write_private(path: Path, data: object) -> None:
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with filelock.FileLock(str(path) + ".lock", timeout=10, mode=0o600, thread_local=False, is_singleton=False):
            write_private(path, json.dumps(data, indent=2).encode())  # readers see the old or the new file
    except filelock.Timeout:
        raise AccountSetupError(f"timed out waiting for the lock on {path}") from None
    except OSError as exc:
        raise AccountSetupError(f"cannot write {path}: {exc.strerror or type(exc).__name__}") from None
