"""`serve --start-limit` and `--warm` reach the pool; a peer sees a capped answer refused with a sentence.

`agent-sdk serve` runs as a subprocess on a project of our counting server over stdio; the peer is
the MCP Python SDK's `Client`."""

from __future__ import annotations

from pathlib import Path

import anyio
import mcp.types as mt
import pytest
from mcp import Client

from gateway.cli import build_parser
from gateway.commands.serve import settings_from_args
from gateway.errors import CliError
from gateway.settings import ServeSettings

from ..conftest import assert_clean, make_project, serve

COUNTING = str(Path(__file__).resolve().parents[2] / "fixtures" / "upstreams" / "counting_server.py")


def counting(count: Path, tool: str, **fields: object) -> str:
    extra = "".join(f", {k}={v!r}" for k, v in fields.items())
    return (
        "import sys\nfrom connections import define_connection\n\n"
        f"connection = define_connection(command=sys.executable, args=[{COUNTING!r}, 'stdio'],\n"
        f"    env={{'COUNT_FILE': {str(count)!r}}}, advertise_tools=True, allow_tools=[{tool!r}]{extra})\n"
    )


def test_the_flags_and_the_variables_reach_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AGENT_SDK_START_LIMIT", "AGENT_SDK_WARM"):
        monkeypatch.delenv(var, raising=False)
    defaults = settings_from_args(build_parser().parse_args(["serve"]))
    assert (defaults.start_limit, defaults.warm) == (None, False)
    flagged = settings_from_args(build_parser().parse_args(["serve", "--start-limit", "3", "--warm"]))
    assert (flagged.start_limit, flagged.warm) == (3, True)
    from_env = ServeSettings.from_env({"AGENT_SDK_START_LIMIT": "5", "AGENT_SDK_WARM": "1"})
    assert (from_env.start_limit, from_env.warm) == (5, True)
    with pytest.raises(CliError, match="start_limit"):
        settings_from_args(build_parser().parse_args(["serve", "--start-limit", "0"]))


@pytest.mark.anyio
async def test_warm_starts_the_children_before_the_first_peer_and_a_capped_answer_is_refused(
    tmp_path: Path,
) -> None:
    count = tmp_path / "count.txt"
    project = make_project(
        tmp_path / "project",
        {"a": counting(count, "echo"), "b": counting(count, "big", max_result_bytes=100_000)},
    )
    served = serve(project, tmp_path / "state", "--warm", "--start-limit", "1")
    try:
        with anyio.fail_after(60):  # no request sent yet: only --warm starts them
            while len(count.read_text().splitlines() if count.exists() else []) < 2:  # noqa: ASYNC110 - a file
                await anyio.sleep(0.05)
        async with Client(f"{served.url}/v1/mcp/tools", mode="legacy") as client:  # type: ignore[arg-type]
            small = await client.call_tool("big", {"size": 1000})
            large = await client.call_tool("big", {"size": 300_000})
            echo = await client.call_tool("echo", {"text": "still here"})
        assert small.is_error is False
        assert large.is_error is True
        text = "".join(c.text for c in large.content if isinstance(c, mt.TextContent))
        assert text == (
            "result_too_large: connection 'b': tools/call 'big' refused: the upstream's answer is over this "
            "connection's max_result_bytes (100000 bytes); ask the tool for less, or raise max_result_bytes in "
            "the connection's definition"
        )
        assert echo.is_error is False
        assert len(count.read_text().splitlines()) == 2  # warm started each child once; the calls reused them
    finally:
        served.stop()
    assert_clean(served.log_text())
