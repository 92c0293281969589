"""`agent-sdk login [--url HUB]`: configure the account hub that `account=True` connections use.

The API key is read from stdin (piped) or a hidden prompt, never from a flag (shell history, `ps`).
It is checked against the hub (`GET /v1/hub/connectors`), then stored in the OS keyring (service
`agent-sdk`, user `account-api-key:<hub URL>`); the URL goes to `<config dir>/account.json` (0600).
Servers set `AGENT_SDK_ACCOUNT_URL` + `AGENT_SDK_API_KEY` instead. See docs/accounts.md.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from typing import Any

import httpx2

from connections import (
    ACCOUNT_URL_ENV,
    API_KEY_ENV,
    HUB_CONNECTORS_PATH,
    KEYRING_SERVICE,
    AccountSetupError,
    account_file,
    forget_account_login,
    keyring_user,
    normalize_hub_url,
    save_account_login,
    saved_hub_url,
    transport_failure,
)
from oauth import Secret

from ..errors import CliError
from ._keyring_backend import describe_keyring

__all__ = ["login", "register"]


def register(sub: argparse._SubParsersAction[Any]) -> None:  # pyright: ignore[reportPrivateUsage]
    p = sub.add_parser(
        "login",
        help="store the account hub URL and API key (the key goes to the OS keyring)",
        description="Configure the account hub for account=True connections. The API key is read from stdin "
        "or a hidden prompt, checked against the hub, and stored in the OS keyring.",
    )
    p.add_argument("--url", help="the hub's base URL, e.g. https://hub.example.com (default: the one saved)")
    action = p.add_mutually_exclusive_group()
    action.add_argument("--status", action="store_true", help="show what is configured (never the key)")
    action.add_argument("--logout", action="store_true", help="delete the saved key and URL")
    p.add_argument("--no-check", action="store_true", help="store the key without asking the hub whether it works")
    p.set_defaults(func=login)


def _read_key(url: str) -> Secret:
    if sys.stdin.isatty():
        value = getpass.getpass(f"API key for {url}: ")
    else:
        value = sys.stdin.readline()
    value = value.strip()
    if not value:
        raise CliError("no API key given; pipe it on stdin or type it at the prompt")
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
        names = [str(c["name"]) for c in data["connectors"]]
    except (ValueError, KeyError, TypeError):
        raise CliError(f"{url} did not answer with a hub connector list; nothing was stored") from None
    account = data.get("account")
    return (str(account) if account is not None else None), names


def login(args: argparse.Namespace) -> int:
    """Store (or show, or forget) the hub URL and API key."""
    try:
        if args.logout:
            forgotten = forget_account_login()
            print(f"forgot the API key and URL of {forgotten}" if forgotten else "no saved account login")
            return 0
        saved = saved_hub_url()
        if args.status:
            if os.environ.get(ACCOUNT_URL_ENV) or os.environ.get(API_KEY_ENV):
                print(f"{ACCOUNT_URL_ENV} / {API_KEY_ENV} are set: they override any saved login")
            if saved is None:
                print("no saved account login; run agent-sdk login --url HUB")
                # Exit 1 when nothing is configured, as `mcp oauth NAME --status` does when logged out.
                return 0 if os.environ.get(ACCOUNT_URL_ENV) and os.environ.get(API_KEY_ENV) else 1
            print(
                f"hub {saved} (saved in {account_file()}); API key in {describe_keyring()}, service "
                f"{KEYRING_SERVICE!r}, user {keyring_user(saved)!r}"
            )
            return 0
        if args.url is None and saved is None:
            raise CliError("pass --url HUB (the hub's base URL); no hub was saved before")
        url = normalize_hub_url(args.url) if args.url is not None else saved
        assert url is not None
        key = _read_key(url)
        account, names = (None, []) if args.no_check else _check(url, key)
        path = save_account_login(url, key)
    except AccountSetupError as exc:
        raise CliError(str(exc)) from None
    who = f" as account {account!r}" if account else ""
    linked = f"; connectors: {', '.join(names) or 'none'}" if not args.no_check else ""
    print(
        f"logged in to {url}{who}{linked}. The key is in {describe_keyring()} (service {KEYRING_SERVICE!r}, user "
        f"{keyring_user(url)!r}); the URL is in {path}"
    )
    return 0
