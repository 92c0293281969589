"""`--runner openai` against an OpenAI-compatible chat-completions endpoint over real HTTP.

The endpoint is a scripted model (no network on this machine): it asks for the `lookup` tool
once, then answers with what the tool returned. What is checked is our side of the wire: the
request shape (model, tools as functions, tool results, the conversation), the key, the step cap.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.conftest import free_port

from ..conftest import BASIC, Served, assert_clean, serve

KEY = "sk-test-0123456789abcdef"


class ScriptedModel:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []

    async def complete(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        last = body["messages"][-1]
        asked = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
        if asked.startswith("loop"):
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [_call("loop", "bump", {})]}
        elif last["role"] == "user":
            message = {"role": "assistant", "content": None, "tool_calls": [_call("c1", "lookup", {"key": "abc"})]}
        else:
            result = json.loads(last["content"])
            message = {"role": "assistant", "content": f"the value is {result['value']}"}
        return JSONResponse(
            {"choices": [{"index": 0, "message": message}], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}
        )


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


@pytest.fixture(scope="module")
def model() -> Iterator[tuple[ScriptedModel, str]]:
    scripted = ScriptedModel()
    app = Starlette(routes=[Route("/v1/chat/completions", scripted.complete, methods=["POST"])])
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield scripted, f"http://127.0.0.1:{port}/v1"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, model: tuple[ScriptedModel, str]) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("openai")
    env = {
        "AGENT_SDK_OPENAI_BASE_URL": model[1],
        "AGENT_SDK_OPENAI_MODEL": "scripted-1",
        "AGENT_SDK_OPENAI_API_KEY": KEY,
        "AGENT_SDK_OPENAI_MAX_STEPS": "3",
    }
    served = serve(BASIC, root / "state", "--runner", "openai", env=env)
    yield served
    served.stop()
    assert_clean(served.log_text(), secrets=[KEY])


def _wait(http: httpx2.Client, session_id: str, start_index: int = 0) -> dict[str, Any]:
    """The session's state once a turn that ends at or after event `start_index` has ended."""
    with http.stream("GET", f"/v1/session/{session_id}/stream", params={"startIndex": start_index}) as response:
        for line in response.iter_lines():
            if line and json.loads(line)["type"] in ("turn.completed", "turn.failed"):
                break
    return http.get(f"/v1/session/{session_id}").json()


def test_the_model_calls_a_tool_and_answers(gateway: Served, model: tuple[ScriptedModel, str]) -> None:
    scripted, _url = model
    scripted.requests.clear()
    with gateway.client() as http:
        created = http.post("/v1/session", json={"message": "what is abc?"}).json()
        state = _wait(http, created["sessionId"])
        events = http.get(f"/v1/session/{created['sessionId']}/events", params={"format": "json"}).json()["events"]
        http.post(
            f"/v1/session/{created['sessionId']}",
            json={"message": "and again?", "continuationToken": created["continuationToken"]},
        )
        # Wait for the follow-up's own turn: the first turn's end is already in the stream.
        _wait(http, created["sessionId"], start_index=len(events))
    assert state["status"] == "completed" and state["reply"] == "the value is ABC"
    assert state["usage"] == {"inputTokens": 14, "outputTokens": 6}
    first = scripted.requests[0]
    assert first["model"] == "scripted-1"
    assert {t["function"]["name"] for t in first["tools"]} == {"lookup", "bump", "explode"}
    assert scripted.headers[0]["authorization"] == f"Bearer {KEY}"
    assert scripted.requests[1]["messages"][-1]["role"] == "tool"
    results = [e["data"] for e in events if e["type"] == "action.result"]
    assert results[0]["toolName"] == "lookup" and results[0]["result"]["value"] == "ABC"
    # The follow-up carries the conversation so far, from the session's events.
    follow = scripted.requests[2]["messages"]
    assert [m["role"] for m in follow] == ["user", "assistant", "user"]
    assert follow[1]["content"] == "the value is ABC"


def test_the_step_cap_fails_a_turn_that_never_answers(gateway: Served) -> None:
    with gateway.client() as http:
        created = http.post("/v1/session", json={"message": "loop forever"}).json()
        state = _wait(http, created["sessionId"])
    assert state["status"] == "failed" and state["error"] == "runner_failed"
    assert "3 steps" in state["message"]
