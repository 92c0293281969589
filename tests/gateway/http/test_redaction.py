"""One redaction rule (issue #22 item 3, #18 item 7): no key, token, `${VAR}` value, URL path secret,
query or stdio argument in any output, event, log line or trace file.

Real `agent-sdk` processes (the CLI and `serve`), real stdio and HTTP upstreams; every byte they
print or write is searched for the secrets.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path

import anyio
import httpx2
import pytest

from tests.conftest import free_port
from tests.gateway.accounts.test_accounts import cli, create_key, run_turn, write

from ..conftest import Served, serve

pytestmark = pytest.mark.anyio


def every_file(root: Path) -> Iterable[tuple[Path, str]]:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            yield path, path.read_text(errors="replace")


def hits(needle: str, texts: dict[str, str]) -> list[str]:
    """Where `needle` occurs: the names of the outputs and files that hold it."""
    return [where for where, text in texts.items() if needle in text]


# -- the two account variables swapped ------------------------------------------------------------------------


async def test_with_the_account_variables_swapped_the_key_appears_nowhere(tmp_path: Path) -> None:
    hub_project = tmp_path / "hub"
    write(hub_project, "mcp-connections", "linear", "connection = define_connection(url='http://127.0.0.1:9/mcp', "
          "linkable=True)")  # fmt: skip
    _id, key = create_key(hub_project, tmp_path / "hub-state", "team", "--all")
    project, state_root = tmp_path / "edge", tmp_path / "edge-state"
    write(project, "mcp-connections", "work", "connection = define_connection(account=True, servers=['linear'])")
    write(project, "mcp-connections", "listed", "connection = define_connection(account=True, advertise_tools=True)")
    swapped = {"AGENT_SDK_ACCOUNT_URL": key, "AGENT_SDK_API_KEY": f"http://127.0.0.1:{free_port()}"}
    texts: dict[str, str] = {}

    def record(name: str, *args: str, env: dict[str, str] = swapped, stdin: str | None = None) -> None:
        done = cli(*args, env={**env, "AGENT_SDK_CONFIG_DIR": str(tmp_path / "config")}, stdin=stdin)
        texts[name] = done.stdout + done.stderr
        assert "Traceback" not in texts[name], texts[name]

    record("info", "info", "--dir", str(project))
    record("info --json", "info", "--dir", str(project), "--json")
    record("validate", "validate", "--dir", str(project))
    record("mcp list", "mcp", "list", "--dir", str(project), "--json")
    record("mcp tools", "mcp", "tools", "work", "--dir", str(project))
    record("mcp call", "mcp", "call", "work", "echo", "--dir", str(project))
    record("login --url KEY", "login", "--url", key, env={}, stdin=key + "\n")
    record("login --key KEY", "login", "--url", "http://127.0.0.1:9", "--key", key, env={})
    record("login --key=KEY", "login", "--key=" + key, env={})
    record("login --api-key KEY", "login", "--api-key", key, env={})
    record("login --status", "login", "--status")
    served: Served = serve(project, state_root, env=swapped)
    try:
        async with httpx2.AsyncClient(base_url=served.url, timeout=60) as http:
            with anyio.fail_after(60):
                texts["/v1/info"] = (await http.get("/v1/info")).text
                texts["/v1/tools"] = (await http.get("/v1/tools")).text
                texts["/v1/tools/echo"] = (await http.post("/v1/tools/echo", json={"input": {}})).text
        turn = await run_turn(served.url, 'call mcp_call_tool {"connection": "work", "tool": "echo", "arguments": {}}')
        texts["turn"] = json.dumps(turn)
        async with httpx2.AsyncClient(base_url=served.url, timeout=60) as http:
            events = await http.get(f"/v1/session/{turn['sessionId']}/events", params={"format": "json"})
        texts["events"] = events.text
    finally:
        served.stop()
    texts["serve log"] = served.log_text()
    texts |= {str(path): text for path, text in every_file(state_root)}
    texts |= {str(path): text for path, text in every_file(tmp_path / "config")}

    assert turn["type"] == "turn.failed", turn
    assert any(p["code"] == "account_not_configured" for p in turn["data"]["problems"]), turn
    assert "looks like an API key" in texts["turn"] and "looks like an API key" in texts["info"]
    assert "login takes no --key" in texts["login --key KEY"] and "--api-key" in texts["login --api-key KEY"]
    assert any("traces" in where for where in texts), sorted(texts)  # the trace file was searched too
    assert hits(key, texts) == []
    assert hits(key[4:20], texts) == []  # not even a piece of it


# -- URLs, args and ${VAR} values of connections ---------------------------------------------------------------

PATH_SECRET = "Zk3q0P4x7pathsecret"
QUERY_SECRET = "querysecret9"
ARG_SECRET = "argsecret42x"
VAR_SECRET = "header-var-secret-value"


def secret_project(root: Path, port: int) -> Path:
    write(root, "mcp-connections", "remote", f"connection = define_connection(url='http://127.0.0.1:{port}/mcp/"
          f"{PATH_SECRET}?token={QUERY_SECRET}', headers={{'X-Key': '${{SECRET_VAR}}'}})")  # fmt: skip
    write(root, "mcp-connections", "listed", f"connection = define_connection(url='http://user:{QUERY_SECRET}@"
          f"127.0.0.1:{port}/v1/{PATH_SECRET}/mcp', advertise_tools=True)")  # fmt: skip
    write(root, "mcp-connections", "local", f"connection = define_connection(command={sys.executable!r}, "
          f"args=['-c', 'import sys; sys.exit(3)', '--token', '{ARG_SECRET}'])")  # fmt: skip
    return root


def assert_no_connection_secret(where: str, text: str) -> None:
    for secret in (PATH_SECRET, QUERY_SECRET, ARG_SECRET, VAR_SECRET):
        assert secret not in text, (where, secret, text)


def test_cli_outputs_show_url_shapes_and_command_names_only(tmp_path: Path) -> None:
    port = free_port()
    project = secret_project(tmp_path / "p", port)
    env = {"SECRET_VAR": VAR_SECRET}
    outputs = {
        "info": cli("info", "--dir", str(project), env=env),
        "info --json": cli("info", "--dir", str(project), "--json", env=env),
        "mcp list": cli("mcp", "list", "--dir", str(project), env=env),
        "mcp list --json": cli("mcp", "list", "--dir", str(project), "--json", env=env),
        "mcp tools remote": cli("mcp", "tools", "remote", "--dir", str(project), env=env),
        "mcp tools listed": cli("mcp", "tools", "listed", "--dir", str(project), env=env),
        "mcp tools local": cli("mcp", "tools", "local", "--dir", str(project), env=env),
        "validate": cli("validate", "--dir", str(project), env=env),
    }
    for where, done in outputs.items():
        assert_no_connection_secret(where, done.stdout + done.stderr)
    doc = {c["name"]: c for c in json.loads(outputs["info --json"].stdout)["connections"]}
    assert doc["remote"]["url"] == f"http://127.0.0.1:{port}/mcp/*?*"
    assert doc["listed"]["url"] == f"http://127.0.0.1:{port}/v1/*/mcp"
    assert doc["local"]["command"] == Path(sys.executable).name and "args" not in doc["local"]
    rows = {r["name"]: r for r in json.loads(outputs["mcp list --json"].stdout)}
    assert rows["local"]["target"] == Path(sys.executable).name
    assert rows["remote"]["target"] == f"http://127.0.0.1:{port}/mcp/*?*"
    assert f"cannot connect to http://127.0.0.1:{port}/mcp/*?*" in outputs["mcp tools remote"].stderr
    assert outputs["mcp tools local"].returncode == 1 and "Traceback" not in outputs["mcp tools local"].stderr
    # Asked for, the arguments are shown; a hub key among them is still masked.
    shown = cli("mcp", "list", "--dir", str(project), "--show-args")
    assert f"-c import sys; sys.exit(3) --token {ARG_SECRET}" in shown.stdout
    write(project, "mcp-connections", "keyed", "connection = define_connection(command='srv', "
          "args=['--key', 'ask_" + "k" * 43 + "'])")  # fmt: skip
    keyed = cli("info", "--dir", str(project), "--json", "--show-args")
    entry = next(c for c in json.loads(keyed.stdout)["connections"] if c["name"] == "keyed")
    assert entry["args"] == ["--key", "ask_***"] and "k" * 43 not in keyed.stdout


async def test_serve_shows_no_connection_secret_in_info_errors_or_session_replies(tmp_path: Path) -> None:
    port = free_port()
    project = secret_project(tmp_path / "p", port)
    served = serve(project, tmp_path / "state", env={"SECRET_VAR": VAR_SECRET})
    try:
        async with httpx2.AsyncClient(base_url=served.url, timeout=60) as http:
            with anyio.fail_after(60):
                info = await http.get("/v1/info")
                tools = await http.get("/v1/tools")
        turn = await run_turn(served.url, 'call mcp_call_tool {"connection": "remote", "tool": "x", "arguments": {}}')
        async with httpx2.AsyncClient(base_url=served.url, timeout=60) as http:
            events = await http.get(f"/v1/session/{turn['sessionId']}/events", params={"format": "json"})
    finally:
        served.stop()
    by_name = {c["name"]: c for c in info.json()["connections"]}
    assert by_name["remote"]["url"] == f"http://127.0.0.1:{port}/mcp/*?*"
    [problem] = tools.json()["connectionErrors"]
    assert f"http://127.0.0.1:{port}/v1/*/mcp" in problem["message"], problem
    # The session's reply: the advertised connection cannot list, so the turn fails closed, naming its URL's shape.
    assert turn["type"] == "turn.failed" and f"http://127.0.0.1:{port}/v1/*/mcp" in json.dumps(turn), turn
    texts = {"info": info.text, "tools": tools.text, "turn": json.dumps(turn),
             "events": events.text, "log": served.log_text(),
             **{str(p): t for p, t in every_file(tmp_path / "state")}}  # fmt: skip
    for where, text in texts.items():
        assert_no_connection_secret(where, text)
