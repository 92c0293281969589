"""A large answer is serialized in pieces: the bytes of one `to_json`, the result it carries untouched."""

from __future__ import annotations

import copy
import json

import pydantic_core

from connections.client._tool_results import LONG_TEXT
from gateway.http.json_pieces import SLICE, answer_pieces


def test_a_large_answer_in_pieces_has_the_bytes_of_one_to_json_and_its_result_is_untouched() -> None:
    text = 'x\u00e9"\n' * LONG_TEXT
    result = {
        "content": [{"type": "text", "text": text}, {"type": "text", "text": "small"}],
        "structuredContent": {"result": text, "nested": [1, None, True]},
        "isError": False,
    }
    kept = copy.deepcopy(result)
    answer = {"jsonrpc": "2.0", "id": "call-7", "result": result}
    whole = pydantic_core.to_json(answer)
    pieces = answer_pieces(answer)
    assert len(pieces) > 1
    assert b"".join(pieces) == whole
    assert answer == {}  # the answer we built is emptied
    assert result == kept  # what its maker may still hold is not


def test_a_small_answer_is_one_piece() -> None:
    answer = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "hi"}], "isError": False}}
    whole = pydantic_core.to_json(answer)
    assert answer_pieces(answer) == [whole]


def test_at_2026_07_28_the_pieces_are_the_sdks_bytes_ascii_or_not() -> None:
    for text in ("x\n" * LONG_TEXT, "xé😀\n" * LONG_TEXT):
        result = {
            "content": [{"type": "text", "text": text}],
            "structuredContent": {"result": text, "score": 1e16},
            "resultType": "complete",
        }
        answer = {"jsonrpc": "2.0", "id": 3, "result": result}
        whole = pydantic_core.to_json(answer)
        if not whole.isascii():  # the SDK's 2026-07-28 entry: `json.dumps`, compact
            whole = json.dumps(answer, separators=(",", ":")).encode()
        pieces = answer_pieces(dict(answer), modern=True)
        assert len(pieces) > 3
        assert b"".join(pieces) == whole


def test_a_long_string_is_written_in_slices() -> None:
    text = 'ab"\\\u2028\x01' * (SLICE // 2)  # three slices' worth, every escape
    answer = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": text}]}}
    whole = pydantic_core.to_json(answer)
    pieces = answer_pieces(answer)
    assert max(len(piece) for piece in pieces) < len(whole) // 2
    assert b"".join(pieces) == whole
