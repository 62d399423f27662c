import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserLogin, createJwtUser, createTestApp, extractCsrf, type TestApp, type TestUser } from '../support/harness.js';
import { registerModelWorker } from '../support/model-workers.js';

/**
 * The built-in generator of the speech token API's token (`provider_speech_api`, scope
 * `speech.api`) over the real app, PostgreSQL and Redis: the JSON route, the /account button and
 * the CLI; who may call it (401, 403), what it validates (422), that the token it returns works on
 * /api/speech/transcribe, and that generating again revokes the previous one.
 */

const run = promisify(execFile);
const ROUTE = '/api/account/tokens/speech-api';
const CALLBACK = 'https://hooks.example.net/speech/done';

let t: TestApp;
let alice: TestUser; // speech.use + speech.api
let noApi: TestUser; // speech.use only
let noUse: TestUser; // speech.api only
let root: TestUser; // administrator without explicit permissions

const post = (headers: Record<string, string>, payload?: unknown) =>
  t.app.inject({ method: 'POST', url: ROUTE, headers, ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }) });

const transcribe = (token: string) =>
  t.app.inject({
    method: 'POST',
    url: '/api/speech/transcribe',
    headers: { authorization: `Bearer ${token}` },
    payload: { callback_url: CALLBACK, source_url: 'https://media.example.org/talk.mp3' },
  });

async function tokensNamed(userId: number, name = 'provider_speech_api') {
  return t.orm.em
    .getConnection()
    .execute<Array<{ id: number; scopes: string[]; revoked: boolean }>>(
      'select id, scopes, revoked_at is not null as revoked from personal_access_tokens where user_id = ? and name = ? order by id',
      [userId, name],
    );
}

beforeAll(async () => {
  t = await createTestApp({ env: { PUBLIC_BASE_URL: 'https://sonar.example.org', TOKEN_RATE_LIMIT_PER_MINUTE: '1000', WORKER_PRESENCE_TTL_MS: '900000' } });
  await registerModelWorker(t.orm, 'models', ['small'], { present: true });
  alice = await createJwtUser(t, ['speech.use', 'speech.api']);
  noApi = await createJwtUser(t, ['speech.use']);
  noUse = await createJwtUser(t, ['speech.api']);
  root = await createJwtUser(t, [], { isAdmin: true });
});

afterAll(async () => {
  await t?.close();
});

describe('POST /api/account/tokens/speech-api', () => {
  it('401 without credentials, with a bad JWT, and with a personal token (sessions and JWTs only)', async () => {
    const pat = (await t.accounts.createPersonalToken(alice.id, { name: 'other', scopes: ['speech.api'] })).token;
    for (const headers of [{}, { authorization: 'Bearer not-a-jwt' }, { authorization: `Bearer ${pat}` }, { 'x-api-key': pat }] as Array<
      Record<string, string>
    >) {
      const res = await post(headers);
      expect(res.statusCode, JSON.stringify(headers)).toBe(401);
      expect(res.json()).toMatchObject({ ok: false, reason: 'unauthenticated' });
    }
    expect(await tokensNamed(alice.id)).toEqual([]);
  });

  it('403 for users lacking speech.api or speech.use, naming the permission; nothing is created', async () => {
    for (const [who, missing] of [
      [noApi, 'speech.api'],
      [noUse, 'speech.use'],
    ] as const) {
      const res = await post(who.auth);
      expect(res.statusCode, res.body).toBe(403);
      expect(res.json()).toMatchObject({ ok: false, reason: 'forbidden', message: expect.stringContaining(missing) });
      expect(await tokensNamed(who.id)).toEqual([]);
    }
  });

  it('422 for an invalid expiry or fields it does not take (name and scopes are fixed); nothing is created', async () => {
    for (const [payload, field] of [
      [{ expires_in_days: 0 }, 'expires_in_days'],
      [{ expires_in_days: 3651 }, 'expires_in_days'],
      [{ expires_in_days: 'soon' }, 'expires_in_days'],
      [{ name: 'mine' }, 'body'],
      [{ scopes: ['ai.assistant'] }, 'body'],
    ] as const) {
      const res = await post(alice.auth, payload);
      expect(res.statusCode, JSON.stringify(payload)).toBe(422);
      expect(res.json()).toMatchObject({ ok: false, reason: 'validation_failed' });
      expect(Object.keys(res.json().errors), JSON.stringify(payload)).toContain(field);
    }
    expect(await tokensNamed(alice.id)).toEqual([]);
  });

  it('creates provider_speech_api (scope speech.api, shown once) that works on /api/speech/transcribe; again rotates it', async () => {
    const first = await post(alice.auth);
    expect(first.statusCode, first.body).toBe(201);
    const a = first.json();
    expect(a).toEqual({
      ok: true,
      token: expect.stringMatching(/^sonar_pat_/),
      callback_secret: expect.stringMatching(/^[0-9a-f]{64}$/),
      token_info: {
        id: expect.any(Number),
        name: 'provider_speech_api',
        scopes: ['speech.api'],
        prefix: expect.any(String),
        created_at: expect.any(String),
        expires_at: null,
        last_used_at: null,
        revoked_at: null,
      },
      revoked_token_ids: [],
    });
    expect(a.token.startsWith(a.token_info.prefix)).toBe(true);
    const queued = await transcribe(a.token);
    expect(queued.statusCode, queued.body).toBe(201);
    expect(queued.json().job).toMatchObject({ queue_channel: 'api', callback: { status: 'pending' } });

    // Generating again: a new token, the previous one revoked in the same step; other tokens untouched.
    const second = await post(alice.auth, { expires_in_days: 30 });
    expect(second.statusCode, second.body).toBe(201);
    const b = second.json();
    expect(b.token).not.toBe(a.token);
    expect(b.callback_secret).not.toBe(a.callback_secret);
    expect(b.revoked_token_ids).toEqual([a.token_info.id]);
    expect(Date.parse(b.token_info.expires_at) - Date.now()).toBeGreaterThan(29 * 86400_000);
    expect(await tokensNamed(alice.id)).toEqual([
      { id: a.token_info.id, scopes: ['speech.api'], revoked: true },
      { id: b.token_info.id, scopes: ['speech.api'], revoked: false },
    ]);
    expect((await tokensNamed(alice.id, 'other')).map((x) => x.revoked)).toEqual([false]);
    const old = await transcribe(a.token);
    expect(old.statusCode).toBe(401);
    expect(old.json().message).toMatch(/revoked/);
    expect((await transcribe(b.token)).statusCode).toBe(201);
  });

  it('concurrent generations leave exactly one active token', async () => {
    const user = await createJwtUser(t, ['speech.use', 'speech.api']);
    const answers = await Promise.all(Array.from({ length: 4 }, () => post(user.auth)));
    expect(answers.map((r) => r.statusCode)).toEqual([201, 201, 201, 201]);
    const rows = await tokensNamed(user.id);
    expect(rows).toHaveLength(4);
    expect(rows.filter((r) => !r.revoked)).toHaveLength(1);
    expect(answers.flatMap((r) => r.json().revoked_token_ids as number[]).sort()).toEqual(rows.filter((r) => r.revoked).map((r) => r.id));
  });

  it('administrators have every permission', async () => {
    const res = await post(root.auth);
    expect(res.statusCode, res.body).toBe(201);
    expect((await transcribe(res.json().token)).statusCode).toBe(201);
  });

  it('is documented in OpenAPI with its statuses and session/JWT security', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    const op = doc.paths[ROUTE].post;
    expect(Object.keys(op.responses).sort()).toEqual(['201', '401', '403', '422', '429']);
    expect(op.security).toEqual([{ session: [] }, { bearerJwt: [] }]);
  });
});

