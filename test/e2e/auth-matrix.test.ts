import type {} from '@fastify/jwt';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Fastify from 'fastify';
import { enforceRouteAuth, principalOf, type RouteAuthEntry } from '../../coordinator/src/accounts/auth-plugin.js';
import { declarePublicScope } from '../../coordinator/src/http/public-scope.js';
import type { AuthRequirement } from '../../coordinator/src/accounts/types.js';
import { installDomainErrors, okReasonBody, successErrorBody } from '../../coordinator/src/http/errors.js';
import { DyndnsTokens } from '../../coordinator/src/platform/dyndns/dyndns-token-repository.js';
import { browserLogin, createTestApp, extractCsrf, randomName, type CookieJar, type TestApp } from '../support/harness.js';

/**
 * Every credential transport against the route policies each area declares, with the
 * exact 401/403 bodies. Probe routes use the same `config.auth` mechanism as the product routes.
 */
const policies: Record<string, AuthRequirement> = {
  // Speech token API: personal token with scope speech.api; owner needs speech.api + speech.use; legacy transports allowed.
  speechToken: { accept: ['personal_token'], tokenLegacyTransports: true, scope: 'speech.api', permissions: ['speech.api', 'speech.use'] },
  // Assistant: Bearer token with scope ai.assistant only.
  assistant: { accept: ['personal_token'], scope: 'ai.assistant', permissions: ['ai.assistant'] },
  // Signed-in speech API: session or JWT with speech.use.
  speechUser: { accept: ['session', 'jwt'], permissions: ['speech.use'] },
  // Machine re-transcription: JWT only, never a browser session.
  jwtOnly: { accept: ['jwt'] },
  // DNS: session, API key (three transports) or whitelisted IP.
  dns: { accept: ['session', 'dns_api_key', 'ip_whitelist'] },
  admin: { accept: ['session', 'jwt'], adminOnly: true },
};

async function probes(app: FastifyInstance) {
  const describePrincipal = (request: Parameters<typeof principalOf>[0]) => {
    const p = principalOf(request);
    return { via: p.via, access_type: p.accessType, user: p.user?.username ?? null };
  };
  await app.register(async (speech) => {
    installDomainErrors(speech, okReasonBody);
    for (const name of ['speechToken', 'assistant', 'speechUser', 'jwtOnly', 'admin'] as const) {
      speech.get(`/probe/${name}`, { config: { auth: policies[name] } }, async (req) => describePrincipal(req));
      speech.post(`/probe/${name}`, { config: { auth: policies[name] } }, async (req) => describePrincipal(req));
    }
  });
  await app.register(async (dns) => {
    installDomainErrors(dns, okReasonBody, { validation_failed: 400 });
    const r = dns.withTypeProvider<ZodTypeProvider>();
    r.get('/probe/dns', { config: { auth: policies.dns } }, async (req) => describePrincipal(req));
    r.post('/probe/dns', { config: { auth: policies.dns }, schema: { body: z.object({ domain: z.string().min(1) }) } }, async (req) => describePrincipal(req));
  });
  await app.register(async (irc) => {
    installDomainErrors(irc, successErrorBody);
    irc
      .withTypeProvider<ZodTypeProvider>()
      .get('/probe/irc', { config: { auth: 'public' }, schema: { querystring: z.object({ limit: z.coerce.number().int().min(1).max(1000) }) } }, async () => ({
        success: true,
      }));
  });
}

let t: TestApp;
let alice: { name: string; password: string; id: number };
let bob: { name: string; password: string; id: number };
let root: { name: string; password: string; id: number };
/** Never granted anything (bob gains permissions along the way). */
let nobody: { name: string; password: string; id: number };

beforeAll(async () => {
  // Budgets high enough for the matrix below (rate limits have their own tests in http-edge.test.ts).
  t = await createTestApp({
    beforeReady: probes,
    env: { LOGIN_RATE_LIMIT_PER_MINUTE: '200', TOKEN_RATE_LIMIT_PER_MINUTE: '1000', DNS_RATE_LIMIT_PER_MINUTE: '1000', ADMIN_RATE_LIMIT_PER_MINUTE: '1000' },
  });
  const mk = async (perms: string[], isAdmin = false) => {
    const name = randomName();
    const { user, password } = await t.accounts.createUser({ username: name, permissions: perms, isAdmin });
    return { name, password, id: user.id };
  };
  alice = await mk(['speech.use', 'speech.api', 'ai.assistant']);
  bob = await mk([]);
  root = await mk([], true);
  nobody = await mk([]);
});
afterAll(async () => t?.close());

const get = (url: string, headers: Record<string, string> = {}, remoteAddress?: string) =>
  t.app.inject({ method: 'GET', url, headers, ...(remoteAddress ? { remoteAddress } : {}) });

async function jwtFor(username: string, password: string) {
  const res = await t.app.inject({ method: 'POST', url: '/api/account/login', payload: { username, password } });
  expect(res.statusCode).toBe(200);
  return res.json().token as string;
}

