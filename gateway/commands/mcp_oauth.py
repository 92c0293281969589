"""`agent-sdk mcp oauth NAME [--store | --status | --logout]`: PKCE login for an oauth connection.

A thin layer over the `oauth` package: find the connection in the project, pick the interaction
(browser, `--no-browser`, `--non-interactive`), log in, save to `<state root>/mcp-auth.json`, and with
`--store` upsert the grant into the deployment secret store (OS keyring, or Redis when
`AGENT_SDK_SECRETS_URL=redis://...`). Every failure is a `CliError` sentence; tokens are never printed.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import anyio

from connections import ConnectionDefinition, ProjectError, load_project
from oauth import (
    FileTokenStore,
    Interaction,
    OAuthConfig,
    OAuthError,
    StoreKey,
    TokenStore,
    deployment_store,
    follow_redirects,
    grant_status,
    login,
    logout,
    open_browser,
    print_url,
)

from ..errors import CliError
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
    action = parser.add_mutually_exclusive_group()
    action.add_argument(
        "--store",
        action="store_true",
        help="also upsert the tokens into the deployment secret store: the OS keyring, or Redis when "
        "AGENT_SDK_SECRETS_URL=redis://... is set",
    )
    action.add_argument("--status", action="store_true", help="show what is stored for the connection (no tokens)")
    action.add_argument("--logout", action="store_true", help="revoke the tokens where supported, then delete them")
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
        type=float,
        default=float(os.environ.get("AGENT_SDK_OAUTH_TIMEOUT", "300")),
        help="seconds to wait for the login redirect (default 300, $AGENT_SDK_OAUTH_TIMEOUT)",
    )
    parser.set_defaults(func=run)


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
    _definition, url, config = find_oauth_connection(Path(args.dir), args.name)
    state_root = state_root_of(args)
    try:
        return anyio.run(_run, args, url, config, state_root)
    except OAuthError as exc:
        raise CliError(str(exc)) from None


async def _run(args: argparse.Namespace, url: str, config: OAuthConfig, state_root: Path) -> int:
    local = FileTokenStore(state_root)
    key = StoreKey(args.name, url)
    if args.status:
        grant = await local.load(key)
        if grant is None:
            print(f"{args.name}: not logged in (nothing in {local.name}); run `agent-sdk mcp oauth {args.name}`")
            return 1
        print("\n".join([*grant_status(grant).lines(), f"stored in: {local.name}"]))
        return 0
    if args.logout:
        result = await logout(local, key)
        if not result.deleted:
            print(f"{args.name}: nothing stored in {local.name}")
            return 0
        revoked = (
            f"revoked {result.revoked} token(s)"
            if result.revocation_supported and result.revocation_error is None
            else "the server offers no revocation (RFC 7009)"
            if not result.revocation_supported
            else f"revocation failed ({result.revocation_error})"
        )
        print(f"{args.name}: logged out; {revoked}; deleted from {local.name}")
        return 0

    def status(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    grant = await login(
        args.name, url, config, local, interaction=_interaction(args), login_timeout=args.timeout, status=status
    )
    print(f"{args.name}: logged in to {grant.issuer}; tokens saved to {local.name}")
    if args.store:
        target: TokenStore = deployment_store()
        try:
            await target.save(grant)
        finally:
            await target.aclose()
        print(f"{args.name}: tokens also stored in {target.name} (entry mcp-oauth:{args.name}:{url})")
    return 0
