"""`serve --no-fast-calls` (or `AGENT_SDK_FAST_CALLS=0`) reaches the client pool as a setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from connections import load_project
from gateway.app import default_broker
from gateway.cli import build_parser
from gateway.commands.serve import settings_from_args
from gateway.settings import ServeSettings
from tests.conftest import free_port
from tests.processes import recording_server, running

pytestmark = pytest.mark.anyio


def test_the_flag_and_the_variable_turn_the_fast_wire_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENT_SDK_FAST_CALLS", raising=False)
    assert settings_from_args(build_parser().parse_args(["serve"])).fast_calls is True
    assert settings_from_args(build_parser().parse_args(["serve", "--no-fast-calls"])).fast_calls is False
    assert ServeSettings.from_env({"AGENT_SDK_FAST_CALLS": "0"}).fast_calls is False
    assert ServeSettings.from_env({"AGENT_SDK_FAST_CALLS": "1"}).fast_calls is True


@pytest.mark.parametrize("fast_calls", [True, False])
async def test_the_serving_broker_takes_the_setting(tmp_path: Path, fast_calls: bool) -> None:
    port = free_port()
    folder = tmp_path / "agent" / "mcp-connections"
    folder.mkdir(parents=True)
    (folder / "rec.py").write_text(
        "from connections import define_connection\n\n"
        f"connection = define_connection(url='http://127.0.0.1:{port}/mcp', protocol='legacy')\n"
    )
    with running(recording_server(port), port=port):
        settings = ServeSettings(state_root=tmp_path / "state", fast_calls=fast_calls)
        async with default_broker(load_project(tmp_path), settings) as broker:
            await broker.host.mcp.call_tool("rec", "record", {"value": "v"})
            assert broker.host.mcp.status("rec").fast_calls is fast_calls