async function patFor(userId: number, scopes: string[]) {
  return (await t.accounts.createPersonalToken(userId, { name: 'probe', scopes })).token;
}

const UNAUTH = { ok: false, reason: 'unauthenticated' };
const FORBID = { ok: false, reason: 'forbidden' };

describe('JWT login (POST /api/account/login)', () => {
  it('returns a bearer JWT and the user summary', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/api/account/login', payload: { username: alice.name, password: alice.password } });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ ok: true, token_type: 'Bearer', expires_in: 3600, user: { username: alice.name, is_admin: false } });
    expect(body.user.permissions.sort()).toEqual(['ai.assistant', 'speech.api', 'speech.use']);
    expect(Date.parse(body.expires_at)).toBeGreaterThan(Date.now() + 3500_000);
    const me = await get('/api/account/me', { authorization: `Bearer ${body.token}` });
    expect(me.statusCode).toBe(200);
    expect(me.json().user.username).toBe(alice.name);
  });

  it('refuses a wrong password and an unknown user with the same 401', async () => {
    const wrong = await t.app.inject({ method: 'POST', url: '/api/account/login', payload: { username: alice.name, password: 'not-the-password' } });
    const unknown = await t.app.inject({ method: 'POST', url: '/api/account/login', payload: { username: 'nobody-here', password: 'whatever1' } });
    for (const res of [wrong, unknown]) {
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({ ok: false, reason: 'invalid_credentials', message: 'Invalid username or password.' });
    }
  });

  it('validates the body (422 with the failing field)', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/api/account/login', payload: { username: alice.name } });
    expect(res.statusCode).toBe(422);
    expect(res.json()).toMatchObject({ ok: false, reason: 'validation_failed', errors: { password: [expect.any(String)] } });
    const bad = await t.app.inject({ method: 'POST', url: '/api/account/login', headers: { 'content-type': 'application/json' }, payload: '{nope' });
    expect(bad.statusCode).toBe(422);
    expect(bad.json().reason).toBe('validation_failed');
  });

  it('refuses a disabled account after a correct password (403)', async () => {
    const name = randomName();
    const { password } = await t.accounts.createUser({ username: name });
    await t.accounts.setDisabled(name, true);
    const res = await t.app.inject({ method: 'POST', url: '/api/account/login', payload: { username: name, password } });
    expect(res.statusCode).toBe(403);
    expect(res.json().reason).toBe('account_disabled');
  });
});

