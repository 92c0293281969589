"""`oauth._shared.printable`: text from a server, hub or request reaches a terminal or log as one safe line."""

from oauth._shared import printable


def test_controls_bidi_and_surrogates_are_replaced() -> None:
    hostile = "ok\x1b[2J\x1b]0;title\x07\u202eevil\u2066x\u2069\ud800\r\nforged: line\x00"
    out = printable(hostile)
    assert "\x1b" not in out and "\x07" not in out and "\x00" not in out
    assert "\n" not in out and "\r" not in out
    assert not any(ch in out for ch in "\u202e\u2066\u2069")
    out.encode("utf-8")  # a lone surrogate would raise here
    assert out.startswith("ok\ufffd[2J") and "forged: line" in out


def test_length_is_capped_and_marked() -> None:
    assert printable("a" * 500, limit=40) == "a" * 39 + "…"
    assert printable("short", limit=40) == "short"
    assert printable(404) == "404"
