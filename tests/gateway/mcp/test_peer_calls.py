"""`PeerCalls`: a peer's `notifications/cancelled` finds only its own call; `logging/setLevel` levels are bounded."""

from __future__ import annotations

import pytest

from gateway.mcp.peers import calls as peer_calls
from gateway.mcp.peers.calls import PeerCalls


def test_a_cancel_finds_the_peers_own_call_and_no_other() -> None:
    calls = PeerCalls()
    cancelled: list[tuple[str, str]] = []

    def mine(why: str) -> None:
        cancelled.append(("aaa", why))

    def theirs(why: str) -> None:
        cancelled.append(("bbb", why))

    key = calls.started(("bearer:aaa", None), 7, mine)
    calls.started(("bearer:bbb", None), 7, theirs)
    assert calls.cancel(("bearer:ccc", None), 7, "x") is False  # no such call for that principal
    assert calls.cancel(("bearer:bbb", "session-2"), 7, "x") is False  # nor for another session of bbb's
    assert calls.cancel(("bearer:aaa", None), "7", "the peer cancelled") is True  # "7" and 7 are one id, as in the SDK
    assert cancelled == [("aaa", "the peer cancelled")]
    calls.finished(key, theirs)  # not the hook registered under that key: kept
    assert calls.in_flight() == 2
    calls.finished(key, mine)
    assert calls.in_flight() == 1 and calls.cancel(("bearer:aaa", None), 7, "late") is False


def test_the_levels_of_the_least_recent_principals_are_forgotten_past_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(peer_calls, "MAX_LEVELS", 2)
    calls = PeerCalls()
    a, b, c = ("p", "session-a"), ("p", "session-b"), ("q", None)
    calls.set_level(a, "debug")
    calls.set_level(b, "info")
    calls.set_level(a, "warning")  # a is now the most recent
    calls.set_level(c, "error")
    assert (calls.level(a), calls.level(b), calls.level(c)) == ("warning", None, "error")