describe('signed-in API: session or JWT', () => {
  it('401 without credentials, with the documented body', async () => {
    const res = await get('/probe/speechUser');
    expect(res.statusCode).toBe(401);
    expect(res.json()).toMatchObject(UNAUTH);
  });

  it('403 when the user lacks the permission; administrators bypass', async () => {
    const bobJwt = await jwtFor(bob.name, bob.password);
    const denied = await get('/probe/speechUser', { authorization: `Bearer ${bobJwt}` });
    expect(denied.statusCode).toBe(403);
    expect(denied.json()).toMatchObject({ ...FORBID, message: 'The permission "speech.use" is required.' });
    const rootJwt = await jwtFor(root.name, root.password);
    expect((await get('/probe/speechUser', { authorization: `Bearer ${rootJwt}` })).statusCode).toBe(200);
    expect((await get('/probe/admin', { authorization: `Bearer ${rootJwt}` })).statusCode).toBe(200);
    expect((await get('/probe/admin', { authorization: `Bearer ${await jwtFor(alice.name, alice.password)}` })).statusCode).toBe(403);
  });

  it('rejects tampered, expired and disabled-user JWTs with 401', async () => {
    const jwt = await jwtFor(alice.name, alice.password);
    const [h, p, s] = jwt.split('.');
    const payload = JSON.parse(Buffer.from(p!, 'base64url').toString());
    const forged = `${h}.${Buffer.from(JSON.stringify({ ...payload, sub: String(root.id) })).toString('base64url')}.${s}`;
    expect((await get('/probe/speechUser', { authorization: `Bearer ${forged}` })).statusCode).toBe(401);

    const expired = t.app.jwt.sign({ sub: String(alice.id), typ: 'access' }, { clockTimestamp: Date.now() - 2 * 3600_000 });
    const res = await get('/probe/speechUser', { authorization: `Bearer ${expired}` });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toMatchObject({ ...UNAUTH, message: 'The bearer token is invalid or expired.' });

    const name = randomName();
    const u = await t.accounts.createUser({ username: name, permissions: ['speech.use'] });
    const token = await jwtFor(name, u.password);
    expect((await get('/probe/speechUser', { authorization: `Bearer ${token}` })).statusCode).toBe(200);
    await t.accounts.setDisabled(name, true);
    expect((await get('/probe/speechUser', { authorization: `Bearer ${token}` })).statusCode).toBe(401);
  });

  it('JWTs carry the token version: a password change or disable ends them before they expire (401)', async () => {
    const name = randomName();
    const u = await t.accounts.createUser({ username: name, permissions: ['speech.use'] });
    const before = await jwtFor(name, u.password);
    const claims = JSON.parse(Buffer.from(before.split('.')[1]!, 'base64url').toString());
    expect(claims).toMatchObject({ sub: String(u.user.id), typ: 'access', ver: 0 });
    expect((await get('/probe/speechUser', { authorization: `Bearer ${before}` })).statusCode).toBe(200);

    await t.accounts.setPassword(name, 'a-brand-new-password');
    const stale = await get('/probe/speechUser', { authorization: `Bearer ${before}` });
    expect(stale.statusCode).toBe(401);
    expect(stale.json()).toMatchObject({ ...UNAUTH, message: expect.stringContaining('password changed') });
    // A token issued after the change works, and carries the new version.
    const after = await jwtFor(name, 'a-brand-new-password');
    expect(JSON.parse(Buffer.from(after.split('.')[1]!, 'base64url').toString()).ver).toBe(1);
    expect((await get('/api/account/me', { authorization: `Bearer ${after}` })).statusCode).toBe(200);

    // Disabling ends it too, and enabling the account again does not bring the old token back.
    await t.accounts.setDisabled(name, true);
    expect((await get('/api/account/me', { authorization: `Bearer ${after}` })).statusCode).toBe(401);
    await t.accounts.setDisabled(name, false);
    expect((await get('/api/account/me', { authorization: `Bearer ${after}` })).statusCode).toBe(401);
    expect((await get('/api/account/me', { authorization: `Bearer ${await jwtFor(name, 'a-brand-new-password')}` })).statusCode).toBe(200);
    // A token whose version claim is not a number is refused like a forged one.
    const odd = t.app.jwt.sign({ sub: String(u.user.id), typ: 'access', ver: '2' as unknown as number });
    expect((await get('/api/account/me', { authorization: `Bearer ${odd}` })).statusCode).toBe(401);
  });

  it('a browser session works for reads; mutations need the CSRF token', async () => {
    const { jar, res } = await browserLogin(t.app, alice.name, alice.password);
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('/');
    const cookie = jar.header();
    expect((await get('/probe/speechUser', { cookie })).json()).toEqual({ via: 'session', access_type: 'authenticated', user: alice.name });

    const noCsrf = await t.app.inject({ method: 'POST', url: '/probe/speechUser', headers: { cookie } });
    expect(noCsrf.statusCode).toBe(403);
    expect(noCsrf.json()).toMatchObject({ ok: false, reason: 'csrf_invalid' });
    const badCsrf = await t.app.inject({ method: 'POST', url: '/probe/speechUser', headers: { cookie, 'x-csrf-token': 'forged' } });
    expect(badCsrf.statusCode).toBe(403);

    const page = await get('/account', { cookie });
    const csrf = extractCsrf(page.body);
    const ok = await t.app.inject({ method: 'POST', url: '/probe/speechUser', headers: { cookie, 'x-csrf-token': csrf } });
    expect(ok.statusCode).toBe(200);
    // The same mutation with a JWT needs no CSRF token: there is no ambient credential to abuse.
    const jwt = await jwtFor(alice.name, alice.password);
    expect((await t.app.inject({ method: 'POST', url: '/probe/speechUser', headers: { authorization: `Bearer ${jwt}` } })).statusCode).toBe(200);
  });

  it('JWT-only routes never fall back to the browser session', async () => {
    const { jar } = await browserLogin(t.app, alice.name, alice.password);
    const res = await get('/probe/jwtOnly', { cookie: jar.header() });
    expect(res.statusCode).toBe(401);
    const jwt = await jwtFor(alice.name, alice.password);
    expect((await get('/probe/jwtOnly', { authorization: `Bearer ${jwt}`, cookie: jar.header() })).json().via).toBe('jwt');
  });

  it('an invalid explicit credential is refused even when a valid session cookie is present', async () => {
    const { jar } = await browserLogin(t.app, alice.name, alice.password);
    const res = await get('/probe/speechUser', { cookie: jar.header(), authorization: 'Bearer garbage' });
    expect(res.statusCode).toBe(401);
  });

  it('logout ends the session server-side', async () => {
    const { jar } = await browserLogin(t.app, alice.name, alice.password);
    const cookie = jar.header();
    const csrf = extractCsrf((await get('/account', { cookie })).body);
    const out = await t.app.inject({
      method: 'POST',
      url: '/logout',
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
      payload: `_csrf=${encodeURIComponent(csrf)}`,
    });
    expect(out.statusCode).toBe(303);
    // The old cookie value no longer maps to a session.
    expect((await get('/probe/speechUser', { cookie })).statusCode).toBe(401);
  });
});

