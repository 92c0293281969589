"""The load of `bench/chaos.py`: what peers and session-API users do while the faults strike.

Raw JSON-RPC over `httpx2` (as `tests/gateway/state/test_replicas.py` does), so that each peer's answer is
seen exactly as it came, and every request carries an `X-Chaos-Id` the nginx log joins on:

- MCP peers of both generations on `/v1/mcp/tools`: handshake-era ones (`initialize` at 2025-11-25,
  then their sealed `Mcp-Session-Id` on every call) and 2026-07-28 ones (one request per POST, the
  `_meta` envelope). Most call `echo` on the HTTP upstream; some call server-everything's
  `trigger-long-running-operation` over stdio with a `progressToken` and count the progress they get.
- listeners: 2026-07-28 `subscriptions/listen` streams, reopened when one ends;
- task peers: a task-augmented `simulate-research-query` (stdio), polled with `tasks/get` to its end;
- session-API users: a session, then follow-ups, each turn read on the live event stream with
  `startIndex` reconnects.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2

__all__ = ["RETRYABLE", "Load", "Op", "run_load"]

HANDSHAKE, MODERN = "2025-11-25", "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "chaos", "version": "1"},
}
LONG = "trigger-long-running-operation"
TERMINAL = {"completed", "failed", "cancelled"}
RETRYABLE = ("HTTP 502", "HTTP 503", "HTTP 504", "retry", "reopened on the next use", "RemoteProtocolError")
"""What a failed peer's error must say for it to act on it: the proxy's or the replica's 50x, or a sentence."""


@dataclass(slots=True)
class Op:
    """One request a peer made and what it saw."""

    kind: str
    peer: str
    ident: str
    started: float
    ended: float = 0.0
    error: str = ""
    progress: int = 0


@dataclass
class Load:
    bearer: str
    stop: bool = False
    ops: list[Op] = field(default_factory=list[Op])
    sessions: dict[str, str] = field(default_factory=dict[str, str])
    """Acknowledged sessions: id -> the last continuation token known."""
    turns: dict[str, str] = field(default_factory=dict[str, str])
    """Acknowledged turns: turn id -> session id."""
    seen: dict[str, list[dict[str, Any]]] = field(default_factory=dict[str, list[dict[str, Any]]])
    resumes: int = 0
    bad_resumes: list[str] = field(default_factory=list[str])
    gave_up: list[str] = field(default_factory=list[str])
    """Readers that stopped following a turn (the final log still shows how it ended)."""
    listens: list[Op] = field(default_factory=list[Op])
    tasks: dict[str, str] = field(default_factory=dict[str, str])
    """Sealed task id -> how it ended: a terminal status (with its message), an error, or `working`."""
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def op(self, kind: str, peer: str) -> Op:
        made = Op(kind, peer, f"c{next(self._ids)}", time.time())
        self.ops.append(made)
        return made


async def run_load(http: httpx2.AsyncClient, load: Load, *, peers: int, users: int, listeners: int, tasks: int) -> None:
    """Run until `load.stop`: `peers` MCP peers (half each generation, one in four with long calls)."""
    async with anyio.create_task_group() as tg:
        for n in range(peers):
            tg.start_soon(_peer, http, load, n, HANDSHAKE if n % 2 == 0 else MODERN, n % 4 == 3)
        for n in range(users):
            tg.start_soon(_user, http, load, n)
        for n in range(listeners):
            tg.start_soon(_listener, http, load, n)
        for n in range(tasks):
            tg.start_soon(_task_peer, http, load, n)


def _headers(op: Op, version: str, session: str | None, method: str, name: str = "") -> dict[str, str]:
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": version,
        "X-Chaos-Id": op.ident,
    }
    if session:
        headers["Mcp-Session-Id"] = session
    if version == MODERN:
        headers["Mcp-Method"] = method
        if name:
            headers["Mcp-Name"] = name
    return headers


def _params(version: str, params: dict[str, Any]) -> dict[str, Any]:
    if version != MODERN:
        return params
    meta = {**params.get("_meta", {}), **ENVELOPE}
    return {**params, "_meta": meta}


