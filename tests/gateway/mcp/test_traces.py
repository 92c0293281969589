"""One trace from the peer through the gateway into the upstream, in the OpenTelemetry MCP conventions.

Everything real: `agent-sdk serve --otlp-endpoint` (the OpenTelemetry SDK and its OTLP/HTTP exporter)
sends to a receiver here that decodes what arrives with `opentelemetry-proto`. The peers have their
own OpenTelemetry SDK exporting to the same receiver (the `mcp` 2.x `Client` at both generations,
`tests/fixtures/traced_peer.py`) or send a `traceparent` header (the TypeScript SDK client); the
upstreams are `mcp` 2.x servers with their own SDK on (`tests/fixtures/upstreams/traced_server.py`),
one over stdio and one over Streamable HTTP. For `tools/call`, `resources/read` and `prompts/get`, the
receiver must hold one trace: the peer's client span, the gateway's server span under it, the
gateway's client span under that, and the upstream's server span under that.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import free_port
from tests.peers import node20, node_module
from tests.processes import running

from ..conftest import HERE, Served, Upstream, serving

TRACED = HERE.parent / "fixtures" / "upstreams" / "traced_server.py"
PEER = HERE.parent / "fixtures" / "traced_peer.py"
TS_PEER = HERE.parent / "fixtures" / "peers_js" / "ts_traced_client.mjs"
WAIT_S = 20.0
SERVER, CLIENT = 2, 3  # OTLP's Span.SpanKind


@dataclass
class Span:
    trace_id: str
    span_id: str
    parent: str
    name: str
    kind: int
    service: str
    attributes: dict[str, Any]


def _value(value: AnyValue) -> Any:
    return getattr(value, value.WhichOneof("value") or "string_value")


@dataclass
class Receiver:
    """An OTLP/HTTP receiver: every span and metric name that arrives, decoded with `opentelemetry-proto`."""

    url: str
    spans: list[Span] = field(default_factory=list[Span])
    metrics: set[str] = field(default_factory=set[str])
    changed: threading.Condition = field(default_factory=threading.Condition)

    def wait_for(self, what: str, found: Any) -> Any:
        """`found()`'s first truthy answer as spans arrive; fails naming `what` after WAIT_S."""
        with self.changed:
            answer = self.changed.wait_for(found, timeout=WAIT_S)
        assert answer, f"the receiver never got {what}; it holds {[(s.service, s.name) for s in self.spans]}"
        return answer

    def trace(self, trace_id: str) -> list[Span]:
        return [s for s in self.spans if s.trace_id == trace_id]


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    port = free_port()
    found = Receiver(f"http://127.0.0.1:{port}")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.path == "/v1/traces":
                request = ExportTraceServiceRequest.FromString(body)
                spans = [
                    Span(
                        span.trace_id.hex(),
                        span.span_id.hex(),
                        span.parent_span_id.hex(),
                        span.name,
                        span.kind,
                        next(_value(a.value) for a in rs.resource.attributes if a.key == "service.name"),
                        {a.key: _value(a.value) for a in span.attributes},
                    )
                    for rs in request.resource_spans
                    for ss in rs.scope_spans
                    for span in ss.spans
                ]
                with found.changed:
                    found.spans.extend(spans)
                    found.changed.notify_all()
            elif self.path == "/v1/metrics":
                request = ExportMetricsServiceRequest.FromString(body)
                with found.changed:
                    found.metrics.update(
                        m.name for rm in request.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
                    )
                    found.changed.notify_all()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield found
    server.shutdown()
    thread.join()


def _otel_env(receiver: Receiver) -> dict[str, str]:
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none"}


@pytest.fixture(scope="module")
def http_upstream(receiver: Receiver) -> Iterator[Upstream]:
    port = free_port()
    cmd = [sys.executable, str(TRACED), "http", str(port)]
    with running(cmd, port=port, env={**os.environ, **_otel_env(receiver)}, what="traced upstream") as proc:
        yield Upstream(f"http://127.0.0.1:{port}/mcp", proc)


