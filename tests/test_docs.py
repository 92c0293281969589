"""Every code block in `docs/` and the README is run, so a doc cannot drift from the code.

How each fenced block is treated:

- a Python block with a `define_connection(...)` / `define_tool(...)`: written into a fresh project at
  the path its first-line comment names (`# agent/mcp-connections/x.py`; default
  `agent/mcp-connections/doc_example.py`) and loaded: no error diagnostic. A block that names its
  file is that whole file, as a reader copies it: it must import what it uses. Into a block without
  a file name that imports nothing from `connections`,
  `from connections import OAuthConfig, define_connection, define_tool` is put in front (the docs
  leave it out of one-line examples). A connection's `auth` callback is
  called as a turn calls it and must return `{"headers": {str: str}}`;
- any other Python block: compiled (top-level `await` allowed);
- a JSON block that holds `"mcpServers"` or `"servers"`: loaded as a project's `mcp.json`, no error;
- every command line (a line of a `sh` or unlabelled block starting with `agent-sdk`, `$ agent-sdk`,
  `.venv/bin/agent-sdk` or `python -m gateway`, after any `VAR=value`s, split at `&&`): parsed by the
  real `agent-sdk` parser, and the ones that need no server (`init`, `validate`, `info`, `mcp list`,
  `tools`, `--version`) run for real in a folder where `my-agent` is an `agent-sdk init` project.

A block that is none of these (a tree, an output transcript, a `curl` to a running server, a
benchmark) is marked on the line above its fence with `<!-- doc-run: skip: why -->`; an unmarked
block that this test does not understand fails it. `<!-- doc-run: principal=P; env=K=V -->` sets the
principal and environment an `auth` callback is called with.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from connections import SessionInfo, load_project
from gateway.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
_FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
_MARKER = re.compile(r"<!--\s*doc-run:\s*(.*?)\s*-->")
_PRELUDE = "from connections import OAuthConfig, define_connection, define_tool\n\n"
_RUN_FOR_REAL = (("init",), ("validate",), ("info",), ("mcp", "list"), ("tools",), ("--version",))


@dataclass
class Block:
    doc: Path
    line: int
    lang: str
    text: str
    marker: str | None

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def blocks() -> list[Block]:
    found: list[Block] = []
    for doc in DOCS:
        lines = doc.read_text().splitlines()
        i = 0
        while i < len(lines):
            fence = _FENCE.match(lines[i])
            if fence is None:
                i += 1
                continue
            indent, lang = fence.groups()
            end = i + 1
            while end < len(lines) and not _FENCE.match(lines[end]):
                end += 1
            body = "\n".join(line[len(indent) :] if line.startswith(indent) else line for line in lines[i + 1 : end])
            above = _MARKER.search(lines[i - 1]) if i > 0 else None
            found.append(Block(doc, i + 1, lang, body + "\n", above.group(1) if above else None))
            i = end + 1
    return found


ALL = blocks()


def kind(block: Block) -> str:
    if block.marker is not None and block.marker.startswith("skip"):
        return "skip"
    if block.lang == "python":
        return (
            "definition"
            if re.search(r"^(connection|tool|server) = define_(connection|tool|server)\(", block.text, re.M)
            else "python"
        )
    if block.lang == "json":
        return "mcp.json" if re.search(r'"(mcpServers|servers)"', block.text) else "unknown"
    if block.lang in ("", "sh") and commands(block):
        return "commands"
    return "unknown"


def commands(block: Block) -> list[list[str]]:
    """Every agent-sdk invocation in a shell block, as argv after `agent-sdk`."""
    out: list[list[str]] = []
    text = block.text.replace("\\\n", " ")
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("$ "):
            line = line[2:]
        for part in line.split("&&"):
            # `VAR=$(command) agent-sdk ...`: the assignment is the shell's, the command is ours.
            part = re.sub(r"^\s*(?:[A-Z_][A-Z0-9_]*=\$\([^)]*\)\s+)+", "", part)
            try:
                words = shlex.split(part, comments=True)
            except ValueError:
                continue
            while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
                words = words[1:]
            if words[:3] == ["python", "-m", "gateway"]:
                words = ["agent-sdk", *words[3:]]
            if not words or Path(words[0]).name != "agent-sdk":
                continue
            out.append([w[1:-1] if w.startswith("[") and w.endswith("]") else w for w in words[1:]])
    return out


def test_every_block_is_understood_or_marked() -> None:
    unknown = [f"{b.where} ```{b.lang}" for b in ALL if kind(b) == "unknown"]
    assert unknown == [], "mark these with <!-- doc-run: skip: why --> or make them runnable"
    skipped_without_reason = [b.where for b in ALL if kind(b) == "skip" and not re.match(r"skip:\s*\S", b.marker or "")]
    assert skipped_without_reason == []


def _options(block: Block) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in (block.marker or "").split(";"):
        if "=" in item:
            key, value = item.strip().split("=", 1)
            out[key.strip()] = value.strip()
    return out


@pytest.mark.parametrize("block", [b for b in ALL if kind(b) == "definition"], ids=lambda b: b.where)
def test_a_definition_in_the_docs_loads_and_its_auth_callback_works(block: Block, tmp_path: Path) -> None:
    first = block.text.splitlines()[0]
    named = re.match(r"#\s*(agent/[\w/-]+\.py)", first)
    relative = named.group(1) if named else "agent/mcp-connections/doc_example.py"
    whole_file = named is not None or "from connections import" in block.text
    source = block.text if whole_file else _PRELUDE + block.text
    path = tmp_path / relative
    path.parent.mkdir(parents=True)
    path.write_text(source)
    if relative.startswith("agent/servers/"):  # a curated server picks from the connections its page defines
        for other in ALL:
            named_other = re.match(r"#\s*(agent/mcp-connections/[\w-]+\.py)", other.text)
            if other.doc == block.doc and named_other:
                (tmp_path / named_other.group(1)).parent.mkdir(parents=True, exist_ok=True)
                (tmp_path / named_other.group(1)).write_text(other.text)
    project = load_project(tmp_path)
    assert [d.format(tmp_path) for d in project.errors] == [], block.where
    options = _options(block)
    for defn in project.connections.values():
        if defn.auth is None:
            continue
        env = dict(item.split("=", 1) for item in options.get("env", "").split(",") if item)
        session = SessionInfo(id="ses_doc", auth=options.get("principal", "loopback"))
        with pytest.MonkeyPatch.context() as patch:
            for key, value in env.items():
                patch.setenv(key, value)
            value = defn.auth(session)
            if inspect.isawaitable(value):
                value = anyio.run(lambda v=value: v)  # type: ignore[misc]
        assert isinstance(value, dict) and isinstance(value.get("headers"), dict), block.where
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in value["headers"].items()), block.where


@pytest.mark.parametrize("block", [b for b in ALL if kind(b) == "python"], ids=lambda b: b.where)
def test_a_python_snippet_in_the_docs_compiles(block: Block) -> None:
    compile(block.text, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


@pytest.mark.parametrize("block", [b for b in ALL if kind(b) == "mcp.json"], ids=lambda b: b.where)
def test_an_mcp_json_in_the_docs_imports_without_errors(block: Block, tmp_path: Path) -> None:
    json.loads(block.text)
    (tmp_path / "mcp.json").write_text(block.text)
    project = load_project(tmp_path)
    assert [d.format(tmp_path) for d in project.errors] == [], block.where
    assert project.connections, block.where


@pytest.mark.parametrize("block", [b for b in ALL if kind(b) == "commands"], ids=lambda b: b.where)
def test_every_command_in_the_docs_parses(block: Block) -> None:
    parser = build_parser()
    for argv in commands(block):
        if argv == ["--version"]:
            continue
        try:
            parser.parse_args(argv)
        except SystemExit as exc:
            pytest.fail(f"{block.where}: agent-sdk {shlex.join(argv)} does not parse (exit {exc.code})")


def test_the_commands_that_need_no_server_run(tmp_path: Path) -> None:
    runnable = [
        (b, argv)
        for b in ALL
        if kind(b) == "commands"
        for argv in commands(b)
        if tuple(argv[: 2 if argv[:1] == ["mcp"] else 1]) in _RUN_FOR_REAL
    ]
    assert runnable, "the docs show no init/validate/info command any more?"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SDK_")} | {"PYTHONPATH": str(ROOT)}
    cli = [sys.executable, "-m", "gateway"]
    subprocess.run([*cli, "init", "my-agent"], cwd=tmp_path, env=env, check=True, capture_output=True)
    for block, argv in runnable:
        if argv[:1] == ["init"]:
            argv = ["init", "fresh-" + str(abs(hash(block.where)))]
        done = subprocess.run([*cli, *argv], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{block.where}: agent-sdk {shlex.join(argv)}\n{done.stdout}{done.stderr}"


# Flags of other programs the docs show in prose (the bench scripts, the conformance suite and its
# runner, the Inspector, Chromium, systemctl): not agent-sdk's.
_OTHER_PROGRAMS_FLAGS = {
    "--async-auth", "--calls", "--config", "--era", "--fastmcp", "--header", "--headless", "--mb", "--now",
    "--only", "--suite", "--transport", "--upstream",
    "--die-with-parent", "--runs",  # bubblewrap's (docs/connections.md), bench_sandbox_start's
    "--granian",  # bench_floor's (docs/performance.md)
}  # fmt: skip


def _agent_sdk_flags(parser: argparse.ArgumentParser) -> set[str]:
    found: set[str] = set()
    for action in parser._actions:  # pyright: ignore[reportPrivateUsage]
        found.update(s for s in action.option_strings if s.startswith("--"))
        if isinstance(action, argparse._SubParsersAction):  # pyright: ignore[reportPrivateUsage]
            for sub in action.choices.values():  # pyright: ignore[reportUnknownVariableType]
                found |= _agent_sdk_flags(sub)  # pyright: ignore[reportUnknownArgumentType]
    return found


def test_every_flag_the_docs_and_the_shipped_config_name_exists() -> None:
    known = _agent_sdk_flags(build_parser())
    named: list[str] = []
    for path in DOCS:
        named += [f"{path.name}: {m[1]}" for m in re.finditer(r"`(--[a-z][a-z0-9-]*)[ =`]", path.read_text())]
    for path in sorted((ROOT / "deploy").iterdir()):
        named += [f"{path.name}: {m[1]}" for m in re.finditer(r"(?<![\w-])(--[a-z][a-z0-9-]*)", path.read_text())]
    unknown = [n for n in named if n.split(": ")[1] not in known | _OTHER_PROGRAMS_FLAGS]
    assert unknown == [], "flags no agent-sdk command has"


_OUTSIDE = re.compile(r"\bDESIGN\.md\b|(?<![\w/])reference/\w+\.md")  # the product's design card, the TS SDK's docs
_REPO_PATH = re.compile(
    r"(?<![\w/.-])((?:gateway|connections|oauth|tests|docs|bench|deploy|examples|scripts)/[\w./-]*\w)"
)


def test_every_path_the_code_and_docs_name_exists() -> None:
    # A comment, docstring or doc that points at `gateway/mcp/lane.py` or `docs/oauth.md` sends a
    # reader there: after a file moves, every such pointer must move with it. Files outside this
    # repository (a design card, another project's reference) are not named at all.
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    missing: list[str] = []
    for name in tracked.split():
        if not name.endswith((".py", ".md", ".conf", ".service", ".toml", ".sh")) and not name.startswith("scripts/"):
            continue
        for number, line in enumerate((ROOT / name).read_text(errors="replace").splitlines(), 1):
            if _OUTSIDE.search(line):
                missing.append(f"{name}:{number}: names a file outside this repository")
            for match in _REPO_PATH.finditer(line):
                path = match.group(1).rstrip(".")
                if "*" not in path and "<" not in line[match.start() : match.end() + 1] and not (ROOT / path).exists():
                    missing.append(f"{name}:{number}: {path}")
    assert missing == []
