"""The one redaction rule (connections/_redact.py), in-process: what is masked, what is kept."""

from __future__ import annotations

import logging

import pytest

from connections import EnvironmentVariableMissing, UpstreamError
from connections.serving import (
    RedactingFilter,
    expand_map,
    redact,
    remember_secret,
    shown_arguments,
    shown_command,
    shown_url,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("the key ask_Zk3q0P4x7abcdEFGH-_1 was refused", "the key ask_*** was refused"),
        ("Authorization: Bearer eyJhbGciOi.payload.sig", "Authorization: Bearer ***"),
        ("Authorization: basic Zm9vOmJhcg==", "Authorization: basic ***"),
        ("cannot reach https://alice:pw@hub.example.com/x", "cannot reach https://***@hub.example.com/x"),
        ("send Authorization: Bearer ***", "send Authorization: Bearer ***"),
        ('WWW-Authenticate: Bearer realm="hub", error="invalid_token"', None),
        ("Authorization: Bearer abc==def", "Authorization: Bearer ***"),
        ("Authorization: Basic abcdefgh==", "Authorization: Basic ***"),
        ("a plain sentence about a token, a task_id and https://example.com/a@b", None),
        ("in anyio.create_task_group(), a flask_handler and mask_value", None),
        ("a bearer token must be at least 16 characters; bearer tokens are secrets.", None),
        ("Authorization: Bearer token-0123456789abcdef", "Authorization: Bearer ***"),
        # Tool names are not keys: a key starts a word and looks like one (mixed case or digits, or very long).
        ("tool 'ask_model' failed; try ask_question or ask_user_for_details", None),
        ("calling ask_name, then ask_color (2 tools)", None),
        (
            "a cut-off key ask_Zk3q0P4x7abcdEFG and a lower-case one ask_" + "k" * 43,
            "a cut-off key ask_*** and a lower-case one ask_***",
        ),
        ("--key=ask_Zk3q0P4x7abcdEFGH-_1xYz; task_group_ask_Zk3q0P4x7abcdEFGH", "--key=ask_***; task_group_ask_***"),
    ],
)
def test_redact_masks_keys_credentials_and_url_user_info(text: str, expected: str | None) -> None:
    assert redact(text) == (text if expected is None else expected)


def test_a_var_value_read_for_a_header_is_masked_in_every_later_message() -> None:
    value = "var-secret-for-redact-test"
    expanded = expand_map("crm", "header", {"X-Key": "Token ${REDACT_TEST_VAR}"}, {"REDACT_TEST_VAR": value})
    assert expanded == {"X-Key": f"Token {value}"}  # the upstream still gets it
    error = UpstreamError("crm", f"the server said: bad key {value}!")
    assert value not in str(error) and str(error) == "connection 'crm': the server said: bad key ***!"
    with pytest.raises(EnvironmentVariableMissing, match=r"reads \$\{NOT_SET_HERE\}"):
        expand_map("crm", "header", {"X-Key": "${NOT_SET_HERE}"}, {})
    remember_secret("short")  # under 8 characters: not remembered, or every `short` would vanish
    assert redact("a short sentence") == "a short sentence"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp"),
        ("https://u:p@mcp.example.com:8443/sse/Zk3q0P4x7?api_key=s#frag", "https://mcp.example.com:8443/sse/*?*"),
        ("http://127.0.0.1:9/v1/hub/connectors/linear/mcp", "http://127.0.0.1:9/v1/hub/connectors/linear/mcp"),
        ("http://[::1]:80/t0k3n/mcp", "http://[::1]:80/*/mcp"),
        ("https://api.example.com/v2/Users/abcdef0123456789", "https://api.example.com/v2/*/*"),
        ("ask_notaurl", "(an invalid URL)"),
        ("http://h:99999/", "(an invalid URL)"),
    ],
)
def test_a_url_is_shown_by_its_shape(url: str, shown: str) -> None:
    assert shown_url(url) == shown


def test_a_command_is_shown_by_its_name_and_its_args_only_when_asked() -> None:
    args = ["server.js", "--token", "ask_" + "a" * 43]
    assert shown_command("/usr/local/bin/node", args) == "node"
    assert shown_command("/usr/local/bin/node", args, show_args=True) == "node server.js --token ask_***"


def test_the_log_filter_masks_a_record_with_its_arguments(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("tests.redact")
    handler = caplog.handler
    handler.addFilter(RedactingFilter())
    try:
        with caplog.at_level(logging.INFO, logger="tests.redact"):
            logger.info("calling %s with %s", "https://x:y@h.example/", "Bearer abc.def.ghi")
    finally:
        handler.filters.clear()
    assert caplog.messages == ["calling https://***@h.example/ with Bearer ***"]


def test_the_log_filter_keeps_a_record_s_argument_tuple_for_formatters_that_read_it() -> None:
    # uvicorn's access formatter unpacks `record.args` as (client, method, path, version, status).
    remember_secret("an-authorization-code-in-a-query")
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", "/cb?code=an-authorization-code-in-a-query", "1.1", 400), None,
    )  # fmt: skip
    assert RedactingFilter().filter(record)
    assert record.args == ("127.0.0.1:5", "GET", "/cb?code=***", "1.1", 400)
    assert record.getMessage() == '127.0.0.1:5 - "GET /cb?code=*** HTTP/1.1" 400'


def test_an_approval_shows_arguments_with_secret_looking_values_masked_and_long_ones_cut() -> None:
    arguments = {
        "doc": "42",
        "api_key": "sk-live-0123456789",
        "headers": {"Authorization": "Bearer abc.def.ghi", "X-Trace": "t-1"},
        "note": "retry with Bearer eyJhbGciOi.payload.sig please",
        "password": {"nested": "anything"},
        "items": list(range(60)),
        "long": "x" * 600,
        "count": 3,
        "flag": None,
    }
    shown = shown_arguments(arguments)
    assert isinstance(shown, dict)
    assert shown["doc"] == "42" and shown["count"] == 3 and shown["flag"] is None
    assert shown["api_key"] == "***" and shown["password"] == "***"
    assert shown["headers"] == {"Authorization": "***", "X-Trace": "t-1"}
    assert shown["note"] == "retry with Bearer *** please"
    assert shown["items"][:3] == [0, 1, 2] and shown["items"][-1] == "… 10 more" and len(shown["items"]) == 51
    assert len(shown["long"]) == 501 and shown["long"].endswith("…")
    deep: object = "bottom"
    for _ in range(10):
        deep = {"d": deep}
    assert "bottom" not in str(shown_arguments(deep))
