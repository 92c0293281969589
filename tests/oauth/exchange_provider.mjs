// oidc-provider (npm) configured for the caller-credential tests (docs/oauth.md "Token exchange", "ID-JAG", "DPoP"):
// the same script runs as the enterprise IdP (the gateway's --oauth-issuer) and as an upstream's authorization
// server. Nothing here is an authorization server of ours: the grants are oidc-provider's own extension API
// (`registerGrantType`), their tokens its own `AccessToken` model (JWT format, RFC 8707 audience), the DPoP
// binding its own helpers.
//
//   node exchange_provider.mjs PORT PATH_TO_OIDC_PROVIDER_PACKAGE_DIR CONFIG_JSON
//
// CONFIG_JSON: {
//   "clients": [...],                  static clients (confidential, client_secret_basic)
//   "resources": {"<url>": "<scope>"}, the resources it issues access tokens for (anything else: invalid_target)
//   "subjectAudiences": ["<url>"],     token exchange: a subject token must be one of ours, for one of these
//   "refuseSubjects": ["<sub>"],       token exchange: the IdP's policy refuses these subjects (invalid_grant)
//   "refuseClientNames": ["<name>"],   token exchange: it refuses tokens issued to a client of that client_name
//   "idJagAudiences": ["<issuer>"],    token exchange may issue ID-JAGs for these authorization servers
//   "idJagClients": {"<client>": "<id>"} the client id an ID-JAG names at the audience (default: the same)
//   "misdirect": {"<client>": "<aud>"} ID-JAGs asked for by that client are issued for that audience instead
//   "trustIdp": "<issuer>",            jwt-bearer: ID-JAGs signed by that issuer's JWKS are redeemed here
//   "dpopNonce": true                  every DPoP proof at the token endpoint needs a server nonce (RFC 9449 §8)
// }
//
// GET /_stats: grants by type, errors by code, ID-JAGs issued, DPoP-bound tokens issued.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const pkg = process.argv[3];
const load = (path) => import(pathToFileURL(join(pkg, path)).href);
const { default: Provider, errors } = await load('lib/index.js');
const { default: ResourceServer } = await load('lib/helpers/resource_server.js');
const grantHelpers = await load('lib/helpers/grants.js');
const { applyDpopBinding } = await load('lib/helpers/grant_common.js');
const jose = await import(pathToFileURL(join(pkg, '..', 'jose', 'dist', 'webapi', 'index.js')).href);

const port = Number(process.argv[2]);
const config = JSON.parse(process.argv[4]);
const issuer = `http://127.0.0.1:${port}`;

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const jwk = { ...privateKey.export({ format: 'jwk' }), use: 'sig', alg: 'RS256', kid: `k-${port}` };
const { d, p, q, dp, dq, qi, ...publicJwk } = jwk;
const ownKeys = jose.createLocalJWKSet({ keys: [publicJwk] });
const idpKeys = config.trustIdp ? jose.createRemoteJWKSet(new URL(`${config.trustIdp}/jwks`)) : null;

const stats = { grants: {}, errors: {}, idJags: 0, dpopBound: 0 };
const bump = (table, key) => { table[key] = (table[key] || 0) + 1; };

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const ID_JAG_TYPE = 'urn:ietf:params:oauth:token-type:id-jag';

const resourceServer = (url) => new ResourceServer(url, {
  audience: url, scope: config.resources[url], accessTokenTTL: 600, accessTokenFormat: 'jwt', jwt: { sign: { alg: 'RS256' } },
});

// One access token of the provider's own model for `resource`, DPoP-bound when the request carried a proof.
async function issueAccessToken(ctx, provider, { sub, resource, scope, gty, extra }) {
  if (!config.resources[resource]) throw new errors.InvalidTarget(`this server issues no tokens for ${resource}`);
  const dPoP = await grantHelpers.validateDpop(provider, ctx);
  const token = new provider.AccessToken({ accountId: sub, client: ctx.oidc.client, gty, scope, extra });
  token.resourceServer = resourceServer(resource);
  await applyDpopBinding(provider, ctx, dPoP, token);
  if (token.jkt) stats.dpopBound += 1;
  const value = await token.save();
  return grantHelpers.buildTokenResponse(provider, {
    accessToken: value, expiresIn: token.expiration, scope, tokenType: token.tokenType,
    issuedTokenType: gty === 'token_exchange' ? ACCESS_TOKEN_TYPE : undefined,
  });
}

