"""Token stores against real backends: the file (0600, atomic), the keyring (keyrings.alt), Redis."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest

from oauth import (
    ClientRegistration,
    ConnectionAuth,
    FileTokenStore,
    Grant,
    OAuthConfig,
    RedisTokenStore,
    StoreCorrupt,
    StoreKey,
    TokenSet,
    TokenStore,
    grant_status,
)
from oauth._shared import Secret
from tests.conftest import free_port
from tests.peers import ROOT, debian_bin

pytestmark = pytest.mark.anyio

ACCESS = "at-" + "a" * 40
REFRESH = "rt-" + "r" * 40


def make_grant(connection: str = "docs", resource: str = "https://mcp.example.com/mcp", principal: str = "") -> Grant:
    return Grant(
        key=StoreKey(connection, resource, principal),
        issuer="https://as.example.com",
        token_endpoint="https://as.example.com/token",
        client=ClientRegistration("client-1", None, "none", "dynamic", "http://127.0.0.1:5555/callback"),
        tokens=TokenSet(Secret(ACCESS), Secret(REFRESH), "Bearer", time.time() + 3600, "mcp:tools", time.time()),
        resource_indicator=resource,
        revocation_endpoint="https://as.example.com/revoke",
    )


async def roundtrip(store: TokenStore) -> None:
    grant = make_grant()
    await store.save(grant)
    await store.save(make_grant("other"))
    loaded = await store.load(grant.key)
    assert loaded is not None and loaded.tokens is not None and loaded.tokens.refresh_token is not None
    assert loaded.tokens.access_token.reveal() == ACCESS and loaded.tokens.refresh_token.reveal() == REFRESH
    assert loaded.tokens.expires_at == grant.tokens.expires_at  # type: ignore[union-attr]  # persisted expiry
    assert await store.keys() == [grant.key, StoreKey("other", grant.key.resource)]
    assert await store.delete(grant.key) is True
    assert await store.load(grant.key) is None
    assert await store.delete(grant.key) is False
    await principals_apart(store)


async def principals_apart(store: TokenStore) -> None:
    """Each principal's own grant of one connection (`grants="per_principal"`) under its own key, beside the
    gateway's; one deleted leaves the others."""
    gateway, alice, bob = (
        make_grant("p"),
        make_grant("p", principal="oauth:alice"),
        make_grant("p", principal="bearer:b0b"),
    )
    for grant in (gateway, alice, bob):
        await store.save(grant)
    for grant in (gateway, alice, bob):
        loaded = await store.load(grant.key)
        assert loaded is not None and loaded.key == grant.key
    assert [k for k in await store.keys() if k.connection == "p"] == sorted([gateway.key, alice.key, bob.key])
    assert await store.delete(alice.key) is True
    assert await store.load(alice.key) is None
    assert (await store.load(bob.key), await store.load(gateway.key)) != (None, None)
    assert await store.delete(bob.key) and await store.delete(gateway.key)


async def test_file_store_roundtrip_mode_0600_and_no_token_in_repr(tmp_path: Path) -> None:
    store = FileTokenStore(tmp_path / "state")
    await roundtrip(store)
    path = tmp_path / "state" / "mcp-auth.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "state").stat().st_mode) == 0o700
    assert json.loads(path.read_text())["version"] == 1
    shown = f"{make_grant()!r} {make_grant().tokens!r} {grant_status(make_grant()).lines()}"
    assert ACCESS not in shown and REFRESH not in shown
    assert [p.name for p in (tmp_path / "state").iterdir() if p.suffix == ".tmp"] == []  # atomic replace left nothing


async def assert_lock_excludes(first: TokenStore, second: TokenStore, key: StoreKey) -> None:
    """While `first` holds the key's lock, `second` waits for it (two store objects, one backend)."""
    order: list[str] = []
    held = anyio.Event()

    async def holder() -> None:
        async with first.lock(key):
            order.append("first in")
            held.set()
            await anyio.sleep(0.2)
            order.append("first out")

    async def contender() -> None:
        await held.wait()
        async with second.lock(key):
            order.append("second in")

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(holder)
            tg.start_soon(contender)
    assert order == ["first in", "first out", "second in"]


async def test_a_grant_filed_under_another_principals_key_is_refused_never_used(tmp_path: Path) -> None:
    store = FileTokenStore(tmp_path / "state")
    await store.save(make_grant(principal="bearer:b0b"))
    path = tmp_path / "state" / "mcp-auth.json"
    data = json.loads(path.read_text())
    grants = data["grants"]
    grants["docs@bearer:a11ce"] = grants.pop("docs@bearer:b0b")  # bob's record, copied under alice's key
    path.write_text(json.dumps(data))
    auth = ConnectionAuth("docs", "https://mcp.example.com/mcp", OAuthConfig(), store, principal="bearer:a11ce")
    with pytest.raises(StoreCorrupt, match="another principal") as refused:
        await auth.current_tokens()
    assert ACCESS not in str(refused.value)


async def test_file_store_lock_excludes_another_store_object_on_the_same_file(tmp_path: Path) -> None:
    key = StoreKey("docs", "https://mcp.example.com/mcp")
    await assert_lock_excludes(FileTokenStore(tmp_path), FileTokenStore(tmp_path), key)


