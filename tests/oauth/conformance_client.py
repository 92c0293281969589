"""The MCP conformance suite's client under test (`conformance client --command ... --suite auth`).

    python tests/oauth/conformance_client.py SERVER_URL

A plain MCP client (`mcp.Client` over Streamable HTTP) whose `httpx2` client carries our
`oauth.connection_auth(...)` in non-interactive mode: list the tools, call one. The scenario's
context (`MCP_CONFORMANCE_CONTEXT`: a pre-registered `client_id` / `client_secret`) becomes an
`OAuthConfig`, exactly as a connection definition would give it. Exit 0 on success; on failure one
sentence on stderr and exit 1.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from oauth import FileTokenStore, OAuthConfig, OAuthError, connection_auth, follow_redirects

CIMD_URL = "https://conformance-test.local/client-metadata.json"


def config_from_context() -> OAuthConfig:
    """The scenario's context as a definition would give it: secrets in environment variables."""
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    secret_env = key_env = None
    if context.get("client_secret"):
        os.environ["CONFORMANCE_CLIENT_SECRET"] = context["client_secret"]
        secret_env = "CONFORMANCE_CLIENT_SECRET"
    if context.get("private_key_pem"):
        os.environ["CONFORMANCE_PRIVATE_KEY"] = context["private_key_pem"]
        key_env = "CONFORMANCE_PRIVATE_KEY"
    machine = str(context.get("name", "")).startswith("auth/client-credentials")
    return OAuthConfig(
        client_id=context.get("client_id"),
        client_secret_env=secret_env,
        client_metadata_url=CIMD_URL,
        client_name="agent-sdk conformance client",
        grant="client_credentials" if machine else "authorization_code",
        private_key_env=key_env,
        assertion_alg=context.get("signing_algorithm"),
    )


async def main(url: str) -> int:
    with tempfile.TemporaryDirectory() as state_root:
        store = FileTokenStore(state_root)
        auth = connection_auth("conformance", url, config_from_context(), store, interaction=follow_redirects())
        async with auth, httpx2.AsyncClient(auth=auth, timeout=20.0) as http:
            with anyio.fail_after(25):
                async with Client(streamable_http_client(url, http_client=http)) as client:
                    tools = await client.list_tools()
                    for tool in tools.tools[:1]:
                        await client.call_tool(tool.name, {})
        print(f"ok: {auth.stats}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(anyio.run(main, sys.argv[-1]))
    except* OAuthError as group:
        print(f"conformance client: {group.exceptions[0]}", file=sys.stderr)
        sys.exit(1)