async def rpc(
    http: httpx2.AsyncClient, op: Op, version: str, session: str | None, method: str, params: dict[str, Any]
) -> dict[str, Any] | None:
    """One JSON-RPC request; its `result`, or None with `op.error` saying what the peer saw."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": _params(version, params)}
    headers = _headers(op, version, session, method, str(params.get("name", "")))
    answer: dict[str, Any] | None = None
    try:
        async with http.stream("POST", "/v1/mcp/tools", json=body, headers=headers) as response:
            if response.status_code != 200:
                text = (await response.aread()).decode(errors="replace")
                op.error = f"HTTP {response.status_code} {_short(text)}"
                return None
            if response.headers.get("content-type", "").startswith("text/event-stream"):
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    message = json.loads(line[5:])
                    if message.get("method") == "notifications/progress":
                        op.progress += 1
                    elif "id" in message:
                        answer = message
            else:
                answer = json.loads(await response.aread())
    except httpx2.HTTPError as exc:
        op.error = f"{type(exc).__name__} {_short(str(exc))}"
        return None
    finally:
        op.ended = time.time()
    if answer is None:
        op.error = "the answer ended without a JSON-RPC response"
        return None
    if "error" in answer:
        op.error = f"JSON-RPC {answer['error'].get('code')} {_short(answer['error'].get('message', ''))}"
        return None
    result: dict[str, Any] = answer["result"]
    if result.get("isError"):
        op.error = f"tool error {_short(json.dumps(result.get('content')))}"
        return None
    return result


def _short(text: str) -> str:
    return " ".join(text.split())[:200]


async def _initialize(http: httpx2.AsyncClient, load: Load, name: str) -> str:
    """A handshake-era peer's `initialize` (retried until it is answered): its sealed `Mcp-Session-Id`."""
    while not load.stop:
        op = load.op("initialize", name)
        body = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": name, "version": "1"}},
        }
        try:
            response = await http.post("/v1/mcp/tools", json=body, headers=_headers(op, HANDSHAKE, None, "initialize"))
            op.ended = time.time()
            if response.status_code == 200 and "mcp-session-id" in response.headers:
                return response.headers["mcp-session-id"]
            op.error = f"HTTP {response.status_code} {_short(response.text)}"
        except httpx2.HTTPError as exc:
            op.ended, op.error = time.time(), type(exc).__name__
        await anyio.sleep(0.2)
    return ""


async def _peer(http: httpx2.AsyncClient, load: Load, n: int, version: str, long: bool) -> None:
    name = f"{'h' if version == HANDSHAKE else 'm'}{n}"
    session = await _initialize(http, load, name) if version == HANDSHAKE else None
    for k in itertools.count():
        if load.stop:
            return
        if long:
            op = load.op("long", name)
            args = {"name": LONG, "arguments": {"duration": 2, "steps": 4}, "_meta": {"progressToken": op.ident}}
            result = await rpc(http, op, version, session, "tools/call", args)
        else:
            op = load.op("call", name)
            text = f"{name}.{k}"
            result = await rpc(
                http, op, version, session, "tools/call", {"name": "echo", "arguments": {"message": text}}
            )
            if result is not None and text not in json.dumps(result):
                op.error = f"wrong answer {_short(json.dumps(result))}"
        await anyio.sleep(0.05 if result is not None else 0.2)


