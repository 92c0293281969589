"""What every route reads and writes at the ASGI level, in one place.

- **Headers**: `header` (the first value), `header_values` (all of them).
- **Error writers**: `send_json_error` (`{"ok": false, "error", "message"}`), `send_rpc_error`
  (a JSON-RPC error, `id` null), and `send_error`, which picks the shape the route answers in
  (JSON-RPC on the MCP endpoints: `/v1/mcp`, `/v1/mcp/tools`, the hub's and the bridge's `/mcp`).
  `json_error` builds the `{"ok": false, ...}` body for routes that answer with a Starlette
  response. Every error body they write carries the request's id (`request_ids`): `requestId`, or
  the JSON-RPC error's `data.requestId`.
- **The bounded JSON reader**: `loads_bounded` parses a body with a cap on nesting depth and
  refuses strings that UTF-8 cannot carry (lone surrogates), so nothing deeper than the cap or
  unencodable gets past the boundary to a recursive encoder, validator or store.
- **Peers**: loopback names and addresses, strict `Host` parsing, and the forwarding headers a
  proxy adds.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import logging
import re
from collections.abc import Coroutine, Iterable
from itertools import accumulate
from typing import Any

from starlette.types import Scope, Send

from oauth._shared import printable

from ..errors import GatewayError
from .request_ids import note_error

__all__ = [
    "FORWARDING_HEADERS",
    "MAX_JSON_DEPTH",
    "JsonRefused",
    "forwarding_header",
    "header",
    "header_values",
    "host_of",
    "is_loopback_address",
    "is_loopback_name",
    "is_mcp_path",
    "json_depth",
    "json_error",
    "loads_bounded",
    "loads_stored",
    "receive_body",
    "refuse",
    "send_error",
    "send_json_error",
    "send_rpc_error",
]

MAX_JSON_DEPTH = 100
"""Deepest nesting a JSON body may have (arrays and objects). Tool arguments nest a few levels;
a parser, validator or encoder that recurses per level must never see thousands."""

FORWARDING_HEADERS = frozenset(
    {
        b"forwarded",
        b"via",
        b"x-real-ip",
        b"x-client-ip",
        b"client-ip",
        b"true-client-ip",
        b"cf-connecting-ip",
        b"fastly-client-ip",
        b"x-cluster-client-ip",
        b"x-original-forwarded-for",
        b"x-envoy-external-address",
        b"x-appengine-user-ip",
    }
)
"""Headers a proxy or CDN adds to say who the client is (plus every `x-forwarded-*`)."""

_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_DEPTH_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of header `name` (lower-case bytes), decoded as Latin-1; None when absent."""
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None


def header_values(scope: Scope, name: bytes) -> list[str]:
    """Every value of header `name`, in order."""
    return [value.decode("latin-1") for key, value in scope.get("headers", []) if key == name]


def forwarding_header(scope: Scope) -> str | None:
    """The name of the first proxy-forwarding header the request carries, or None."""
    for key, _value in scope.get("headers", []):
        if key in FORWARDING_HEADERS or key.startswith(b"x-forwarded-"):
            return key.decode("latin-1")
    return None


def is_mcp_path(path: str) -> bool:
    """Whether `path` is an MCP endpoint (answers are JSON-RPC)."""
    if path == "/v1/mcp" or path.startswith("/v1/mcp/"):
        return True
    return path.endswith("/mcp") and path.startswith(("/v1/hub/connectors/", "/v1/account/"))


async def _send_json(send: Send, status: int, body: dict[str, Any], headers: Iterable[tuple[bytes, bytes]]) -> None:
    payload = json.dumps(body).encode()  # ensure_ascii: any text, even unpaired surrogates, encodes
    start = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": payload})


def json_error(code: str, message: str, **extra: Any) -> dict[str, Any]:
    """`{"ok": false, "error": code, "message": message, ...extra}`, with the request's `requestId` when
    one is known (the answer's `X-Request-Id`)."""
    body: dict[str, Any] = {"ok": False, "error": code, "message": message, **extra}
    if (request_id := note_error(code)) is not None:
        body["requestId"] = request_id
    return body


