"""Which item of a listing a peer's request names: a prompt by its name, a resource or template by its
canonical URI (`connections/_uris.py`), a template's instance by matching it (`Offerings` routes by these)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mcp_types as mt
from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate

from .._uris import canonical_uri
from ._offer_calls import ListMethod

__all__ = ["NOT_FOUND", "Holds", "instance_of", "keyed", "matching"]

Holds = Callable[[ListMethod, dict[str, Any]], bool]
"""Whether an item of a listing (of that method) is the one asked for."""

NOT_FOUND = (-32002, mt.INVALID_PARAMS)
"""An upstream's answers to a read of a resource it does not have (MCP's -32002; the TypeScript SDK's -32602)."""

_KEYS: dict[ListMethod, str] = {
    "resources/list": "uri",
    "resources/templates/list": "uriTemplate",
    "prompts/list": "name",
}


def keyed(value: str) -> Holds:
    """Holds the item named `value` (a prompt's name; a URI or template compared in canonical form)."""

    def holds(method: ListMethod, item: dict[str, Any]) -> bool:
        key = _KEYS[method]
        named = str(item.get(key))
        return (named if key == "name" else canonical_uri(named, template=key == "uriTemplate")) == value

    return holds


def matching(uri: str) -> Holds:
    """Holds a template that canonical `uri` is an instance of."""
    return lambda _method, item: instance_of(canonical_uri(str(item.get("uriTemplate")), template=True), uri)


def instance_of(template: str, uri: str) -> bool:
    """Whether canonical `uri` is an instance of canonical URI template `template`."""
    try:
        return UriTemplate.parse(template).match(uri) is not None
    except InvalidUriTemplate:
        return False
