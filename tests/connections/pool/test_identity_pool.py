"""Per-session `auth` clients pooled per identity, against our counting upstream (both protocol generations)
and the reference server `server-everything`: isolation, bounds, rotation, a refused tenant."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from connections import Broker, SessionInfo, UnknownTool, define_connection, load_project
from connections.client._identity import SessionHeaders  # pyright: ignore[reportPrivateUsage]
from connections.pool._identity_pool import IdentityPool  # pyright: ignore[reportPrivateUsage]
from tests.conftest import free_port
from tests.connections.turns.test_turns import project
from tests.peers import node_bin
from tests.processes import identity_upstream, running

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def handshake_upstream() -> Iterator[str]:
    port = free_port()
    with running(identity_upstream(port, stateful=True, refuse_tenant="refused"), port=port):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def modern_upstream() -> Iterator[str]:
    port = free_port()
    with running(identity_upstream(port, stateful=False, refuse_tenant="refused"), port=port):
        yield f"http://127.0.0.1:{port}"


async def stats(base: str) -> dict[str, Any]:
    async with httpx2.AsyncClient() as client:
        return (await client.get(f"{base}/stats")).json()


def tenant_conn(url: str, protocol: str, **fields: Any) -> Any:
    async def tenant(session: SessionInfo) -> dict[str, Any]:
        return {"headers": {"X-Tenant": str(session.auth)}}

    return define_connection(url=url, auth=tenant, protocol=protocol, **fields).named("tenant", None)


def tenant_project(root: Path, base: str, extra: str = "") -> Path:
    """A project whose advertised connection `tenant` sends `X-Tenant: <principal>` (handshake pinned)."""
    source = f"""
        from connections import define_connection

        async def tenant(session):
            return {{"headers": {{"X-Tenant": str(session.auth)}}}}

        connection = define_connection(
            url={base + "/mcp"!r}, auth=tenant, advertise_tools=True, protocol="legacy"{extra}
        )
    """
    return project(root, {"mcp-connections/tenant.py": source})


def headers_of(tenant: str, session_id: str | None = None) -> SessionHeaders:
    return SessionHeaders({"X-Tenant": tenant}, session_id or f"s-{tenant}")


async def interleave(pool: IdentityPool, tenants: list[str], calls: int, *, mark: str, width: int = 16) -> None:
    plan = [t for t in tenants for _ in range(calls)]
    random.Random(11).shuffle(plan)
    limiter = anyio.Semaphore(width)

    async def one(n: int, tenant: str) -> None:
        async with limiter:
            await pool.call_identity_tool("tenant", "record", {"value": f"{mark}|{tenant}|{n}"}, headers_of(tenant))

    async with anyio.create_task_group() as tg:
        for n, tenant in enumerate(plan):
            tg.start_soon(one, n, tenant)


def mine(seen: dict[str, Any], mark: str) -> list[dict[str, Any]]:
    return [c for c in seen["calls"] if str(c["value"]).startswith(f"{mark}|")]


@pytest.mark.parametrize("generation", ["handshake", "modern"])
async def test_2000_interleaved_calls_never_cross_identities_while_the_cap_evicts(
    generation: str, handshake_upstream: str, modern_upstream: str
) -> None:
    base = handshake_upstream if generation == "handshake" else modern_upstream
    protocol = "legacy" if generation == "handshake" else "modern"
    defn = tenant_conn(base + "/mcp", protocol, max_identities=4)
    tenants = [f"iso{generation}-{i}" for i in range(10)]
    before = await stats(base)
    async with IdentityPool({"tenant": defn}) as pool:
        await interleave(pool, tenants, 200, mark=f"x{generation}")
        counts = pool.identity_counts("tenant")
    calls = mine(await stats(base), f"x{generation}")
    assert len(calls) == 2000
    assert [c for c in calls if c["value"].split("|")[1] != c["tenant"]] == []
    assert counts.live <= 4 + 16  # the cap, plus at most one identity per call in flight
    assert counts.closed > 0  # the cap of 4 evicted during the run
    if generation == "handshake":
        # Each upstream session served one tenant only, through every eviction and reopen.
        served: dict[str, set[str]] = {}
        for c in calls:
            served.setdefault(c["session"], set()).add(c["tenant"])
        assert all(len(t) == 1 for t in served.values())
        assert None not in served
    else:
        assert counts.shared
        assert (await stats(base))["discovers"] - before["discovers"] <= 2


async def test_two_identities_interleaving_on_one_handshake_upstream_each_keep_their_own_session(
    handshake_upstream: str,
) -> None:
    defn = tenant_conn(handshake_upstream + "/mcp", "legacy")
    before = await stats(handshake_upstream)
    async with IdentityPool({"tenant": defn}) as pool:
        await interleave(pool, ["two-a", "two-b"], 100, mark="two", width=8)
        assert pool.identity_counts("tenant").live == 2
    after = await stats(handshake_upstream)
    calls = mine(after, "two")
    assert len(calls) == 200
    by_session: dict[str, set[str]] = {}
    for c in calls:
        by_session.setdefault(c["session"], set()).add(c["tenant"])
    assert sorted(sorted(t) for t in by_session.values()) == [["two-a"], ["two-b"]]
    assert after["sessions"] - before["sessions"] == 2
    assert after["deleted"] - before["deleted"] == 2  # closed with the pool


@pytest.mark.parametrize("generation", ["handshake", "modern"])
async def test_100_identities_times_10_calls_open_one_session_each_or_one_pool(
    generation: str, handshake_upstream: str, modern_upstream: str
) -> None:
    base = handshake_upstream if generation == "handshake" else modern_upstream
    protocol = "legacy" if generation == "handshake" else "auto"
    defn = tenant_conn(base + "/mcp", protocol)
    before = await stats(base)
    async with IdentityPool({"tenant": defn}) as pool:
        await interleave(pool, [f"hundred{generation}-{i}" for i in range(100)], 10, mark=f"h{generation}", width=8)
    after = await stats(base)
    assert len(mine(after, f"h{generation}")) == 1000
    if generation == "handshake":
        assert after["sessions"] - before["sessions"] == 100
    else:
        assert after["sessions"] - before["sessions"] == 0
        assert after["discovers"] - before["discovers"] == 1
        # One keep-alive pool: TCP connections bounded by the calls in flight (8), not by the 100 identities.
        assert after["connections"] - before["connections"] <= 8 + 2


@pytest.mark.parametrize("generation", ["handshake", "modern"])
async def test_a_refused_tenant_fails_only_its_own_calls(
    generation: str, handshake_upstream: str, modern_upstream: str
) -> None:
    base = handshake_upstream if generation == "handshake" else modern_upstream
    defn = tenant_conn(base + "/mcp", "legacy" if generation == "handshake" else "modern")
    async with IdentityPool({"tenant": defn}) as pool:
        ok = await pool.call_identity_tool("tenant", "record", {"value": "r|fine"}, headers_of(f"fine{generation}"))
        for _ in range(8):  # past the restart policy's count: the refusals must not pause anyone else
            with pytest.raises(Exception) as failed:
                await pool.call_identity_tool("tenant", "record", {"value": "r|no"}, headers_of("refused"))
            assert "401" in str(failed.value)
        again = await pool.call_identity_tool("tenant", "record", {"value": "r|fine"}, headers_of(f"fine{generation}"))
    assert not ok.get("isError") and not again.get("isError")


async def test_a_refused_tenant_that_meets_the_shared_client_closed_pauses_no_one_else(modern_upstream: str) -> None:
    """2026-07-28, `auto`: every open sends `server/discover` with its caller's headers. The shared client's
    session ends; the refused tenant comes first, eight times: its refusals stay its own."""
    defn = tenant_conn(modern_upstream + "/mcp", "auto")
    async with IdentityPool({"tenant": defn}) as pool:
        await pool.call_identity_tool("tenant", "record", {"value": "shut|1"}, headers_of("shut-fine"))
        shared = pool._conns["tenant"].shared  # pyright: ignore[reportPrivateUsage]
        assert shared is not None and shared.session is not None
        shared.retire(shared.session, shared.listings)  # as when its transport ends
        for _ in range(8):
            with pytest.raises(Exception, match="401"):
                await pool.call_identity_tool("tenant", "record", {"value": "shut|no"}, headers_of("refused"))
        out = await pool.call_identity_tool("tenant", "record", {"value": "shut|2"}, headers_of("shut-fine"))
        assert not out.get("isError") and pool.identity_counts("tenant").shared


@pytest.mark.parametrize("generation", ["handshake", "modern"])
async def test_a_tool_the_identitys_listing_lacks_is_unknown_tool(
    generation: str, handshake_upstream: str, modern_upstream: str
) -> None:
    base = handshake_upstream if generation == "handshake" else modern_upstream
    defn = tenant_conn(base + "/mcp", "legacy" if generation == "handshake" else "modern")
    async with IdentityPool({"tenant": defn}) as pool:
        with pytest.raises(UnknownTool) as caught:
            await pool.call_identity_tool("tenant", "no_such_tool", {}, headers_of(f"lack-{generation}"))
    assert caught.value.code == "unknown_tool"
    assert (await stats(base))["lists"][-1] == f"lack-{generation}"  # listed as the caller, never bare


async def test_rotated_credentials_open_a_new_client_and_retire_the_old(handshake_upstream: str) -> None:
    defn = tenant_conn(handshake_upstream + "/mcp", "legacy")
    before = await stats(handshake_upstream)
    async with IdentityPool({"tenant": defn}) as pool:
        await pool.call_identity_tool("tenant", "record", {"value": "rot|1"}, headers_of("rot-old", "rot-session"))
        await pool.call_identity_tool("tenant", "record", {"value": "rot|2"}, headers_of("rot-new", "rot-session"))
        counts = pool.identity_counts("tenant")
        assert (counts.live, counts.closed) == (1, 1)
        with anyio.fail_after(10):
            # The retired client closes its upstream session (DELETE) in the background.
            while (await stats(handshake_upstream))["deleted"] - before["deleted"] < 1:  # noqa: ASYNC110 - a peer
                await anyio.sleep(0.05)
        pool.session_ended("rot-session")
        assert pool.identity_counts("tenant").live == 0
    calls = mine(await stats(handshake_upstream), "rot")
    assert [c["tenant"] for c in calls] == ["rot-old", "rot-new"]
    assert calls[0]["session"] != calls[1]["session"]


async def test_an_idle_identity_is_closed_after_its_timeout(handshake_upstream: str) -> None:
    defn = tenant_conn(handshake_upstream + "/mcp", "legacy", identity_idle_timeout=0.2)
    async with IdentityPool({"tenant": defn}) as pool:
        await pool.call_identity_tool("tenant", "record", {"value": "idle|1"}, headers_of("idle-a"))
        assert pool.identity_counts("tenant").live == 1
        with anyio.fail_after(10):
            while pool.identity_counts("tenant").live:  # noqa: ASYNC110 - the sweep runs on its own clock
                await anyio.sleep(0.05)
        assert pool.identity_counts("tenant").closed == 1


async def test_logs_show_the_digest_never_the_header_value(
    handshake_upstream: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="connections")
    defn = tenant_conn(handshake_upstream + "/mcp", "legacy", max_identities=1)
    secret = "Bearer tenant-secret-value-123"
    async with IdentityPool({"tenant": defn}) as pool:
        for tenant in ("log-a", "log-b"):
            headers = SessionHeaders({"X-Tenant": tenant, "Authorization": secret}, tenant)
            await pool.call_identity_tool("tenant", "record", {"value": "log|1"}, headers)
            assert headers.digest in caplog.text
    assert "tenant-secret" not in caplog.text and "log-a" not in caplog.text
    assert "tenant-secret" not in repr(headers)


async def test_turns_list_and_call_through_pooled_identity_clients(tmp_path: Path, handshake_upstream: str) -> None:
    """A build and a call per session, three turns each: each identity's one session serves them all."""
    root = tenant_project(tmp_path, handshake_upstream)
    before = await stats(handshake_upstream)
    async with Broker(load_project(root), listing_ttl=0) as broker:
        for _ in range(3):
            for who in ("turn-a", "turn-b"):
                toolset = await broker.builder.build(SessionInfo(id=who, auth=who))
                await toolset.tools["record"].call({"value": f"turn|{who}"})
    after = await stats(handshake_upstream)
    assert after["sessions"] - before["sessions"] == 2
    assert after["lists"][len(before["lists"]) :] == ["turn-a", "turn-b"] * 3


