"""A tool whose body raises: the call's envelope has isError true, the server stays up."""

from connections import ToolContext, define_tool


def execute(value: dict[str, object], ctx: ToolContext) -> None:
    raise RuntimeError("kaboom")


tool = define_tool(description="Always fails.", input={"type": "object", "properties": {}}, execute=execute)
