"""The rules of docs/connections.md for one connection definition, as diagnostics."""

from __future__ import annotations

from collections.abc import Iterator

from .._redact import SECRETISH_KEY
from ._definitions import ConnectionDefinition
from ._expand import references
from ._limits import DEFAULT_IDENTITY_IDLE_TIMEOUT, DEFAULT_MAX_IDENTITIES
from ._problems import Problem

__all__ = ["connection_problems"]


def connection_problems(defn: ConnectionDefinition, *, in_host_folder: bool) -> Iterator[Problem]:
    """Every rule `defn` breaks, each with the fix in its sentence."""
    targets = [
        label
        for label, present in (
            ("url", defn.url is not None),
            ("command", defn.command is not None),
            ("account", defn.account),
        )
        if present
    ]
    # A misspelt `uri=` already has its did-you-mean diagnostic; "it sets none" would only repeat it.
    misspelt = any(p.code == "unknown-field" for p in defn.problems)
    if len(targets) > 1 or (not targets and not misspelt):
        found = f"it sets {' and '.join(targets)}" if targets else "it sets none"
        yield Problem(
            "exactly-one-target",
            f"a connection needs exactly one of url=..., command=... or account=True; {found}",
        )
    if defn.auth is not None and defn.url is None:
        yield Problem(
            "auth-needs-url",
            "auth=... only works on url connections (per-session headers are HTTP headers); remove auth or use url=...",
        )
    per_principal = defn.upstream_sessions == "per_principal"
    if per_principal and defn.auth is not None:
        yield Problem(
            "upstream-sessions-with-auth",
            "upstream_sessions='per_principal' on a connection with auth=...: its upstream sessions are "
            "already one per identity (per set of headers auth returns); remove upstream_sessions",
            "warning",
        )
    if per_principal and defn.account:
        yield Problem(
            "upstream-sessions-account",
            "upstream_sessions='per_principal' cannot be combined with account=True: an account connection's "
            "sessions belong to its hub; set it on the hub's own url or command connection instead",
        )
    if per_principal and defn.linkable:
        yield Problem(
            "upstream-sessions-linkable",
            "upstream_sessions='per_principal' cannot be combined with linkable=True: a hub calls a linked "
            "connector for accounts, not for this gateway's principals; drop one",
        )
    if (
        defn.auth is None
        and not per_principal
        and (
            defn.max_identities != DEFAULT_MAX_IDENTITIES or defn.identity_idle_timeout != DEFAULT_IDENTITY_IDLE_TIMEOUT
        )
    ):
        yield Problem(
            "identity-bounds-without-auth",
            "max_identities and identity_idle_timeout bound the clients kept per identity of an auth=... "
            "connection; this one has no auth callback, so they do nothing: remove them",
            "warning",
        )
    if defn.auth is not None and defn.oauth is not None:
        yield Problem(
            "auth-with-oauth",
            "auth=... cannot be combined with oauth=...: the OAuth provider owns the Authorization header; "
            "keep one of them",
        )
    if defn.oauth is not None and defn.url is None:
        yield Problem("oauth-needs-url", "oauth=... needs url=...: OAuth protects remote servers only")
    if defn.grants == "per_principal" and defn.oauth is None:
        yield Problem(
            "grants-need-oauth",
            "grants='per_principal' needs oauth=True: each principal's own grant is an OAuth login; add oauth=True "
            "or remove grants",
        )
    if defn.grants == "per_principal" and defn.oauth is not None and defn.oauth.grant == "client_credentials":
        yield Problem(
            "grants-with-client-credentials",
            "grants='per_principal' cannot be combined with OAuthConfig(grant='client_credentials'): a client "
            "credentials token is the deployment's own, not a person's; drop one",
        )
    if defn.oauth is not None:
        yield from _grant_problems(defn)
    if defn.dpop is not None and defn.oauth is None:
        yield Problem(
            "dpop-needs-oauth",
            f"dpop={defn.dpop} binds the tokens of an OAuth grant to a key, and this connection has no oauth=...; "
            "add oauth=True or remove dpop",
        )
    elif defn.oauth is not None and defn.oauth.dpop is not None and defn.oauth.grant in ("token_exchange", "id_jag"):
        yield Problem(
            "dpop-with-caller-credential",
            f"dpop=... does nothing with OAuthConfig(grant={defn.oauth.grant!r}): a caller's own tokens travel as "
            "Bearer; remove dpop",
            "warning",
        )
    if defn.oauth is not None and any(k.lower() == "authorization" for k in defn.headers):
        yield Problem(
            "oauth-with-authorization-header",
            "headers set Authorization on an oauth connection; the OAuth provider owns that header, remove it",
        )
    if defn.advertise_tools and (defn.host_only or in_host_folder):
        where = "in host-connections/" if in_host_folder else "with host_only=True"
        yield Problem(
            "advertise-host-only",
            f"advertise_tools=True {where} is contradictory: advertising puts the tools in the model's toolset, "
            "host-only keeps them off the model; drop one",
        )
    for fname, value in (
        ("advertise_resources", defn.advertise_resources),
        ("advertise_prompts", defn.advertise_prompts),
    ):
        if value is False:
            continue
        if defn.host_only or in_host_folder:
            where = "in host-connections/" if in_host_folder else "with host_only=True"
            yield Problem(
                "advertise-host-only",
                f"{fname}=... {where} is contradictory: advertising offers them to peers of /v1/mcp/tools, "
                "host-only keeps them to host.mcp; drop one",
            )
        elif defn.account:
            yield Problem(
                "advertise-account-offerings",
                f"{fname}=... is not supported on account=True connections yet; link the connector's own "
                "url or command connection and advertise there",
            )
        elif defn.auth is not None:
            yield Problem(
                "advertise-with-auth",
                f"{fname}=... on a connection with auth=...: /v1/mcp/tools has no session to compute the "
                "headers from, so nothing of this connection is offered there (host.mcp still reaches it)",
                "warning",
            )
    for kind, offered, denied in (
        ("resource", defn.advertise_resources, defn.deny_resources),
        ("prompt", defn.advertise_prompts, defn.deny_prompts),
    ):
        both = sorted(offered & denied) if isinstance(offered, frozenset) else []
        if both:
            yield Problem(
                "allow-and-deny",
                f"{kind} {both[0]!r} is in both advertise_{kind}s and deny_{kind}s; deny wins, remove it from one list",
                "warning",
            )
    if defn.linkable and defn.account:
        yield Problem(
            "linkable-account",
            "linkable=True cannot be combined with account=True: a hub links connections that reach an upstream "
            "themselves; link the hub's own url or command connection instead",
        )
    if defn.linkable and defn.auth is not None:
        yield Problem(
            "linkable-with-auth",
            "linkable=True cannot be combined with auth=...: a hub calls linked connectors with its own "
            "credentials, and an account has no session to compute per-session headers from; use headers or oauth",
        )
    if defn.bridge and defn.command is None:
        yield Problem(
            "bridge-needs-command",
            "bridge=True hands the account bridge's URL and secret to a stdio child; it needs command=...",
        )
    if defn.bridge and defn.linkable:
        yield Problem(
            "linkable-bridge",
            "bridge=True cannot be combined with linkable=True: accounts reach a linked connection from other "
            "machines, and the bridge secret must never reach them; drop one",
        )
    if defn.headers and defn.url is None:
        yield Problem("headers-need-url", "headers=... only apply to url connections; remove them or use url=...")
    if defn.command is None and (defn.args or defn.env or defn.cwd is not None or defn.sandbox):
        stdio_only = (("args", defn.args), ("env", defn.env), ("cwd", defn.cwd), ("sandbox", defn.sandbox))
        given = ", ".join(n for n, v in stdio_only if v)
        yield Problem("stdio-fields-need-command", f"{given} only apply to command=... connections; remove them")
    if defn.transport == "sse" and defn.url is None:
        yield Problem("transport-needs-url", "transport='sse' only applies to url connections")
    for key, value in defn.headers.items():
        if SECRETISH_KEY.search(key) and not references(value):
            yield Problem(
                "hardcoded-secret",
                f"header {key!r} holds a literal value; read secrets from the environment instead, "
                f'e.g. {{"{key}": "Bearer ${{MY_TOKEN}}"}}',
                "warning",
            )
    if defn.allow_tools is not None:
        both = sorted(defn.allow_tools & defn.deny_tools)
        if both:
            yield Problem(
                "allow-and-deny",
                f"tool {both[0]!r} is in both allow_tools and deny_tools; deny wins, remove it from one list",
                "warning",
            )


