"""The stdio transport: a child process speaking newline-delimited JSON-RPC on stdin/stdout.

Modelled on the SDK's `stdio_client` (same framing, same shutdown order, the SDK's own
process-group kill), with two differences the pool needs: the child's pid and liveness are
visible (`StdioChild`), and the child's whole process group is swept after it exits, so a
grandchild left behind by a server that exited on stdin EOF is not orphaned.

Framing is done on bytes: a line that arrives in one read is parsed straight into Python objects
(`pydantic_core.from_json`, no decoded copy, no intermediate tree), then validated without copying
its strings; a line that spans reads is parsed as it arrives (`JsonChunks`: past 1 MiB its long
strings are parsed one by one and the rest at the end), so a large answer is never held whole as
bytes beside its objects (an answer of two long texts peaks at about 1.5 times its size here;
one long text at about twice, the string and its bytes while it is parsed). A line over
`max_message_bytes` is not kept: the rest of it is skipped and the request it answers (its `id`,
found at the line's start or end) gets an error that `translate` reports as `ResultTooLarge`.

Shutdown (MCP 2025-11-25 basic/lifecycle §Shutdown, stdio): close the child's stdin, wait
`STDIN_GRACE` seconds for it to exit, then SIGTERM the process group, SIGKILL after
`TERM_GRACE` seconds. It runs shielded from cancellation with every wait bounded, so Ctrl-C of
the gateway still stops every child and cannot hang on one.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Any, TextIO

import anyio
import anyio.abc
import mcp_types as mt
import pydantic_core
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage

from ..._exceptions import ResultTooLarge
from ._json_chunks import HEAD, JsonChunks

__all__ = ["STDERR_LINE_BYTES", "STDIN_GRACE", "TERM_GRACE", "StdioChild", "stdio_transport"]

logger = logging.getLogger(__name__)

STDIN_GRACE = 2.0
"""Seconds a child has to exit by itself once its stdin is closed."""
TERM_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL to the child's process group."""
_REAP_WAIT = 2.0
STDERR_LINE_BYTES = 8192
"""A child's stderr line longer than this is cut here (one log line, never an unbounded buffer)."""
_EDGE = HEAD
"""Bytes kept from each end of a line that is skipped, to find the `id` it answers."""
_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.){0,200}")')


@dataclass(slots=True)
class StdioChild:
    """The running child: its pid (also its process group id) and whether it has exited."""

    process: anyio.abc.Process

    @property
    def pid(self) -> int:
        return self.process.pid

    def exit_text(self) -> str:
        """How it ended, for an error message: " with code 1", " (killed by SIGKILL)", or "" while unknown."""
        code = self.process.returncode
        if code is None:
            try:  # peek without reaping: the event loop's child watcher reaps it
                info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except (AttributeError, OSError):
                return ""
            if info is None:
                return ""
            code = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
        if code < 0:
            try:
                return f" (killed by {signal.Signals(-code).name})"
            except ValueError:
                return f" (killed by signal {-code})"
        return f" with code {code}"

    @property
    def alive(self) -> bool:
        """False once the child exited, including the moment between its death and its reaping."""
        return self.process.returncode is None and not _zombie(self.process.pid)


def _zombie(pid: int) -> bool:
    # A killed child is a zombie until the event loop's child watcher reaps it; a call sent in that
    # window would be lost. WNOWAIT peeks at the exit without reaping it (the watcher still does).
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True  # already reaped: `returncode` is about to be set
    except (AttributeError, OSError):  # pragma: no cover - no waitid on this platform
        return False


