"""The value checks of `define_connection`: each field's expected type in words, lists and maps of
strings, the advertised-offerings lists and URI templates, and which entries they offer.

Every check records a `Problem` (or calls `bad`) instead of raising: `agent-sdk validate` reports
every broken file in one run.
"""

# Definition files are untyped user code: the runtime isinstance checks on typed parameters are the point.
# pyright: reportUnnecessaryIsInstance=false, reportUnnecessaryComparison=false

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Literal

from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate

from ._problems import Problem

__all__ = ["FIELD_TYPES", "offer", "offered", "servers_value", "shown", "str_list", "str_map", "template_problems"]

FIELD_TYPES: dict[str, str] = {
    "url": "a URL string (http:// or https://)",
    "transport": "'streamable-http' or 'sse'",
    "headers": "a dict of header name to string value",
    "command": "a string (the program to start)",
    "args": "a list of strings",
    "env": "a dict of name to string value",
    "cwd": "a path string",
    "oauth": "True, False or an OAuthConfig(...)",
    "host_only": "True or False",
    "account": "True or False",
    "servers": "a list of connector names or the string '*'",
    "auth": "a function auth(session) returning {'headers': {...}}",
    "advertise_tools": "True or False",
    "advertise_resources": "True, False or a list of resource URIs and URI templates",
    "advertise_prompts": "True, False or a list of prompt names",
    "deny_resources": "a list of resource URIs and URI templates",
    "deny_prompts": "a list of prompt names",
    "timeouts": "a Timeouts(...) or a dict with connect/list/call/auth/question seconds",
    "allow_tools": "a list of tool names",
    "deny_tools": "a list of tool names",
    "protocol": "'auto', 'legacy' or 'modern'",
    "description": "a string",
    "linkable": "True or False",
    "bridge": "True or False",
    "pin": "True or False",
    "optional": "True or False",
    "trace_content": "True or False",
    "max_result_bytes": "a whole number of bytes of at least 1024",
    "max_identities": "a whole number of at least 1",
    "identity_idle_timeout": "a positive number of seconds",
    "upstream_sessions": "'shared' or 'per_principal'",
    "grants": "'gateway' or 'per_principal'",
    "sandbox": "True, False, a Sandbox(...) or a dict of its fields",
    "dpop": "True, False or None (bind to DPoP only where the upstream asks)",
    "min_log_level": "one of 'debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'",
}


def offered(advertise: bool | frozenset[str], deny: frozenset[str], key: str, uri: str, *, match: bool = False) -> bool:
    if advertise is False or _listed(deny, key, uri, match):
        return False
    return advertise is True or _listed(advertise, key, uri, match)


def _listed(entries: frozenset[str], key: str, uri: str, match: bool) -> bool:
    if key in entries:
        return True
    return match and any(_template_matches(entry, uri) for entry in entries if "{" in entry)


@functools.lru_cache(maxsize=256)
def _template(entry: str) -> UriTemplate | None:
    try:
        return UriTemplate.parse(entry)
    except InvalidUriTemplate:
        return None  # reported by `define_connection`; never matches


def _template_matches(entry: str, uri: str) -> bool:
    template = _template(entry)
    return template is not None and template.match(uri) is not None


def servers_value(servers: object, account: bool, problems: list[Problem]) -> tuple[str, ...] | Literal["*"]:
    """`servers`: the connector names an account connection keeps, or `'*'` (the default)."""
    clean: tuple[str, ...] | Literal["*"] = "*"
    if servers is None:
        return clean
    if servers == "*":
        clean = "*"
    elif isinstance(servers, list | tuple) and all(isinstance(s, str) and s for s in servers):
        clean = tuple(servers)
        if not clean:
            problems.append(
                Problem("bad-servers", "field 'servers' is an empty list; name at least one connector or use '*'")
            )
    else:
        problems.append(
            Problem(
                "bad-servers",
                f"field 'servers' must be a list of connector names or '*', got {servers!r}"[:200],
            )
        )
    if not account:
        problems.append(Problem("servers-without-account", "field 'servers' only applies to account=True connections"))
    return clean


def offer(
    fname: str, value: object, bad: Callable[[str, object], None], problems: list[Problem]
) -> bool | frozenset[str]:
    """`advertise_resources` / `advertise_prompts`: True, False, or a non-empty list of strings."""
    if value is True or value is False:
        return value
    if value is None:
        return False
    entries = str_list(fname, value, bad)
    if entries is None:
        return False
    if not entries or not all(entries):
        what = "URIs or URI templates" if fname == "advertise_resources" else "prompt names"
        problems.append(
            Problem(
                f"empty-{fname.replace('_', '-')}",
                f"field {fname!r} lists no {what} (or an empty one); name at least one, or use True for all of them",
            )
        )
        return False
    return frozenset(entries)


def template_problems(fname: str, entries: frozenset[str]) -> list[Problem]:
    out: list[Problem] = []
    for entry in sorted(entries):
        if "{" not in entry:
            continue
        try:
            UriTemplate.parse(entry)
        except InvalidUriTemplate as exc:
            out.append(
                Problem(
                    "bad-uri-template",
                    f"{fname} entry {entry[:80]!r} is not an RFC 6570 URI template: {str(exc).split(';')[0]}"[:240],
                )
            )
    return out


def shown(fname: str, value: object) -> str:
    """How a bad value appears in a diagnostic: scalars by value, containers by what is wrong inside.

    Header and env maps show only types: their values may be secrets read from the environment.
    """
    if isinstance(value, bool | int | float | str) and fname not in ("headers", "env"):
        return repr(value)[:80]
    if isinstance(value, list | tuple):
        odd = next((item for item in value if not isinstance(item, str)), None)
        if odd is not None:
            return f"a {type(value).__name__} holding {type(odd).__name__} {odd!r}"[:120]
    if isinstance(value, Mapping) and fname in ("headers", "env"):
        odd = next((v for v in value.values() if not isinstance(v, str)), None)
        if odd is not None:
            return f"a value of type {type(odd).__name__}"
    return type(value).__name__


def str_map(fname: str, value: object, bad: Callable[[str, object], None]) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        bad(fname, value)
        return {}
    return dict(value)


def str_list(fname: str, value: object, bad: Callable[[str, object], None]) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, list | tuple):
        bad(fname, value)
        return None
    items = tuple(value)
    if not all(isinstance(item, str) for item in items):
        bad(fname, value)
        return None
    return items