describe('personal access tokens (speech token API and assistant policies)', () => {
  it('accepts Bearer, legacy X-Api-Key and ?apikey= where legacy transports are allowed', async () => {
    const token = await patFor(alice.id, ['speech.api']);
    for (const res of [
      await get('/probe/speechToken', { authorization: `Bearer ${token}` }),
      await get('/probe/speechToken', { 'x-api-key': token }),
      await get(`/probe/speechToken?apikey=${token}`),
    ]) {
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ via: 'personal_token', access_type: 'authenticated', user: alice.name });
    }
  });

  it('assistant accepts only Authorization: Bearer', async () => {
    const token = await patFor(alice.id, ['ai.assistant']);
    expect((await get('/probe/assistant', { authorization: `Bearer ${token}` })).statusCode).toBe(200);
    const legacy = await get('/probe/assistant', { 'x-api-key': token });
    expect(legacy.statusCode).toBe(401);
    expect(legacy.json()).toMatchObject(UNAUTH);
  });

  it('403 when the token lacks the scope or its owner lacks the permission', async () => {
    const wrongScope = await patFor(alice.id, ['ai.assistant']);
    const res = await get('/probe/speechToken', { authorization: `Bearer ${wrongScope}` });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toMatchObject({ ...FORBID, message: 'The access token lacks the scope "speech.api".' });

    const bobToken = await patFor(bob.id, ['speech.api']);
    const denied = await get('/probe/speechToken', { authorization: `Bearer ${bobToken}` });
    expect(denied.statusCode).toBe(403);
    expect(denied.json().message).toBe('The permission "speech.api" is required.');
    await t.accounts.grantPermissions(bob.name, ['speech.api']);
    expect((await get('/probe/speechToken', { authorization: `Bearer ${bobToken}` })).json().message).toBe('The permission "speech.use" is required.');
    await t.accounts.grantPermissions(bob.name, ['speech.use']);
    expect((await get('/probe/speechToken', { authorization: `Bearer ${bobToken}` })).statusCode).toBe(200);
  });

  it('401 for unknown, revoked and expired tokens, and for tokens of disabled users', async () => {
    const unknown = await get('/probe/speechToken', { authorization: 'Bearer sonar_pat_doesnotexist' });
    expect(unknown.statusCode).toBe(401);
    expect(unknown.json()).toMatchObject({ ...UNAUTH, message: 'The access token is invalid, expired or revoked.' });

    const { token, record } = await t.accounts.createPersonalToken(alice.id, { name: 'to-revoke', scopes: ['speech.api'] });
    expect((await get('/probe/speechToken', { authorization: `Bearer ${token}` })).statusCode).toBe(200);
    expect(await t.accounts.revokePersonalToken(record.id, { ownerId: alice.id })).toBe(true);
    expect((await get('/probe/speechToken', { authorization: `Bearer ${token}` })).statusCode).toBe(401);

    const exp = await t.accounts.createPersonalToken(alice.id, { name: 'to-expire', scopes: ['speech.api'], expiresInDays: 1 });
    expect((await get('/probe/speechToken', { authorization: `Bearer ${exp.token}` })).statusCode).toBe(200);
    await t.orm.em.getConnection().execute(`update personal_access_tokens set expires_at = now() - interval '1 second' where id = ?`, [exp.record.id]);
    expect((await get('/probe/speechToken', { authorization: `Bearer ${exp.token}` })).statusCode).toBe(401);

    const name = randomName();
    const u = await t.accounts.createUser({ username: name, permissions: ['speech.use', 'speech.api'] });
    const ut = await patFor(u.user.id, ['speech.api']);
    expect((await get('/probe/speechToken', { authorization: `Bearer ${ut}` })).statusCode).toBe(200);
    await t.accounts.setDisabled(name, true);
    expect((await get('/probe/speechToken', { authorization: `Bearer ${ut}` })).statusCode).toBe(401);
  });

  it('a session cookie is not a token: 401 on token-only routes', async () => {
    const { jar } = await browserLogin(t.app, alice.name, alice.password);
    expect((await get('/probe/speechToken', { cookie: jar.header() })).statusCode).toBe(401);
  });

  it('stores only a hash: the plaintext is not in the database', async () => {
    const { token, record } = await t.accounts.createPersonalToken(alice.id, { name: 'hash-check', scopes: ['speech.api'] });
    const rows = await t.orm.em
      .getConnection()
      .execute<Array<{ token_hash: string; prefix: string }>>('select token_hash, prefix from personal_access_tokens where id = ?', [record.id]);
    expect(rows[0]!.token_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(rows[0]!.token_hash).not.toContain(token.slice(10));
    expect(token.startsWith(rows[0]!.prefix)).toBe(true);
    expect(rows[0]!.prefix.length).toBeLessThan(token.length / 2);
  });
});