@pytest.fixture(scope="module")
def everything() -> Iterator[str]:
    port = free_port()
    with running([str(node_bin("mcp-server-everything")), "streamableHttp"], port=port, env={"PORT": str(port)}):
        yield f"http://127.0.0.1:{port}/mcp"


async def test_the_reference_server_serves_each_identity_on_its_own_session(everything: str) -> None:
    async def tenant(session: SessionInfo) -> dict[str, Any]:
        return {"headers": {"X-Tenant": str(session.auth)}}

    defn = define_connection(url=everything, auth=tenant, max_identities=2).named("tenant", None)
    async with IdentityPool({"tenant": defn}) as pool:
        for i in range(6):
            who = f"ev-{i % 3}"
            out = await pool.call_identity_tool("tenant", "echo", {"message": who}, headers_of(who))
            assert out["content"][0]["text"] == f"Echo: {who}"
        counts = pool.identity_counts("tenant")
    assert (counts.opened, counts.shared) == (6, False)  # cap 2, three tenants in turn: each use reopens


async def test_metrics_count_identities_per_connection_and_show_no_digest(
    tmp_path: Path, handshake_upstream: str
) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from gateway.metrics_collectors import BrokerCollector

    root = tenant_project(tmp_path, handshake_upstream, ", max_identities=2")
    async with Broker(load_project(root)) as broker:
        digests = []
        for who in ("metric-a", "metric-b", "metric-c"):
            toolset = await broker.builder.build(SessionInfo(id=who, auth=who))
            await toolset.tools["record"].call({"value": f"metric|{who}"})
            digests.append(SessionHeaders({"X-Tenant": who}).digest)
        registry = CollectorRegistry()
        registry.register(BrokerCollector(broker, pid_label=False))
        text = generate_latest(registry).decode()
    assert 'agent_sdk_identity_clients{connection="tenant"} 2.0' in text
    assert 'agent_sdk_identity_clients_closed_total{connection="tenant"} 1.0' in text
    assert not any(d in text for d in digests) and "metric-a" not in text
