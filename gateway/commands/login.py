"""`agent-sdk login [--url HUB]`: configure the account hub that `account=True` connections use.
(`agent-sdk login --gateway URL`: an operator's credential for a gateway, `operator_login.py`.)

The API key is read from `--key-file`, stdin (piped) or a hidden prompt, never from a flag value
(shell history, `ps`). Plain `http://` to a hub that is not on loopback needs `--allow-http`.
It is checked against the hub (`GET /v1/hub/connectors`), then stored in the OS keyring (service
`agent-sdk`, user `account-api-key:<hub URL>`); the URL goes to `<config dir>/account.json` (0600).
Servers set `AGENT_SDK_ACCOUNT_URL` + `AGENT_SDK_API_KEY` instead. See docs/accounts.md.
"""

from __future__ import annotations

import argparse
import getpass
import ipaddress
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2

from connections import AccountSetupError
from connections.serving import (
    ACCOUNT_URL_ENV,
    API_KEY_ENV,
    HUB_CONNECTORS_PATH,
    KEYRING_SERVICE,
    account_file,
    forget_account_login,
    keyring_user,
    load_account_credentials,
    normalize_hub_url,
    save_account_login,
    saved_hub_url,
    transport_failure,
)
from oauth._shared import Secret, printable

from ..errors import CliError
from ._keyring_backend import describe_keyring
from .operator_login import login_gateway

__all__ = ["login", "register"]


def register(sub: argparse._SubParsersAction[Any]) -> None:  # pyright: ignore[reportPrivateUsage]
    p = sub.add_parser(
        "login",
        help="store the account hub URL and API key (the key goes to the OS keyring)",
        description="Configure the account hub for account=True connections. The API key is read from stdin "
        "or a hidden prompt, checked against the hub, and stored in the OS keyring.",
    )
    p.add_argument("--url", help="the hub's base URL, e.g. https://hub.example.com (default: the one saved)")
    p.add_argument(
        "--gateway",
        metavar="URL",
        help="instead: sign in as an operator of the gateway at URL with its OAuth identity provider (a browser "
        "login) and keep the credential for the commands that act on it (docs/console.md)",
    )
    p.add_argument("--scope", action="append", default=[], help="with --gateway: a scope to ask for (repeatable)")
    p.add_argument("--no-browser", action="store_true", help="with --gateway: print the sign-in URL, do not open it")
    action = p.add_mutually_exclusive_group()
    action.add_argument("--status", action="store_true", help="show what is configured (never the key)")
    action.add_argument("--logout", action="store_true", help="delete the saved key and URL")
    p.add_argument("--no-check", action="store_true", help="store the key without asking the hub whether it works")
    p.add_argument("--key-file", metavar="FILE", help="read the API key from FILE (default: stdin or a hidden prompt)")
    p.add_argument(
        "--allow-http", action="store_true", help="accept plain http:// to a hub that is not on loopback (the key "
        "crosses the network in clear)"
    )  # fmt: skip
    # Not a way in: a key given here is refused, unread and unechoed (it would sit in shell history and `ps`).
    p.add_argument("--key", help=argparse.SUPPRESS)
    p.set_defaults(func=login)


_NO_KEY_FLAG = (
    "login takes no --key: a key on the command line lands in shell history and ps; pipe it on stdin, type it at "
    "the prompt, or pass --key-file FILE (and consider the key exposed: ask the hub's operator for a new one)"
)


