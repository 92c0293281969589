"""`/v1/mcp/tools` in-process: the capabilities follow what is advertised, and the paging cursor is
stateless, opaque and refused (-32602, with a sentence) when it is not ours or its listing changed."""

from __future__ import annotations

import base64
import json

import mcp_types as mt
import pytest
from mcp.server.lowlevel.server import NotificationOptions
from mcp.shared.exceptions import MCPError

from connections import ClientPool, define_connection
from connections.serving import Freshness, Merged, Offerings
from gateway.mcp.offerings import _page  # pyright: ignore[reportPrivateUsage]
from gateway.mcp.tools import tools_server


def capabilities(**fields: object) -> dict[str, object]:
    defn = define_connection(command="upstream", **fields).named("up", None)
    offerings = Offerings({"up": defn}, ClientPool({"up": defn}))
    caps = tools_server(offerings=offerings).get_capabilities(NotificationOptions())
    return caps.model_dump(exclude_none=True)


# Always declared with tools: `logging` (#14), `tasks` and the 2026-07-28 tasks extension (a tool's
# task support is known only from its live listing; gateway/mcp/task_capability.py).
ALWAYS = {"tools", "logging", "tasks", "extensions"}


def test_the_capabilities_name_only_what_some_connection_advertises() -> None:
    assert set(capabilities(advertise_tools=True)) == ALWAYS
    assert set(capabilities(advertise_resources=True)) == ALWAYS | {"resources", "completions"}
    assert set(capabilities(advertise_prompts=["greet"])) == ALWAYS | {"prompts", "completions"}
    host_only = capabilities(advertise_resources=True, host_only=True)  # a validate error; never offered either
    assert set(host_only) == ALWAYS


def listing(*uris: str, ttl_ms: int = 0, private: bool = True) -> Merged:
    return Merged("resources", [{"uri": u, "name": u} for u in uris], Freshness(ttl_ms, private))


def test_pages_follow_each_other_and_the_last_has_no_cursor() -> None:
    merged = listing("a://1", "a://2", "a://3", "b://1", "b://2", ttl_ms=5000, private=False)
    first = _page("resources/list", merged, None, 2)
    assert [r["uri"] for r in first["resources"]] == ["a://1", "a://2"]
    assert (first["ttlMs"], first["cacheScope"]) == (5000, "public")
    second = _page("resources/list", merged, first["nextCursor"], 2)
    last = _page("resources/list", merged, second["nextCursor"], 2)
    assert [r["uri"] for r in second["resources"] + last["resources"]] == ["a://3", "b://1", "b://2"]
    assert "nextCursor" not in last


def test_a_cursor_of_a_listing_that_changed_is_refused_with_a_sentence() -> None:
    cursor = _page("resources/list", listing("a://1", "a://2", "a://3"), None, 2)["nextCursor"]
    with pytest.raises(MCPError) as stale:
        _page("resources/list", listing("a://1", "a://9", "a://3"), cursor, 2)
    assert stale.value.code == mt.INVALID_PARAMS
    assert stale.value.message == (
        "invalid cursor for resources/list: the listing changed since it was issued; list again without a cursor"
    )


@pytest.mark.parametrize(
    "cursor",
    [
        "not base64 at all!",
        base64.urlsafe_b64encode(b"[1, 2]").decode(),
        base64.urlsafe_b64encode(json.dumps({"o": "1", "h": "x"}).encode()).decode(),
        base64.urlsafe_b64encode(json.dumps({"o": -2, "h": "x"}).encode()).decode(),
    ],
)
def test_a_cursor_that_is_not_ours_is_refused(cursor: str) -> None:
    with pytest.raises(MCPError) as refused:
        _page("resources/list", listing("a://1", "a://2", "a://3"), cursor, 2)
    assert refused.value.code == mt.INVALID_PARAMS
    assert "list again without a cursor" in refused.value.message
