"""A write-effect tool: refused with 409 session_busy while the bound session runs a turn."""

from pydantic import BaseModel

from connections import ToolContext, define_tool

_count = {"n": 0}


class BumpInput(BaseModel):
    by: int = 1


def execute(value: BumpInput, ctx: ToolContext) -> dict[str, int]:
    _count["n"] += value.by
    return {"count": _count["n"]}


tool = define_tool(description="Add to a counter (a write).", input=BumpInput, effect="write", execute=execute)
