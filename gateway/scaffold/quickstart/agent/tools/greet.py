"""Authored server tool `greet`: code of your own, served beside the connections' tools.

`input` is a pydantic model (validated before `execute` runs) or a JSON Schema dict; `ctx.host.mcp`
reaches every connection, and `ctx.session` is the calling session (or None). docs/connections.md,
"Fields of define_tool". Try it: agent-sdk tools call greet --input '{"name": "Ada"}'
"""

from pydantic import BaseModel, Field

from connections import ToolContext, define_tool


class GreetInput(BaseModel):
    name: str = Field(description="Who to greet", min_length=1)


async def execute(value: GreetInput, ctx: ToolContext) -> dict[str, object]:
    greeting = f"Hello, {value.name}!"
    return {"greeting": greeting}


tool = define_tool(
    description="Greet someone by name.",
    input=GreetInput,
    effect="read",
    execute=execute,
)
