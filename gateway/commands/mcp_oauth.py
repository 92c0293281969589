"""`agent-sdk mcp oauth NAME [--store | --status | --logout]`: PKCE login for an oauth connection.

A thin layer over the `oauth` package: find the connection in the project, pick the interaction
(browser, `--no-browser`, `--non-interactive`), log in and save the grant in its one home:
`<state root>/mcp-auth.json`, or with `--store` the deployment secret store (OS keyring, or Redis when
`AGENT_SDK_SECRETS_URL=redis://...`), leaving only a pointer in `mcp-auth.json`. Every failure is a
`CliError` sentence; tokens are never printed, and server text passes through `oauth._shared.printable`.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import Any

import anyio

from connections import ConnectionDefinition, ProjectError, load_project
from oauth import (
    Interaction,
    LocalStore,
    LogoutResult,
    OAuthConfig,
    OAuthError,
    StoreKey,
    TokenStore,
    check_store,
    deployment_store,
    follow_redirects,
    grant_status,
    insecure_transport_warning,
    is_caller_grant,
    login,
    logout,
    open_browser,
    print_url,
)
from oauth._shared import printable

from ..errors import CliError
from ..policy import STDIO
from ._common import add_project_args, state_root_of

__all__ = ["register", "run"]

NOT_OAUTH = "must be define_connection(url=..., oauth=True)"


def register(group: argparse._SubParsersAction[Any]) -> None:  # pyright: ignore[reportPrivateUsage]
    """Add `mcp oauth` (built on the `oauth` package)."""
    parser = group.add_parser(
        "oauth",
        help="log in to an oauth connection (PKCE) and store its tokens",
        description="Log in to an OAuth-protected MCP connection with PKCE and store the tokens in "
        "<state root>/mcp-auth.json (and with --store in the deployment secret store).",
    )
    parser.add_argument("name", help="the connection name (its file name in mcp-connections/ or host-connections/)")
    add_project_args(parser)
    parser.add_argument(
        "--store",
        action="store_true",
        help="keep the grant in the deployment secret store (the OS keyring, or Redis when "
        "AGENT_SDK_SECRETS_URL=redis://... is set) instead of mcp-auth.json, which then points there; "
        "with --logout, also delete it from that store",
    )
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--status", action="store_true", help="show what is stored for the connection (no tokens)")
    action.add_argument(
        "--logout", action="store_true", help="revoke the tokens where supported, then delete every copy"
    )
    parser.add_argument(
        "--principal",
        metavar="ID",
        help="with --status or --logout on a grants='per_principal' connection: that principal's own grant "
        "(its id as the gateway names it, e.g. bearer:1a2b... or oauth:...)",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--no-browser",
        action="store_true",
        default=os.environ.get("AGENT_SDK_NO_BROWSER") == "1",
        help="print the URL instead of opening a browser; also accepts the pasted redirect URL on stdin "
        "($AGENT_SDK_NO_BROWSER=1)",
    )
    mode.add_argument(
        "--non-interactive",
        action="store_true",
        default=os.environ.get("AGENT_SDK_OAUTH_NON_INTERACTIVE") == "1",
        help="follow the authorization redirects and submit plain login/consent forms without a person "
        "(automation and tests; $AGENT_SDK_OAUTH_NON_INTERACTIVE=1)",
    )
    parser.add_argument(
        "--timeout",
        type=_seconds,
        default=os.environ.get("AGENT_SDK_OAUTH_TIMEOUT", "300"),
        help="seconds to wait for the login redirect (default 300, $AGENT_SDK_OAUTH_TIMEOUT)",
    )
    parser.set_defaults(func=run)


MAX_TIMEOUT = 86400.0


def _seconds(text: str) -> float:
    """`--timeout`: a finite number of seconds above 0 and at most a day."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not 0 < value <= MAX_TIMEOUT:
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds above 0 and at most {MAX_TIMEOUT:g}, got {printable(text, 40)!r}"
        )
    return value


def find_oauth_connection(directory: Path, name: str) -> tuple[ConnectionDefinition, str, OAuthConfig]:
    """The connection `name` of the project at `directory`, which must be an oauth URL connection."""
    try:
        project = load_project(directory)
    except ProjectError as exc:
        raise CliError(str(exc)) from None
    definition = project.connections.get(name)
    if definition is None:
        broken = [d for d in project.diagnostics if getattr(d, "severity", "") == "error" and name in str(d)]
        hint = " (its definition has errors; run `agent-sdk validate`)" if broken else ""
        raise CliError(f"no connection named {name!r} in {directory}/agent/mcp-connections/ or host-connections/{hint}")
    if definition.url is None or definition.oauth is None or definition.kind not in ("http", "sse"):
        where = f" in {definition.source}" if definition.source else ""
        raise CliError(
            f"connection {name!r} {NOT_OAUTH} to log in with OAuth; it is a {definition.kind} connection"
            f"{' without oauth' if definition.oauth is None else ''}. Fix: define it{where} as "
            f"define_connection(url='https://...', oauth=True)"
        )
    return definition, definition.url, definition.oauth


def _interaction(args: argparse.Namespace) -> Interaction:
    if args.non_interactive:
        return follow_redirects()
    if args.no_browser:
        return print_url(sys.stderr, sys.stdin)
    return open_browser(sys.stderr)


