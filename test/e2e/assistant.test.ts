import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ASSISTANT_SCOPES, GraphStub } from '../support/graph-stub.js';
import { browserLogin, createTestApp, extractCsrf, randomName, type CookieJar, type TestApp } from '../support/harness.js';
import { MsIdentityStandIn, type StandInAccount } from '../support/ms-identity.js';
import { OpenAiStub } from '../support/openai-stub.js';

/**
 * The organization assistant connector end to end: tenant setups with encrypted secrets, the
 * delegated sign-in through the `organizations` authority of an identity-provider stand-in over
 * HTTPS (its own CA, trusted through ASSISTANT_EXTRA_CA_FILE), MSAL's token cache in PostgreSQL,
 * validation (personal-account tenant, audience, scopes), refresh, the graph assistant stand-in
 * (reply, licence, 5xx, garbage, hang), the error statuses, no fallback to the OpenAI-compatible
 * provider, and an audit log and application log free of secrets.
 */
const PUBLIC_BASE_URL = 'http://localhost:8080';
const TENANT = randomUUID();
const OTHER_TENANT = randomUUID();
const PERSONAL_TENANT = '9188040d-6c67-4c5b-b112-36a304b66dad';
const CLIENT_ID = randomUUID();
const CLIENT_SECRET = `secret~${randomUUID()}`;
const SECRET_KEY = 'assistant-test-key-0123456789abcdef0123';
const CLI_SECRET = `cli-secret~${randomUUID()}`;

const identity = new MsIdentityStandIn();
const graph = new GraphStub(identity);
const openai = new OpenAiStub();
const logLines: string[] = [];
let t: TestApp;
let idp: Agent;

const names = {
  admin: randomName('admin'),
  alice: randomName('alice'),
  bob: randomName('bob'),
  carol: randomName('carol'),
  dave: randomName('dave'),
  erin: randomName('erin'),
  frank: randomName('frank'),
  gina: randomName('gina'),
  hank: randomName('hank'),
  kim: randomName('kim'),
  lena: randomName('lena'),
  ivan: randomName('ivan'),
};
type Who = keyof typeof names;
const users = {} as Record<Who, { id: number; password: string; jar: CookieJar; pat: string }>;
const accounts = {} as Record<'alice' | 'bob' | 'carol' | 'dave' | 'erin' | 'frank' | 'gina' | 'kim' | 'lena', StandInAccount>;
/** A client certificate and key (PEM) for the certificate-credential setup, made with openssl. */
const certDir = mkdtempSync(path.join(tmpdir(), 'sonar-assistant-cert-'));
execFileSync(
  'openssl',
  [
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    path.join(certDir, 'key.pem'),
    '-out',
    path.join(certDir, 'cert.pem'),
    '-days',
    '2',
    '-subj',
    '/CN=sonar-assistant',
  ],
  { stdio: 'ignore' },
);
const CERT_PEM = readFileSync(path.join(certDir, 'cert.pem'), 'utf8');
const KEY_PEM = readFileSync(path.join(certDir, 'key.pem'), 'utf8');
const CERT_CLIENT_ID = randomUUID();

