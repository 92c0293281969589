"""The hand check of plain output schemas agrees with jsonschema wherever it says "valid", and says nothing
(None) for any schema outside the plain shape."""

from __future__ import annotations

import itertools
from typing import Any

import jsonschema
import pytest

from connections.client._output_shapes import simple_check

PLAIN = {
    "type": "object",
    "title": "echoOutput",
    "properties": {
        "result": {"type": "string", "title": "Result"},
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "ok": {"type": "boolean"},
        "none": {"type": "null"},
    },
    "required": ["result"],
}
VALUES: list[Any] = ["a", "", 1, 0, -3, 1.5, 1.0, True, False, None, [], {}, [1], {"a": 1}]


def test_agrees_with_jsonschema_on_every_valid_verdict() -> None:
    check = simple_check(PLAIN)
    assert check is not None
    validator = jsonschema.Draft202012Validator(PLAIN)
    seen_valid = seen_invalid = 0
    for result, count, ratio in itertools.product(VALUES, repeat=3):
        for content in ({"result": result, "count": count, "ratio": ratio}, {"count": count}, {"ok": result}):
            general = validator.is_valid(content)
            if check(content):
                assert general, content  # never "valid" where jsonschema says not
                seen_valid += 1
            else:
                assert not general or isinstance(content.get("count"), float), content
                seen_invalid += 1
    assert seen_valid and seen_invalid
    assert not check(["not", "an", "object"]) and not check(None)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"x": {"type": ["string", "null"]}}},
        {"type": "object", "properties": {"x": {"type": "string", "minLength": 2}}},
        {"type": "object", "properties": {"x": {"type": "array"}}},
        {"type": "object", "properties": {"x": {"$ref": "#/$defs/x"}}, "$defs": {"x": {"type": "string"}}},
        {"type": "object", "additionalProperties": False, "properties": {}},
        {"type": "object", "required": ["a", "a"]},
        {"type": "array"},
        {"type": "object", "properties": {"x": {"type": "string", "title": 3}}},
        "not a schema",
    ],
)
def test_any_other_schema_keeps_the_general_validator(schema: object) -> None:
    assert simple_check(schema) is None