_GRANTS = ("authorization_code", "client_credentials", "token_exchange", "id_jag")


def _grant_problems(defn: ConnectionDefinition) -> Iterator[Problem]:
    """`OAuthConfig.grant` and what each grant needs (docs/oauth.md)."""
    config = defn.oauth
    assert config is not None
    if config.grant not in _GRANTS:
        yield Problem(
            "oauth-grant",
            f"OAuthConfig(grant={config.grant!r}) is not a grant this gateway runs; use one of {', '.join(_GRANTS)}",
        )
        return
    if config.grant not in ("token_exchange", "id_jag"):
        return
    # A caller's own credential: the gateway's client at the IdP (and, for id_jag, at the upstream's server).
    if not config.client_id or not (config.client_secret_env or config.private_key_env):
        yield Problem(
            "oauth-grant-client",
            f"OAuthConfig(grant={config.grant!r}) needs client_id=... and client_secret_env=... (or "
            "private_key_env=...): the gateway authenticates as its own client when it asks for each caller's token",
        )
    if config.grant == "id_jag" and not (config.idp_client_id and config.idp_client_secret_env):
        yield Problem(
            "oauth-grant-client",
            "OAuthConfig(grant='id_jag') needs idp_client_id=... and idp_client_secret_env=...: the gateway's "
            "client at the identity provider that issues the ID-JAGs",
        )
    if defn.advertise_resources is not False or defn.advertise_prompts is not False:
        yield Problem(
            "advertise-with-caller-grant",
            f"advertise_resources / advertise_prompts on a grant={config.grant!r} connection: offerings are listed "
            "for every peer at once, and this connection has no credential but each caller's own; advertise tools only",
        )