beforeAll(async () => {
  await identity.start();
  await graph.start();
  await openai.start();
  identity.addApp({ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, redirectUris: [`${PUBLIC_BASE_URL}/admin/assistant/callback`] });
  idp = new Agent({ connect: { ca: identity.ca } });
  accounts.alice = identity.addAccount({ username: 'alice@contoso.example', name: 'Alice', tid: TENANT });
  accounts.bob = identity.addAccount({ username: 'bob@outlook.example', name: 'Bob', tid: PERSONAL_TENANT });
  accounts.carol = identity.addAccount({ username: 'carol@contoso.example', name: 'Carol', tid: TENANT, idTokenAudience: randomUUID() });
  accounts.dave = identity.addAccount({
    username: 'dave@contoso.example',
    name: 'Dave',
    tid: TENANT,
    grantedScopes: ['User.Read', ...ASSISTANT_SCOPES.filter((s) => s !== 'Mail.Read' && s !== 'Chat.Read')],
  });
  accounts.erin = identity.addAccount({ username: 'erin@fabrikam.example', name: 'Erin', tid: OTHER_TENANT, accessTokenSeconds: 60 });
  accounts.frank = identity.addAccount({
    username: 'frank@fabrikam.example',
    name: 'Frank',
    tid: OTHER_TENANT,
    failWith: {
      error: 'invalid_request',
      code: 50020,
      description: "User account 'frank@fabrikam.example' from identity provider does not exist in tenant 'Contoso'.",
    },
  });
  accounts.gina = identity.addAccount({ username: 'gina@contoso.example', name: 'Gina', tid: TENANT });
  graph.unlicensed.add(accounts.gina.oid);
  identity.addApp({ clientId: CERT_CLIENT_ID, certificatePem: CERT_PEM, redirectUris: [`${PUBLIC_BASE_URL}/admin/assistant/callback`] });
  accounts.lena = identity.addAccount({ username: 'lena@northwind.example', name: 'Lena', tid: OTHER_TENANT });
  accounts.kim = identity.addAccount({ username: 'kim@contoso.example', name: 'Kim', tid: TENANT, forgedIdToken: true });

  t = await createTestApp({
    env: {
      PUBLIC_BASE_URL,
      ASSISTANT_SECRET_KEY: SECRET_KEY,
      ASSISTANT_EXTRA_CA_FILE: identity.caFile,
      ASSISTANT_UPSTREAM_TIMEOUT_SECONDS: '8',
      ASSISTANT_RATE_LIMIT_PER_MINUTE: '30',
      OPENAI_BASE_URL: openai.baseUrl,
      OPENAI_MODEL: 'stub-model',
      LOGIN_RATE_LIMIT_PER_MINUTE: '1000',
    },
    logger: { level: 'debug', stream: { write: (line: string) => void logLines.push(line) } },
  });
  for (const who of Object.keys(names) as Who[]) {
    const perms = who === 'admin' ? [] : ['ai.assistant'];
    const { user, password } = await t.accounts.createUser({ username: names[who], permissions: perms, isAdmin: who === 'admin' });
    const { jar } = await browserLogin(t.app, names[who], password);
    const pat = (await t.accounts.createPersonalToken(user.id, { name: 'assistant', scopes: ['ai.assistant'] })).token;
    users[who] = { id: user.id, password, jar, pat };
  }
}, 120_000);

afterAll(async () => {
  await t?.close();
  await idp?.close();
  await graph.stop();
  await identity.stop();
  await openai.close();
  rmSync(certDir, { recursive: true, force: true });
});

const csrfOf = async (who: Who) =>
  extractCsrf((await t.app.inject({ method: 'GET', url: '/admin/assistant', headers: { cookie: users[who].jar.header() } })).body);

async function postForm(who: Who, url: string, fields: Record<string, string>) {
  const form = new URLSearchParams({ _csrf: await csrfOf(who), ...fields });
  return t.app.inject({
    method: 'POST',
    url,
    headers: { cookie: users[who].jar.header(), 'content-type': 'application/x-www-form-urlencoded' },
    payload: form.toString(),
  });
}

/** The browser's round trip: connect on our page, sign in at the identity provider, come back to the callback. */
async function connect(who: Who, account: StandInAccount, slug = 'contoso') {
  const start = await postForm(who, `/admin/assistant/setups/${slug}/connect`, {});
  expect(start.statusCode, start.body.slice(0, 300)).toBe(303);
  const authorize = new URL(String(start.headers.location));
  const picker = await request(authorize, { dispatcher: idp });
  expect(picker.statusCode).toBe(200);
  expect(await picker.body.text()).toContain(account.username);
  const form = new URLSearchParams([...authorize.searchParams, ['login', account.username], ['passwd', account.password]]);
  const signedIn = await request(new URL('select', authorize), {
    method: 'POST',
    body: form.toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    dispatcher: idp,
  });
  await signedIn.body.dump();
  expect(signedIn.statusCode).toBe(302);
  const back = new URL(String(signedIn.headers.location));
  expect(`${back.origin}${back.pathname}`).toBe(`${PUBLIC_BASE_URL}/admin/assistant/callback`);
  const callback = await t.app.inject({ method: 'GET', url: back.pathname + back.search, headers: { cookie: users[who].jar.header() } });
  return { authorize, back, callback };
}

