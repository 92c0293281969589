"""The conformance suite's `json-schema-2020-12` fixture: the schema keywords must reach peers unchanged."""

from connections import ToolContext, define_tool

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}


def execute(value: dict[str, object], ctx: ToolContext) -> dict[str, object]:
    return {"received": value}


tool = define_tool(description="Tool with JSON Schema 2020-12 features", input=SCHEMA, effect="read", execute=execute)