async def _listener(http: httpx2.AsyncClient, load: Load, n: int) -> None:
    """A 2026-07-28 `subscriptions/listen` stream; when it ends, it is opened again."""
    name = f"listen{n}"
    while not load.stop:
        op = load.op("listen", name)
        load.listens.append(op)
        params = {"notifications": {"toolsListChanged": True, "resourcesListChanged": True}}
        body = {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": _params(MODERN, params)}
        acknowledged = False
        try:
            headers = _headers(op, MODERN, None, "subscriptions/listen")
            async with http.stream("POST", "/v1/mcp/tools", json=body, headers=headers) as response:
                if response.status_code != 200:
                    op.error = f"HTTP {response.status_code} {_short((await response.aread()).decode())}"
                else:
                    async for line in response.aiter_lines():
                        if "notifications/subscriptions/acknowledged" in line:
                            acknowledged = True
                        if load.stop:
                            break
                    if not load.stop:
                        op.error = "the stream ended" + ("" if acknowledged else " before it was acknowledged")
        except httpx2.HTTPError as exc:
            op.error = f"{type(exc).__name__} {_short(str(exc))}"
        op.ended = time.time()
        if load.stop:
            op.error = ""
        elif not acknowledged and not op.error:
            op.error = "never acknowledged"
        await anyio.sleep(0.2)


async def _task_peer(http: httpx2.AsyncClient, load: Load, n: int) -> None:
    """Start a task, poll `tasks/get` until it ends (or the run does), start the next."""
    name = f"task{n}"
    session = await _initialize(http, load, name)
    while not load.stop:
        op = load.op("task.start", name)
        args = {"name": "simulate-research-query", "arguments": {"topic": f"t{n}"}, "task": {"ttl": 120000}}
        created = await rpc(http, op, HANDSHAKE, session, "tools/call", args)
        if created is None or "task" not in created:
            if created is not None:
                op.error = f"no task in the answer {_short(json.dumps(created))}"
            await anyio.sleep(0.3)
            continue
        task_id = created["task"]["taskId"]
        load.tasks[task_id] = "working"
        while True:  # polled until it ends, even after the load stops: a task must never stay `working`
            await anyio.sleep(0.5)
            poll = load.op("task.get", name)
            got = await rpc(http, poll, HANDSHAKE, session, "tasks/get", {"taskId": task_id})
            if got is None and any(hint in poll.error for hint in RETRYABLE) and time.time() - op.started < 60:
                continue  # what a peer does with a retryable error: ask again
            if got is None:
                load.tasks[task_id] = f"error: {poll.error}"
                break
            status = got.get("status", "?")
            if status in TERMINAL:
                load.tasks[task_id] = f"{status}" + (f": {got['statusMessage']}" if got.get("statusMessage") else "")
                break
            if load.stop and time.time() - op.started > 30:
                break


# -- session-API users --------------------------------------------------------------------------


async def _user(http: httpx2.AsyncClient, load: Load, n: int) -> None:
    k = 0
    while not load.stop:
        k += 1
        made = await _session_post(http, load, f"u{n}", "session.create", "/v1/session", {"message": _message(n, k)})
        if made is None:
            continue
        sid = made["sessionId"]
        load.sessions[sid] = made["continuationToken"]
        load.turns[made["turnId"]] = sid
        load.seen[sid] = []
        turn: str | None = made["turnId"]
        for _ in range(4):
            if turn is not None:
                await _read_turn(http, load, sid, turn)
            if load.stop:
                return
            k += 1
            body = {"message": _message(n, k), "continuationToken": load.sessions[sid]}
            answer = await _session_post(http, load, f"u{n}", "session.follow", f"/v1/session/{sid}", body)
            if answer is None:  # not accepted (its replica died, Redis was away): learn the current token
                turn = None
                await _refresh_token(http, load, sid)
                continue
            load.sessions[sid] = answer["continuationToken"]
            load.turns[answer["turnId"]] = sid
            turn = answer["turnId"]


def _message(n: int, k: int) -> str:
    return f'hello {n}.{k}\nsleep 0.4\ncall lookup {{"key": "k{n}x{k}"}}'


async def _session_post(
    http: httpx2.AsyncClient, load: Load, peer: str, kind: str, path: str, body: dict[str, Any]
) -> dict[str, Any] | None:
    op = load.op(kind, peer)
    try:
        response = await http.post(path, json=body, headers={"X-Chaos-Id": op.ident})
    except httpx2.HTTPError as exc:
        op.ended, op.error = time.time(), type(exc).__name__
        await anyio.sleep(0.2)
        return None
    op.ended = time.time()
    if response.status_code != 200:
        op.error = f"HTTP {response.status_code} {_short(response.text)}"
        await anyio.sleep(0.2)
        return None
    return response.json()


async def _refresh_token(http: httpx2.AsyncClient, load: Load, sid: str) -> None:
    for _ in range(150):
        try:
            response = await http.get(f"/v1/session/{sid}")
            if response.status_code == 200:
                load.sessions[sid] = response.json()["continuationToken"]
                return
        except httpx2.HTTPError:
            pass
        await anyio.sleep(0.2)


async def _read_turn(http: httpx2.AsyncClient, load: Load, sid: str, turn: str) -> None:
    """Follow the stream until `turn` ends: reconnect from the next index every 4 events and after a break."""
    seen = load.seen[sid]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        start = len(seen)
        try:
            async with _stream(http, sid, start) as response:
                if response.status_code != 200:
                    await anyio.sleep(0.2)
                    continue
                got = 0
                async for line in response.aiter_lines():
                    if not line:
                        continue
                    event = json.loads(line)
                    if got == 0 and start:
                        load.resumes += 1
                        if event["index"] != start:
                            load.bad_resumes.append(f"{sid}: asked {start}, got {event['index']}")
                    seen.append(event)
                    got += 1
                    if event["type"] == "session.waiting" and event.get("turnId") == turn:
                        return
                    if got == 4:
                        break
        except httpx2.HTTPError:
            await anyio.sleep(0.1)
    load.gave_up.append(f"turn {turn} of {sid}: no end read on its stream within 60 s")


@asynccontextmanager
async def _stream(http: httpx2.AsyncClient, sid: str, start: int) -> AsyncGenerator[httpx2.Response]:
    async with http.stream("GET", f"/v1/session/{sid}/stream", params={"startIndex": start}) as response:
        yield response
