// A peer signing in with the TypeScript MCP SDK's OAuth support:
//   node ts_oauth_client.mjs URL SDK_DIR REDIRECT_URI
// The SDK's `auth()` runs on the server's 401: RFC 9728 discovery from the challenge, RFC 8414 metadata,
// RFC 7591 registration, PKCE with `resource`. Its provider's redirectToAuthorization prints
// "authorize URL" on stdout (where a browser would be opened); the test posts the login and consent
// pages and writes back the URL the browser was redirected to. Then finishAuth, reconnect, list the
// tools and call echo; prints {"tools": [...], "text": "..."}. Exits 1 on any failure.
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const [url, sdk, redirectUrl] = process.argv.slice(2);
const { Client } = await import(pathToFileURL(`${sdk}/dist/esm/client/index.js`).href);
const { StreamableHTTPClientTransport } = await import(pathToFileURL(`${sdk}/dist/esm/client/streamableHttp.js`).href);
const { UnauthorizedError } = await import(pathToFileURL(`${sdk}/dist/esm/client/auth.js`).href);

const lines = createInterface({ input: process.stdin });
const nextLine = () => new Promise((resolve) => lines.once("line", resolve));

let saved = { client: undefined, tokens: undefined, verifier: undefined };
let redirected;
const provider = {
  get redirectUrl() { return redirectUrl; },
  get clientMetadata() {
    return {
      client_name: "agent-sdk ts oauth peer",
      redirect_uris: [redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  },
  clientInformation: () => saved.client,
  saveClientInformation: (info) => { saved.client = info; },
  tokens: () => saved.tokens,
  saveTokens: (tokens) => { saved.tokens = tokens; },
  saveCodeVerifier: (verifier) => { saved.verifier = verifier; },
  codeVerifier: () => saved.verifier,
  redirectToAuthorization: async (authorizationUrl) => {
    console.log(`authorize ${authorizationUrl.href}`);
    redirected = await nextLine();
  },
};

async function connect() {
  const client = new Client({ name: "agent-sdk-ts-oauth-peer", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  await client.connect(transport);
  return { client, transport };
}

try {
  let connected;
  try {
    connected = await connect();
  } catch (error) {
    if (!(error instanceof UnauthorizedError)) throw error;
    const code = new URL(redirected).searchParams.get("code");
    const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
    await transport.finishAuth(code);
    connected = await connect();
  }
  const { client } = connected;
  const listed = await client.listTools();
  const called = await client.callTool({ name: "echo", arguments: { text: "hello from ts" } });
  console.log(JSON.stringify({ tools: listed.tools.map((t) => t.name), text: called.content[0].text }));
  await client.close();
  process.exit(0);
} catch (error) {
  console.error(error?.stack || String(error));
  process.exit(1);
}
