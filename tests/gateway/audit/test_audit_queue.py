"""The audit trail's own rules, in process (docs/audit.md): a full queue drops and counts a record and says
so once, `--audit-required` refuses a call before it runs while the queue has no room, the file rotates
by size and is read back newest first across its rotated files, and an in-process limit admits exactly N
of concurrent callers."""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path

import anyio
import limits
import pytest

from connections import ToolOutcome, TurnTool
from gateway.approvals import ApprovalGate
from gateway.audit import AuditQuery, AuditRecord, AuditTrail, AuditUnavailable, CallGuard, FileSink, read_file_records
from gateway.limits import Limiter, LimitRule, RateLimited

pytestmark = pytest.mark.anyio


class _Stuck:
    """A sink that takes one batch and then waits until released: the queue behind it fills."""

    name = "stuck"

    def __init__(self) -> None:
        self.release = anyio.Event()
        self.taken = anyio.Event()
        self.lines: list[str] = []

    async def write(self, records: list[AuditRecord], lines: list[str]) -> None:
        self.taken.set()
        await self.release.wait()
        self.lines += lines


def _tool(calls: list[str]) -> TurnTool:
    async def invoke(arguments: object) -> ToolOutcome:
        calls.append("ran")
        return ToolOutcome(is_error=False, result={"ok": True})

    return TurnTool("echo", "", {"type": "object"}, "advertised", invoke, connection="everything")


async def test_a_full_queue_counts_and_logs_the_drop_and_required_refuses_the_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = _Stuck()
    calls: list[str] = []
    async with AuditTrail.running([sink], capacity=2, required=True) as trail:
        guard = CallGuard(trail, Limiter(()), ApprovalGate({}))
        tool = guard.tool(_tool(calls), "http", "bearer:a")
        await tool.call({})  # its record goes to the sink, which then holds the writer
        with anyio.fail_after(5):
            await sink.taken.wait()
        await tool.call({})
        await tool.call({})  # the queue (2) is full now
        with caplog.at_level(logging.WARNING, logger="gateway.audit"), pytest.raises(AuditUnavailable):
            await tool.call({})
        assert calls == ["ran", "ran", "ran"]  # the refused call never ran
        assert trail.dropped == 1  # its own refusal record found no room either
        assert [r.message for r in caplog.records].count(
            "the audit queue is full (2 records): 1 record(s) dropped; calls are refused until it has room "
            "(--audit-required)"
        ) == 1
        sink.release.set()
    assert len(sink.lines) == 3


async def test_without_required_a_full_queue_drops_but_the_call_runs() -> None:
    sink = _Stuck()
    calls: list[str] = []
    async with AuditTrail.running([sink], capacity=1) as trail:
        tool = CallGuard(trail, Limiter(()), ApprovalGate({})).tool(_tool(calls), "http", "bearer:a")
        await tool.call({})
        with anyio.fail_after(5):
            await sink.taken.wait()
        for _ in range(3):
            await tool.call({})
        assert calls == ["ran"] * 4 and trail.dropped == 2
        sink.release.set()


class _CountedFile(FileSink):
    """The real audit file, counting the appends (each one a thread hop and a locked open-append-close)."""

    appends = 0

    async def write(self, records: list[AuditRecord], lines: list[str]) -> None:
        self.appends += 1
        await super().write(records, lines)


async def test_the_records_of_calls_in_quick_succession_reach_the_file_in_one_append(tmp_path: Path) -> None:
    sink = _CountedFile(tmp_path)
    calls: list[str] = []
    async with AuditTrail.running([sink], flush_s=2.0) as trail:
        tool = CallGuard(trail, Limiter(()), ApprovalGate({})).tool(_tool(calls), "http", "bearer:a")
        for _ in range(50):  # each call lets the writer task run, as calls on a busy server do
            await tool.call({})
            await anyio.to_thread.run_sync(lambda: None)  # and the loop goes on to other work meanwhile
    assert len(calls) == 50
    assert len((tmp_path / "audit.jsonl").read_text().splitlines()) == 50  # shutdown wrote them all
    assert sink.appends == 1, "a batch per flush interval, not an append per call"


async def test_a_reused_tool_is_guarded_once_per_caller_and_each_call_is_recorded_as_its_own(tmp_path: Path) -> None:
    sink = _CountedFile(tmp_path)
    calls: list[str] = []
    plain = _tool(calls)
    async with AuditTrail.running([sink]) as trail:
        guard = CallGuard(trail, Limiter(()), ApprovalGate({}))
        first = guard.tool(plain, None, "bearer:a")
        assert guard.tool(plain, None, "bearer:a") is first  # no copy of the tool per call
        assert guard.tool(plain, None, "bearer:b") is not first
        assert guard.tool(plain, "http", "bearer:a") is not first
        for who in ("bearer:a", "bearer:b", "bearer:a"):
            await guard.tool(plain, None, who).call({})
        await guard.tool(plain, "http", "bearer:b").call({})
    records = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [(r["principal"], r["surface"]) for r in records] == [
        ("bearer:a", "mcp/tools"),
        ("bearer:b", "mcp/tools"),
        ("bearer:a", "mcp/tools"),
        ("bearer:b", "http"),
    ]


async def test_the_file_rotates_by_size_and_reads_back_newest_first(tmp_path: Path) -> None:
    sink = FileSink(tmp_path, max_bytes=4096, keep=3)
    for n in range(120):
        record = AuditRecord("bearer:a", "http", f"tool{n}")
        await sink.write([record], [record.line()])
    assert (tmp_path / "audit.jsonl.1").exists() and not (tmp_path / "audit.jsonl.4").exists()
    assert oct((tmp_path / "audit.jsonl").stat().st_mode & 0o777) == "0o600"
    newest = read_file_records(tmp_path, AuditQuery(limit=40))
    assert [r["target"] for r in newest] == [f"tool{n}" for n in range(119, 79, -1)]
    assert [r["target"] for r in read_file_records(tmp_path, AuditQuery(limit=5, target="tool100"))] == ["tool100"]


async def test_an_in_process_limit_admits_exactly_n_concurrent_callers() -> None:
    rule = LimitRule(0, "5/minute", limits.parse("5/minute"), ("principal", "tool"), tools=frozenset({"echo"}))
    limiter = Limiter((rule,))
    outcomes: list[str] = []

    async def one() -> None:
        try:
            await limiter.admit("bearer:a", "echo", "everything")
            outcomes.append("admitted")
        except RateLimited as exc:
            assert 1 <= exc.retry_after <= 60 and exc.headers() == {"retry-after": str(exc.retry_after)}
            outcomes.append("limited")

    async with anyio.create_task_group() as tg:
        for _ in range(16):
            tg.start_soon(one)
    assert Counter(outcomes) == {"admitted": 5, "limited": 11}
    await limiter.admit("bearer:b", "echo", "everything")  # another principal has its own counter
    await limiter.admit("bearer:a", "lookup", None)  # a tool the rule does not name is not limited