async function respond(who: Who, body: Record<string, unknown>, token = users[who].pat) {
  return t.app.inject({ method: 'POST', url: '/api/ai/assistant/respond', headers: { authorization: `Bearer ${token}` }, payload: body });
}

interface StatusBody {
  setups: Array<{ slug: string }>;
  connections: Array<{ setup_slug: string; status: string; last_validation: { ok: boolean; code: string | null; missing_scopes: string[] } | null }>;
}
const status = async (who: Who) =>
  (await t.app.inject({ method: 'GET', url: '/api/ai/assistant/status', headers: { cookie: users[who].jar.header() } })).json<StatusBody>();

describe('tenant setups', () => {
  it('an administrator creates a setup on the page; the secret is stored encrypted and never shown again', async () => {
    const res = await postForm('admin', '/admin/assistant/setups', {
      slug: 'contoso',
      display_name: 'Contoso assistant',
      client_id: CLIENT_ID,
      credential_kind: 'secret',
      client_secret: CLIENT_SECRET,
      redirect_uri: `${PUBLIC_BASE_URL}/admin/assistant/callback`,
      graph_url: graph.url,
      authority_host: identity.url,
      scopes: '',
      time_zone: 'Europe/Stockholm',
    });
    expect(res.statusCode, res.body.slice(0, 500)).toBe(303);
    expect(res.headers.location).toBe('/admin/assistant?notice=saved&slug=contoso');
    const page = await t.app.inject({ method: 'GET', url: '/admin/assistant', headers: { cookie: users.admin.jar.header() } });
    expect(page.body).toContain('Contoso assistant');
    expect(page.body).not.toContain(CLIENT_SECRET);
    const rows = await t.orm.em.getConnection().execute('select * from assistant_setups');
    expect(rows).toHaveLength(1);
    expect(JSON.stringify(rows)).not.toContain(CLIENT_SECRET);
    expect(rows[0]!.credential_enc).toMatch(/^v1\./);
    expect(rows[0]!.scopes).toEqual(['offline_access', 'openid', 'profile', 'User.Read', ...ASSISTANT_SCOPES]);

    const api = await t.app.inject({ method: 'GET', url: '/api/ai/assistant/status', headers: { cookie: users.admin.jar.header() } });
    expect(api.statusCode).toBe(200);
    expect(api.body).not.toContain(CLIENT_SECRET);
    expect(api.json().setups[0]).toMatchObject({ slug: 'contoso', client_id: CLIENT_ID, credential_kind: 'secret', time_zone: 'Europe/Stockholm' });
  });

  it('refuses invalid setups (422 naming the field) and setups from non-administrators (403)', async () => {
    const bad = await postForm('admin', '/admin/assistant/setups', {
      slug: 'Bad Slug',
      display_name: 'x',
      client_id: 'not-a-guid',
      client_secret: 's',
      authority_host: 'http://login.example/tenant',
      graph_url: graph.url,
      time_zone: 'Mars/Olympus',
    });
    expect(bad.statusCode).toBe(422);
    expect(bad.body).toContain('slug');
    const denied = await postForm('alice', '/admin/assistant/setups', { slug: 'x', display_name: 'x', client_id: CLIENT_ID, client_secret: 's' });
    expect(denied.statusCode).toBe(403);
  });

  it('delegates the setup to users; others do not see it and cannot connect', async () => {
    for (const who of ['alice', 'bob', 'carol', 'dave', 'erin', 'frank', 'gina', 'kim'] as const) {
      const res = await postForm('admin', '/admin/assistant/setups/contoso/delegates', { username: names[who] });
      expect(res.statusCode).toBe(303);
    }
    expect((await status('alice')).setups.map((s) => s.slug)).toEqual(['contoso']);
    expect((await status('ivan')).setups).toEqual([]);
    const refused = await postForm('ivan', '/admin/assistant/setups/contoso/connect', {});
    expect(refused.statusCode).toBe(403);
    expect(refused.body).toContain('has not been delegated to you');
    // A delegated user (not an administrator) finds the page in the navigation; the admin through /admin.
    const home = (who: Who) => t.app.inject({ method: 'GET', url: '/', headers: { cookie: users[who].jar.header() } });
    expect((await home('alice')).body).toContain('<a href="/admin/assistant"');
    const adminHome = (await home('admin')).body;
    expect(adminHome).not.toMatch(/<nav class="main"[^]*href="\/admin\/assistant"[^]*<\/nav>/);
    expect(adminHome).toContain('<a href="/admin"');
  });
});

