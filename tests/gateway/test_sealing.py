"""Sealed task ids share the deployment key of `requestState`, and never open as one (nor it as a task id)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gateway.request_state import RequestStateRefused, RequestStates, SealedState, load_state_key
from gateway.sealing import Sealer, SealError

pytestmark = pytest.mark.anyio


async def test_replicas_on_one_state_root_open_each_others_task_ids(tmp_path: Path) -> None:
    one = RequestStates(await load_state_key(tmp_path)).sealer_for("task")
    two = RequestStates(await load_state_key(tmp_path)).sealer_for("task")  # another process, the same key
    token = one.seal({"c": "everything", "t": "abc", "p": "alice"})
    assert two.open(token) == {"c": "everything", "t": "abc", "p": "alice"}
    assert "alice" not in token and "abc" not in token  # sealed, not only signed
    with pytest.raises(SealError):
        RequestStates(os.urandom(32)).sealer_for("task").open(token)  # another deployment's key


async def test_a_task_id_is_no_request_state_and_a_request_state_no_task_id(tmp_path: Path) -> None:
    states = RequestStates(await load_state_key(tmp_path))
    task_id = states.sealer_for("task").seal({"p": "alice", "t": "x"})
    with pytest.raises(RequestStateRefused, match="not issued by this gateway"):
        await states.open(task_id, "alice", "x")
    request_state = states.seal(SealedState(principal="alice", tool="x", connection="c"))
    with pytest.raises(SealError):
        states.sealer_for("task").open(request_state)


@pytest.mark.parametrize("token", ["", "agent-sdk.task1.", "agent-sdk.task1.AAAA", None, 7, "x" * 70_000])
def test_what_is_not_a_sealed_token_is_refused(token: object) -> None:
    with pytest.raises(SealError):
        Sealer(os.urandom(32), aad=b"t", prefix="agent-sdk.task1.").open(token)


def test_an_altered_token_is_refused() -> None:
    sealer = Sealer(os.urandom(32), aad=b"t", prefix="p.")
    token = sealer.seal({"t": "1"})
    flipped = token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]
    with pytest.raises(SealError):
        sealer.open(flipped)
    assert "key" not in repr(sealer).replace("key=***", "")
