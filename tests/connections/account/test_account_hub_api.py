"""The edge's side of the hub API against a minimal hub of our own over real HTTP: what it refuses.

The two-gateway tests are tests/gateway/accounts/test_accounts.py; here a plain `http.server` plays a hub
that answers oddly, to pin down where the API key may go and what an odd answer becomes.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from connections import AccountUnauthorized, UpstreamError, define_connection
from connections.account._account import AccountConnections

pytestmark = pytest.mark.anyio

KEY = "ask_" + "z" * 43


class _Server:
    def __init__(self, answer: dict[str, tuple[int, object]]) -> None:
        self.answer = answer
        self.seen: list[tuple[str, str | None]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self) -> None:
                outer.seen.append((self.path, self.headers.get("Authorization")))
                status, body = outer.answer.get(self.path, (404, {"ok": False}))
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = _reply
            do_POST = _reply

            def log_message(self, format: str, *args: object) -> None:
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def elsewhere() -> Iterator[_Server]:
    server = _Server({})
    yield server
    server.close()


def pool_for(hub: _Server, tmp_path: Path) -> AccountConnections:
    defn = define_connection(account=True).named("acct", None)
    env = {"HOME": str(tmp_path), "AGENT_SDK_ACCOUNT_URL": hub.url, "AGENT_SDK_API_KEY": KEY}
    return AccountConnections({"acct": defn}, environ=env)


async def test_a_connector_on_another_origin_never_gets_the_key(tmp_path: Path, elsewhere: _Server) -> None:
    listing = {"connectors": [{"name": "evil", "mcp": f"{elsewhere.url}/mcp"}]}
    hub = _Server({"/v1/hub/connectors": (200, listing)})
    try:
        async with pool_for(hub, tmp_path) as pool:
            with pytest.raises(UpstreamError, match="lists connector 'evil' on another origin; refusing to send"):
                await pool.list_tools("acct")
    finally:
        hub.close()
    assert hub.seen == [("/v1/hub/connectors", f"Bearer {KEY}")]
    assert elsewhere.seen == []


@pytest.mark.parametrize(
    ("status", "body", "error", "message"),
    [
        (401, {"ok": False}, AccountUnauthorized, "refused the API key (wrong or revoked)"),
        (500, {"ok": False}, UpstreamError, "answered HTTP 500 to the connector list"),
        (200, {"tools": []}, UpstreamError, "a connector list that is not agent-sdk's hub API"),
    ],
)
async def test_odd_hub_answers_are_one_sentence(
    tmp_path: Path, status: int, body: object, error: type[Exception], message: str
) -> None:
    hub = _Server({"/v1/hub/connectors": (status, body)})
    try:
        async with pool_for(hub, tmp_path) as pool:
            with pytest.raises(error) as caught:
                await pool.list_tools("acct")
    finally:
        hub.close()
    assert message in str(caught.value) and str(caught.value).startswith("connection 'acct': ")
    assert KEY not in str(caught.value)
