"""The file store's kept index: a restart reads one index file, not every record, and is never misled by it.

A restart with the index missing, stale (an older copy) or cut short still lists exactly the right
sessions and answers for exactly the right tokens; an index that names a session under the wrong
principal never puts it in that principal's page; a process killed between writing a record and
writing its index entry (a real child process, `os._exit` at that point) loses nothing.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gateway.sessions import FileSessionStore, SessionRecord
from gateway.sessions._records import new_event

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[3]


def _record(owner: str, second: int) -> SessionRecord:
    return SessionRecord(
        id=f"ses_{secrets.token_hex(12)}",
        owner=owner,
        continuation_token=f"http:{secrets.token_hex(8)}",
        created_at=f"2026-12-01T00:{second // 60:02d}:{second % 60:02d}.000Z",
    )


async def _opened(root: Path) -> FileSessionStore:
    store = FileSessionStore(root)
    await store.open()
    return store


async def _listing(store: FileSessionStore, principal: str) -> list[str]:
    """Every session of `principal`, page by page (3 a page), newest first."""
    out: list[str] = []
    cursor = None
    while True:
        page, cursor = await store.page(principal, cursor, 3)
        out += [r.id for r in page]
        if cursor is None:
            return out


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    read: list[str] = []
    original = FileSessionStore._read  # pyright: ignore[reportPrivateUsage]

    def counting(self: FileSessionStore, session_id: str) -> SessionRecord | None:
        read.append(session_id)
        return original(self, session_id)

    monkeypatch.setattr(FileSessionStore, "_read", counting)
    return read


async def test_a_restart_reads_the_index_and_no_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = await _opened(tmp_path)
    made = [_record("alice", i) for i in range(20)]
    for r in made:
        await store.create(r)
    await store.rotate(made[0].id, made[0].continuation_token, "http:rotated")
    await store.aclose()
    read = _count_reads(monkeypatch)
    again = await _opened(tmp_path)
    assert read == []  # nothing but the index and the folder listing
    assert await _listing(again, "alice") == [r.id for r in reversed(made)]
    assert await again.find_token("http:rotated") == (made[0].id, True)
    assert await again.find_token(made[1].continuation_token) == (made[1].id, True)
    assert await again.count() == 20
    assert oct((tmp_path / "session-index.ndjson").stat().st_mode & 0o777) == "0o600"


async def test_the_index_is_rewritten_when_superseded_lines_pile_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await _opened(tmp_path)
    record = _record("alice", 1)
    await store.create(record)
    token = record.continuation_token
    for i in range(1500):  # a long conversation: one index line per rotation
        new = f"http:rotation-{i}"
        assert await store.rotate(record.id, token, new)
        token = new
    lines = (tmp_path / "session-index.ndjson").read_text().splitlines()
    assert len(lines) < 1100  # rewritten once past 2 x 1 + 1,000 lines, not 1,501 lines long
    await store.aclose()
    read = _count_reads(monkeypatch)
    again = await _opened(tmp_path)
    assert read == []
    assert await again.find_token(token) == (record.id, True)


async def test_a_missing_index_is_rebuilt_from_the_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = await _opened(tmp_path)
    mine = [_record("alice", i) for i in range(5)]
    theirs = [_record("bob", 30 + i) for i in range(2)]
    for r in [*mine, *theirs]:
        await store.create(r)
    await store.aclose()
    (tmp_path / "session-index.ndjson").unlink()
    read = _count_reads(monkeypatch)
    again = await _opened(tmp_path)
    assert sorted(read) == sorted(r.id for r in [*mine, *theirs])
    assert await _listing(again, "alice") == [r.id for r in reversed(mine)]
    assert await _listing(again, "bob") == [r.id for r in reversed(theirs)]
    await again.aclose()
    read.clear()
    await _opened(tmp_path)  # rebuilt and written: the next restart reads no record
    assert read == []


async def test_a_stale_index_still_lists_exactly_the_right_sessions(tmp_path: Path) -> None:
    store = await _opened(tmp_path)
    early = [_record("alice", i) for i in range(4)]
    for r in early:
        await store.create(r)
    stale = tmp_path / "old-index"
    shutil.copy(tmp_path / "session-index.ndjson", stale)
    late = [_record("alice", 10 + i) for i in range(3)]
    for r in late:
        await store.create(r)
    old_token = early[1].continuation_token
    assert await store.rotate(early[1].id, old_token, "http:after-the-copy")
    assert await store.begin_turn(early[2].id, "turn_x", "h", 30, [new_event(early[2].id, "message.received", {})])
    await store.aclose()
    (tmp_path / "sessions" / f"{early[3].id}.json").unlink()  # a record removed by hand
    shutil.copy(stale, tmp_path / "session-index.ndjson")  # the index as it was before the later writes

    again = await _opened(tmp_path)
    expected = [r.id for r in reversed([*early[:3], *late])]
    assert await _listing(again, "alice") == expected
    assert await again.count() == 6
    assert await again.find_token("http:after-the-copy") == (early[1].id, True)
    assert await again.find_token(old_token) is None  # the token the stale index holds is not current
    assert await again.find_token(early[3].continuation_token) is None
    assert await again.find_token(late[2].continuation_token) == (late[2].id, True)
    running = await again.load(early[2].id)  # the turn the stale index did not know was running: closed
    assert running is not None and running.turn is None and running.last_turn is not None
    assert running.last_turn["status"] == "interrupted"


async def test_an_index_that_names_the_wrong_owner_never_shows_another_principals_session(tmp_path: Path) -> None:
    store = await _opened(tmp_path)
    bobs = _record("bob", 1)
    alices = _record("alice", 2)
    await store.create(bobs)
    await store.create(alices)
    await store.aclose()
    index = tmp_path / "session-index.ndjson"
    lines = index.read_text().splitlines()
    forged = [json.loads(line) for line in lines[1:]]
    for row in forged:
        if row[0] == bobs.id:
            row[1] = "alice"  # the stamp still matches the record: only the owner is wrong
    index.write_text("\n".join([lines[0], *(json.dumps(row) for row in forged)]) + "\n")

    again = await _opened(tmp_path)
    assert await _listing(again, "alice") == [alices.id]
    assert await _listing(again, "bob") == []


async def test_a_torn_index_line_is_dropped_and_appends_start_clean(tmp_path: Path) -> None:
    store = await _opened(tmp_path)
    made = [_record("alice", i) for i in range(3)]
    for r in made:
        await store.create(r)
    await store.aclose()
    index = tmp_path / "session-index.ndjson"
    data = index.read_bytes()
    index.write_bytes(data[: len(data) - 20])  # the last entry cut short, as a crash mid-write leaves it

    again = await _opened(tmp_path)
    assert await _listing(again, "alice") == [r.id for r in reversed(made)]
    later = _record("alice", 9)
    await again.create(later)
    await again.aclose()
    assert all(json.loads(line) for line in index.read_text().splitlines())
    third = await _opened(tmp_path)
    assert await _listing(third, "alice") == [later.id, *(r.id for r in reversed(made))]


_CRASH = textwrap.dedent(
    """
    import os, sys, anyio
    from pathlib import Path
    from gateway.sessions import FileSessionStore, SessionRecord
    from gateway.sessions._index import SessionIndex

    root, action, sid, token = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]

    def die(*args, **kwargs):  # the record is replaced; the process dies before its index entry is written
        os._exit(9)

    async def main():
        store = FileSessionStore(root)
        await store.open()
        SessionIndex.put = die
        if action == "create":
            rec = SessionRecord(id=sid, owner="alice", continuation_token=token, created_at="2026-12-01T01:00:00.000Z")
            await store.create(rec)
        elif action == "rotate":
            await store.rotate(sid, None, token)
        else:
            await store.begin_turn(sid, "turn_crash", "h", 30, [])

    anyio.run(main)
    """
)


def _crash_during(root: Path, action: str, session_id: str, token: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CRASH, str(root), action, session_id, token],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 9, done.stderr.decode()


async def test_a_crash_between_the_record_and_its_index_entry_loses_nothing(tmp_path: Path) -> None:
    store = await _opened(tmp_path)
    first = _record("alice", 1)
    await store.create(first)
    await store.aclose()

    new_id = f"ses_{secrets.token_hex(12)}"
    _crash_during(tmp_path, "create", new_id, "http:created-then-crashed")
    first_token = first.continuation_token
    _crash_during(tmp_path, "rotate", first.id, "http:rotated-then-crashed")
    _crash_during(tmp_path, "begin", first.id, "-")

    again = await _opened(tmp_path)
    assert await _listing(again, "alice") == [new_id, first.id]
    assert await again.find_token("http:created-then-crashed") == (new_id, True)
    assert await again.find_token("http:rotated-then-crashed") == (first.id, True)
    assert await again.find_token(first_token) is None
    loaded = await again.load(first.id)
    assert loaded is not None and loaded.turn is None  # the turn the crash left running was closed on open
    assert loaded.last_turn is not None and loaded.last_turn["turnId"] == "turn_crash"
    assert loaded.last_turn["status"] == "interrupted"