describe('the /account page', () => {
  async function signIn(user: TestUser) {
    const { jar } = await browserLogin(t.app, user.name, user.password);
    const page = await t.app.inject({ method: 'GET', url: '/account', headers: { cookie: jar.header() } });
    return { jar, page, csrf: extractCsrf(page.body) };
  }
  const press = (cookie: string, csrf?: string) =>
    t.app.inject({
      method: 'POST',
      url: '/account/tokens/speech-api',
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
      payload: csrf ? `_csrf=${encodeURIComponent(csrf)}` : '',
    });

  it('has a button that generates, then rotates, the token and shows it once (CSRF required)', async () => {
    const user = await createJwtUser(t, ['speech.use', 'speech.api']);
    const { jar, page, csrf } = await signIn(user);
    expect(page.body).toContain('Generate speech API token');
    expect((await press(jar.header())).statusCode).toBe(403);
    expect(await tokensNamed(user.id)).toEqual([]);

    const made = await press(jar.header(), csrf);
    expect(made.statusCode).toBe(201);
    const token = /data-testid="new-token">([^<]+)</.exec(made.body)?.[1];
    expect(token).toMatch(/^sonar_pat_/);
    expect(made.body).toContain('data-testid="callback-secret"');
    expect(made.body).toContain('Rotate speech API token');
    expect((await transcribe(token!)).statusCode).toBe(201);

    const again = await press(jar.header(), extractCsrf(made.body));
    expect(again.statusCode).toBe(201);
    expect(again.body).toContain('The previous provider_speech_api token was revoked.');
    expect((await transcribe(token!)).statusCode).toBe(401);
    expect((await tokensNamed(user.id)).map((r) => r.revoked)).toEqual([true, false]);
  });

  it('tells a user without the permissions whom to ask, and refuses the post with 403', async () => {
    const { jar, page, csrf } = await signIn(noApi);
    expect(page.body).not.toContain('Generate speech API token');
    expect(page.body).toContain('It needs the permissions speech.api and speech.use');
    const res = await press(jar.header(), csrf);
    expect(res.statusCode).toBe(403);
    expect(res.body).toContain('lacks speech.api');
    expect(await tokensNamed(noApi.id)).toEqual([]);
  });
});

describe('CLI token:speech-api (compiled CLI; build with tsc -b first)', () => {
  const cli = fileURLToPath(new URL('../../coordinator/dist/cli.js', import.meta.url));
  const env = () => ({ PATH: process.env.PATH ?? '', DATABASE_URL: t.db.url });

  it('generates and rotates a user’s token; refuses a user lacking the permissions (exit 1)', async () => {
    const user = await createJwtUser(t, ['speech.use', 'speech.api']);
    const first = JSON.parse((await run(process.execPath, [cli, '--json', 'token:speech-api', user.name], { env: env() })).stdout);
    expect(first).toMatchObject({ ok: true, token: { name: 'provider_speech_api', scopes: ['speech.api'] }, revoked_token_ids: [] });
    expect((await transcribe(first.secret)).statusCode).toBe(201);
    const second = await run(process.execPath, [cli, 'token:speech-api', user.name, '--expires-days', '7'], { env: env() });
    expect(second.stdout).toContain(`revoked the previous provider_speech_api token(s): ${first.token.id}`);
    expect((await transcribe(first.secret)).statusCode).toBe(401);
    const refused = await run(process.execPath, [cli, 'token:speech-api', noUse.name], { env: env() }).catch(
      (e: unknown) => e as { code: number; stderr: string },
    );
    expect(refused).toMatchObject({ code: 1, stderr: expect.stringContaining('lacks speech.use') });
  }, 60_000);
});
