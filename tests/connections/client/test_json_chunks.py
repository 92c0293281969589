"""`JsonChunks` parses what `pydantic_core.from_json` parses, however the text is cut, and fails where it fails."""

from __future__ import annotations

import json
import random
from typing import Any

import pydantic_core
import pytest

import connections.client._transports._json_chunks as json_chunks
from connections.client._transports._json_chunks import JsonChunks

_ALPHABET = ["a", '"', "\\", "é", "😀", "\n", "x", " ", "\u2028", "\x00", ":", "/"]


def parsed(data: bytes, size: int, **options: Any) -> Any:
    parts = JsonChunks(**options)
    for start in range(0, len(data), size):
        parts.feed(data[start : start + size])
    assert parts.size == len(data)
    return parts.finish()


@pytest.fixture
def small_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Split from the 10th byte, strings of 8 bytes and more cut out: every path on small texts."""
    monkeypatch.setattr(json_chunks, "STREAM_FROM", 10)
    monkeypatch.setattr(json_chunks, "LONG_LITERAL", 8)


def random_value(rnd: random.Random, depth: int = 0) -> Any:
    def text() -> str:
        return "".join(rnd.choice(_ALPHABET) for _ in range(rnd.randint(0, 30)))

    roll = rnd.random()
    if depth > 3 or roll < 0.3:
        return rnd.choice([text(), 1, 2.5, None, True, -3, 10**30, text()])
    if roll < 0.6:
        return [random_value(rnd, depth + 1) for _ in range(rnd.randint(0, 4))]
    return {text(): random_value(rnd, depth + 1) for _ in range(rnd.randint(0, 4))}


@pytest.mark.usefixtures("small_limits")
def test_any_text_cut_anywhere_parses_as_whole() -> None:
    rnd = random.Random(23)
    for _ in range(1500):
        data = json.dumps(random_value(rnd), ensure_ascii=rnd.random() < 0.5).encode()
        whole = pydantic_core.from_json(data)
        for size in (1, 2, 3, 7, 64):
            assert parsed(data, size) == whole, (data, size)


@pytest.mark.usefixtures("small_limits")
@pytest.mark.parametrize(
    "data",
    [
        b'{"a":"x\\q", "b": "long enough to cut"}',  # a bad escape
        b'["abc',  # a string left open
        b'["' + b"x" * 40 + b'\\"]',  # the closing quote escaped
        b'{"a":1} x',  # trailing text
        b'["\xff' + b"x" * 30 + b'"]',  # not UTF-8, in a long literal
        b'["' + b"x" * 30 + b'"] ["x"]',  # two values
        b"",
    ],
)
def test_what_from_json_refuses_is_refused(data: bytes) -> None:
    with pytest.raises(ValueError):
        pydantic_core.from_json(data)
    for size in (1, 3, 64):
        with pytest.raises(ValueError):
            parsed(data, size)


def test_a_placeholder_of_another_text_is_a_plain_string(monkeypatch: pytest.MonkeyPatch) -> None:
    # Placeholders carry a random mark per text: an upstream cannot write one that is replaced.
    monkeypatch.setattr(json_chunks, "STREAM_FROM", 10)
    monkeypatch.setattr(json_chunks, "LONG_LITERAL", 40)
    first = JsonChunks()
    first.feed(b'["' + b"y" * 50 + b'"]')
    mark = first._mark  # pyright: ignore[reportPrivateUsage]
    assert first.finish() == ["y" * 50]
    spoof = mark.replace(b"\\u0000", b"\x00").decode() + "0"
    second = JsonChunks()
    second.feed(b'["' + b"z" * 50 + b'", "' + mark + b'0"]')
    assert second._mark != mark  # pyright: ignore[reportPrivateUsage]
    assert second.finish() == ["z" * 50, spoof]


@pytest.mark.usefixtures("small_limits")
def test_bytes_that_are_not_utf8_become_replacement_characters_when_asked() -> None:
    data = b'{"text":"ok \xff' + b"z" * 30 + b'","k\xfe":"v"}'
    assert parsed(data, 4, replace_invalid_utf8=True) == {"text": "ok \ufffd" + "z" * 30, "k\ufffd": "v"}
    with pytest.raises(ValueError):
        parsed(data, 4)


def test_a_large_answer_at_the_real_limits() -> None:
    text = 'ab\\"é😀\n\t' * 200_000
    answer = {"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": text}], "key": [text, 1.5]}}
    for ensure_ascii in (True, False):
        data = json.dumps(answer, ensure_ascii=ensure_ascii).encode()
        assert len(data) > json_chunks.STREAM_FROM
        assert parsed(data, 65536) == answer
    assert parsed(b'{"small": true}', 65536) == {"small": True}  # under STREAM_FROM: joined and parsed whole
