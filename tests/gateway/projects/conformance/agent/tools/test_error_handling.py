"""The conformance suite's `tools-call-error` fixture: a tool body that fails."""

from connections import ToolContext, define_tool


def execute(value: dict[str, object], ctx: ToolContext) -> None:
    raise RuntimeError("This tool intentionally returns an error for testing")


tool = define_tool(description="Always fails (conformance fixture).", execute=execute)