describe('account token API', () => {
  it('creates a token shown once, lists it without the secret, and revokes it (JWT)', async () => {
    const jwt = await jwtFor(alice.name, alice.password);
    const auth = { authorization: `Bearer ${jwt}` };
    const created = await t.app.inject({
      method: 'POST',
      url: '/api/account/tokens',
      headers: auth,
      payload: { name: 'ci', scopes: ['speech.api'], expires_in_days: 30 },
    });
    expect(created.statusCode).toBe(201);
    const { token, token_info } = created.json();
    expect(token).toMatch(/^sonar_pat_/);
    const list = await get('/api/account/tokens', auth);
    expect(list.body).not.toContain(token);
    expect(list.json().tokens.map((x: { id: number }) => x.id)).toContain(token_info.id);
    expect((await get('/probe/speechToken', { authorization: `Bearer ${token}` })).statusCode).toBe(200);
    const del = await t.app.inject({ method: 'DELETE', url: `/api/account/tokens/${token_info.id}`, headers: auth });
    expect(del.json()).toEqual({ ok: true, revoked: true });
    expect((await get('/probe/speechToken', { authorization: `Bearer ${token}` })).statusCode).toBe(401);
  });

  it('cannot revoke somebody else’s token (404) and validates scopes (422)', async () => {
    const other = await t.accounts.createPersonalToken(bob.id, { name: 'bobs', scopes: ['speech.api'] });
    const jwt = await jwtFor(alice.name, alice.password);
    const res = await t.app.inject({ method: 'DELETE', url: `/api/account/tokens/${other.record.id}`, headers: { authorization: `Bearer ${jwt}` } });
    expect(res.statusCode).toBe(404);
    const bad = await t.app.inject({
      method: 'POST',
      url: '/api/account/tokens',
      headers: { authorization: `Bearer ${jwt}` },
      payload: { name: 'x', scopes: ['root'] },
    });
    expect(bad.statusCode).toBe(422);
    expect(bad.json().errors).toHaveProperty(['scopes.0']);
  });
});

describe('DNS API policy: session, API key (three transports), IP whitelist', () => {
  it('global keys give api_key_global through Bearer, X-API-Key and api_key=', async () => {
    const { key } = await t.accounts.createDnsApiKey({ name: 'global' });
    for (const res of [
      await get('/probe/dns', { authorization: `Bearer ${key}` }),
      await get('/probe/dns', { 'x-api-key': key }),
      await get(`/probe/dns?api_key=${key}`),
    ]) {
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ via: 'dns_api_key', access_type: 'api_key_global', user: null });
    }
  });

  it('user-bound keys act as their user (access_type authenticated)', async () => {
    const { key } = await t.accounts.createDnsApiKey({ name: 'alice-key', username: alice.name });
    expect((await get('/probe/dns', { 'x-api-key': key })).json()).toEqual({ via: 'dns_api_key', access_type: 'authenticated', user: alice.name });
  });

  it('revoked keys and keys of disabled users are refused with 401 {ok:false, reason:unauthenticated}', async () => {
    const { key, id } = await t.accounts.createDnsApiKey({ name: 'short-lived' });
    await t.accounts.revokeDnsApiKey(id);
    const res = await get('/probe/dns', { authorization: `Bearer ${key}` });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toMatchObject(UNAUTH);
  });

  it('whitelisted addresses get ip_whitelist; others 401; a bad key is never rescued by the whitelist', async () => {
    await t.accounts.addWhitelist('198.51.100.0/24', 'office');
    expect((await get('/probe/dns', {}, '198.51.100.7')).json()).toEqual({ via: 'ip_whitelist', access_type: 'ip_whitelist', user: null });
    expect((await get('/probe/dns', {}, '::ffff:198.51.100.8')).json().access_type).toBe('ip_whitelist');
    expect((await get('/probe/dns', {}, '203.0.113.9')).statusCode).toBe(401);
    expect((await get('/probe/dns', { 'x-api-key': 'sonar_dns_wrong' }, '198.51.100.7')).statusCode).toBe(401);
    await t.accounts.removeWhitelist('198.51.100.0/24');
    expect((await get('/probe/dns', {}, '198.51.100.7')).statusCode).toBe(401);
  });

  it('session users are authenticated; personal tokens and JWTs are not DNS credentials', async () => {
    const { jar } = await browserLogin(t.app, alice.name, alice.password);
    expect((await get('/probe/dns', { cookie: jar.header() })).json().access_type).toBe('authenticated');
    expect((await get('/probe/dns', { authorization: `Bearer ${await patFor(alice.id, ['speech.api'])}` })).statusCode).toBe(401);
    expect((await get('/probe/dns', { authorization: `Bearer ${await jwtFor(alice.name, alice.password)}` })).statusCode).toBe(401);
  });

  it('DNS validation errors are 400 validation_failed', async () => {
    const { key } = await t.accounts.createDnsApiKey({ name: 'writer' });
    const res = await t.app.inject({ method: 'POST', url: '/probe/dns', headers: { 'x-api-key': key }, payload: { domain: '' } });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ ok: false, reason: 'validation_failed', errors: { domain: [expect.any(String)] } });
  });
});

