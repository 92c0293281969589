"""A `tools/call` result as the upstream wrote it, and the peer's answer spliced from its bytes.

A result that nothing has to change on its way to a peer (the peer speaks the upstream session's
protocol version; no cap or rewrite of the gateway's applies) need not be parsed into models and
serialized again: `UpstreamResult.answer` writes the JSON-RPC answer around the upstream's own bytes
with the peer's request id. Two things are still rewritten in place, by splicing members, never by
re-encoding the rest: the spec-reserved `_meta` keys (`io.modelcontextprotocol/...`, the upstream's
own envelope, which a forwarding server does not pass off as its own) are left out, and at
2026-07-28 the answer carries the forwarding server's `serverInfo` stamp and `resultType`.

The result is checked once, where it enters (`call_upstream_tool`): `plain_call_result` knows the
verdict of the version's schema for the common shapes without running it; any other result is
validated and, where the schema's dump differs from what the upstream sent, carries no bytes to
splice (`text` is None), so a peer never gets bytes that the check would have changed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pydantic_core
from mcp_types import SERVER_INFO_META_KEY
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

__all__ = ["RESERVED_META", "UpstreamResult", "plain_call_result", "result_text"]

RESERVED_META = "io.modelcontextprotocol/"
"""Spec-reserved `_meta` keys (MCP 2026-07-28 basic §_meta): the sender's own envelope."""

_COMPLETE = "complete"
_TEXT_ITEM = frozenset({"type", "text"})
_HANDSHAKE_KEYS = frozenset({"content", "isError", "structuredContent", "_meta"})
_MODERN_KEYS = _HANDSHAKE_KEYS | {"resultType"}

# A plain response's members other than `result` are `jsonrpc` ("2.0") and the wire's own id (a
# string without escapes, or an integer); they sit before `result`, after it, or around it.
_MEMBER = rb'\s*"(?:jsonrpc|id)"\s*:\s*(?:"[^"\\]*"|-?\d+)\s*'
_HEAD = re.compile(rb"\s*\{((?:" + _MEMBER + rb',)*)\s*"result"\s*:')
_TAIL = re.compile(rb"((?:," + _MEMBER + rb")*)\}\s*\Z")
_MCP_HEAD = b'{"jsonrpc":"2.0","id":"'
_MCP_RESULT = b'","result":'
_ID_CHARS = 128
_KEY = re.compile(rb'"(?:jsonrpc|id)"\s*:')
_TAIL_WINDOW = 256
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]]', re.DOTALL)
_COLON = re.compile(rb"\s*:")
_MAX_TOKENS = 4096
"""A result whose `_meta` sits behind more strings and brackets than this is rewritten, not spliced."""


def plain_call_result(result: Any, version: str) -> bool:
    """Whether `result` has a shape whose verdict under `version`'s `CallToolResult` schema is known without
    running it: accepted, and dumped exactly as it is (nothing sieved, nothing defaulted).

    Plain: text content items only (`type` and `text`, nothing else), `isError` a boolean when present,
    `structuredContent` an object when present, `_meta` an object without null members, and at
    2026-07-28 `resultType` "complete". `tests/connections/client/test_passthrough.py` holds the predicate to
    the schema's own verdict for every version."""
    if type(result) is not dict:
        return False
    modern = version not in HANDSHAKE_PROTOCOL_VERSIONS
    if not (_MODERN_KEYS if modern else _HANDSHAKE_KEYS).issuperset(result):
        return False
    if modern and result.get("resultType") != _COMPLETE:
        return False
    content = result.get("content")
    if type(content) is not list:
        return False
    for item in content:
        if type(item) is not dict or item.keys() != _TEXT_ITEM:
            return False
        if item["type"] != "text" or type(item["text"]) is not str:
            return False
    if "isError" in result and type(result["isError"]) is not bool:
        return False
    if "structuredContent" in result and type(result["structuredContent"]) is not dict:
        return False
    meta = result.get("_meta", {})
    return type(meta) is dict and None not in meta.values()


def result_text(message: bytes) -> bytes | None:
    """The bytes of the `result` member of `message`, a plain JSON-RPC response (`plain_message_result`
    accepted its parse); None when its other members are not spelled as this wire's are (then nothing is
    spliced). Inside a JSON string a quote is escaped, so neither pattern can match inside one."""
    close = len(message.rstrip()) - 1  # the response object's closing brace
    if message.startswith(_MCP_HEAD):  # `mcp`'s own order and spelling, with a string id: no pattern needed
        at = message.find(_MCP_RESULT, len(_MCP_HEAD), len(_MCP_HEAD) + _ID_CHARS)
        if at != -1 and b'"' not in message[len(_MCP_HEAD) : at]:
            return message[at + len(_MCP_RESULT) : close].strip()
    head = _HEAD.match(message)
    if head is None:
        return None
    before = len(_KEY.findall(head.group(1)))
    if before == 2:  # `result` is the last member (as `mcp` writes it): the rest is the closing brace
        return message[head.end() : close].strip()
    tail = _TAIL.search(message, max(head.end(), close - _TAIL_WINDOW))
    if tail is None or before + len(_KEY.findall(tail.group(1))) != 2:
        return None
    return message[head.end() : tail.start()].strip()