// RFC 8693: the subject token must be an access token this server issued, for one of `subjectAudiences`.
async function tokenExchange(ctx) {
  const { params, client } = ctx.oidc;
  if (params.subject_token_type !== ACCESS_TOKEN_TYPE) {
    throw new errors.InvalidRequest('subject_token_type must be urn:ietf:params:oauth:token-type:access_token');
  }
  let subject;
  try {
    ({ payload: subject } = await jose.jwtVerify(params.subject_token, ownKeys, { issuer }));
  } catch (err) {
    throw new errors.InvalidGrant(`the subject token is not valid here (${err.code || err.message})`);
  }
  const audiences = [subject.aud].flat();
  if (!audiences.some((a) => (config.subjectAudiences || []).includes(a))) {
    throw new errors.InvalidGrant('the subject token was not issued to a party allowed to exchange it');
  }
  if ((config.refuseSubjects || []).includes(subject.sub)) {
    throw new errors.InvalidGrant('this subject may not act at other services');
  }
  if ((config.refuseClientNames || []).length) {
    const issuedTo = subject.client_id && await ctx.oidc.provider.Client.find(subject.client_id);
    if (issuedTo && config.refuseClientNames.includes(issuedTo.clientName)) {
      throw new errors.InvalidGrant('tokens issued to this client may not be exchanged');
    }
  }
  const act = params.actor_token ? { sub: client.clientId, actor_token: 'presented' } : undefined;
  if (params.requested_token_type === ID_JAG_TYPE) {
    const audience = params.audience;
    if (!(config.idJagAudiences || []).includes(audience)) {
      throw new errors.InvalidTarget(`no ID-JAG can be issued for the authorization server ${audience}`);
    }
    const now = Math.floor(Date.now() / 1000);
    const aud = (config.misdirect || {})[client.clientId] || audience;
    const idJag = await new jose.SignJWT({
      sub: subject.sub, client_id: (config.idJagClients || {})[client.clientId] || client.clientId, resource: params.resource,
      scope: params.scope, jti: randomBytes(16).toString('hex'),
    }).setProtectedHeader({ alg: 'RS256', kid: jwk.kid, typ: 'oauth-id-jag+jwt' })
      .setIssuer(issuer).setAudience(aud).setIssuedAt(now).setExpirationTime(now + 300)
      .sign(await jose.importJWK(jwk, 'RS256'));
    stats.idJags += 1;
    ctx.body = { access_token: idJag, issued_token_type: ID_JAG_TYPE, token_type: 'N_A', expires_in: 300 };
    return;
  }
  if (!params.resource) throw new errors.InvalidTarget('name the resource to exchange the token for');
  ctx.body = await issueAccessToken(ctx, ctx.oidc.provider, {
    sub: subject.sub, resource: params.resource, scope: params.scope || config.resources[params.resource],
    gty: 'token_exchange', extra: act ? { act } : undefined,
  });
}

// RFC 7523 with an ID-JAG (draft-ietf-oauth-identity-assertion-authz-grant): issued by `trustIdp`, for this
// server, for the authenticated client.
async function jwtBearer(ctx) {
  const { params, client } = ctx.oidc;
  let claims;
  try {
    ({ payload: claims } = await jose.jwtVerify(params.assertion, idpKeys, {
      issuer: config.trustIdp, audience: issuer, typ: 'oauth-id-jag+jwt',
    }));
  } catch (err) {
    throw new errors.InvalidGrant(`the assertion is not an ID-JAG for this server (${err.code || err.message})`);
  }
  if (claims.client_id !== client.clientId) throw new errors.InvalidGrant('the ID-JAG was issued to another client');
  ctx.body = await issueAccessToken(ctx, ctx.oidc.provider, {
    sub: claims.sub, resource: claims.resource, scope: claims.scope || config.resources[claims.resource], gty: 'jwt_bearer',
  });
}

const provider = new Provider(issuer, {
  jwks: { keys: [jwk] },
  clients: (config.clients || []).map((c) => ({
    redirect_uris: [], response_types: [], grant_types: ['client_credentials', TOKEN_EXCHANGE, JWT_BEARER], ...c,
  })),
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    clientCredentials: { enabled: true },
    dPoP: config.dpopNonce
      ? { enabled: true, nonceSecret: randomBytes(32), requireNonce: () => true }
      : { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: (_ctx, _client, oneOf) => (oneOf ? oneOf[0] : undefined),
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, url) => {
        if (!config.resources[url]) throw new errors.InvalidTarget(`this server issues no tokens for ${url}`);
        return { scope: config.resources[url], audience: url, accessTokenTTL: 600, accessTokenFormat: 'jwt', jwt: { sign: { alg: 'RS256' } } };
      },
    },
  },
  pkce: { required: () => true },
  scopes: ['openid', 'offline_access', ...new Set(Object.values(config.resources).flatMap((s) => s.split(' ')))],
  issueRefreshToken: (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  rotateRefreshToken: () => true,
});

provider.registerGrantType(TOKEN_EXCHANGE, tokenExchange, [
  'subject_token', 'subject_token_type', 'requested_token_type', 'audience', 'resource', 'scope', 'actor_token',
  'actor_token_type',
]);
provider.registerGrantType(JWT_BEARER, jwtBearer, ['assertion', 'scope']);

provider.on('grant.success', (ctx) => bump(stats.grants, ctx.oidc.params.grant_type));
provider.on('grant.error', (_ctx, err) => bump(stats.errors, err.error || 'unknown'));
provider.on('server_error', (_ctx, err) => console.error('server_error', err));
provider.use(async (ctx, next) => {
  if (ctx.path === '/_stats') {
    ctx.body = stats;
    return;
  }
  await next();
});

provider.listen(port, '127.0.0.1', () => console.log(`oidc-provider listening on ${issuer}`));