describe('dynamic-DNS tokens: HTTP Basic password on the dyndns2 routes only', () => {
  const basicOf = (secret: string, user = 'router') => `Basic ${Buffer.from(`${user}:${secret}`).toString('base64')}`;

  it('a token works as the Basic password with any user name, and nowhere else', async () => {
    const { secret } = await new DyndnsTokens(t.orm).create(alice.id, 'matrix', []);
    for (const user of ['router', alice.name, '']) {
      const res = await get('/nic/update?hostname=x.example.test&myip=192.0.2.1', { authorization: basicOf(secret, user) });
      expect(res.statusCode).toBe(200);
      expect(res.body).toBe('nohost\n');
    }
    // As a bearer token, or on any other route, it is not a credential.
    const bearer = await get('/nic/update?hostname=x.example.test', { authorization: `Bearer ${secret}` });
    expect(bearer.statusCode).toBe(401);
    expect(bearer.body).toBe('badauth\n');
    for (const url of ['/probe/dns', '/probe/speechUser', '/api/dyndns/tokens', '/api/account/me']) {
      const res = await get(url, { authorization: basicOf(secret) });
      expect(res.statusCode, url).toBe(401);
      expect(res.json()).toMatchObject(UNAUTH);
    }
  });

  it('other credentials are refused with badauth; revoked tokens and tokens of disabled users too', async () => {
    const key = (await t.accounts.createDnsApiKey({ name: 'not-dyndns' })).key;
    const pat = await patFor(alice.id, ['speech.api']);
    const { jar } = await browserLogin(t.app, alice.name, alice.password);
    const attempts: Array<Record<string, string>> = [
      { authorization: basicOf(key) },
      { authorization: basicOf(pat) },
      { 'x-api-key': key },
      { cookie: jar.header() },
    ];
    for (const headers of attempts) {
      const res = await get('/api/dyndns/update?hostname=x.example.test', headers);
      expect(res.statusCode).toBe(401);
      expect(res.body).toBe('badauth\n');
      expect(res.headers['www-authenticate']).toMatch(/^Basic realm=/);
    }
    const tokens = new DyndnsTokens(t.orm);
    const revoked = await tokens.create(alice.id, 'revoked', []);
    await tokens.revoke(alice.id, revoked.token.id);
    expect((await get('/nic/update?hostname=x.example.test', { authorization: basicOf(revoked.secret) })).statusCode).toBe(401);
    const name = randomName();
    const u = await t.accounts.createUser({ username: name });
    const theirs = await tokens.create(u.user.id, 'theirs', []);
    expect((await get('/nic/update?hostname=x.example.test', { authorization: basicOf(theirs.secret) })).statusCode).toBe(200);
    await t.accounts.setDisabled(name, true);
    expect((await get('/nic/update?hostname=x.example.test', { authorization: basicOf(theirs.secret) })).body).toBe('badauth\n');
  });
});

describe('chat-log archive error shape', () => {
  it('uses {success:false, error} for validation errors and unknown paths', async () => {
    const res = await get('/probe/irc?limit=5000');
    expect(res.statusCode).toBe(422);
    expect(res.json()).toEqual({ success: false, error: expect.stringContaining('limit') });
    const missing = await get('/irc/api/nothing-here');
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toEqual({ success: false, error: 'Not found.' });
  });
});

describe('deny by default: a route must declare config.auth', () => {
  it('refuses to register a route without a declaration, naming its method and URL', async () => {
    const app = Fastify();
    enforceRouteAuth(app);
    expect(() => app.get('/forgotten', async () => 'open')).toThrow(/GET \/forgotten.*config\.auth/);
    expect(() => app.route({ method: ['POST', 'PUT'], url: '/forgotten-too', handler: async () => 'open' })).toThrow(/POST,PUT \/forgotten-too/);
    // Inside a plugin the failure stops the start.
    void app.register(async (child) => {
      child.post('/in-plugin', async () => 'open');
    });
    await expect(app.ready()).rejects.toThrow(/POST \/in-plugin/);
  });

  it('accepts public routes, routes with a requirement, and third-party routes of a public scope', async () => {
    const app = Fastify();
    enforceRouteAuth(app);
    app.get('/open', { config: { auth: 'public' } }, async () => 'open');
    app.get('/closed', { config: { auth: { accept: ['jwt'] } } }, async () => 'closed');
    expect(() => app.get('/empty', { config: { auth: { accept: [] } } }, async () => 'x')).toThrow(/GET \/empty has an invalid config\.auth/);
    await app.register(async (docs) => {
      declarePublicScope(docs);
      docs.get('/docs-like', async () => 'docs');
    });
    await app.ready();
    expect(app.routeAuthTable.map((r) => `${r.method} ${r.url} ${typeof r.auth === 'string' ? r.auth : 'auth'}`)).toEqual([
      'GET /open public',
      'HEAD /open public',
      'GET /closed auth',
      'HEAD /closed auth',
      'GET /docs-like public',
      'HEAD /docs-like public',
    ]);
    await app.close();
  });
});