@dataclass(frozen=True, slots=True)
class UpstreamResult:
    """One `tools/call` result from an upstream session: what a forwarding server needs to answer with it.

    `result` is the result as JSON, checked once for `version` (the upstream session's negotiated
    protocol version). `text` is its JSON text exactly as the upstream sent it, or None where the wire
    kept none (stdio, the SDK's transport, an answer over 1 MiB parsed as it arrived) or the check
    changed it: then only `result` can be forwarded, re-encoded."""

    result: dict[str, Any]
    version: str
    text: bytes | None = None

    @property
    def modern(self) -> bool:
        """The upstream session speaks 2026-07-28 (stateless, `resultType`, the `serverInfo` stamp)."""
        return self.version not in HANDSHAKE_PROTOCOL_VERSIONS

    def answer(self, request_id: str | int, *, server_info: Mapping[str, Any] | None = None) -> bytes | None:
        """The whole JSON-RPC answer to a peer's request `request_id` at `version`: the upstream's result
        bytes with the reserved `_meta` keys left out and, at 2026-07-28, `server_info` (the forwarding
        server's `serverInfo` stamp) and `resultType` added. None when there are no bytes to splice (forward
        `result` instead). The caller decides that the peer speaks `version` and that nothing else applies."""
        text = self.text
        if text is None:
            return None
        head = b'{"jsonrpc":"2.0","id":' + pydantic_core.to_json(request_id) + b',"result":'
        meta: Any = self.result.get("_meta")
        reserved = type(meta) is dict and any(str(key).startswith(RESERVED_META) for key in meta)
        stamp = self.modern and server_info is not None
        if not reserved and not stamp:
            return head + text + b"}"  # the usual handshake-era answer: nothing but the id changes
        body = text
        if meta is not None:
            last = next(reversed(self.result)) == "_meta"  # the parsed dict keeps the text's member order
            body = _without_last_member(text, b"_meta", meta) if last else _without_member(text, b"_meta")
            if body is None:
                return None
        kept: dict[str, Any] = {k: v for k, v in (meta or {}).items() if not str(k).startswith(RESERVED_META)}
        if stamp:
            kept[SERVER_INFO_META_KEY] = server_info
        added = b""
        if self.modern and "resultType" not in self.result:
            added += b',"resultType":"complete"'
        if kept:
            added += b',"_meta":' + pydantic_core.to_json(kept)
        close = body.rindex(b"}")
        if added and body[:close].rstrip().endswith(b"{"):
            added = added[1:]  # the result had no other member
        return head + body[:close] + added + body[close:] + b"}"


def _without_last_member(text: bytes, key: bytes, value: Any) -> bytes | None:
    """`text` (a JSON object whose last member is `key`, holding `value`) without that member: the last
    `"key"` that starts a member whose text up to the closing brace is `value`'s (a `"key"` nested in the
    value comes later in the text, and what follows it does not parse as the whole value)."""
    close = len(text.rstrip()) - 1
    quoted = b'"' + key + b'"'
    end = close
    while (at := text.rfind(quoted, 0, end)) != -1:
        end = at
        colon = _COLON.match(text, at + len(quoted))
        before = text[:at].rstrip()
        if colon is None or not before.endswith((b",", b"{")):
            continue
        try:
            if pydantic_core.from_json(text[colon.end() : close]) != value:
                continue
        except ValueError:
            continue
        return _cut(text, at, close)
    return None


def _without_member(text: bytes, key: bytes) -> bytes | None:
    """`text` (a JSON object) with its top-level member `key` and one comma next to it cut out; None when
    the member lies beyond `_MAX_TOKENS` tokens."""
    quoted = b'"' + key + b'"'
    depth = 0
    found: tuple[int, int] | None = None  # the key's start and its value's start
    for count, token in enumerate(_TOKEN.finditer(text)):
        if count > _MAX_TOKENS:
            return None
        piece = token.group()
        if piece in (b"{", b"["):
            depth += 1
        elif piece in (b"}", b"]"):
            depth -= 1
            if depth == 0 and found is not None:
                return _cut(text, found[0], token.start())  # the member was the last
        elif depth == 1 and piece[0:1] == b'"':
            colon = _COLON.match(text, token.end())
            if colon is None:
                continue  # a string value, not a key
            if found is not None:
                return _cut(text, found[0], text.rindex(b",", found[1], token.start()))
            if piece == quoted:
                found = (token.start(), colon.end())
    return None


def _cut(text: bytes, start: int, end: int) -> bytes:
    """`text` without `[start, end)` (a member) and the comma that separated it from its neighbour."""
    before = text[:start].rstrip()
    after = text[end:]
    if before.endswith(b","):
        return before[:-1] + after
    stripped = after.lstrip()
    return before + (stripped[1:] if stripped.startswith(b",") else after)