def test_keyring_store_with_a_real_backend(tmp_path: Path) -> None:
    # keyrings.alt's PlaintextKeyring, selected explicitly, writing under a temporary XDG_DATA_HOME.
    script = (
        "import anyio, json, sys\n"
        "sys.path.insert(0, 'tests/oauth/stores')\n"
        "from test_stores import make_grant, roundtrip\n"
        "from oauth import KeyringTokenStore\n"
        "async def main():\n"
        "    store = KeyringTokenStore()\n"
        "    await roundtrip(store)\n"
        "    await store.save(make_grant())\n"
        "    print(json.dumps([k.parts() for k in await store.keys()]))\n"
        "anyio.run(main)\n"
    )
    env = {
        **os.environ,
        "PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring",
        "XDG_DATA_HOME": str(tmp_path),
        "PYTHONPATH": str(ROOT),
    }
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout) == [["docs", "https://mcp.example.com/mcp"], ["other", "https://mcp.example.com/mcp"]]
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert files, "PlaintextKeyring wrote nothing under XDG_DATA_HOME"
    assert any("[agent_2Dsdk]" in p.read_text() for p in files)  # service `agent-sdk`, as keyrings.alt escapes it


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [debian_bin("redis-server"), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        from tests.processes import wait_for_port

        wait_for_port(port, proc, "redis-server")  # type: ignore[arg-type]
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
async def redis_store(redis_url: str) -> AsyncIterator[RedisTokenStore]:
    async with RedisTokenStore(redis_url) as store:
        yield store


async def test_redis_store_roundtrip(redis_store: RedisTokenStore) -> None:
    await roundtrip(redis_store)
    assert "127.0.0.1" in redis_store.name


async def test_a_poisoned_redis_grant_is_a_sentence_and_a_poisoned_index_member_is_skipped(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    from redis.asyncio import Redis

    from oauth import StoreCorrupt

    async with RedisTokenStore(redis_url, prefix="poisoned:") as store, Redis.from_url(redis_url) as raw:
        good, bad = make_grant("good"), make_grant("bad")
        await store.save(good)
        await store.save(bad)
        await raw.set(f"poisoned:mcp-oauth:bad:{bad.key.resource}", "{not json " + ACCESS)
        await raw.sadd("poisoned:mcp-oauth:index", "[not json", '"a string"')
        with caplog.at_level("WARNING", logger="oauth"):
            assert await store.keys() == [bad.key, good.key]  # the two members that are not keys left out
        assert "poisoned:mcp-oauth:index" in caplog.text and "not json" not in caplog.text
        with pytest.raises(StoreCorrupt) as caught:
            await store.load(bad.key)
        assert str(caught.value) == (
            f"the Redis key 'poisoned:mcp-oauth:bad:{bad.key.resource}' at {store.name} is not valid JSON"
        )
        assert ACCESS not in str(caught.value)
        assert (await store.load(good.key)) is not None


async def test_redis_lock_excludes_another_replica(redis_url: str) -> None:
    key = StoreKey("docs", "https://mcp.example.com/mcp")
    async with RedisTokenStore(redis_url) as first, RedisTokenStore(redis_url) as second:
        await assert_lock_excludes(first, second, key)


async def test_the_keyring_lock_folder_is_private_and_a_shared_one_is_refused(tmp_path: Path) -> None:
    from oauth import KeyringTokenStore, StoreError

    private = tmp_path / "locks"
    async with KeyringTokenStore(lock_dir=private).lock(StoreKey("docs", "https://x/mcp")):
        assert stat.S_IMODE(private.stat().st_mode) == 0o700
        assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in private.iterdir())
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    with pytest.raises(StoreError, match="not a private folder"):
        async with KeyringTokenStore(lock_dir=shared).lock(StoreKey("docs", "https://x/mcp")):
            pass


def test_the_redis_lock_outlives_the_longest_refresh() -> None:
    from oauth.flows._auth import REFRESH_BUDGET

    store = RedisTokenStore("redis://127.0.0.1:9/0")
    assert store._lock_ttl >= 2 * REFRESH_BUDGET  # pyright: ignore[reportPrivateUsage]


def test_keyring_writers_in_two_processes_lose_no_index_entry(tmp_path: Path) -> None:
    # Two processes save 15 grants each at once into one keyrings.alt file keyring; the index (a
    # read-modify-write of one entry) must list all 30 afterwards.
    script = (
        "import anyio, sys\n"
        "sys.path.insert(0, 'tests/oauth/stores')\n"
        "from test_stores import make_grant\n"
        "from oauth import KeyringTokenStore\n"
        "async def main():\n"
        "    store = KeyringTokenStore(lock_dir=sys.argv[2])\n"
        "    for i in range(15):\n"
        "        await store.save(make_grant(f'{sys.argv[1]}-{i}'))\n"
        "anyio.run(main)\n"
    )
    env = {
        **os.environ,
        "PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring",
        "XDG_DATA_HOME": str(tmp_path),
        "PYTHONPATH": str(ROOT),
    }
    locks = str(tmp_path / "locks")
    writers = [
        subprocess.Popen([sys.executable, "-c", script, name, locks], env=env, cwd=ROOT, stderr=subprocess.PIPE)
        for name in ("a", "b")
    ]
    for writer in writers:
        _, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err.decode()[-2000:]
    listing = subprocess.run(
        [sys.executable, "-c", "import anyio, oauth; print(len(anyio.run(oauth.KeyringTokenStore().keys)))"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert listing.stdout.strip() == "30"
