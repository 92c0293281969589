// A real OAuth 2.1 authorization server for the oauth tests: oidc-provider (npm) with PKCE required,
// RFC 7591 dynamic registration, RFC 8707 resource indicators issuing audience-bound JWT access tokens,
// refresh-token rotation (a reused refresh token is rejected and revokes the grant), RFC 7009 revocation
// and the development login/consent pages (devInteractions) that a headless client can post.
//
//   node oidc_provider.mjs PORT ACCESS_TOKEN_TTL_SECONDS PATH_TO_OIDC_PROVIDER_PACKAGE_DIR [KEY_FILE]
//
// Everything (clients, grants) lives in memory: a restart forgets every registration. KEY_FILE keeps
// the signing key across restarts (written on the first start), so a resource server that cached the
// JWKS still verifies tokens issued after a restart. OIDC_DPOP_BOUND_CLIENTS=1: every client it registers
// gets `dpop_bound_access_tokens: true` (RFC 9449 §5.2), so a token request without a DPoP proof is
// refused (`invalid_grant`, "DPoP proof JWT not provided").
//
// (ESM ignores NODE_PATH, so the test passes where .peers/ installed oidc-provider.)
//
// For the gateway's own protected-resource tests (tests/gateway/oauth_peers.py) it also has RFC 7662
// introspection, the client credentials grant, RFC 9449 DPoP (a client that sends a proof at the token
// endpoint gets a `cnf.jkt`-bound token) and two static confidential clients: `gateway-introspector` (the
// gateway's introspection credentials) and `opaque-service` (its tokens are opaque, not JWTs).
//
// GET /_stats answers counters the tests assert on (token grants by type, grant errors by code, codes issued,
// registrations, grants revoked, introspection requests).
import { generateKeyPairSync } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const { default: Provider } = await import(pathToFileURL(join(process.argv[4], 'lib', 'index.js')).href);

const port = Number(process.argv[2]);
const accessTtl = Number(process.argv[3] || '3600');
const issuer = `http://127.0.0.1:${port}`;

const keyFile = process.argv[5];
const dpopBoundClients = process.env.OIDC_DPOP_BOUND_CLIENTS === '1';
let jwk;
if (keyFile && existsSync(keyFile)) {
  jwk = JSON.parse(readFileSync(keyFile, 'utf8'));
} else {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  jwk = { ...privateKey.export({ format: 'jwk' }), use: 'sig', alg: 'RS256', kid: 'test-rs256' };
  if (keyFile) writeFileSync(keyFile, JSON.stringify(jwk), { mode: 0o600 });
}

const stats = { grants: {}, errors: {}, codes: 0, registrations: 0, revocations: 0 };
const bump = (table, key) => { table[key] = (table[key] || 0) + 1; };

const staticClients = [
  { client_id: 'gateway-introspector', client_secret: 'introspector-secret-0123456789', grant_types: ['client_credentials'], redirect_uris: [], response_types: [] },
  { client_id: 'opaque-service', client_secret: 'opaque-secret-0123456789', grant_types: ['client_credentials'], redirect_uris: [], response_types: [] },
  { client_id: 'jwt-service', client_secret: 'jwt-secret-0123456789', grant_types: ['client_credentials'], redirect_uris: [], response_types: [] },
];

// OIDC_GROUPS (JSON, e.g. {"carol": ["gateway-admins"]}): a `groups` claim in each listed account's access
// tokens, as a company IdP sends (the gateway's `--operator-claim groups=...`).
const groups = JSON.parse(process.env.OIDC_GROUPS || '{}');
// OIDC_CLIENTS (JSON list): more static clients, e.g. a gateway's pre-registered browser sign-in client.
staticClients.push(...JSON.parse(process.env.OIDC_CLIENTS || '[]'));

const provider = new Provider(issuer, {
  jwks: { keys: [jwk] },
  extraTokenClaims: (_ctx, token) => (token.accountId && groups[token.accountId] ? { groups: groups[token.accountId] } : undefined),
  clients: staticClients,
  ...(dpopBoundClients ? { clientDefaults: { grant_types: ['authorization_code'], id_token_signed_response_alg: 'RS256', response_types: ['code'], token_endpoint_auth_method: 'client_secret_basic', dpop_bound_access_tokens: true } } : {}),
  features: {
    devInteractions: { enabled: true },
    introspection: { enabled: true },
    clientCredentials: { enabled: true },
    dPoP: { enabled: true },
    registration: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: (_ctx, _client, oneOf) => (oneOf ? oneOf[0] : undefined),
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resourceIndicator) => ({
        scope: 'mcp:tools mcp:admin',
        audience: resourceIndicator,
        accessTokenTTL: accessTtl,
        accessTokenFormat: ctx.oidc.client?.clientId === 'opaque-service' ? 'opaque' : 'jwt',
        jwt: { sign: { alg: 'RS256' } },
      }),
    },
  },
  pkce: { required: () => true },
  // The resource's scopes too: a client registers (RFC 7591) with the scope the resource's challenge names.
  scopes: ['openid', 'offline_access', 'mcp:tools', 'mcp:admin'],
  issueRefreshToken: (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  rotateRefreshToken: () => true,
  ttl: { RefreshToken: 24 * 3600, Grant: 24 * 3600, Session: 3600, Interaction: 600, AuthorizationCode: 60 },
});

provider.on('grant.success', (ctx) => bump(stats.grants, ctx.oidc.params.grant_type));
provider.on('grant.error', (_ctx, err) => bump(stats.errors, err.error || 'unknown'));
provider.on('authorization_code.saved', () => { stats.codes += 1; });
provider.on('registration_create.success', () => { stats.registrations += 1; });
provider.on('grant.revoked', () => { stats.revocations += 1; });
provider.on('server_error', (_ctx, err) => console.error('server_error', err));

provider.use(async (ctx, next) => {
  if (ctx.path === '/_stats') {
    ctx.body = stats;
    return;
  }
  if (ctx.path === '/token/introspection') stats.introspections = (stats.introspections || 0) + 1;
  await next();
});

provider.listen(port, '127.0.0.1', () => {
  console.log(`oidc-provider listening on ${issuer}`);
});
