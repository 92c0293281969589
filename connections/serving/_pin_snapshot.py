"""What `agent-sdk pin` records: every pinned connection's tools, resources, resource templates and prompts
as canonical definitions (`snapshot`), the lock made of them (`lock_of`), how a lock differs from them
(`compare`), and a unified diff of one changed definition (`definition_diff`).

Each connection is listed twice: an upstream whose listing changes between the two (or between two
pages of one) has nothing stable to pin, and `snapshot` says so rather than record half a change.
"""

from __future__ import annotations

import difflib
import json
import unicodedata
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as mt

from .._exceptions import ConnectionsError, UpstreamError
from ..client._clients import OpenedClient
from ..client._identity import acting_for
from ..pool._offer_calls import ListMethod, list_every_page
from ..project._pins import (
    KEY_FIELDS,
    PIN_KINDS,
    Drift,
    Lock,
    PinKind,
    PinnedConnection,
    canonical_definition,
    digest_of,
    drifts,
)

if TYPE_CHECKING:
    from ._broker import Broker

__all__ = ["Snapshot", "compare", "definition_diff", "lock_of", "snapshot"]

Snapshot = dict[str, dict[PinKind, dict[str, dict[str, Any]]]]
"""connection -> kind -> item name -> canonical definition."""

_METHODS: dict[PinKind, ListMethod] = {
    "resources": "resources/list",
    "resourceTemplates": "resources/templates/list",
    "prompts": "prompts/list",
}


async def snapshot(broker: Broker, names: list[str], principal: str | None = None) -> Snapshot:
    """List each connection in `names` (twice, see above); a `grants="per_principal"` one as `principal`, with
    that principal's own grant (its listing is what that person's peers are checked against). Raises
    `ConnectionsError` naming every connection whose listing failed or would not hold still."""
    out: Snapshot = {}
    failed: dict[str, ConnectionsError] = {}

    async def one(name: str) -> None:
        try:
            first = await _listed(broker, name, principal)
            second = await _listed(broker, name, principal)
        except ConnectionsError as exc:
            failed[name] = exc
            return
        if first != second:
            failed[name] = ConnectionsError(
                f"connection {name!r}: its listing changed while it was being listed (between pages or two "
                "listings); nothing was pinned; run agent-sdk pin again once the server holds still"
            )
            return
        out[name] = first

    async with anyio.create_task_group() as tg:
        for name in names:
            tg.start_soon(one, name)
    if len(failed) == 1:
        raise next(iter(failed.values()))
    if failed:  # every cause, in a stable order
        raise ConnectionsError("; ".join(str(failed[n]) for n in sorted(failed)))
    return out


async def _listed(broker: Broker, name: str, principal: str | None) -> dict[PinKind, dict[str, dict[str, Any]]]:
    if broker.project.connections[name].grants == "per_principal":
        return await _listed_as(broker, name, principal)
    tools = await broker.pool.list_tools(name)  # every page, the allow/deny lists applied, never cached
    found: dict[PinKind, dict[str, dict[str, Any]]] = {"tools": _keyed(name, "tools", tools)}
    for kind, method in _METHODS.items():

        async def run(opened: OpenedClient, method: ListMethod = method) -> tuple[Any, ...]:
            return (await list_every_page(opened.client, method)).items

        try:
            items = await broker.pool.request(name, method, run)
        except UpstreamError as exc:
            if exc.rpc_code != mt.METHOD_NOT_FOUND:
                raise
            items = ()  # the server offers none of this kind
        found[kind] = _keyed(name, kind, items)
    return found


async def _listed_as(broker: Broker, name: str, principal: str | None) -> dict[PinKind, dict[str, dict[str, Any]]]:
    """A per-user connection's tools as `principal` sees them (its resources and prompts are not offered)."""
    if not principal:
        raise ConnectionsError(
            f"connection {name!r} has grants='per_principal': its tools are listed with a person's own grant; "
            "sign in through the gateway, then run agent-sdk pin with --principal YOUR_ID and the gateway's "
            "--state-root (or pin=False on the connection)"
        )
    with acting_for(principal):
        tools = await broker.host.mcp.list_tools(name)  # every page, allow/deny applied, never cached
    return {"tools": _keyed(name, "tools", tools), **{kind: {} for kind in _METHODS}}


def _keyed(connection: str, kind: PinKind, items: Any) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        definition = canonical_definition(item)
        key = str(definition.get(KEY_FIELDS[kind]))
        if key in out and out[key] != definition:
            raise ConnectionsError(
                f"connection {connection!r}: {kind} lists {key!r} twice with two definitions; "
                "nothing was pinned; fix the server or deny it"
            )
        out[key] = definition
    return out


def lock_of(found: Snapshot, previous: Lock | None, names: list[str] | None = None) -> Lock:
    """The lock recording `found` for `names` (default: every connection in it); every other connection
    keeps its entry in `previous`, and every entry keeps its `acceptNewTools`."""
    chosen = set(found if names is None else names)
    connections: dict[str, PinnedConnection] = {}
    definitions: dict[str, Mapping[str, Any]] = {}
    if previous is not None:
        for name, entry in previous.connections.items():
            if name not in chosen:
                connections[name] = entry
                for kind in entry.items.values():
                    definitions.update({d: previous.definitions[d] for d in kind.values() if d in previous.definitions})
    for name in chosen & set(found):
        items: dict[PinKind, dict[str, str]] = {}
        for kind in PIN_KINDS:
            items[kind] = {}
            for item, definition in found[name][kind].items():
                digest = digest_of(definition)
                items[kind][item] = digest
                definitions[digest] = definition
        old = previous.connections.get(name) if previous is not None else None
        connections[name] = PinnedConnection(items, old.accept_new_tools if old is not None else False)
    return Lock(connections, definitions)


def compare(lock: Lock, found: Snapshot) -> list[Drift]:
    """Every drift of `found` from `lock`, by connection then kind then name."""
    out: list[Drift] = []
    for name in sorted(found):
        for kind in PIN_KINDS:
            out.extend(drifts(name, kind, lock.connections.get(name), found[name][kind], lock.definitions))
    return out


def definition_diff(drift: Drift) -> str:
    """A unified diff of the pinned definition against the live one; characters that do not show (format
    and control characters, combining marks, unusual spaces) are written `\\u{XXXX}`, so two descriptions
    that differ only there do not look alike."""
    label = f"{drift.connection}/{drift.kind}/"
    before = _shown(drift.before) if drift.before is not None else []
    after = _shown(drift.after) if drift.after is not None else []
    old_name = drift.renamed_from if drift.change == "renamed" else drift.name
    lines = difflib.unified_diff(
        before, after, fromfile=f"mcp.lock {label}{old_name}", tofile=f"upstream {label}{drift.name}", lineterm=""
    )
    return "\n".join(lines)


def _shown(definition: Mapping[str, Any]) -> list[str]:
    text = json.dumps(definition, indent=2, sort_keys=True, ensure_ascii=False)
    return [_escaped(line) for line in text.splitlines()]


_HIDDEN = frozenset({"Cc", "Cf", "Co", "Cn", "Cs", "Mn", "Me", "Zl", "Zp"})


def _escaped(line: str) -> str:
    return "".join(
        f"\\u{{{ord(ch):04X}}}"
        if unicodedata.category(ch) in _HIDDEN or (unicodedata.category(ch) == "Zs" and ch != " ")
        else ch
        for ch in line
    )
