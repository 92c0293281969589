"""The one redaction rule for every message, event, log line and trace, and for every URL or
command line shown to a user (docs/connections.md, "Secrets in messages").

- `redact(text)` masks what may be a secret wherever a value is echoed: hub API keys (`ask_…`),
  the credential after `Bearer`/`Basic`, the user name and password of a URL, and every value
  this process knows to be secret (`remember_secret`: `${VAR}` values as they are expanded, the
  account API key, the bridge secret). Each becomes `***`.
- `shown_url(url)` is a connection's URL as any output shows it: scheme, host and port kept, the
  path reduced to its shape (plain lowercase words and `v1`-style versions kept, every other
  segment `*`), a query shown as `?*`, user info and fragment dropped.
- `shown_command(command, args, show_args=)` is a stdio connection's command line: the program's
  name only, unless the user asked for its arguments (which are still `redact`ed).
- `shown_arguments(arguments)` is a tool call's arguments as an approval shows them to an operator: the
  value of every secret-looking key (`SECRETISH_KEY`, the rule `validate` warns about in `headers=`)
  masked, every string `redact`ed, long strings, lists and objects cut short.

The known secrets are process-wide on purpose: a value known to be secret anywhere in the
process must be masked in every log line and message the process writes.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import urlsplit

__all__ = [
    "MASK",
    "SECRETISH_KEY",
    "RedactingFilter",
    "redact",
    "remember_secret",
    "shown_arguments",
    "shown_command",
    "shown_url",
]

MASK = "***"
_MIN_SECRET = 8
"""Shorter values are not remembered: masking every `dev` or `1234` would garble messages."""

# A hub API key (`ask_` + 43 random base64url characters) starts a word and looks like a key: at least 16
# characters with an upper-case letter or a digit, or 32 of any kind (a cut-off key too). Not the `ask_` inside
# `task_group`, nor a tool's name: `ask_model`, `ask_question`, `ask_user_for_details` pass through.
_KEY = re.compile(r"(?<![A-Za-z0-9])ask_(?:(?=[A-Za-z0-9_-]*[A-Z0-9])[A-Za-z0-9_-]{16,}|[A-Za-z0-9_-]{32,})")
# The credential after the scheme word, not a challenge's parameters (`Bearer realm="..."`, RFC 6750 §3),
# nor the word "token(s)" in a sentence ("a bearer token must be ...").
_SCHEME_CREDENTIAL = re.compile(
    r"(?i)\b(bearer|basic)(\s+)(?!\*\*\*)(?![A-Za-z_]+=[^=\s])(?!tokens?(?:[\s'\",;:.)}\]]|$))[^\s'\",;)}\]]{4,}"
)
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@'\"?#]+@")
_PLAIN_SEGMENT = re.compile(r"[a-z][a-z_-]{0,23}|v[0-9]{1,2}")
SECRETISH_KEY = re.compile(r"(authorization|token|secret|api[-_]?key|password|passwd|cookie|credential)", re.IGNORECASE)
"""A name whose value is a secret: a header of a definition (`validate` warns), an argument an approval shows."""
_SHOWN_TEXT = 500
_SHOWN_ITEMS = 50
_SHOWN_DEPTH = 6

_known: set[str] = set()
_known_lock = threading.Lock()
_known_sorted: tuple[str, ...] = ()


def remember_secret(value: str) -> None:
    """From now on, `redact` masks `value` wherever it appears (values under 8 characters are ignored)."""
    global _known_sorted
    value = value.strip()
    if len(value) < _MIN_SECRET or value in _known:
        return
    with _known_lock:
        _known.add(value)
        _known_sorted = tuple(sorted(_known, key=len, reverse=True))  # longest first: no partial leftovers


def redact(text: str) -> str:
    """`text` with every known secret, hub API key, scheme credential and URL user info masked as `***`."""
    for value in _known_sorted:
        if value in text:
            text = text.replace(value, MASK)
    if "ask_" in text:
        text = _KEY.sub("ask_" + MASK, text)
    text = _SCHEME_CREDENTIAL.sub(_masked_credential, text)
    if "@" in text:
        text = _URL_USERINFO.sub(lambda m: f"{m[1]}{MASK}@", text)
    return text


def _masked_credential(match: re.Match[str]) -> str:
    """The scheme word with its credential masked; a scope value such as `mcp:basic mcp:write` (RFC 6749 §3.3: the
    word after a colon) passes, unless the colon ends an `Authorization:` header name."""
    text, start = match.string, match.start()
    if start and text[start - 1] == ":" and not text[max(0, start - 14) : start].lower().endswith("authorization:"):
        return match[0]
    return f"{match[1]}{match[2]}{MASK}"


def shown_url(url: str) -> str:
    """`url` as outputs show it: scheme, host, port and the path's shape; never user info, query values or fragment."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return "(an invalid URL)"
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    path = "/".join(s if not s or _PLAIN_SEGMENT.fullmatch(s) else "*" for s in parts.path.split("/"))
    query = "?*" if parts.query else ""
    if not parts.scheme or not host:
        return "(an invalid URL)"
    return f"{parts.scheme}://{host}{f':{port}' if port is not None else ''}{path}{query}"


