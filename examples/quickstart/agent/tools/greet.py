"""An authored server tool: greets someone, and counts the words with the notes server."""

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