def _loopback(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _read_key(url: str, key_file: str | None) -> Secret:
    if key_file is not None:
        try:
            value = Path(key_file).expanduser().read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or type(exc).__name__
            raise CliError(f"cannot read --key-file {printable(key_file)}: {reason}") from None
    elif sys.stdin.isatty():
        value = getpass.getpass(f"API key for {url}: ")
    else:
        value = sys.stdin.readline()
    value = value.strip()
    if not value:
        raise CliError("no API key given; pipe it on stdin, type it at the prompt, or pass --key-file FILE")
    return Secret(value)


def _check(url: str, key: Secret) -> tuple[str | None, list[str]]:
    """Ask the hub for this key's connectors; returns (account, connector names). Raises `CliError`."""
    try:
        response = httpx2.get(
            url + HUB_CONNECTORS_PATH, headers={"Authorization": f"Bearer {key.reveal()}"}, timeout=15.0
        )
    except httpx2.HTTPError as exc:
        raise CliError(
            f"cannot reach the hub at {url} ({transport_failure(exc)}); check the URL, or pass --no-check to store "
            "the key anyway"
        ) from None
    if response.status_code == 401:
        raise CliError(f"the hub at {url} refused this API key (wrong or revoked); nothing was stored")
    if response.status_code != 200:
        raise CliError(
            f"{url} answered HTTP {response.status_code} to {HUB_CONNECTORS_PATH}; is it an agent-sdk hub "
            "(serve --hub)? Nothing was stored"
        )
    try:
        data = response.json()
        names = [printable(c["name"], 64) for c in data["connectors"]]  # the hub's text: no terminal escapes
    except (ValueError, KeyError, TypeError):
        raise CliError(f"{url} did not answer with a hub connector list; nothing was stored") from None
    account = data.get("account")
    return (printable(account, 64) if account is not None else None), names


def login(args: argparse.Namespace) -> int:
    """Store (or show, or forget) the hub URL and API key; with `--gateway`, sign in as that gateway's operator."""
    if args.gateway is not None:
        return login_gateway(args.gateway, scopes=args.scope, browser=not args.no_browser)
    try:
        if args.logout:
            forgotten = forget_account_login()
            print(f"forgot the API key and URL of {forgotten}" if forgotten else "no saved account login")
            return 0
        if args.key is not None:
            raise CliError(_NO_KEY_FLAG)
        saved = saved_hub_url()
        if args.status:
            return _status(saved)
        if args.url is None and saved is None:
            raise CliError("pass --url HUB (the hub's base URL); no hub was saved before")
        url = normalize_hub_url(args.url) if args.url is not None else saved
        assert url is not None
        if url.startswith("http://") and not _loopback(url):
            if not args.allow_http:
                raise CliError(
                    f"{url} is plain http:// to a hub that is not on this machine: the API key would cross the "
                    "network in clear; use https://, or pass --allow-http if the network itself is trusted"
                )
            print(f"agent-sdk: WARNING: the API key goes to {url} in clear text (--allow-http)", file=sys.stderr)
        key = _read_key(url, args.key_file)
        account, names = (None, []) if args.no_check else _check(url, key)
        path = save_account_login(url, key)
    except AccountSetupError as exc:
        raise CliError(str(exc)) from None
    who = f" as account {account!r}" if account else ""  # already made printable by _check
    linked = f"; connectors: {', '.join(names) or 'none'}" if not args.no_check else ""
    print(
        f"logged in to {url}{who}{linked}. The key is in {describe_keyring()} (service {KEYRING_SERVICE!r}, user "
        f"{keyring_user(url)!r}); the URL is in {path}"
    )
    return 0


def _status(saved: str | None) -> int:
    """What an account connection would use now, and whether it works; 1 when it would fail."""
    url_set, key_set = bool(os.environ.get(ACCOUNT_URL_ENV, "").strip()), bool(os.environ.get(API_KEY_ENV, "").strip())
    if url_set and key_set:
        print(f"{ACCOUNT_URL_ENV} and {API_KEY_ENV} are set: they win over any saved login")
    elif url_set or key_set:
        present, absent = (ACCOUNT_URL_ENV, API_KEY_ENV) if url_set else (API_KEY_ENV, ACCOUNT_URL_ENV)
        print(
            f"{present} is set but {absent} is not: account connections fail until both are set, or {present} "
            "is unset (the saved login is not used while it is set)"
        )
    if saved is None:
        print("no saved account login; run agent-sdk login --url HUB")
    else:
        print(
            f"saved login: hub {saved} (in {account_file()}); API key in {describe_keyring()}, service "
            f"{KEYRING_SERVICE!r}, user {keyring_user(saved)!r}"
        )
    try:
        creds = load_account_credentials()
    except AccountSetupError as exc:
        print(f"not usable: {exc}")
        return 1
    where = "the environment" if creds.source == "environment" else "the saved login (the keyring holds its key)"
    print(f"in use: hub {creds.url}, from {where}")
    return 0
