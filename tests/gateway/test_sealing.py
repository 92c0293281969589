"""Sealed task ids share the deployment key of `requestState`, and never open as one (nor it as a task id)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gateway.request_state import RequestStateRefused, RequestStates, SealedState
from gateway.settings import ServeSettings
from gateway.state_key import load_state_key

pytestmark = pytest.mark.anyio


async def test_replicas_on_one_state_root_open_each_others_task_ids(tmp_path: Path) -> None:
    one = RequestStates(await load_state_key(ServeSettings(state_root=tmp_path)))
    two = RequestStates(await load_state_key(ServeSettings(state_root=tmp_path)))  # another process, the same key
    token = one.seal_task("everything", "abc", "alice")
    assert two.open_task(token, "alice") == ("everything", "abc")
    assert "alice" not in token and "abc" not in token  # sealed, not only signed
    assert two.open_task(token, "bob") is None  # another principal's
    assert RequestStates(os.urandom(32)).open_task(token, "alice") is None  # another deployment's key


async def test_a_task_id_is_no_request_state_and_a_request_state_no_task_id(tmp_path: Path) -> None:
    states = RequestStates(await load_state_key(ServeSettings(state_root=tmp_path)))
    task_id = states.seal_task("c", "x", "alice")
    with pytest.raises(RequestStateRefused, match="not issued by this gateway"):
        await states.open(task_id, "alice", "x")
    request_state = states.seal(SealedState(principal="alice", tool="x", connection="c"))
    assert states.open_task(request_state, "alice") is None


@pytest.mark.parametrize("token", ["", "agent-sdk.task1.", "agent-sdk.task1.AAAA", None, 7, "x" * 70_000])
def test_what_is_not_a_sealed_task_id_is_refused(token: object) -> None:
    assert RequestStates(os.urandom(32)).open_task(token, "alice") is None


def test_an_altered_task_id_is_refused() -> None:
    states = RequestStates(os.urandom(32))
    token = states.seal_task("c", "1", "alice")
    flipped = token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]
    assert states.open_task(flipped, "alice") is None
