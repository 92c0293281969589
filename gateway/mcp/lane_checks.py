"""The `/v1/mcp/tools` lane's 2026-07-28 checks (`gateway/mcp/lane.py`), with the SDK's own functions: the inbound
ladder (a routing header sent twice, the `_meta` envelope, `MCP-Protocol-Version` / `Mcp-Method` / `Mcp-Name`
against the body), the `Mcp-Param-*` headers against the tool's cached schema, and a call's params against the
version's request schema (`valid_request`: the SDK's model, once per distinct `_meta` envelope)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cachetools import LRUCache
from mcp.shared.inbound import (
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
    validate_mcp_param_headers,
)
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    HEADER_MISMATCH,
    PROTOCOL_VERSION_META_KEY,
    ErrorData,
)
from mcp_types import methods as _methods
from pydantic import ValidationError
from pydantic_core import to_json
from starlette.types import Scope

__all__ = ["PARAM_PREFIX", "ladder_rejection", "param_rejection", "rejected", "valid_request"]

PARAM_PREFIX = b"mcp-param-"

# A plain call's params: a name and its arguments, with the envelope (`_meta`) a peer sends alike on every call.
_PLAIN_CALL = frozenset({"name", "arguments", "_meta"})
_passed: LRUCache[tuple[str, bytes], None] = LRUCache(maxsize=4096)
"""The (version, `_meta` as JSON) of plain calls whose params the SDK's model passed."""


def valid_request(method: str, version: str, params: Mapping[str, Any] | None) -> None:
    """`validate_client_request` (raises its `ValidationError`, `KeyError` or `ValueError`), run by the SDK's model
    once per distinct envelope of a plain `tools/call`: the model's verdict on such params is a function of
    `_meta` alone once `name` is a string and `arguments` an object or null (an object of anything, in the
    schema), so a peer's later calls with the same envelope pay a JSON dump and a lookup, not the model (about
    14 µs). Any other method or shape of params goes to the model every time."""
    if method == "tools/call" and type(params) is dict and _PLAIN_CALL.issuperset(params):
        arguments = params.get("arguments")
        if type(params.get("name")) is str and (arguments is None or type(arguments) is dict):
            key = (version, to_json(params.get("_meta")))
            if key in _passed:
                return
            _methods.validate_client_request(method, version, params)
            _passed[key] = None
            return
    _methods.validate_client_request(method, version, params)


def ladder_rejection(body: Mapping[str, Any], headers: list[tuple[str, str]]) -> InboundLadderRejection | None:
    """The SDK's modern entry ladder (`handle_modern_request`), first failure wins."""
    duplicated = find_duplicated_routing_header(headers)
    if duplicated is not None:
        return InboundLadderRejection(code=HEADER_MISMATCH, message=f"{duplicated} header appears more than once")
    verdict = classify_inbound_request(body, headers=dict(headers))
    return verdict if isinstance(verdict, InboundLadderRejection) else None


def param_rejection(
    scope: Scope, params: Any, headers: list[tuple[str, str]], found: tuple[Any, ...] | None
) -> InboundLadderRejection | None:
    """`Mcp-Param-*` against the tool's schema, as `_mcp_param_rejection` in the SDK (malformed params
    and an unknown tool are dispatch's to reject), but from the catalog's cached listing rather than
    a fresh `tools/list`. `params` passed the ladder, so it is an object."""
    arguments = params.get("arguments")
    if found is None or (arguments is not None and not isinstance(arguments, Mapping)):
        return None
    if not arguments and not any(k.startswith(PARAM_PREFIX) for k, _ in scope["headers"]):
        return None  # no argument values and no `Mcp-Param-*` header: nothing can disagree
    tool = found[0]
    if tool is None or not tool.header_params:
        return None  # no annotated parameter: no header can be out of line
    rejection = validate_mcp_param_headers(tool.input_schema, arguments or {}, _Pairs(headers))
    if rejection is not None and not _envelope_lists(params["_meta"]):
        return None  # the SDK skips the check when the envelope cannot list tools; dispatch rejects it
    return rejection


def _envelope_lists(meta: Mapping[str, Any]) -> bool:
    """Whether the request's envelope passes as a `tools/list` envelope: the SDK reads the schema it
    checks `Mcp-Param-*` against from such a listing (`_tool_input_schema`) and skips the check otherwise."""
    version = meta[PROTOCOL_VERSION_META_KEY]
    envelope = {PROTOCOL_VERSION_META_KEY: version, CLIENT_CAPABILITIES_META_KEY: meta[CLIENT_CAPABILITIES_META_KEY]}
    if meta.get(CLIENT_INFO_META_KEY) is not None:
        envelope[CLIENT_INFO_META_KEY] = meta[CLIENT_INFO_META_KEY]
    try:
        _methods.validate_client_request("tools/list", version, {"_meta": envelope})
    except ValidationError:
        return False
    return True


class _Pairs(Mapping[str, str]):
    """Header lines as a mapping whose `items()` keeps duplicates (what `validate_mcp_param_headers` reads)."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._pairs = pairs

    def __getitem__(self, key: str) -> str:
        return next(v for k, v in self._pairs if k == key)

    def __iter__(self) -> Any:
        return (k for k, _ in self._pairs)

    def __len__(self) -> int:
        return len(self._pairs)

    def items(self) -> Any:
        return list(self._pairs)


def rejected(rejection: InboundLadderRejection) -> ErrorData:
    return ErrorData(code=rejection.code, message=rejection.message, data=rejection.data)
