"""`mcp.lock`'s digests and comparison, and the guard's cost: checked once per new listing, never per call.

The digest and diff rules run in-process on definitions as an upstream sends them; the guard's cost is
measured on a real `mcp` 2.x stdio upstream (`rug_pull_server.py`) through a `Broker`.
"""

from __future__ import annotations

import sys
import unicodedata
from pathlib import Path

import anyio
import pytest

from connections import Broker, define_connection, load_project
from connections.project._pins import canonical_definition, digest_of, drifts, read_lock  # pyright: ignore[reportPrivateUsage]
from connections.serving import definition_diff, lock_of, pin_snapshot, write_lock

RUG = Path(__file__).resolve().parents[2] / "fixtures" / "upstreams" / "rug_pull_server.py"


def _tool(description: str, **extra: object) -> dict[str, object]:
    return {"name": "greet", "description": description, "inputSchema": {"type": "object"}, **extra}


def test_a_digest_ignores_key_order_and_whitespace_but_not_one_character() -> None:
    one = {"name": "greet", "inputSchema": {"type": "object", "properties": {"a": {"type": "string"}}}}
    other = {"inputSchema": {"properties": {"a": {"type": "string"}}, "type": "object"}, "name": "greet"}
    assert digest_of(one) == digest_of(other)
    assert len(digest_of(one)) == 64
    nfc = unicodedata.normalize("NFC", "Résumé a page.")
    nfd = unicodedata.normalize("NFD", nfc)
    assert nfc != nfd and digest_of(_tool(nfc)) != digest_of(_tool(nfd))
    assert digest_of(_tool("Say hello.")) != digest_of(_tool("Say\u200b hello."))


def test_volatile_meta_keys_do_not_count_but_the_rest_of_meta_does() -> None:
    plain = canonical_definition(_tool("x"))
    progress = canonical_definition(_tool("x", _meta={"progressToken": 7, "io.modelcontextprotocol/related-task": {}}))
    ui = canonical_definition(_tool("x", _meta={"io.modelcontextprotocol/ui": {"resourceUri": "ui://a"}}))
    assert digest_of(progress) == digest_of(plain) and "_meta" not in progress
    assert digest_of(ui) != digest_of(plain)


def test_the_diff_shows_characters_that_do_not_show_escaped() -> None:
    pinned = canonical_definition(_tool(unicodedata.normalize("NFC", "Café")))
    live = canonical_definition(_tool(unicodedata.normalize("NFD", "Café") + "\u200b"))
    lock = lock_of({"c": {"tools": {"greet": pinned}, "resources": {}, "resourceTemplates": {}, "prompts": {}}}, None)
    (drift,) = drifts("c", "tools", lock.connections["c"], {"greet": live}, lock.definitions)
    assert drift.change == "changed" and drift.fields == ("description",)
    diff = definition_diff(drift)
    assert '-  "description": "Café",' in diff
    assert '+  "description": "Cafe\\u{0301}\\u{200B}",' in diff


def test_drifts_name_each_change_and_accept_new_tools_lets_only_new_ones_in() -> None:
    def tool(name: str, description: str) -> dict[str, object]:
        return {"name": name, "description": description, "inputSchema": {"type": "object"}}

    pinned = {"a": tool("a", "A."), "b": tool("b", "B."), "old": tool("old", "Same."), "gone": tool("gone", "G.")}
    live = {"a": tool("a", "A!"), "b": tool("b", "B."), "new": tool("new", "Same."), "extra": tool("extra", "E.")}
    empty: dict[str, dict[str, object]] = {}
    found = {"c": {"tools": pinned, "resources": empty, "resourceTemplates": empty, "prompts": empty}}
    lock = lock_of(found, None)  # pyright: ignore[reportArgumentType]
    seen = drifts("c", "tools", lock.connections["c"], live, lock.definitions)
    assert [(d.name, d.change, d.fields, d.renamed_from) for d in seen] == [
        ("a", "changed", ("description",), None),
        ("extra", "new", (), None),
        ("gone", "removed", (), None),
        ("new", "renamed", ("name",), "old"),
    ]
    assert [d.held_back for d in seen] == [True, True, False, True]
    assert "changed (description): " in seen[0].sentence() and seen[0].old and seen[0].old[:12] in seen[0].sentence()
    accepting = type(lock.connections["c"])(lock.connections["c"].items, accept_new_tools=True)
    assert [d.name for d in drifts("c", "tools", accepting, live, lock.definitions)] == ["a", "gone", "new"]


def _rug_project(root: Path, *, pin: bool = True) -> Path:
    folder = root / "agent" / "mcp-connections"
    folder.mkdir(parents=True)
    (folder / "rug.py").write_text(
        "from connections import define_connection\n\n"
        f"connection = define_connection(command={sys.executable!r}, args=[{str(RUG)!r}, 'stdio'], "
        f"env={{'PULL_FILE': {str(root / 'pulled')!r}}}, advertise_tools=True, pin={pin!r})\n"
    )
    return root


@pytest.mark.anyio
async def test_pinning_checks_a_listing_once_and_costs_nothing_per_call(tmp_path: Path) -> None:
    project = load_project(_rug_project(tmp_path))
    with anyio.fail_after(60):
        async with Broker(project) as broker:
            write_lock(tmp_path / "mcp.lock", lock_of(await pin_snapshot(broker, ["rug"]), None))
            toolset = await broker.builder.build(None)
            assert broker.pins.checks == 1 and "stable" in toolset
            for _ in range(20):
                assert (await toolset.tools["stable"].call({})).is_error is False
            for _ in range(5):  # the same listing (the listing cache's): not compared again
                await broker.builder.build(None)
            assert broker.pins.checks == 1
            await toolset.tools["rug_pull"].call({})
            broker.pool.listing_cache.invalidate("rug")  # as the announcement does; a new listing is checked
            held = await broker.builder.build(None, hold_back=True)
            assert broker.pins.checks == 2
            assert set(held.held_back) == {"greet", "add", "get_page", "exfiltrate"}
            assert "greet" not in held and "stable" in held


@pytest.mark.anyio
async def test_a_connection_with_pin_false_is_never_checked(tmp_path: Path) -> None:
    root = _rug_project(tmp_path, pin=False)
    (root / "mcp.lock").write_text('{"version": 1, "connections": {}}\n')
    project = load_project(root)
    assert project.ok, [d.message for d in project.diagnostics]
    with anyio.fail_after(60):
        async with Broker(project) as broker:
            toolset = await broker.builder.build(None)
    assert "greet" in toolset and broker.pins.checks == 0


def test_pin_false_must_be_a_bool() -> None:
    defn = define_connection(command="x", advertise_tools=True, pin="no")  # type: ignore[arg-type]
    assert defn.pin is True  # fails closed: still pinned
    assert any("'pin' must be True or False" in p.message for p in defn.problems)


def test_a_lock_edited_by_hand_is_refused_where_it_is_wrong(tmp_path: Path) -> None:
    path = tmp_path / "mcp.lock"
    path.write_text('{\n  "version": 1,\n  "connections": {\n    "a": {\n      "tools": {"t": "abc"}\n    }\n  }\n}\n')
    lock, problems = read_lock(path, ["a"])
    assert lock is not None and [(p.line, p.code) for p in problems] == [(5, "bad-lock")]
    assert "a digest is 64 hex digits (SHA-256), this one is 3 characters" in problems[0].message
