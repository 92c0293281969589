"""`--audit-argument-digest` on a real `agent-sdk serve` (docs/audit.md): each record's `argumentsDigest` is an
HMAC-SHA256 under a key derived from the deployment's state key, so the same call compares equal within a
deployment, and a guessed argument cannot be confirmed from the record (its plain SHA-256 is not there, and
another deployment's key gives another digest)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx2

from gateway.state.state_key import new_state_key

from ..conftest import Served, make_project, serve
from .test_audit_trail import _file_records, _until  # pyright: ignore[reportPrivateUsage]


def _digests(served: Served, calls: list[dict[str, Any]]) -> list[str]:
    for arguments in calls:
        answer = httpx2.post(f"{served.url}/v1/tools/lookup", json={"input": arguments}, timeout=30)
        assert answer.status_code == 200, answer.text
    records = _until(len(calls), lambda: _file_records(served))
    assert len(records) == len(calls), records
    return [r["argumentsDigest"] for r in records]


def _deployments(root: Path, count: int) -> Iterator[list[Served]]:
    project = make_project(root / "project")
    with ExitStack() as stack:
        served = []
        for index in range(count):
            env = {"AGENT_SDK_STATE_KEY": new_state_key()}
            one = serve(project, root / f"state-{index}", "--audit-argument-digest", env=env)
            stack.callback(one.stop)
            served.append(one)
        yield served


def test_argument_digests_are_keyed_so_a_guess_cannot_be_confirmed_from_the_record(tmp_path: Path) -> None:
    guess = {"key": "yes"}
    for first, second in _deployments(tmp_path, 2):
        here = _digests(first, [guess, guess, {"key": "no"}])
        assert here[0] == here[1] != here[2]  # the same call compares equal within the deployment
        assert all(d.startswith("hmac-sha256:") and len(d) == len("hmac-sha256:") + 64 for d in here)
        canonical = json.dumps(guess, sort_keys=True, separators=(",", ":")).encode()
        assert hashlib.sha256(canonical).hexdigest() not in here[0]  # the guess's plain hash confirms nothing
        there = _digests(second, [guess])
        assert there[0] != here[0]  # another deployment's key, another digest
        for served in (first, second):
            assert "yes" not in (served.state_root / "audit" / "audit.jsonl").read_text()
