"""Cache hints and collisions of advertised resources and prompts on `/v1/mcp/tools`, with two bearer
principals and upstreams whose answers carry `ttlMs` / `cacheScope` (`fixtures/upstreams/hinted_server.py`:
each listing names how many listings that upstream process has answered)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from ..conftest import Served, assert_clean, make_project, serve

HINTED = str(Path(__file__).resolve().parents[2] / "fixtures" / "upstreams" / "hinted_server.py")
ALICE, BOB = "alice-token-0123456789abcdef", "bob-token-0123456789abcdef01"


def hinted(prefix: str, scope: str, ttl_ms: int, **fields: object) -> str:
    extra = "".join(f", {k}={v!r}" for k, v in fields.items())
    env = {"PREFIX": prefix, "HINT_SCOPE": scope, "HINT_TTL_MS": str(ttl_ms)}
    return (
        "from connections import define_connection\n\n"
        f"connection = define_connection(command={sys.executable!r}, args=[{HINTED!r}], env={env!r}{extra})\n"
    )


def _served(tmp_path_factory: pytest.TempPathFactory, name: str, connections: dict[str, str]) -> Iterator[Served]:
    root = tmp_path_factory.mktemp(name)
    server = serve(
        make_project(root / "project", connections, tools=False),
        root / "state",
        "--bearer-token",
        ALICE,
        "--bearer-token",
        BOB,
    )
    yield server
    server.stop()
    assert_clean(server.log_text(), secrets=[ALICE, BOB])


@pytest.fixture(scope="module")
def private_only(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    yield from _served(
        tmp_path_factory, "private", {"notes": hinted("notes", "private", 60_000, advertise_resources=True)}
    )


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    yield from _served(
        tmp_path_factory,
        "mixed",
        {
            "catalog": hinted("catalog", "public", 60_000, advertise_resources=True),
            "inbox": hinted("inbox", "private", 45_000, advertise_resources=True),
        },
    )


@pytest.fixture(scope="module")
def colliding(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    both = {"advertise_resources": True, "advertise_prompts": True}
    yield from _served(
        tmp_path_factory,
        "colliding",
        {"left": hinted("same", "public", 0, **both), "right": hinted("same", "public", 0, **both)},
    )


async def _ask(served: Served, token: str, method: str, mode: str = "auto", **params: Any) -> Any:
    async with httpx2.AsyncClient(timeout=30, headers={"Authorization": f"Bearer {token}"}) as http:
        transport = streamable_http_client(f"{served.url}/v1/mcp/tools", http_client=http)
        async with Client(transport, mode=mode, cache=None) as client:  # pyright: ignore[reportArgumentType]
            if method == "resources/list":
                return await client.list_resources(cache_mode="bypass")
            if method == "resources/read":
                return await client.read_resource(params["uri"], cache_mode="bypass")
            return await client.list_prompts(cache_mode="bypass")


async def _refused(served: Served, method: str, **params: Any) -> MCPError:
    """The JSON-RPC error the gateway answered `method` with (the client raises it inside a task group)."""
    try:
        await _ask(served, ALICE, method, **params)
    except BaseException as exc:
        found = exc
        while isinstance(found, BaseExceptionGroup) and len(found.exceptions) == 1:  # pyright: ignore[reportUnknownMemberType]
            found = found.exceptions[0]  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        assert isinstance(found, MCPError), exc
        return found
    raise AssertionError(f"{method} succeeded")


def _uris(result: Any) -> list[str]:
    return [r.uri for r in result.resources if "/listing/" in r.uri]


def test_a_private_listing_is_never_served_to_a_second_principal(private_only: Served) -> None:
    async def run() -> None:
        first = await _ask(private_only, ALICE, "resources/list")
        assert _uris(first) == ["notes://listing/1"]
        assert (first.ttl_ms, first.cache_scope) == (60_000, "private")
        assert _uris(await _ask(private_only, ALICE, "resources/list")) == ["notes://listing/1"]  # Alice's cache
        assert _uris(await _ask(private_only, BOB, "resources/list")) == ["notes://listing/2"]  # not Alice's
        assert _uris(await _ask(private_only, BOB, "resources/list")) == ["notes://listing/2"]
        assert _uris(await _ask(private_only, ALICE, "resources/list", mode="legacy")) == ["notes://listing/1"]

    anyio.run(run)


def test_a_private_read_is_never_served_to_a_second_principal(private_only: Served) -> None:
    async def run() -> None:
        uri = "notes://listing/9"
        alice = await _ask(private_only, ALICE, "resources/read", uri=uri)
        again = await _ask(private_only, ALICE, "resources/read", uri=uri)
        bob = await _ask(private_only, BOB, "resources/read", uri=uri)
        assert alice.contents[0].text == again.contents[0].text
        assert bob.contents[0].text != alice.contents[0].text
        assert (bob.ttl_ms, bob.cache_scope) == (60_000, "private")

    anyio.run(run)


def test_a_merged_listing_takes_the_smallest_ttl_and_is_private_if_any_part_is(mixed: Served) -> None:
    async def run() -> None:
        alice = await _ask(mixed, ALICE, "resources/list")
        assert (alice.ttl_ms, alice.cache_scope) == (45_000, "private")
        bob = await _ask(mixed, BOB, "resources/list")
        # The public part is shared across principals; the private part is asked again for Bob.
        assert _uris(alice) == ["catalog://listing/1", "inbox://listing/1"]
        assert _uris(bob) == ["catalog://listing/1", "inbox://listing/2"]

    anyio.run(run)


def test_two_connections_offering_one_prompt_or_resource_fail_the_listing_naming_both(colliding: Served) -> None:
    async def run() -> None:
        for method, subject in (("prompts/list", "prompt 'same-prompt'"), ("resources/list", "resource 'same://")):
            message = (await _refused(colliding, method)).message
            assert f"{method} failed closed" in message
            assert "'left'" in message and "'right'" in message and subject in message
        ambiguous = await _refused(colliding, "resources/read", uri="same://static")
        assert ambiguous.code == -32602
        assert "offered by both connections 'left' and 'right'" in ambiguous.message

    anyio.run(run)