describe('connect', () => {
  it('signs in through the organizations authority with PKCE and account selection, validates, and marks the connection ready', async () => {
    const { authorize, back, callback } = await connect('alice', accounts.alice);
    expect(authorize.origin).toBe(identity.url);
    expect(authorize.pathname).toBe('/organizations/oauth2/v2.0/authorize');
    const q = authorize.searchParams;
    expect(q.get('prompt')).toBe('select_account');
    expect(q.get('code_challenge_method')).toBe('S256');
    expect(q.get('response_type')).toBe('code');
    expect(q.get('client_id')).toBe(CLIENT_ID);
    expect(q.get('state')).toMatch(/^[A-Za-z0-9_-]{40,}$/);
    for (const s of ['offline_access', 'openid', 'profile', 'User.Read', ...ASSISTANT_SCOPES]) expect(q.get('scope')?.split(' ')).toContain(s);
    // The code was redeemed with the verifier of that challenge (the stand-in checks S256).
    expect(identity.tokenRequests.at(-1)?.get('grant_type')).toBe('authorization_code');
    expect(callback.statusCode, callback.body.slice(0, 500)).toBe(303);
    expect(callback.headers.location).toBe('/admin/assistant?notice=connected&slug=contoso');
    const s = await status('alice');
    expect(s.connections).toEqual([expect.objectContaining({ setup_slug: 'contoso', status: 'ready', tenant_id: TENANT, account: accounts.alice.username })]);
    expect(s.connections[0]!.last_validation).toMatchObject({ ok: true, code: null });

    // The state is single-use: replaying the identity provider's answer is refused.
    const replay = await t.app.inject({ method: 'GET', url: back.pathname + back.search, headers: { cookie: users.alice.jar.header() } });
    expect(replay.statusCode).toBe(422);
    expect(replay.body).toContain('already used');
    // The token cache is stored encrypted.
    const [row] = await t.orm.em.getConnection().execute('select token_cache_enc from assistant_connections where user_id = ?', [users.alice.id]);
    expect(row!.token_cache_enc).toMatch(/^v1\./);
  });

  it('binds the state to the browser session that started the sign-in', async () => {
    const start = await postForm('alice', '/admin/assistant/setups/contoso/connect', {});
    const authorize = new URL(String(start.headers.location));
    const form = new URLSearchParams([...authorize.searchParams, ['login', accounts.alice.username], ['passwd', accounts.alice.password]]);
    const signedIn = await request(new URL('select', authorize), {
      method: 'POST',
      body: form.toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      dispatcher: idp,
    });
    await signedIn.body.dump();
    const back = new URL(String(signedIn.headers.location));
    // Another session of the same user (another browser) cannot finish it.
    const { jar: other } = await browserLogin(t.app, names.alice, users.alice.password);
    const res = await t.app.inject({ method: 'GET', url: back.pathname + back.search, headers: { cookie: other.header() } });
    expect(res.statusCode).toBe(403);
    expect(res.body).toContain('another browser session');
  });

  it('refuses a personal Microsoft account (personal-account tenant)', async () => {
    const { callback } = await connect('bob', accounts.bob);
    expect(callback.statusCode).toBe(403);
    expect(callback.body).toContain('data-code="personal_account"');
    const s = await status('bob');
    expect(s.connections[0]).toMatchObject({ status: 'invalid', last_validation: { ok: false, code: 'personal_account' } });
    const res = await respond('bob', { user_prompt: 'hi' });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toMatchObject({ ok: false, reason: 'forbidden', code: 'personal_account' });
  });

  it('refuses an ID token issued to another application (audience)', async () => {
    const { callback } = await connect('carol', accounts.carol);
    expect(callback.statusCode).toBe(403);
    expect(callback.body).toContain('data-code="wrong_audience"');
    expect((await respond('carol', { user_prompt: 'hi' })).json()).toMatchObject({ code: 'wrong_audience' });
  });

  it('refuses an ID token whose signature does not verify with the provider’s published keys', async () => {
    const { callback } = await connect('kim', accounts.kim);
    expect(callback.statusCode).toBe(403);
    expect(callback.body).toContain('data-code="id_token_invalid"');
    expect((await status('kim')).connections[0]).toMatchObject({ status: 'invalid', last_validation: { code: 'id_token_invalid' } });
  });

  it('names the delegated permissions that were not granted (403)', async () => {
    const { callback } = await connect('dave', accounts.dave);
    expect(callback.statusCode).toBe(403);
    expect(callback.body).toContain('Mail.Read, Chat.Read');
    const res = await respond('dave', { user_prompt: 'hi' });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toMatchObject({ code: 'scope_missing', missing_scopes: ['Mail.Read', 'Chat.Read'] });
  });

  it('shows an identity-provider error code with what to do (AADSTS50020)', async () => {
    const { callback } = await connect('frank', accounts.frank);
    expect(callback.statusCode).toBe(403);
    expect(callback.body).toContain('AADSTS50020');
    expect(callback.body).toContain('any organizational directory');
    expect(callback.body).toContain('do not pin a tenant');
  });

  it('authenticates with a client certificate (signed client assertion) instead of a secret', async () => {
    const saved = await postForm('admin', '/admin/assistant/setups', {
      slug: 'northwind',
      display_name: 'Northwind (certificate)',
      client_id: CERT_CLIENT_ID,
      credential_kind: 'certificate',
      certificate_pem: CERT_PEM,
      private_key_pem: KEY_PEM,
      graph_url: graph.url,
      authority_host: identity.url,
      time_zone: 'UTC',
    });
    expect(saved.statusCode, saved.body.slice(0, 400)).toBe(303);
    const [row] = await t.orm.em
      .getConnection()
      .execute<Array<{ credential_enc: string }>>("select credential_enc from assistant_setups where slug = 'northwind'");
    expect(row!.credential_enc).not.toContain('PRIVATE KEY');
    expect((await postForm('admin', '/admin/assistant/setups/northwind/delegates', { username: names.lena })).statusCode).toBe(303);
    const { callback } = await connect('lena', accounts.lena, 'northwind');
    expect(callback.statusCode, callback.body.slice(0, 400)).toBe(303);
    const assertion = identity.tokenRequests.at(-1)!;
    expect(assertion.get('client_assertion_type')).toBe('urn:ietf:params:oauth:client-assertion-type:jwt-bearer');
    expect(assertion.get('client_secret')).toBeNull();
    const res = await respond('lena', { user_prompt: 'hello from a certificate' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().connector).toMatchObject({ slug: 'northwind', tenant_id: OTHER_TENANT });
  });

  it('sends administrators to the tenant-wide admin consent endpoint and records the answer', async () => {
    const res = await postForm('admin', '/admin/assistant/setups/contoso/consent', {});
    expect(res.statusCode).toBe(303);
    const url = new URL(String(res.headers.location));
    expect(`${url.origin}${url.pathname}`).toBe(`${identity.url}/organizations/v2.0/adminconsent`);
    expect(url.searchParams.get('client_id')).toBe(CLIENT_ID);
    expect(url.searchParams.get('scope')).toContain('https://graph.microsoft.com/Mail.Read');
    const answer = await request(url, { dispatcher: idp });
    await answer.body.dump();
    const back = new URL(String(answer.headers.location));
    const cb = await t.app.inject({ method: 'GET', url: back.pathname + back.search, headers: { cookie: users.admin.jar.header() } });
    expect(cb.statusCode).toBe(303);
    expect(cb.headers.location).toBe('/admin/assistant?notice=consent&slug=contoso');
    expect((await postForm('alice', '/admin/assistant/setups/contoso/consent', {})).statusCode).toBe(403);
  });
});

describe('POST /api/ai/assistant/respond', () => {
  it('answers with the assistant reply, connector metadata and diagnostics naming the upstream assistant', async () => {
    graph.mode = 'reply';
    const before = graph.calls.length;
    const res = await respond('alice', {
      user_prompt: 'Summarize the thread',
      context: 'Thread: the launch moves to Friday.',
      mood: 'friendly',
      instructions: ['be brief'],
      custom_instruction: 'sign as Alice',
      response_language: 'sv',
      use_web_search: true,
      model: 'gpt-4o',
      temperature: 0.2,
    });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({
      ok: true,
      reply: `Assistant reply for ${accounts.alice.username}: Summarize the thread`,
      connector: { slug: 'contoso', display_name: 'Contoso assistant', tenant_id: TENANT, account: accounts.alice.username },
      diagnostics: { provider: 'graph_assistant', time_zone: 'Europe/Stockholm', web_search: true, ignored_fields: ['model', 'temperature'] },
    });
    const calls = graph.calls.slice(before);
    expect(calls.map((c) => c.path)).toEqual(['/beta/assistant/conversations', `/beta/assistant/conversations/${body.connector.conversation_id}/chat`]);
    expect(calls[1]!.body).toMatchObject({
      message: { text: expect.stringContaining('Answer in the language with code "sv"') },
      locationHint: { timeZone: 'Europe/Stockholm' },
      additionalContext: [{ text: 'Thread: the launch moves to Friday.' }],
      contextualResources: { webContext: { isWebEnabled: true } },
    });
    expect((calls[1]!.body as { message: { text: string } }).message.text).toContain('Tone: friendly.');
  });

  it('401 without a resolvable user, 403 for a token without the scope, 422 for an invalid request', async () => {
    expect((await t.app.inject({ method: 'POST', url: '/api/ai/assistant/respond', payload: { user_prompt: 'x' } })).statusCode).toBe(401);
    expect((await respond('alice', { user_prompt: 'x' }, 'sonar_pat_notatoken')).statusCode).toBe(401);
    const spamOnly = (await t.accounts.createPersonalToken(users.alice.id, { name: 'spam', scopes: ['spam.analyze'] })).token;
    expect((await respond('alice', { user_prompt: 'x' }, spamOnly)).statusCode).toBe(403);
    const empty = await respond('alice', { mood: 'calm' });
    expect(empty.statusCode).toBe(422);
    expect(empty.json()).toMatchObject({ ok: false, reason: 'validation_failed', errors: { user_prompt: [expect.any(String)] } });
    expect((await respond('alice', { user_prompt: 'x', web_search_required: true, use_web_search: false })).statusCode).toBe(422);
    expect((await respond('alice', { user_prompt: 'x', response_language: 'not a language' })).statusCode).toBe(422);
  });

  it('connector_slug is an administrator-only override; an unknown slug is 422', async () => {
    const res = await respond('alice', { user_prompt: 'x', connector_slug: 'contoso' });
    expect(res.statusCode).toBe(403);
    expect(res.json().code).toBe('connector_slug_admin_only');
    const unknown = await respond('admin', { user_prompt: 'x', connector_slug: 'nope' });
    expect(unknown.statusCode).toBe(422);
    const notConnected = await respond('admin', { user_prompt: 'x', connector_slug: 'contoso' });
    expect(notConnected.statusCode).toBe(409);
  });

  it('409 with a reconnect link when the user has no connection', async () => {
    const res = await respond('hank', { context: 'Some context' });
    expect(res.statusCode).toBe(409);
    expect(res.json()).toMatchObject({ ok: false, reason: 'conflict', code: 'not_connected', reconnect_url: `${PUBLIC_BASE_URL}/admin/assistant` });
  });

  it('an expired refresh token asks for reconnect (409) and marks the connection', async () => {
    const { callback } = await connect('erin', accounts.erin);
    expect(callback.statusCode, callback.body.slice(0, 300)).toBe(303);
    // Access tokens of 60 s are within MSAL's refresh offset: each call refreshes through the cache.
    const ok = await respond('erin', { user_prompt: 'hello' });
    expect(ok.statusCode).toBe(200);
    expect(ok.json().diagnostics.token_source).toBe('refresh');
    identity.expireRefreshTokens(accounts.erin.username);
    const res = await respond('erin', { user_prompt: 'hello again' });
    expect(res.statusCode).toBe(409);
    expect(res.json()).toMatchObject({
      code: 'reconnect_required',
      identity_provider_code: 'AADSTS700082',
      reconnect_url: `${PUBLIC_BASE_URL}/admin/assistant`,
    });
    expect((await status('erin')).connections[0]).toMatchObject({ status: 'reconnect_required' });
    expect((await respond('erin', { user_prompt: 'and again' })).statusCode).toBe(409);
    // Reconnecting makes it ready again.
    expect((await connect('erin', accounts.erin)).callback.statusCode).toBe(303);
    expect((await respond('erin', { user_prompt: 'back' })).statusCode).toBe(200);
  });

  it('a missing assistant licence is a clear 403 and a "licence missing" state', async () => {
    const { callback } = await connect('gina', accounts.gina);
    expect(callback.statusCode).toBe(303);
    expect((await status('gina')).connections[0]).toMatchObject({ status: 'licence_missing', last_validation: { code: 'licence_missing' } });
    const res = await respond('gina', { user_prompt: 'hi' });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toMatchObject({ reason: 'forbidden', code: 'licence_missing' });
    expect(res.json().message).toContain('licence');
  });

  it('502 when the upstream answers 5xx, garbage or no reply, or hangs (within the upstream timeout); never another provider', async () => {
    for (const [mode, code] of [
      ['server_error', 'upstream_error'],
      ['garbage', 'upstream_invalid'],
      ['no_reply', 'upstream_invalid'],
      ['hang', 'upstream_timeout'],
    ] as const) {
      graph.mode = mode;
      const res = await respond('alice', { user_prompt: `mode ${mode}` });
      expect(res.statusCode, mode).toBe(502);
      expect(res.json()).toMatchObject({ ok: false, reason: 'bad_gateway', code });
    }
    graph.mode = 'reply';
    expect((await respond('alice', { user_prompt: 'fine again' })).statusCode).toBe(200);
    expect(openai.requests).toHaveLength(0);
  }, 60_000);

  it('limits requests per user (429 with Retry-After), not per address', async () => {
    // The budget is per calendar minute: a minute boundary inside the loop restarts the count once,
    // so up to two budgets' worth of requests are allowed before the 429 must have come.
    let limited: Awaited<ReturnType<typeof respond>> | null = null;
    for (let i = 0; i < 62 && !limited; i++) {
      const res = await respond('hank', { user_prompt: 'x' });
      if (res.statusCode === 429) limited = res;
      else expect(res.statusCode).toBe(409);
    }
    expect(limited?.json()).toMatchObject({ ok: false, reason: 'rate_limited', code: 'rate_limited' });
    expect(Number(limited?.headers['retry-after'])).toBeGreaterThan(0);
    // Another user from the same address is not affected.
    expect((await respond('alice', { user_prompt: 'still fine' })).statusCode).toBe(200);
  });
});

describe('admin CLI', () => {
  const cli = fileURLToPath(new URL('../../coordinator/dist/cli.js', import.meta.url));
  const run = (args: string[], env: Record<string, string> = {}) =>
    new Promise<{ code: number; out: string; err: string }>((resolve) =>
      execFile(process.execPath, [cli, '--json', ...args], { env: { ...process.env, DATABASE_URL: t.db.url, ...env } }, (err, stdout, stderr) =>
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out: stdout, err: stderr }),
      ),
    );

  it('saves a setup (secret from the environment, stored encrypted), lists it, delegates it and reads the audit log', async () => {
    const args = [
      'assistant:setup:save',
      'fabrikam',
      '--client-id',
      CLIENT_ID,
      '--graph-url',
      graph.url,
      '--authority-host',
      identity.url,
      '--time-zone',
      'Europe/Oslo',
    ];
    const unconfigured = await run(args, { ASSISTANT_CLIENT_SECRET: CLI_SECRET });
    expect(unconfigured.code).toBe(1);
    expect(unconfigured.err).toContain('ASSISTANT_SECRET_KEY');
    const saved = await run(args, { ASSISTANT_SECRET_KEY: SECRET_KEY, ASSISTANT_CLIENT_SECRET: CLI_SECRET });
    expect(saved.code, saved.err).toBe(0);
    expect(JSON.parse(saved.out).setup).toMatchObject({
      slug: 'fabrikam',
      client_id: CLIENT_ID,
      time_zone: 'Europe/Oslo',
      redirect_uri: `${PUBLIC_BASE_URL}/admin/assistant/callback`,
    });
    expect(saved.out).not.toContain(CLI_SECRET);
    const delegated = await run(['assistant:delegate', 'fabrikam', names.alice]);
    expect(delegated.code, delegated.err).toBe(0);
    const list = await run(['assistant:setup:list']);
    expect(JSON.parse(list.out).setups.find((x: { slug: string }) => x.slug === 'fabrikam')).toMatchObject({ delegates: [{ username: names.alice }] });
    expect(list.out).not.toContain(CLI_SECRET);
    const audit = await run(['assistant:audit', '--user', names.alice, '--action', 'connect', '--limit', '5']);
    expect(audit.code, audit.err).toBe(0);
    const entries = JSON.parse(audit.out).entries as Array<{ action: string; username: string }>;
    expect(entries.length).toBeGreaterThan(0);
    expect(entries.every((e) => e.action === 'connect' && e.username === names.alice)).toBe(true);
    expect((await run(['assistant:delegate', 'nope', names.alice])).code).toBe(1);
  }, 60_000);
});