def shown_command(command: str, args: Iterable[str] = (), *, show_args: bool = False) -> str:
    """A stdio command line as outputs show it: the program's name, plus its arguments only when asked."""
    name = Path(command).name or command
    if not show_args:
        return name
    return " ".join([name, *(redact(a) for a in args)])


def shown_arguments(arguments: object, _depth: int = 0) -> object:
    """`arguments` (JSON values) as an operator may see them: a secret-looking key's value is `***`, every
    string goes through `redact` and is cut at 500 characters, lists and objects at 50 items, nesting at 6."""
    if isinstance(arguments, str):
        text = redact(arguments)
        return text if len(text) <= _SHOWN_TEXT else text[:_SHOWN_TEXT] + "…"
    if arguments is None or isinstance(arguments, bool | int | float):
        return arguments
    if _depth >= _SHOWN_DEPTH:
        return "…"
    if isinstance(arguments, Mapping):
        shown: dict[str, object] = {}
        for i, (key, value) in enumerate(arguments.items()):
            if i >= _SHOWN_ITEMS:
                shown["…"] = f"{len(arguments) - i} more"
                break
            name = redact(str(key))[:100]
            shown[name] = MASK if SECRETISH_KEY.search(name) else shown_arguments(value, _depth + 1)
        return shown
    if isinstance(arguments, list | tuple):
        items: list[object] = [shown_arguments(v, _depth + 1) for v in arguments[:_SHOWN_ITEMS]]
        if len(arguments) > _SHOWN_ITEMS:
            items.append(f"… {len(arguments) - _SHOWN_ITEMS} more")
        return items
    return shown_arguments(str(arguments), _depth)


class RedactingFilter(logging.Filter):
    """A handler filter that passes every record through `redact` (message and arguments merged)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # a malformed record: leave it to the handler's own error path
            return True
        cleaned = redact(message)
        if cleaned == message:
            return True
        if isinstance(record.args, tuple) and isinstance(record.msg, str):
            # Keep the record's shape where that suffices: formatters such as uvicorn's access log
            # read `record.args` as a tuple of fields.
            msg, args = redact(record.msg), tuple(redact(a) if isinstance(a, str) else a for a in record.args)
            try:
                shaped = msg % args
            except (TypeError, ValueError):
                shaped = None
            if shaped is not None and redact(shaped) == shaped:
                record.msg, record.args = msg, args
                return True
        record.msg, record.args = cleaned, None
        return True

    @classmethod
    def install(cls, *loggers: str) -> None:
        """Add the filter to every handler of the root logger and of `loggers` (once each)."""
        for name in ("", *loggers):
            for handler in logging.getLogger(name or None).handlers:
                if not any(isinstance(f, cls) for f in handler.filters):
                    handler.addFilter(cls())