def _connections(receiver: Receiver, http_upstream: Upstream) -> dict[str, str]:
    offers = "advertise_tools=True, advertise_resources=True, advertise_prompts=True"
    return {
        "up_stdio": (
            "from connections import define_connection\n\n"
            f"connection = define_connection(command={sys.executable!r}, args=[{str(TRACED)!r}, 'stdio'], "
            f"env={_otel_env(receiver)!r}, {offers}, trace_content=True)\n"  # its calls' content on spans
        ),
        "up_http": (
            "from connections import define_connection\n\n"
            f"connection = define_connection(url={http_upstream.url!r}, {offers})\n"
        ),
    }


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, receiver: Receiver, http_upstream: Upstream) -> Iterator[Served]:
    env = {"OTEL_BSP_SCHEDULE_DELAY": "50", "OTEL_METRIC_EXPORT_INTERVAL": "200"}
    connections = _connections(receiver, http_upstream)
    with serving(tmp_path_factory, "traces", connections, "--otlp-endpoint", receiver.url, env=env) as server:
        yield server


CALLS = [
    ["tools/call", "echo_stdio", {"text": "hi"}],
    ["tools/call", "echo_http", {"text": "hi"}],
    ["resources/read", "note://stdio", None],
    ["resources/read", "note://http", None],
    ["prompts/get", "greet_stdio", {"name": "Ada"}],
    ["prompts/get", "greet_http", {"name": "Ada"}],
]


