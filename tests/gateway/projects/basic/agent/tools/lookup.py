"""A read-effect tool: runs alongside a busy session's turn."""

from pydantic import BaseModel, Field

from connections import ToolContext, define_tool


class LookupInput(BaseModel):
    key: str = Field(min_length=1, description="What to look up")


async def execute(value: LookupInput, ctx: ToolContext) -> dict[str, object]:
    session = ctx.session.id if ctx.session is not None else None
    return {"key": value.key, "value": value.key.upper(), "session": session}


tool = define_tool(description="Look a key up (read-only).", input=LookupInput, effect="read", execute=execute)