describe('every real route of the application', () => {
  const realRoutes = () => t.app.routeAuthTable.filter((r) => !r.url.startsWith('/probe/'));
  const protectedRoutes = () => realRoutes().filter((r): r is RouteAuthEntry & { auth: AuthRequirement } => r.auth !== 'public');
  const concrete = (url: string) => url.replace(/:[A-Za-z_]+/g, '1').replace(/\*$/, 'x');
  const isIrc = (url: string) => url.startsWith('/irc/api') || url.startsWith('/api/irclog');
  /** The dyndns2 update routes answer in plain text (`badauth` with a Basic challenge). */
  const isDyndns = (url: string) => url === '/nic/update' || url === '/api/dyndns' || url === '/api/dyndns/update';
  const isPage = (url: string) => !url.startsWith('/api/') && !isIrc(url) && !isDyndns(url);
  const label = (r: RouteAuthEntry) => `${r.method} ${r.url}`;

  it('covers the areas of the service (the table is the real one)', () => {
    const names = realRoutes().map(label);
    for (const expected of [
      'GET /api/platform',
      'POST /api/account/login',
      'GET /api/account/me',
      'POST /api/account/tokens',
      'GET /api/speech/jobs',
      'POST /api/speech/transcribe',
      'PATCH /api/speech/uploads/:id',
      'POST /api/dns/records/add',
      'GET /nic/update',
      'GET /api/dyndns/update',
      'GET /api/reputation',
      'POST /api/reputation/reports',
      'GET /irc/api/logs',
      'DELETE /irc/api/admin/aliases',
      'GET /shared/speech/transcript/:token',
      'GET /login',
      'GET /metrics',
      'GET /openapi.json',
      'GET /docs',
    ]) {
      expect(names).toContain(expected);
    }
    expect(protectedRoutes().length).toBeGreaterThan(40);
  });

  it('every protected operation in /openapi.json declares how to authenticate (security)', async () => {
    const spec = (await get('/openapi.json')).json<{ paths: Record<string, Record<string, { security?: unknown[] }>> }>();
    const missing: string[] = [];
    for (const r of protectedRoutes()) {
      const op = spec.paths[r.url.replace(/:([A-Za-z_]+)/g, '{$1}')]?.[r.method.toLowerCase()];
      if (op && !op.security?.length) missing.push(label(r));
    }
    expect(missing).toEqual([]);
  });

  it('public routes are exactly the declared ones: sign-in, platform, reputation lookups, chat-log reads, shares, docs, metrics, static assets', () => {
    const publicUrls = [
      ...new Set(
        realRoutes()
          .filter((r) => r.auth === 'public')
          .map((r) => r.url),
      ),
    ];
    const allowed = [
      /^\/login$/,
      /^\/api\/account\/login$/,
      /^\/api\/platform(\/ready)?$/,
      // Reputation lookups of public things (and the older lookup path); reports need a user.
      /^\/api\/reputation(\/lookup)?$/,
      /^\/(irc\/api|api\/irclog)\/(networks|networks\/:networkId\/channels|logs)$/,
      // The chat-log reader pages (the same public archive, server-rendered).
      /^\/irc(\/search|\/nick\/:nick|\/net\/:network(\/:channel(\/:day)?)?)?$/,
      /^\/shared\/speech\/transcript\/:token$/,
      /^\/docs(\/.*)?$/,
      /^\/openapi\.json$/,
      /^\/metrics$/,
      // Status pages and guestbooks: the published data and the public form.
      /^\/api\/statuspage\/:slug$/,
      /^\/status\/:slug$/,
      /^\/guestbook\/:slug(\/entries)?$/,
      /^\/api\/guestbook\/:slug\/entries$/,
      // The web console's bundle (content-hashed files of coordinator/dist/public) and its icon.
      /^\/assets\/\*$/,
      /^\/favicon\.(svg|ico)$/,
    ];
    expect(publicUrls.filter((u) => !allowed.some((re) => re.test(u)))).toEqual([]);
  });

  it('without credentials every protected route answers 401 in its area’s shape (pages redirect to sign-in)', async () => {
    const failures: string[] = [];
    for (const r of protectedRoutes()) {
      const url = concrete(r.url);
      const res = await t.app.inject({ method: r.method as 'GET', url, remoteAddress: '203.0.113.10' });
      if (isPage(r.url)) {
        if (res.statusCode !== 303 || !String(res.headers.location).startsWith('/login?next='))
          failures.push(`${label(r)}: ${res.statusCode} ${res.headers.location}`);
        continue;
      }
      if (res.statusCode !== 401) {
        failures.push(`${label(r)}: ${res.statusCode}`);
        continue;
      }
      if (r.method === 'HEAD') continue;
      if (isDyndns(r.url)) {
        if (res.body !== 'badauth\n' || !/^Basic /.test(String(res.headers['www-authenticate']))) failures.push(`${label(r)}: body ${res.body}`);
        continue;
      }
      const body = res.json();
      const shapeOk = isIrc(r.url)
        ? body.success === false && typeof body.error === 'string' && Object.keys(body).length === 2
        : body.ok === false && body.reason === 'unauthenticated' && typeof body.message === 'string';
      if (!shapeOk) failures.push(`${label(r)}: body ${res.body}`);
    }
    expect(failures).toEqual([]);
  });

  /** Credentials of `who` that the route accepts (a CSRF header with a session for writes). */
  const sweepJwts = new Map<string, string>();
  async function credentialsFor(
    r: RouteAuthEntry & { auth: AuthRequirement },
    who: { name: string; password: string; id: number },
    sessions: Map<string, { jar: CookieJar; csrf: string }>,
  ) {
    if (r.auth.accept.includes('jwt')) {
      // One sign-in per user for the sweep: with one per JWT route, the routes outgrew the login rate limit.
      const token = sweepJwts.get(who.name) ?? (await jwtFor(who.name, who.password));
      sweepJwts.set(who.name, token);
      return { authorization: `Bearer ${token}` };
    }
    if (r.auth.accept.includes('dyndns_token')) {
      const { secret } = await new DyndnsTokens(t.orm).create(who.id, 'probe', []);
      return { authorization: `Basic ${Buffer.from(`${who.name}:${secret}`).toString('base64')}` };
    }
    if (r.auth.accept.includes('personal_token')) return { authorization: `Bearer ${await patFor(who.id, [r.auth.scope ?? 'speech.api'])}` };
    if (r.auth.accept.includes('session')) {
      let s = sessions.get(who.name);
      if (!s) {
        const { jar } = await browserLogin(t.app, who.name, who.password);
        s = { jar, csrf: extractCsrf((await get('/account', { cookie: jar.header() })).body) };
        sessions.set(who.name, s);
      }
      return { cookie: s.jar.header(), ...(['GET', 'HEAD', 'OPTIONS'].includes(r.method) ? {} : { 'x-csrf-token': s.csrf }) };
    }
    throw new Error(`no credential for ${label(r)}`);
  }

  // One request per route (well over a hundred): more than the default 30 s on a loaded machine.
  it('a signed-in user without the required permission gets 403 on every route that requires one', async () => {
    const sessions = new Map<string, { jar: CookieJar; csrf: string }>();
    const guarded = protectedRoutes().filter((r) => r.auth.adminOnly || (r.auth.permissions?.length ?? 0) > 0);
    expect(guarded.length).toBeGreaterThan(20);
    const failures: string[] = [];
    for (const r of guarded) {
      const res = await t.app.inject({ method: r.method as 'GET', url: concrete(r.url), headers: await credentialsFor(r, nobody, sessions) });
      if (res.statusCode !== 403) {
        failures.push(`${label(r)}: ${res.statusCode} ${res.body.slice(0, 120)}`);
        continue;
      }
      if (r.method === 'HEAD' || isPage(r.url)) continue;
      const body = res.json();
      const shapeOk = isIrc(r.url) ? body.success === false && /Administrator/.test(body.error) : body.ok === false && body.reason === 'forbidden';
      if (!shapeOk) failures.push(`${label(r)}: body ${res.body}`);
    }
    expect(failures).toEqual([]);
  }, 90_000);

  // One request per route (well over a hundred): more than the default 30 s on a loaded machine.
  it('an administrator passes authentication and authorization everywhere, and nothing answers 5xx', async () => {
    const sessions = new Map<string, { jar: CookieJar; csrf: string }>();
    const failures: string[] = [];
    for (const r of protectedRoutes()) {
      // DNS routes accept no JWT: the administrator's browser session.
      const res = await t.app.inject({ method: r.method as 'GET', url: concrete(r.url), headers: await credentialsFor(r, root, sessions) });
      if ([401, 403].includes(res.statusCode) || res.statusCode >= 500) failures.push(`${label(r)}: ${res.statusCode} ${res.body.slice(0, 160)}`);
    }
    expect(failures).toEqual([]);
  }, 90_000);

  it('public routes answer without credentials and never with 401', async () => {
    const failures: string[] = [];
    for (const r of realRoutes().filter((x) => x.auth === 'public')) {
      const res = await t.app.inject({ method: r.method as 'GET', url: concrete(r.url), remoteAddress: '127.0.0.1' });
      if (res.statusCode === 401 || res.statusCode >= 500) failures.push(`${label(r)}: ${res.statusCode}`);
    }
    expect(failures).toEqual([]);
    expect((await get('/api/platform')).statusCode).toBe(200);
    expect((await get('/login')).statusCode).toBe(200);
    expect((await get('/openapi.json')).statusCode).toBe(200);
  });
});