async def send_json_error(
    send: Send, status: int, code: str, message: str, headers: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    """`{"ok": false, "error": code, "message": message}` with `status` (and `requestId`: `json_error`)."""
    await _send_json(send, status, json_error(code, message), headers)


async def send_rpc_error(
    send: Send,
    status: int,
    rpc_code: int,
    message: str,
    data: dict[str, Any] | None = None,
    headers: Iterable[tuple[bytes, bytes]] = (),
    *,
    ident: str | int | None = None,
) -> None:
    """A JSON-RPC 2.0 error with HTTP `status`, answering the request `ident` (null: its id is unknown or
    unreadable); `data.requestId` is the request's id when one is known."""
    data = dict(data or {})
    if (request_id := note_error(str(data.get("error", rpc_code)))) is not None:
        data["requestId"] = request_id
    error: dict[str, Any] = {"code": rpc_code, "message": message, **({"data": data} if data else {})}
    await _send_json(send, status, {"jsonrpc": "2.0", "id": ident, "error": error}, headers)


async def send_error(
    scope: Scope, send: Send, status: int, code: str, message: str, headers: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    """Refuse in the route's own shape: a JSON-RPC error on the MCP endpoints (`-32001` for 401/403,
    `-32600` otherwise, `data.error` the code), our JSON error elsewhere."""
    if is_mcp_path(scope.get("path", "")):
        rpc_code = -32001 if status in (401, 403) else -32600
        await send_rpc_error(send, status, rpc_code, message, {"error": code}, headers)
    else:
        await send_json_error(send, status, code, message, headers)


_auth_log = logging.getLogger("agent_sdk.auth")


def _console_before_token(scope: Scope) -> bool:
    """The console page's own request before an operator typed a token (no credential, its marker header): the
    log keeps its refusal, the console's *Last failures* and *Recent log* do not (`console/_recent.py`)."""
    headers = scope.get("headers") or ()
    return (b"x-agent-sdk-console", b"before-token") in headers and not any(k == b"authorization" for k, _ in headers)


def refuse(
    scope: Scope, send: Send, status: int, code: str, message: str, headers: Iterable[tuple[bytes, bytes]] = ()
) -> Coroutine[Any, Any, None]:
    """`send_error` for the auth chain's refusals, logged with the method, the path and the code only
    (never a header, a token or the query string)."""
    _auth_log.warning(
        "refused %s %s: %s",
        scope.get("method"),
        printable(scope.get("path", ""), 120),
        code,
        extra={"console_before_token": status == 401 and _console_before_token(scope)},
    )
    return send_error(scope, send, status, code, message, headers)


async def receive_body(receive: Any) -> bytes | None:
    """The whole request body (already capped by `BodyLimit`), or None when the client went away."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


class JsonRefused(GatewayError, ValueError):
    """The body is not JSON this server accepts; the message says why, in a sentence."""


def loads_bounded(raw: bytes | str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """`json.loads` with a nesting cap and no unpaired surrogates. Raises `JsonRefused`.

    Cheap on ordinary bodies: the depth is only measured when the body has more brackets than the
    cap, and strings are only walked when the body escapes a surrogate (`\\ud800`-`\\udfff`).
    """
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    try:
        value = json.loads(data)
    except RecursionError:
        raise JsonRefused(f"the JSON nests deeper than {max_depth} levels") from None
    except UnicodeDecodeError:
        raise JsonRefused("the body is not valid UTF-8") from None
    except ValueError:
        raise JsonRefused("the body is not valid JSON") from None
    if data.count(b"[") + data.count(b"{") > max_depth and json_depth(data) > max_depth:
        raise JsonRefused(f"the JSON nests deeper than {max_depth} levels")
    if _SURROGATE_ESCAPE.search(data) and _has_lone_surrogate(value):
        raise JsonRefused("a string in the JSON holds an unpaired surrogate (\\ud800-\\udfff); send valid Unicode")
    return value


def loads_stored(raw: bytes | str) -> Any:
    """`json.loads` for a record a store wrote before the boundary refused unpaired surrogates: any
    left in its strings become `?`, so reading it back can never fail an answer. Raises `ValueError`."""
    value = json.loads(raw)
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if _SURROGATE_ESCAPE.search(data) and _has_lone_surrogate(value):
        return json.loads(json.dumps(value, ensure_ascii=False).encode("utf-8", "replace"))
    return value


def json_depth(data: bytes) -> int:
    """Deepest bracket nesting of a JSON text (brackets inside strings do not count), measured without
    parsing it: no recursion, whatever it holds."""
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS).translate(_DEPTH_STEP)
    return max(accumulate(memoryview(brackets).cast("b")), default=0)  # 0xff is -1 as a signed byte


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode()
                except UnicodeEncodeError:
                    return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


# -- peers and hosts ------------------------------------------------------------------------------------

_HOST = re.compile(r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9._-]+))(?::(?P<port>[0-9]{1,5}))?$")


@functools.lru_cache(maxsize=256)  # one Host per client in practice; bounded whatever is sent
def host_of(value: str) -> tuple[str, int | None] | None:
    """A `Host` header as `(name, port)`: `127.0.0.1:3000` -> `("127.0.0.1", 3000)`, `[::1]` ->
    `("::1", None)`. None for anything else (RFC 9110 §7.2: uri-host [":" port]): userinfo, a
    non-numeric port, spaces, a second colon outside brackets."""
    found = _HOST.match(value)
    if found is None:
        return None
    port = found.group("port")
    if port is not None and not 0 < int(port) <= 65535:
        return None
    return (found.group("v6") or found.group("name") or ""), (int(port) if port is not None else None)


@functools.lru_cache(maxsize=256)  # one Host per client in practice; the cache is bounded whatever is sent
def is_loopback_name(name: str) -> bool:
    """`localhost`, `127.0.0.1`, `::1` or any other loopback IP (a trailing dot is ignored)."""
    name = name.lower().rstrip(".")
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@functools.lru_cache(maxsize=256)
def is_loopback_address(address: str) -> bool:
    """Whether a socket address is a loopback IP (names do not count: it is the socket's address)."""
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False