def run(args: argparse.Namespace) -> int:
    """Run `mcp oauth` for parsed `args`; raises `CliError`."""
    definition, url, config = find_oauth_connection(Path(args.dir), args.name)
    principal = getattr(args, "principal", None)
    if principal is not None:
        if definition.grants != "per_principal":
            raise CliError(
                f"--principal is for a grants='per_principal' connection; {args.name!r} has one grant for the gateway"
            )
        if not (args.status or args.logout) and principal != STDIO.id:
            raise CliError(
                "--principal works with --status or --logout; a principal signs in itself, through the URL the "
                f"gateway answers its call with (a login here is for the `serve --stdio` peer: --principal {STDIO.id})"
            )
        if not principal.strip() or len(principal) > 200:
            raise CliError("--principal needs the principal's id, e.g. bearer:1a2b3c4d5e6f7a8b")
    elif definition.grants == "per_principal" and not args.status:
        raise CliError(
            f"connection {args.name!r} has grants='per_principal': each principal signs in through the gateway; "
            f"name one with --principal ID (with --status or --logout), or log in for `serve --stdio` with "
            f"--principal {STDIO.id}"
        )
    state_root = state_root_of(args)
    try:
        return anyio.run(_run, args, url, config, state_root)
    except OAuthError as exc:
        raise CliError(str(exc)) from None


async def _run(args: argparse.Namespace, url: str, config: OAuthConfig, state_root: Path) -> int:
    if warning := insecure_transport_warning():
        print(warning, file=sys.stderr)
    async with LocalStore(state_root) as local:
        key = StoreKey(args.name, url, getattr(args, "principal", None) or "")
        if args.status:
            return await _status(local, key)
        if args.logout:
            return await _logout(local, key, args.store)
        return await _login(args, url, config, local, key)


async def _status(local: LocalStore, key: StoreKey) -> int:
    home = await local.home(key)
    grant = await home.load(key)
    if grant is None:
        print(f"{key.connection}: not logged in (nothing in {local.name}); run `agent-sdk mcp oauth {key.connection}`")
        return 1
    print("\n".join([*grant_status(grant).lines(), f"stored in: {home.name}"]))
    return 1 if grant.dead else 0


async def _logout(local: LocalStore, key: StoreKey, everywhere: bool) -> int:
    results: list[tuple[str, LogoutResult]] = [(local.name, await logout(local, key))]
    if everywhere:
        target = deployment_store()
        try:
            results.append((target.name, await logout(target, key)))
        finally:
            await target.aclose()
    name = key.connection + (f" (principal {printable(key.principal, 200)})" if key.principal else "")
    deleted = [where for where, result in results if result.deleted]
    if not deleted:
        print(f"{name}: nothing stored in {' or '.join(where for where, _ in results)}")
        return 0
    failed = [result.revocation_error for _, result in results if result.revocation_error]
    revoked = any(result.revoked_at_server for _, result in results)
    unsupported = any(result.had_tokens and not result.revocation_supported for _, result in results)
    if failed:
        said = (
            f"revocation FAILED ({printable(failed[0], 300)}), so the refresh token may still be valid at the "
            "server until it expires; revoke it there"
        )
    elif revoked:
        said = "revoked at the authorization server"
    elif unsupported:
        said = "the server offers no revocation (RFC 7009), so the refresh token stays valid there until it expires"
    else:
        said = "there were no live tokens to revoke"
    print(f"{name}: logged out; {said}; deleted from {', '.join(deleted)}")
    return 1 if failed else 0


async def _login(args: argparse.Namespace, url: str, config: OAuthConfig, local: LocalStore, key: StoreKey) -> int:
    if config.grant == "client_credentials":
        raise CliError(
            f"connection {args.name!r} logs in as the deployment itself (grant='client_credentials'), so there is "
            f"nothing to log in to here; `agent-sdk mcp tools {args.name}` checks its credentials"
        )
    if is_caller_grant(config.grant):
        raise CliError(
            f"connection {args.name!r} acts with each caller's own OAuth token (grant={config.grant!r}), so there is "
            "no login of the gateway's own to run; a peer signed in at the gateway's --oauth-issuer calls it"
        )
    # Reach the store the grant will live in before anyone opens a browser: a bad
    # AGENT_SDK_SECRETS_URL, Redis down or no keyring is a sentence now, not after the login.
    target: TokenStore | None = deployment_store() if args.store else None
    try:
        home = target if target is not None else await local.home(key)
        await check_store(home)

        def status(text: str) -> None:
            print(text, file=sys.stderr, flush=True)

        grant = await login(
            args.name,
            url,
            config,
            home,
            interaction=_interaction(args),
            login_timeout=args.timeout,
            status=status,
            verify_client=True,
            principal=key.principal,
        )
        issuer = printable(grant.issuer)
        if target is not None:
            await local.move_to(target, grant)
            print(
                f"{args.name}: logged in to {issuer}; the grant lives in {target.name} only ({local.name} points there)"
            )
        else:
            print(f"{args.name}: logged in to {issuer}; tokens saved to {home.name}")
        return 0
    finally:
        if target is not None:
            await target.aclose()
