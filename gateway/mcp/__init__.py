"""The MCP endpoints `/v1/mcp` and `/v1/mcp/tools`, and `serve --stdio`."""
