"""What an upstream says changed: `list_changed` for tools, resources and prompts, and `resources/updated`.

A handshake-era upstream (2025-11-25 and before) sends these as notifications on its session (stdio,
the standalone GET stream, or inside a POST's SSE answer): `change_of` reads one. A 2026-07-28 upstream
sends nothing unless asked: there is no standing stream, so `listen_for_changes` holds a
`subscriptions/listen` stream (SEP-2575) open for as long as the pooled session lives, for the kinds the
upstream's capabilities say it announces, and reports each event. A stream that drops is opened again
after a short pause, and the drop itself is reported as a change of every kind (events may have been
missed meanwhile: the listing cache must not trust what it holds).

Each change goes to the pool's `ListingCache.changed`, which drops the connection's cached listing
(tools) at once and tells whoever subscribed (docs/clients.md, "Listing cache").
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import anyio
import mcp_types as mt
from mcp import Client
from mcp.client.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ._call_routing import session_logs
from ._raw_requests import send_request

__all__ = ["Change", "ChangeKind", "change_of", "listen_for_changes", "resource_subscription"]

logger = logging.getLogger(__name__)

ChangeKind = Literal["tools", "resources", "prompts", "resource"]
"""`tools`/`resources`/`prompts`: that listing changed; `resource`: one resource's content changed."""

RELISTEN_PAUSE = 1.0
"""Seconds between a dropped `subscriptions/listen` stream and the next one."""


@dataclass(frozen=True, slots=True)
class Change:
    """One change an upstream announced."""

    kind: ChangeKind
    uri: str | None = None
    """The resource, for `resource`."""


ALL_LISTINGS = (Change("tools"), Change("resources"), Change("prompts"))


def change_of(message: object) -> Change | None:
    """The change a handshake-era notification announces, or None for any other message."""
    if isinstance(message, mt.ToolListChangedNotification):
        return Change("tools")
    if isinstance(message, mt.ResourceListChangedNotification):
        return Change("resources")
    if isinstance(message, mt.PromptListChangedNotification):
        return Change("prompts")
    if isinstance(message, mt.ResourceUpdatedNotification):
        return Change("resource", str(message.params.uri))
    return None


def _change_of_event(event: ServerEvent) -> Change:
    if isinstance(event, ToolsListChanged):
        return Change("tools")
    if isinstance(event, ResourcesListChanged):
        return Change("resources")
    if isinstance(event, PromptsListChanged):
        return Change("prompts")
    assert isinstance(event, ResourceUpdated)
    return Change("resource", event.uri)


def _announced(client: Client) -> tuple[bool, bool, bool]:
    """Which listings (tools, resources, prompts) the upstream says it announces changes of; all three when
    the session knows no capabilities (a client pinned to 2026-07-28 skips `server/discover`): the
    stream's acknowledgment then says which the upstream honours."""
    caps = client.server_capabilities
    if caps.tools is None and caps.resources is None and caps.prompts is None:
        return (True, True, True)
    return (
        bool(caps.tools and caps.tools.list_changed),
        bool(caps.resources and caps.resources.list_changed),
        bool(caps.prompts and caps.prompts.list_changed),
    )


async def listen_for_changes(name: str, client: Client, on_change: Callable[[Change], None]) -> None:
    """Hold a `subscriptions/listen` stream on a 2026-07-28 `client` and report every change; returns at
    once for a handshake-era session (its notifications arrive by themselves) or an upstream that announces
    nothing. Runs until cancelled (the pooled session closes)."""
    if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return
    tools, resources, prompts = _announced(client)
    if not (tools or resources or prompts):
        return
    standing = session_logs(client.session)
    while True:
        acknowledged = False
        standing.standing += 1  # not a call: log messages still go to a call alone in flight beside it
        try:
            async with client.listen(
                tools_list_changed=tools, resources_list_changed=resources, prompts_list_changed=prompts
            ) as subscription:
                acknowledged = True
                async for event in subscription:
                    on_change(_change_of_event(event))
        except Exception as exc:  # boundary: a dropped or refused stream must not end the session
            logger.debug("connection %r: subscriptions/listen ended (%s)", name, type(exc).__name__)
        finally:
            standing.standing -= 1
        if not acknowledged:
            # Refused (or never acknowledged): the listing cache falls back on its TTL for this session.
            logger.info("connection %r: the upstream did not open subscriptions/listen; listings expire by TTL", name)
            return
        for change in ALL_LISTINGS:  # events may have been missed until the next stream is open
            on_change(change)
        await anyio.sleep(RELISTEN_PAUSE)


async def resource_subscription(client: Client, uri: str, *, subscribe: bool) -> bool:
    """`resources/subscribe` (or `unsubscribe`) of `uri` on a handshake-era session whose upstream declares
    `resources.subscribe`, so its `notifications/resources/updated` for `uri` start (or stop); False, and
    nothing sent, for any other session (a 2026-07-28 upstream has no such request)."""
    caps = client.server_capabilities
    if client.protocol_version in MODERN_PROTOCOL_VERSIONS or not (caps.resources and caps.resources.subscribe):
        return False
    await send_request(client, "resources/subscribe" if subscribe else "resources/unsubscribe", {"uri": uri})
    return True
