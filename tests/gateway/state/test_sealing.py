"""Sealed task ids share the deployment key of `requestState`, and never open as one (nor it as a task id)."""

from __future__ import annotations

import os
import string
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from gateway.settings import ServeSettings
from gateway.state.request_state import MemoryUsedStates, RequestStateRefused, RequestStates, SealedState
from gateway.state.state_key import load_state_key

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


_ALPHABET = string.ascii_uppercase + string.ascii_lowercase + string.digits + "-_"


def _other_spellings(token: str) -> list[str]:
    """Texts a lenient base64 decoder reads as the same bytes as `token`'s body: padding, the spare bits of the
    last character set, the standard alphabet's `+` and `/`, characters it skips."""
    prefix, body = token[: token.rindex(".") + 1], token[token.rindex(".") + 1 :]
    spare = {0: 0, 2: 4, 3: 2}[len(body) % 4]  # a body of 4k characters has no spare bits
    last = _ALPHABET.index(body[-1])
    bodies = {body + "=", body + "==", body + "=" * (-len(body) % 4), body.replace("-", "+").replace("_", "/")}
    bodies |= {body[:-1] + _ALPHABET[last ^ bits] for bits in range(1, 2**spare)}
    bodies |= {body[:7] + c + body[7:] for c in ("\n", " ", "!", ".", "=")}
    bodies.discard(body)
    return [prefix + b for b in sorted(bodies)]


def _with_spare_bits(seal: Callable[[str], str]) -> tuple[str, str]:
    """A token from `seal(principal)` whose body's last character carries spare bits (its length is not a
    multiple of 4), and that principal."""
    for size in range(1, 8):
        token = seal("p" * size)
        if len(token.rpartition(".")[2]) % 4 in (2, 3):
            return token, "p" * size
    raise AssertionError("no principal length gave a body with spare bits")


def test_a_sealed_value_opens_only_in_its_one_canonical_spelling_wherever_it_is_read() -> None:
    key = os.urandom(32)
    states = RequestStates(key)

    def opens_state(token: str, principal: str) -> bool:
        try:  # a fresh replay guard each time: only the spelling is on trial
            anyio.run(RequestStates(key, MemoryUsedStates()).open, token, principal, "x")
        except RequestStateRefused:
            return False
        return True

    cases: dict[str, tuple[Callable[[str], str], Callable[[str, str], bool]]] = {
        "requestState": (lambda p: states.seal(SealedState(principal=p, tool="x", connection="c")), opens_state),
        "Mcp-Session-Id": (
            lambda p: states.seal_session(p, {"elicitation": {}}),
            lambda t, p: bool(states.open_session(t, p)),
        ),
        "bare Mcp-Session-Id": (lambda p: states.seal_session(p, {}), states.holds_session),
        "task id": (lambda p: states.seal_task("c", "t", p), lambda t, p: states.open_task(t, p) is not None),
        "pending login": (
            lambda p: states.seal_login({"state": "s", "p": p}),
            lambda t, _: states.open_login(t) is not None,
        ),
    }
    accepted: dict[str, list[str]] = {}
    for name, (seal, opens) in cases.items():
        token, principal = _with_spare_bits(seal)
        assert opens(token, principal), name  # the canonical spelling opens
        spellings = _other_spellings(token)
        assert len(spellings) >= 10
        accepted[name] = [s for s in spellings if opens(s, principal)]
    assert accepted == {name: [] for name in cases}