def _peer(
    served: Served, receiver: Receiver, mode: str, target: str | None = None, env: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    env = {**os.environ, **_otel_env(receiver), **(env or {})}
    cmd = [sys.executable, str(PEER), target or f"{served.url}/v1/mcp/tools", mode, json.dumps(CALLS)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _chain(receiver: Receiver, trace_id: str, parent_id: str, method: str, name: str) -> tuple[Span, Span, Span]:
    """The gateway's server span under `parent_id`, its client span and the upstream's server span."""
    kind = name.split("://")[1] if method == "resources/read" else name.split("_")[-1]

    def found() -> tuple[Span, Span, Span] | None:
        spans = receiver.trace(trace_id)
        served = [s for s in spans if s.service == "agent-sdk" and s.kind == SERVER and s.parent == parent_id]
        for server in (s for s in served if s.attributes["mcp.method.name"] == method):
            for client in (s for s in spans if s.service == "agent-sdk" and s.kind == CLIENT):
                # (a resources/read may list the upstreams' resources first: the read's own span is the one)
                if client.parent != server.span_id or client.attributes["mcp.method.name"] != method:
                    continue
                for up in spans:
                    if up.service == f"traced-upstream-{kind}" and up.kind == SERVER and up.parent == client.span_id:
                        return server, client, up
        return None

    return receiver.wait_for(f"{method} {name}'s spans under {parent_id} in trace {trace_id}", found)


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_one_trace_runs_from_the_peer_through_the_gateway_into_each_upstream(
    served: Served, receiver: Receiver, mode: str
) -> None:
    version = "2025-11-25" if mode == "legacy" else "2026-07-28"
    for call in _peer(served, receiver, mode):
        method, name = call["method"], call["name"]
        kind = "stdio" if "stdio" in name else "http"
        server, client, upstream = _chain(receiver, call["trace_id"], call["span_id"], method, name)
        target = f" {name}" if method != "resources/read" else ""
        assert server.name == f"{method}{target}" and client.name == f"{method}{target}"
        assert server.attributes["mcp.method.name"] == method == client.attributes["mcp.method.name"]
        assert server.attributes["mcp.protocol.version"] == version
        assert server.attributes["network.transport"] == "tcp"
        assert server.attributes["agent_sdk.principal"] == "loopback"  # the loopback-strict principal
        assert server.attributes["agent_sdk.connection"] == f"up_{kind}" == client.attributes["agent_sdk.connection"]
        assert client.attributes["network.transport"] == ("pipe" if kind == "stdio" else "tcp")
        assert "jsonrpc.request.id" in server.attributes and "jsonrpc.request.id" in client.attributes
        if method == "tools/call":
            for span in (server, client):
                assert span.attributes["gen_ai.tool.name"] == name
                assert span.attributes["gen_ai.operation.name"] == "execute_tool"
            assert call["result"]["content"][0]["text"] == "echo: hi"
        else:
            assert "gen_ai.operation.name" not in server.attributes
        if method == "prompts/get":
            assert server.attributes["gen_ai.prompt.name"] == name == client.attributes["gen_ai.prompt.name"]
        if method == "resources/read":
            assert server.attributes["mcp.resource.uri"] == name
        if mode == "legacy":
            assert server.attributes["mcp.session.id"]
        assert upstream.attributes["mcp.method.name"] == method
        if method == "tools/call" and kind == "stdio":  # up_stdio opted in: trace_content=True
            assert json.loads(server.attributes["gen_ai.tool.call.arguments"]) == {"text": "hi"}
            assert json.loads(server.attributes["gen_ai.tool.call.result"])["content"][0]["text"] == "echo: hi"
        else:  # arguments and results never leave in a span unless the connection says so
            assert not any(k.startswith("gen_ai.tool.call.") for k in server.attributes)
            assert not any("echo: hi" in str(v) for s in (server, client) for v in s.attributes.values())


def test_serve_stdio_traces_its_peers_calls_over_a_pipe_and_times_the_session(
    served: Served, receiver: Receiver, tmp_path: Path
) -> None:
    project = served.state_root.parent / "project"  # the same project, served over stdio by its own process
    env = {
        "AGENT_SDK_STATE_ROOT": str(tmp_path / "state"),
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        "OTEL_METRICS_EXPORTER": "otlp",
    }
    calls = _peer(served, receiver, "legacy", f"stdio:{project}", env)
    for call in calls[:2] + calls[4:]:  # the tools and the prompts
        method, name = call["method"], call["name"]
        server, client, _ = _chain(receiver, call["trace_id"], call["span_id"], method, name)
        assert server.attributes["network.transport"] == "pipe"
        assert server.attributes["agent_sdk.principal"] == "stdio"  # serve --stdio's one peer, as the policy names it
        assert "mcp.session.id" not in server.attributes
        assert client.attributes["agent_sdk.connection"] == server.attributes["agent_sdk.connection"]
    # The stdio session ended when the peer closed stdin: its duration is exported as the process exits.
    receiver.wait_for("mcp.server.session.duration", lambda: "mcp.server.session.duration" in receiver.metrics)


def test_the_typescript_sdk_clients_traceparent_header_is_continued_to_the_upstream(
    served: Served, receiver: Receiver, http_upstream: Upstream
) -> None:
    trace_id, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    env = {**os.environ, "MCP_SDK_DIR": str(node_module("@modelcontextprotocol", "sdk", "package.json").parent)}
    cmd = [node20(), str(TS_PEER), f"{served.url}/v1/mcp/tools", f"00-{trace_id}-{parent}-01"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["echo"]["content"][0]["text"] == "echo: from ts"
    assert out["note"]["contents"][0]["text"] == "the http note"
    for method, name in (("tools/call", "echo_http"), ("resources/read", "note://http"), ("prompts/get", "greet_http")):
        server, client, _ = _chain(receiver, trace_id, parent, method, name)
        assert server.attributes["mcp.protocol.version"] == "2025-11-25"
        assert client.attributes["agent_sdk.connection"] == "up_http"
        assert server.attributes["mcp.session.id"]
    # The HTTP upstream got the context in its headers too, for each of the three.
    seen = httpx2.get(http_upstream.url.removesuffix("/mcp") + "/headers").json()
    continued = [h for h in seen if h.get("traceparent", "").split("-")[1:2] == [trace_id]]
    assert len(continued) >= 3


def _direct_call(served: Served, meta: dict[str, Any]) -> Any:
    """`echo_http` from a peer without OpenTelemetry, its `_meta` as given (at the handshake)."""

    async def run() -> Any:
        async with Client(f"{served.url}/v1/mcp/tools", mode="legacy") as client:
            return await client.call_tool("echo_http", {"text": "plain"}, meta=meta)

    return anyio.run(run)


def test_a_malformed_traceparent_starts_a_new_trace_and_the_call_still_answers(
    served: Served, receiver: Receiver
) -> None:
    bad = "00-not-a-trace-id-01"
    result = _direct_call(served, {"traceparent": bad, "marker": "x"})
    assert result.content[0].text == "echo: plain" and not result.is_error

    def found() -> Span | None:
        return next(
            (
                s
                for s in receiver.spans
                if s.service == "agent-sdk" and s.kind == SERVER and s.name == "tools/call echo_http" and not s.parent
            ),
            None,
        )

    root = receiver.wait_for("a root server span for the call with a malformed traceparent", found)
    assert len(root.trace_id) == 32 and root.trace_id != "0" * 32


def test_oversized_baggage_is_cut_to_the_w3c_limits_and_goes_on_to_the_upstream(
    served: Served, receiver: Receiver, http_upstream: Upstream
) -> None:
    trace_id = "0af7651916cd43dd8448eb211c80319c"
    members = [f"k{i}={'v' * 60}" for i in range(300)]  # 300 members, ~20 KB: over both limits
    meta = {"traceparent": f"00-{trace_id}-b7ad6b7169203331-01", "baggage": ",".join(members)}
    result = _direct_call(served, meta)
    assert result.content[0].text == "echo: plain"
    seen = httpx2.get(http_upstream.url.removesuffix("/mcp") + "/headers").json()
    sent = next(h for h in seen if h.get("traceparent", "").split("-")[1:2] == [trace_id])
    kept = sent["baggage"].split(",")
    assert 0 < len(kept) <= 180 and len(sent["baggage"].encode()) <= 8192
    assert kept[0] == members[0] and kept[-1] == members[len(kept) - 1]  # the first members, whole


def test_the_mcp_duration_histograms_reach_prometheus_and_otlp(served: Served, receiver: Receiver) -> None:
    _direct_call(served, {})
    text = httpx2.get(f"{served.url}/v1/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    server = families["mcp_server_operation_duration_seconds"]
    buckets = {s.labels["le"] for s in server.samples if s.name.endswith("_bucket")}
    assert {"1e-05", "0.0001", "0.00025", "0.0005"} <= buckets  # sub-millisecond calls resolve
    assert any(s.labels.get("method") == "tools/call" and s.value > 0 for s in server.samples)
    client = families["mcp_client_operation_duration_seconds"]
    assert any(s.labels.get("connection") == "up_http" and s.value > 0 for s in client.samples)
    wanted = {"mcp.server.operation.duration", "mcp.client.operation.duration"}
    receiver.wait_for(f"metrics {wanted}", lambda: wanted <= receiver.metrics)


def test_the_agent_endpoints_requests_have_server_spans_too(served: Served, receiver: Receiver) -> None:
    trace_id = "5b8efff798038103d269b633813fc60c"
    meta = {"traceparent": f"00-{trace_id}-eee19b7ec3c1b174-01"}

    async def run() -> Any:
        async with Client(f"{served.url}/v1/mcp", mode="legacy") as client:
            return await client.call_tool("check", {"sessionId": "nope"}, meta=meta)

    assert anyio.run(run).is_error  # no such session: an error result, and a span saying so

    def found() -> Span | None:
        return next((s for s in receiver.trace(trace_id) if s.name == "tools/call check" and s.kind == SERVER), None)

    span = receiver.wait_for("the /v1/mcp call's server span", found)
    assert span.parent == "eee19b7ec3c1b174" and span.attributes["gen_ai.tool.name"] == "check"
    assert span.attributes["error.type"] == "tool_error" and span.attributes["network.transport"] == "tcp"