@asynccontextmanager
async def stdio_transport(
    command: str,
    args: list[str],
    *,
    env: Mapping[str, str],
    cwd: str | None,
    errlog: TextIO | int | None,
    on_spawn: Callable[[StdioChild], None],
    max_message_bytes: int | None = None,
    on_stderr: Callable[[str], None] | None = None,
) -> AsyncGenerator[tuple[Any, Any]]:
    """Start the child in a new session (its own process group) and bridge its pipes to MCP streams.

    The child's stderr goes to `errlog`, or, with `on_stderr`, is read line by line (decoded with
    replacement, each line cut at `STDERR_LINE_BYTES`) and handed to it. Raises `OSError` when the
    command cannot be started.
    """
    stderr = subprocess.PIPE if on_stderr is not None else errlog
    process = await anyio.open_process([command, *args], env=dict(env), cwd=cwd, stderr=stderr, start_new_session=True)
    on_spawn(StdioChild(process))
    # No await until the task group is entered, or a cancellation here would leak the child.
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout

    limit = max_message_bytes or sys.maxsize

    async def reader() -> None:
        pending = JsonChunks(replace_invalid_utf8=True)  # the current line so far, when it spans reads
        head = b""  # a skipped line's first bytes (set while skipping)
        tail = b""
        skipping = False
        try:
            async with read_send:
                async for chunk in stdout:
                    start = 0
                    while start <= len(chunk):
                        end = chunk.find(b"\n", start)
                        piece = chunk[start:] if end < 0 else chunk[start:end]
                        if skipping:
                            tail = (tail + piece)[-_EDGE:]
                        elif pending.size + len(piece) > limit:
                            skipping, head, tail = True, (pending.head or piece)[:_EDGE], piece[-_EDGE:]
                            pending = JsonChunks(replace_invalid_utf8=True)
                        elif end < 0:
                            pending.feed(piece)
                        if end < 0:
                            break
                        start = end + 1
                        if skipping:
                            skipping = False
                            refusal = _refusal(head, tail, limit)
                            if refusal is not None:
                                await read_send.send(refusal)
                            continue
                        if pending.size:  # parsed as it arrived: a long line is never held whole
                            pending.feed(piece)
                            del piece
                            message = _parse_chunks(pending)
                            pending = JsonChunks(replace_invalid_utf8=True)
                        elif piece.strip():  # the whole line came in one read: the common case
                            message = _parse(piece)
                        else:
                            continue
                        await read_send.send(message)  # the line is not held while the session handles it
                        del message
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
            pass  # EOF or our own shutdown: the session sees the read stream end

    async def writer() -> None:
        try:
            async with write_recv:
                async for message in write_recv:
                    try:
                        data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    except ValueError as exc:  # PydanticSerializationError: e.g. a lone surrogate in an argument
                        # One caller's unencodable input fails its own request, never the shared child.
                        refusal = _unencodable(message, exc)
                        if refusal is not None:
                            await read_send.send(refusal)
                        continue
                    await stdin.send(data.encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The child stopped reading: end the session instead of leaving a request hanging.
            await read_send.aclose()

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        if on_stderr is not None and process.stderr is not None:
            tg.start_soon(_stderr_lines, process.stderr, on_stderr)
        try:
            yield read_recv, write_send
        finally:
            with anyio.CancelScope(shield=True):
                await write_send.aclose()
                await read_recv.aclose()
                await stop_child(process)
            tg.cancel_scope.cancel()


async def _stderr_lines(stream: anyio.abc.ByteReceiveStream, on_line: Callable[[str], None]) -> None:
    """Hand each line of a child's stderr to `on_line` (a line past `STDERR_LINE_BYTES` is cut there)."""
    pending = b""
    cut = False  # the rest of an over-long line is being dropped
    with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
        async for chunk in stream:
            *lines, rest = (pending + chunk).split(b"\n")
            for line in lines:
                if not cut:
                    _emit(line, on_line)
                cut = False
            pending = rest
            if len(pending) > STDERR_LINE_BYTES:
                if not cut:
                    _emit(pending[:STDERR_LINE_BYTES], on_line)
                pending, cut = b"", True
    if pending and not cut:
        _emit(pending, on_line)


def _emit(line: bytes, on_line: Callable[[str], None]) -> None:
    text = line.rstrip(b"\r").decode(errors="replace")
    if text.strip():
        on_line(text)


def _unencodable(message: SessionMessage, exc: ValueError) -> SessionMessage | None:
    """The error answer to a request that cannot be written as JSON (None for a notification or an
    answer: there is no one to tell, so it is dropped with a log line)."""
    root = message.message
    if not isinstance(root, mt.JSONRPCRequest):
        logger.warning("dropped an outgoing %s that cannot be encoded as JSON", type(root).__name__)
        return None
    error = mt.ErrorData(
        code=mt.INVALID_PARAMS,
        message="the request cannot be encoded as JSON (a string holds a lone surrogate or another "
        f"character UTF-8 cannot carry): {type(exc).__name__}",
    )
    return SessionMessage(mt.JSONRPCError(jsonrpc="2.0", id=root.id, error=error))


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(mt.jsonrpc_message_adapter.validate_python(pydantic_core.from_json(line), by_name=False))
    except ValueError as exc:  # a log line on stdout: surfaced to the session, which drops it
        try:  # or text that is not valid UTF-8: read it as the SDK's client does (errors="replace")
            text = line.decode(errors="replace")
            return SessionMessage(mt.jsonrpc_message_adapter.validate_json(text, by_name=False))
        except ValueError:
            return exc


def _parse_chunks(line: JsonChunks) -> SessionMessage | Exception:
    """`_parse` of a line that spanned reads (a blank or non-JSON line is an error, as there)."""
    try:
        return SessionMessage(mt.jsonrpc_message_adapter.validate_python(line.finish(), by_name=False))
    except ValueError as exc:
        return exc


def _refusal(head: bytes, tail: bytes, limit: int) -> SessionMessage | None:
    """The error answer for a skipped line over `limit`: to the request whose `id` it carries, if any."""
    answer = b'"result"' in head or b'"error"' in head
    found = _ID.search(head) if answer else None
    if found is None and b'"method"' not in head:
        found = _ID.search(tail)  # a server that writes `id` last
    if found is None:
        logger.warning("a stdio message over the %d-byte limit was skipped (no request id found)", limit)
        return None  # a notification or a server request: nothing waits for it
    raw = found[1]
    request_id: int | str = int(raw) if raw[:1] != b'"' else raw[1:-1].decode(errors="replace")
    error = mt.ErrorData(code=mt.INTERNAL_ERROR, message=ResultTooLarge.transport_note(limit))
    return SessionMessage(mt.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


async def stop_child(process: anyio.abc.Process) -> None:
    """Close stdin, wait `STDIN_GRACE`, then kill the process group; sweep the group either way."""
    assert process.stdin is not None and process.stdout is not None
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    await _wait_exit(process, STDIN_GRACE)
    if sys.platform != "win32":
        # The leader's pid is the group id (start_new_session); killpg reaches grandchildren even
        # after the leader exited, which is how a server that exits on EOF still leaves no orphans.
        await terminate_posix_process_tree(process, TERM_GRACE)
    elif process.returncode is None:  # pragma: no cover - the gateway targets POSIX
        process.kill()
    await _wait_exit(process, _REAP_WAIT)
    if process.returncode is None:
        logger.warning("stdio child %d survived SIGKILL; abandoning it", process.pid)
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):  # asyncio's subprocess transport warns at GC unless closed
        with suppress(PermissionError):
            close()


async def _wait_exit(process: anyio.abc.Process, limit: float) -> None:
    # Poll `returncode`, not `process.wait()`: on asyncio 3.11+ wait() also waits for pipe EOF,
    # and a grandchild holding the pipes would make an exited child look hung.
    with anyio.move_on_after(limit):
        while process.returncode is None:  # noqa: ASYNC110
            await anyio.sleep(0.01)
