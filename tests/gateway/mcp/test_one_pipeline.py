"""Progress, log messages, cancellation, elicitation and sampling reach the peer alike on every front.

One executor runs every `tools/call` (`gateway/mcp/pipeline.py`), so what a peer gets does not depend
on how it reached the gateway: `/v1/mcp/tools`, `serve --stdio` (what desktop clients run), or
`/v1/mcp/tools` of a gateway an operator started under `opentelemetry-instrument` (tracing on must
not change what a peer gets). Each front is driven by the `mcp` 2.x `Client` at both protocol
generations. Upstreams: server-everything over Streamable HTTP (progress, elicitation, sampling) and
the patient upstream of `tests/fixtures/upstreams/patient_server.py`, pinned to the handshake (log
messages, and whether its call was cancelled: server-everything cannot say).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as mt
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import free_port
from tests.processes import running

from ..conftest import HERE, Served, Upstream, make_project, serving, url_connection

PATIENT = HERE.parent / "fixtures" / "upstreams" / "patient_server.py"
AGENT_SDK = Path(sys.executable).parent / "agent-sdk"
INSTRUMENT = Path(sys.executable).parent / "opentelemetry-instrument"
LONG, ELICIT, SAMPLE = "trigger-long-running-operation", "trigger-elicitation-request", "trigger-sampling-request"
# The console exporter writes each span to the server's stdout (its log here); nothing leaves the box.
TRACING = {
    "OTEL_TRACES_EXPORTER": "console",
    "OTEL_METRICS_EXPORTER": "none",
    "OTEL_LOGS_EXPORTER": "none",
    "OTEL_SERVICE_NAME": "agent-sdk",
    "OTEL_BSP_SCHEDULE_DELAY": "50",  # the batch span processor writes within 50 ms, not 5 s
}

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def patient() -> Iterator[Upstream]:
    port = free_port()
    with running([sys.executable, str(PATIENT), "--port", str(port)], port=port, what="patient upstream") as proc:
        yield Upstream(f"http://127.0.0.1:{port}/mcp", proc)


def _connections(everything: Upstream, patient: Upstream) -> dict[str, str]:
    patient_file = (
        "from connections import define_connection\n\n"
        f"connection = define_connection(url={patient.url!r}, advertise_tools=True, protocol='legacy',"
        " min_log_level='info', allow_tools=['steps', 'hang'])\n"
    )
    return {"everything": url_connection(everything.url), "patient": patient_file}


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory, everything: Upstream, patient: Upstream) -> Iterator[Served]:
    with serving(tmp_path_factory, "pipeline-plain", _connections(everything, patient)) as served:
        yield served


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory, everything: Upstream, patient: Upstream) -> Iterator[Served]:
    """The operator's `opentelemetry-instrument agent-sdk serve` (the distro installs a tracer provider)."""
    launcher = [str(INSTRUMENT), str(AGENT_SDK)]
    with serving(
        tmp_path_factory, "pipeline-traced", _connections(everything, patient), env=TRACING, launcher=launcher
    ) as served:
        yield served


@pytest.fixture(scope="module")
def stdio_params(
    tmp_path_factory: pytest.TempPathFactory, everything: Upstream, patient: Upstream
) -> StdioServerParameters:
    root = tmp_path_factory.mktemp("pipeline-stdio")
    project = make_project(root / "project", _connections(everything, patient))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_SDK_", "PYTEST_"))}
    env["AGENT_SDK_STATE_ROOT"] = str(root / "state")
    return StdioServerParameters(command=str(AGENT_SDK), args=["serve", "--stdio", "--dir", str(project)], env=env)


async def _elicit(context: ClientRequestContext, params: mt.ElicitRequestParams) -> mt.ElicitResult:
    return mt.ElicitResult(action="accept", content={"name": "Grace", "check": True, "email": "grace@example.com"})


async def _sample(context: ClientRequestContext, params: mt.CreateMessageRequestParams) -> mt.CreateMessageResult:
    return mt.CreateMessageResult(role="assistant", content=mt.TextContent(type="text", text="tides"), model="py")