describe('audit log', () => {
  it('records connects, refreshes, validations and requests with ids and codes', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/ai/assistant/audit?limit=1000', headers: { cookie: users.admin.jar.header() } });
    expect(res.statusCode).toBe(200);
    const entries = res.json().entries as Array<Record<string, string | number | null>>;
    const has = (e: Record<string, unknown>) => entries.some((row) => Object.entries(e).every(([k, v]) => row[k] === v));
    expect(has({ action: 'connect', result: 'ok', username: names.alice, tenant_id: TENANT })).toBe(true);
    expect(has({ action: 'validation', result: 'refused', username: names.bob, error_code: 'personal_account' })).toBe(true);
    expect(has({ action: 'validation', result: 'refused', username: names.carol, error_code: 'wrong_audience' })).toBe(true);
    expect(has({ action: 'connect', result: 'failed', username: names.frank, error_code: 'AADSTS50020' })).toBe(true);
    expect(has({ action: 'refresh', result: 'ok', username: names.erin })).toBe(true);
    expect(has({ action: 'refresh', result: 'reconnect_required', username: names.erin, error_code: 'AADSTS700082' })).toBe(true);
    expect(has({ action: 'request', result: 'ok', username: names.alice })).toBe(true);
    expect(has({ action: 'request', result: 'upstream_error', username: names.alice, error_code: 'upstream_timeout' })).toBe(true);
    expect(has({ action: 'request', result: 'licence_missing', username: names.gina })).toBe(true);
    expect(entries.every((e) => typeof e.request_id === 'string' || e.action === 'setup_save' || e.action === 'delegate')).toBe(true);
    expect((await t.app.inject({ method: 'GET', url: '/api/ai/assistant/audit', headers: { cookie: users.alice.jar.header() } })).statusCode).toBe(403);
  });

  it('neither the audit table nor the application log nor the stored rows hold state, codes, tokens or secrets', async () => {
    const db = t.orm.em.getConnection();
    const audit = JSON.stringify(await db.execute('select * from assistant_audit'));
    const stored = JSON.stringify(
      await db.execute('select s.credential_enc, c.token_cache_enc from assistant_setups s left join assistant_connections c on c.setup_id = s.id'),
    );
    const log = logLines.join('');
    expect(log.length).toBeGreaterThan(1000);
    const secrets = [...identity.secretsSeen, CLIENT_SECRET, CLI_SECRET, SECRET_KEY, ...Object.values(users).map((u) => u.pat)];
    expect(secrets.length).toBeGreaterThan(30);
    const leaks = secrets.filter((s) => audit.includes(s) || log.includes(s) || stored.includes(s));
    expect(leaks).toEqual([]);
  });
});
