"""The conformance suite's `tools-call-simple-text` fixture, as an authored tool."""

from connections import ToolContext, define_tool


def execute(value: dict[str, object], ctx: ToolContext) -> str:
    return "This is a simple text response for testing."


tool = define_tool(description="Returns simple text (conformance fixture).", effect="read", execute=execute)
