"""An authored tool that answers who called it, from the session the gateway built its toolset for."""

from pydantic import BaseModel

from connections import ToolContext, define_tool


class Nothing(BaseModel):
    pass


async def execute(_value: Nothing, ctx: ToolContext) -> dict[str, object]:
    session = ctx.session
    principal = session.principal if session is not None else None
    oauth = getattr(principal, "oauth", None)
    return {
        "auth": session.auth if session is not None else None,
        "kind": getattr(principal, "kind", None),
        "subject": oauth.subject if oauth is not None else None,
        "issuer": oauth.issuer if oauth is not None else None,
        "scopes": sorted(oauth.scopes) if oauth is not None else None,
        "clientId": oauth.client_id if oauth is not None else None,
    }


tool = define_tool(description="Who is calling.", input=Nothing, effect="read", execute=execute)