@asynccontextmanager
async def _client(front: str, mode: str, request: pytest.FixtureRequest, on_log: Any) -> AsyncIterator[Client]:
    callbacks: dict[str, Any] = {
        "mode": mode,
        "elicitation_callback": _elicit,
        "sampling_callback": _sample,
        "logging_callback": on_log,
        "log_level": "debug",
        "cache": None,
    }
    if front == "stdio":
        params: StdioServerParameters = request.getfixturevalue("stdio_params")
        with open(os.devnull, "w") as errlog:  # noqa: ASYNC230  # the child's stderr: the gateway's log
            async with Client(stdio_client(params, errlog=errlog), **callbacks) as client:  # pyright: ignore[reportArgumentType]
                yield client
        return
    served: Served = request.getfixturevalue("plain" if front == "http" else "traced")
    async with httpx2.AsyncClient(timeout=30) as http:
        transport = streamable_http_client(f"{served.url}/v1/mcp/tools", http_client=http)
        async with Client(transport, **callbacks) as client:  # pyright: ignore[reportArgumentType]
            yield client


def _seen(patient: Upstream) -> list[dict[str, Any]]:
    return httpx2.get(patient.url.replace("/mcp", "/seen"), timeout=10).json()


async def _until(patient: Upstream, before: int, key: str) -> dict[str, Any]:
    with anyio.fail_after(20):
        while True:
            found = [e for e in _seen(patient)[before:] if key in e]
            if found:
                return found[0]
            await anyio.sleep(0.05)


def _text(result: mt.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, mt.TextContent))


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
@pytest.mark.parametrize("front", ["http", "stdio", "traced"])
async def test_every_front_forwards_progress_logs_cancellation_and_questions_alike(
    front: str, mode: str, request: pytest.FixtureRequest, patient: Upstream
) -> None:
    progress: list[tuple[float, float | None]] = []
    messages: list[tuple[str, Any]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total))

    async def on_log(params: mt.LoggingMessageNotificationParams) -> None:
        messages.append((params.level, params.data))

    with anyio.fail_after(90):
        async with _client(front, mode, request, on_log) as client:
            assert (client.protocol_version == "2026-07-28") == (mode != "legacy")
            if mode == "legacy":  # a handshake peer's level is its own, for its later calls
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # deprecated at 2026-07-28; the handshake era has it
                    await client.session.set_logging_level("debug")  # pyright: ignore[reportDeprecated]

            long = await client.call_tool(LONG, {"duration": 0.3, "steps": 3}, progress_callback=on_progress)
            assert not long.is_error, long
            assert progress == [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)]

            steps = await client.call_tool("steps", {})
            assert _text(steps) == "done"
            # debug is below the connection's `min_log_level='info'`: never forwarded
            assert messages == [
                ("info", {"said": "info"}),
                ("warning", {"said": "warning"}),
                ("error", {"said": "error"}),
            ]

            elicited = await client.call_tool(ELICIT, {})
            assert '"name": "Grace"' in _text(elicited), elicited
            sampled = await client.call_tool(SAMPLE, {"prompt": "the sea", "maxTokens": 20})
            assert '"text": "tides"' in _text(sampled), sampled

            before = len(_seen(patient))
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "hang", {})
                started = await _until(patient, before, "call")
                tg.cancel_scope.cancel()  # the peer gives up on its call
            cancelled = await _until(patient, before, "cancelled")
            assert cancelled["cancelled"] == "hang" and cancelled["id"] == started["id"]

    if front == "traced":  # tracing was on, and the calls were traced
        served: Served = request.getfixturevalue("traced")
        spans = (f'"name": "tools/call {LONG}"', '"name": "tools/call steps"')
        with anyio.fail_after(20):
            while not all(span in served.log_text() for span in spans):  # noqa: ASYNC110  # another process writes it
                await anyio.sleep(0.05)
