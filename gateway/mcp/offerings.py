"""Resources, prompts and completion on `/v1/mcp/tools`: the SDK server handlers over `Offerings`.

Only what some advertised connection offers is served: without `advertise_resources` anywhere the
server has no resource handlers (so its capabilities say nothing of resources, and the methods answer
-32601), likewise for prompts; `completion/complete` is served when either is.

Listings are merged across connections (fail-closed, `connections/pool/_offerings.py`) and paged by this
gateway: the cursor is opaque to the peer but needs no state here (any replica decodes it). It holds
the offset and a digest of the merged listing's keys; a cursor whose listing changed since, or that is
not one of ours, is -32602 with a sentence saying to list again from the start.

Cache hints (MCP 2026-07-28, SEP-2549): a listing carries the smallest `ttlMs` of its parts and is
`private` if any part is; a read carries its upstream's hint. The peer's principal is the `viewer`
under which a private answer may be kept and reused (never for another principal).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as mt
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from connections import ConnectionsError, NotOffered, TurnBuildError, UpstreamError
from connections.serving import Merged, Offerings, canonical_uri

from ..auth.chain import Principal
from ..policy import Refusal, Target, caller_of, hidden, prompt_target, refused, resource_target, visible_items
from ..runtime import Runtime
from .curated import CuratedView
from .visible import failed_closed

__all__ = ["failed_closed", "offering_handlers"]

_COMPLETE = {"resultType": "complete"}
"""Required by the 2026-07-28 result schemas (the handshake versions' sieve drops it)."""

RuntimeFor = Callable[[ServerRequestContext[Any, Any]], Runtime]
_Handler = Callable[[ServerRequestContext[Any, Any], Any], Awaitable[Any]]


def offering_handlers(
    runtime_for: RuntimeFor, offerings: Offerings | None, view: CuratedView | None = None
) -> dict[str, Any]:
    """The `Server(...)` handler arguments for what `offerings` advertises (none at all when nothing is). With
    `view`, for that curated server: what it picks of them, decided with `context.server` = its name."""
    if offerings is None:
        return {}
    handlers: dict[str, _Handler] = {}
    server = view.name if view is not None else ""

    async def in_view(runtime: Runtime, ctx: ServerRequestContext[Any, Any], action: str, target: Target) -> None:
        """Answer what the view does not pick as one no connection offers (`CuratedView.check`)."""
        if view is not None:
            of = "prompts/get" if target.type == "AgentSdk::Prompt" else action  # a completion's ref is a prompt's
            check = view.check(_offerings(runtime), of, target.id, _viewer(ctx))
            await _guarded(action, check, _refused(runtime, ctx, target, action))

    def lister(method: Any) -> _Handler:
        async def handle(ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams | None) -> Any:
            runtime = runtime_for(ctx)
            found = _offerings(runtime)
            merged = await _guarded(method, found.listing(method, _viewer(ctx)))
            items = merged.items if view is None else view.items(method, merged)
            shown = visible_items(runtime.policy, _caller(ctx), method, items, server)  # the policy's filter
            merged = Merged(merged.field, shown, merged.freshness)
            return _page(method, merged, params.cursor if params is not None else None, _page_size(runtime))

        return handle

    async def read(ctx: ServerRequestContext[Any, Any], params: mt.ReadResourceRequestParams) -> Any:
        # Decided, routed and forwarded in its canonical form; decided against each template it is an instance of.
        runtime, uri = runtime_for(ctx), canonical_uri(str(params.uri))
        target = resource_target(uri)
        found = _offerings(runtime)
        templates: list[Target] = []
        if runtime.policy.enforcing:
            of = await _guarded("resources/read", found.templates_of(uri, _viewer(ctx)))
            templates = [resource_target(t, template=True) for t in of]
        _allowed(runtime, ctx, "resources/read", target, *templates, server=server)
        await in_view(runtime, ctx, "resources/read", target)
        body, hint = await _guarded("resources/read", found.read(uri, _viewer(ctx)), _refused(runtime, ctx, target))
        return {**body, **hint.to_json(), **_COMPLETE}

    async def get(ctx: ServerRequestContext[Any, Any], params: mt.GetPromptRequestParams) -> Any:
        runtime, target = runtime_for(ctx), prompt_target(params.name)
        _allowed(runtime, ctx, "prompts/get", target, server=server)
        await in_view(runtime, ctx, "prompts/get", target)
        got = _offerings(runtime).get_prompt(params.name, params.arguments, _viewer(ctx))
        return {**await _guarded("prompts/get", got, _refused(runtime, ctx, target)), **_COMPLETE}

    async def complete(ctx: ServerRequestContext[Any, Any], params: mt.CompleteRequestParams) -> Any:
        ref, runtime = params.ref, runtime_for(ctx)
        on = prompt_target(ref.name) if isinstance(ref, mt.PromptReference) else resource_target(ref.uri, template=True)
        _allowed(runtime, ctx, "completion/complete", on, server=server)
        await in_view(runtime, ctx, "completion/complete", on)
        found = _offerings(runtime)
        argument = {"name": params.argument.name, "value": params.argument.value}
        context = params.context.arguments if params.context is not None else None
        done = found.complete(params.ref, argument, context, _viewer(ctx))
        return {
            **await _guarded("completion/complete", done, _refused(runtime, ctx, on, "completion/complete")),
            **_COMPLETE,
        }

    if offerings.offers("resources") and (view is None or view.picks_any("resources")):
        handlers["on_list_resources"] = lister("resources/list")
        handlers["on_list_resource_templates"] = lister("resources/templates/list")
        handlers["on_read_resource"] = read
    if offerings.offers("prompts") and (view is None or view.picks_any("prompts")):
        handlers["on_list_prompts"] = lister("prompts/list")
        handlers["on_get_prompt"] = get
    if handlers:
        handlers["on_completion"] = complete
    return handlers


def _offerings(runtime: Runtime) -> Offerings:
    found = runtime.offerings
    if found is None:  # the server was built with handlers, so the runtime has them: a wiring bug
        raise MCPError(mt.INTERNAL_ERROR, "resources and prompts are not set up on this gateway")
    return found


def _page_size(runtime: Runtime) -> int:
    return runtime.settings.page_size


def _caller(ctx: ServerRequestContext[Any, Any]) -> Principal:
    return caller_of(getattr(ctx.request, "scope", None))  # `STDIO` on `serve --stdio`


def _allowed(
    runtime: Runtime, ctx: ServerRequestContext[Any, Any], action: str, target: Target, *also: Target, server: str = ""
) -> None:
    """Raise what an item no connection offers gets (as `_guarded` answers it) when the policy hides `target`
    (or any of `also`: the templates a resource is an instance of), through curated server `server`."""
    refusal = hidden(runtime.policy, _caller(ctx), action, target, *also, server=server)
    if refusal is not None:
        raise MCPError(mt.INVALID_PARAMS, str(refusal), data={"error": refusal.code})


def _refused(
    runtime: Runtime, ctx: ServerRequestContext[Any, Any], target: Target, method: str | None = None
) -> Callable[[], None]:
    """Tell the audit trail that `target` was answered as one no connection offers (it is not there)."""
    action = method or ("prompts/get" if target.type == "AgentSdk::Prompt" else "resources/read")
    return lambda: refused(runtime.policy, _caller(ctx), Refusal(action, target.id, reason="not_offered"))


def _viewer(ctx: ServerRequestContext[Any, Any]) -> str:
    """The authorization context a private answer belongs to: the peer's principal (one for stdio)."""
    request: Any = ctx.request
    state = getattr(request, "scope", {}).get("state", {}) if request is not None else {}
    principal = state.get("principal")
    return principal.id if isinstance(principal, Principal) else "local"


async def _guarded(method: str, work: Awaitable[Any], not_there: Callable[[], None] | None = None) -> Any:
    """`work`'s result; its failures as the JSON-RPC errors a peer can act on (never a traceback). `not_there`
    is told of a `NotOffered` (the audit trail's record of it)."""
    try:
        return await work
    except TurnBuildError as exc:
        raise failed_closed(method, exc) from None
    except NotOffered as exc:
        if not_there is not None:
            not_there()
        raise MCPError(mt.INVALID_PARAMS, str(exc), data={"error": exc.code}) from None
    except UpstreamError as exc:
        if exc.rpc_code is None:
            raise MCPError(mt.INTERNAL_ERROR, f"{exc.code}: {exc}", data={"error": exc.code}) from None
        # The upstream's own answer, as the peer would have seen it directly.
        raise MCPError(exc.rpc_code, exc.rpc_message, data=exc.rpc_data) from None
    except ConnectionsError as exc:
        raise MCPError(mt.INTERNAL_ERROR, f"{exc.code}: {exc}", data={"error": exc.code}) from None


# -- paging ------------------------------------------------------------------------------------------

_KEYS = {"resources": "uri", "resourceTemplates": "uriTemplate", "prompts": "name"}


def _page(method: str, merged: Merged, cursor: str | None, size: int) -> dict[str, Any]:
    digest = _digest(merged)
    start = 0 if cursor is None else _offset(method, cursor, digest)
    end = start + size
    out: dict[str, Any] = {merged.field: merged.items[start:end], **merged.freshness.to_json(), **_COMPLETE}
    if end < len(merged.items):
        out["nextCursor"] = _cursor(end, digest)
    return out


def _digest(merged: Merged) -> str:
    key = _KEYS[merged.field]
    joined = "\n".join(str(item.get(key)) for item in merged.items)
    return hashlib.sha256(joined.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _cursor(offset: int, digest: str) -> str:
    raw = json.dumps({"o": offset, "h": digest}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _offset(method: str, cursor: str, digest: str) -> int:
    """The offset `cursor` names. Raises `MCPError` (-32602) for a cursor that is not ours or is stale."""
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        offset, made_for = data["o"], data["h"]
    except (ValueError, TypeError, KeyError, binascii.Error):
        raise MCPError(
            mt.INVALID_PARAMS, f"invalid cursor for {method}: not one this gateway issued; list again without a cursor"
        ) from None
    if type(offset) is not int or offset < 0 or made_for != digest:
        raise MCPError(
            mt.INVALID_PARAMS,
            f"invalid cursor for {method}: the listing changed since it was issued; list again without a cursor",
        )
    return offset
