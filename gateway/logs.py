"""`serve`'s log: one line per event, text for a terminal or JSON for a log shipper.

Every line carries the request id of the request that caused it (`request_ids.current_request_id`;
turns and tool calls a request started inherit it) and, where there is one, the connection, tool,
session and turn, passed as `extra={...}` by the code that logs. What the gateway logs, once each:

| event | logger | level |
|---|---|---|
| a turn that did not complete (`turn_failed`) | `agent_sdk.turns` | WARNING |
| a tool call that raised (`tool_failed`) | `agent_sdk.tools` | WARNING |
| an auth refusal (401, 403, 421), or the request guard's (400, 403, 415) | `agent_sdk.auth` | WARNING |
| an upstream session reopened after a failure (`upstream_restart`) | `connections.client._session_runner` | WARNING |
| an OAuth access token refreshed (`oauth_refresh`) | `oauth.flows._auth` | INFO |
| each request, with `--access-log` (`http_request`: method, path, status, latency) | `agent_sdk.access` | INFO |
| a line a stdio child wrote to its stderr (`upstream_stderr`, with `connection`) | `connections.stderr` | INFO |
| the CLI's own line: a refusal (`error`), Ctrl-C (`interrupted`), a notice (`tell`) | `agent_sdk.cli` | any |

A stdio child's stderr is never copied raw: each line is one record (one JSON object with
`--log-format json`; `INFO <connection>| <line>` as text), shown even where the log's level is
WARNING (`serve --stdio`), as a desktop client shows a server's stderr.

No secret reaches these lines: the messages are the gateway's own error sentences (which never
hold a header, token or environment value), and text from outside goes through `oauth._shared.printable`.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Literal

from connections.serving import STDERR_LOGGER, RedactingFilter
from oauth._shared import printable

from .http.request_ids import current_request_id

__all__ = ["CLI_LOGGER", "CONTEXT_FIELDS", "LogFormat", "configure_logging", "tell"]

LogFormat = Literal["text", "json"]
CONTEXT_FIELDS = (
    "event", "connection", "tool", "code", "session_id", "turn_id", "status", "method", "path", "latency_ms", "action",
)  # fmt: skip
"""The `extra={...}` keys a log line may carry beside its message."""
CLI_LOGGER = "agent_sdk.cli"
"""What the command line itself says (`tell`): shown at any log level, as a printed line would be."""
ACTION_EVENT = "operator_action"
"""The `event` of a log line recording an operator's action (the console's *Operator actions* shows them)."""


class _RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = current_request_id()
        return True


def _context(record: logging.LogRecord) -> dict[str, Any]:
    out: dict[str, Any] = {}
    request_id = getattr(record, "request_id", None)
    if request_id is not None:
        out["request_id"] = request_id
    for key in CONTEXT_FIELDS:
        value = getattr(record, key, None)
        if value is not None:
            out[key] = value
    return out


class _TextFormatter(logging.Formatter):
    """`LEVEL logger: message key=value ...`, every part made one printable line."""

    def format(self, record: logging.LogRecord) -> str:
        if record.name == STDERR_LOGGER:  # the child's own line, prefixed with whose it is
            return f"{record.levelname} {getattr(record, 'connection', '?')}| {printable(record.getMessage(), 2000)}"
        parts = [f"{record.levelname} {record.name}: {printable(record.getMessage(), 2000)}"]
        parts += [f"{k}={printable(v, 200)}" for k, v in _context(record).items()]
        text = " ".join(parts)
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


class _JsonFormatter(logging.Formatter):
    """One JSON object per line: `ts`, `level`, `logger`, `message`, then the context fields."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **_context(record),
        }
        if record.exc_info:
            doc["traceback"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)


def configure_logging(fmt: LogFormat = "text", *, level: int = logging.INFO) -> None:
    """Send every log record to stderr in `fmt`, with the request id and context fields.

    Replaces the root logger's handlers (so uvicorn's lines take the same format when it runs with
    `log_config=None`).
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter() if fmt == "json" else _TextFormatter())
    handler.addFilter(RedactingFilter())  # keys, tokens and ${VAR} values are masked on every line
    handler.addFilter(_RequestIdFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    logging.getLogger(STDERR_LOGGER).setLevel(logging.INFO)
    logging.getLogger(CLI_LOGGER).setLevel(logging.INFO)
    # With json, Python's own warnings (a Ctrl-C before uvicorn's loop runs leaves "coroutine ... was never
    # awaited") are log records too, so every line on stderr is one JSON object.
    logging.captureWarnings(fmt == "json")


def tell(line: str, *, event: str, level: int = logging.INFO) -> None:
    """One line for whoever reads stderr: printed as it is, or, once `configure_logging("json")` made this
    process's log JSON, one JSON object (`logger` agent_sdk.cli, `event`), so a log shipper parses every line."""
    if any(isinstance(h.formatter, _JsonFormatter) for h in logging.getLogger().handlers):
        logging.getLogger(CLI_LOGGER).log(level, line, extra={"event": event})
    else:
        print(line, file=sys.stderr)
