import type {} from '@fastify/jwt';
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserLogin, createTestApp, randomName, type TestApp } from '../support/harness.js';
import { registerModelWorker } from '../support/model-workers.js';
import { multipartForm, type FormPart } from '../support/multipart.js';

/**
 * Token-authenticated server-to-server speech API (`/api/speech/transcribe*`) over
 * the real app, PostgreSQL and Redis: personal-token auth (Bearer and the legacy transports),
 * scope and permission checks, submission with the required callback_url by URL and by multipart
 * upload, the API-channel visibility rules, throttling and the OpenAPI document.
 */

const PUBLIC_BASE = 'https://sonar.example.org';
const CALLBACK = 'https://hooks.example.net/speech/done?client=42';

interface TokenUser {
  id: number;
  name: string;
  password: string;
  token: string;
  tokenId: number;
  jwt: { authorization: string };
  bearer: { authorization: string };
}

let t: TestApp;
let mediaDir: string;
let fixtures: string;
let wav: Buffer;
let alice: TokenUser; // speech.use + speech.api, token scope speech.api
let bob: TokenUser; // speech.use + speech.api
let manager: TokenUser; // speech.use + speech.api + speech.manage
let noApi: TokenUser; // speech.use only (token has the scope, the owner lacks speech.api)
let noUse: TokenUser; // speech.api only
let wrongScope: string; // alice's token with scope ai.assistant only

async function mkUser(permissions: string[], scopes: string[] = ['speech.api']): Promise<TokenUser> {
  const name = randomName('api');
  const { user, password } = await t.accounts.createUser({ username: name, permissions });
  const { token, record } = await t.accounts.createPersonalToken(user.id, { name: 'integration', scopes });
  const jwt = t.app.jwt.sign({ sub: String(user.id), typ: 'access' });
  return { id: user.id, name, password, token, tokenId: record.id, jwt: { authorization: `Bearer ${jwt}` }, bearer: { authorization: `Bearer ${token}` } };
}

const form = (parts: FormPart[]) => multipartForm(parts, 'audio/wav');

function submit(headers: Record<string, string>, payload: Record<string, unknown>, url = '/api/speech/transcribe') {
  return t.app.inject({ method: 'POST', url, headers, payload });
}

function upload(headers: Record<string, string>, parts: FormPart[]) {
  const { payload, contentType } = form(parts);
  return t.app.inject({ method: 'POST', url: '/api/speech/transcribe', headers: { ...headers, 'content-type': contentType }, payload });
}

function get(url: string, headers: Record<string, string> = {}) {
  return t.app.inject({ method: 'GET', url, headers });
}

async function sql<T>(query: string, params: unknown[] = []): Promise<T[]> {
  return t.orm.em.getConnection().execute<T[]>(query, params);
}

async function jobCount(): Promise<number> {
  return Number((await sql<{ n: string }>('select count(*) as n from speech_jobs'))[0]!.n);
}

async function incomingFiles(): Promise<string[]> {
  try {
    return await readdir(path.join(mediaDir, 'incoming'));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
}

async function apiJob(user: TokenUser, extra: Record<string, unknown> = {}) {
  const res = await submit(user.bearer, { callback_url: CALLBACK, source_url: 'https://media.example.org/talk.mp3', ...extra });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().job as { id: number; [k: string]: unknown };
}

async function webJob(user: TokenUser) {
  const res = await submit(user.jwt, { source_url: 'https://media.example.org/web.mp3' }, '/api/speech/jobs');
  expect(res.statusCode, res.body).toBe(201);
  return res.json().job as { id: number; queue_channel: string };
}

beforeAll(async () => {
  fixtures = await mkdtemp(path.join(os.tmpdir(), 'sonar-token-api-fixtures-'));
  mediaDir = await mkdtemp(path.join(os.tmpdir(), 'sonar-token-api-media-'));
  const file = path.join(fixtures, 'f.wav');
  execFileSync('espeak-ng', ['-v', 'en-us', '-w', file, 'hello world']);
  wav = await readFile(file);
  expect(wav.subarray(8, 12).toString()).toBe('WAVE');
  // The specification's budget (the harness raises it for other files): the throttle test counts to it.
  t = await createTestApp({
    env: { SPEECH_MEDIA_DIR: mediaDir, PUBLIC_BASE_URL: PUBLIC_BASE, WORKER_PRESENCE_TTL_MS: '900000', SPEECH_RATE_LIMIT_PER_MINUTE: '120' },
  });
  await registerModelWorker(t.orm, 'models', ['small', 'large', 'turbo'], { present: true });
  alice = await mkUser(['speech.use', 'speech.api']);
  bob = await mkUser(['speech.use', 'speech.api']);
  manager = await mkUser(['speech.use', 'speech.api', 'speech.manage']);
  noApi = await mkUser(['speech.use']);
  noUse = await mkUser(['speech.api']);
  wrongScope = (await t.accounts.createPersonalToken(alice.id, { name: 'assistant-only', scopes: ['ai.assistant'] })).token;
});

afterAll(async () => {
  await t?.close();
  await rm(mediaDir, { recursive: true, force: true });
  await rm(fixtures, { recursive: true, force: true });
});

const ROUTES: Array<{ method: 'GET' | 'POST'; url: string; payload?: Record<string, unknown> }> = [
  { method: 'GET', url: '/api/speech/transcribe/status' },
  { method: 'GET', url: '/api/speech/transcribe/jobs' },
  { method: 'GET', url: '/api/speech/transcribe/jobs/1' },
  { method: 'POST', url: '/api/speech/transcribe', payload: { callback_url: CALLBACK, source_url: 'https://example.org/a.mp3' } },
];

function call(r: (typeof ROUTES)[number], headers: Record<string, string> = {}, remoteAddress?: string) {
  return t.app.inject({
    method: r.method,
    url: r.url,
    headers,
    ...(r.payload ? { payload: r.payload } : {}),
    ...(remoteAddress ? { remoteAddress } : {}),
  });
}

describe('authentication (401) and authorization (403)', () => {
  it('401 without a token, with a malformed one, and for JWT or session callers on every route', async () => {
    const { jar } = await browserLogin(t.app, alice.name, alice.password);
    const session = { cookie: jar.header() };
    expect((await get('/api/speech/jobs', session)).statusCode).toBe(200); // the session itself is valid
    for (const r of ROUTES) {
      for (const [what, headers] of [
        ['nothing', {}],
        ['garbage bearer', { authorization: 'Bearer not-a-token' }],
        ['JWT', alice.jwt],
        ['session', session],
      ] as const) {
        const res = await call(r, headers);
        expect(res.statusCode, `${r.method} ${r.url} with ${what}`).toBe(401);
        expect(res.json()).toMatchObject({ ok: false, reason: 'unauthenticated' });
        expect(res.headers['x-ratelimit-limit'], `${r.method} ${r.url}`).toBe('120');
      }
    }
    expect(await jobCount()).toBe(0);
  });

  it('401 for revoked and expired tokens', async () => {
    const revoked = await t.accounts.createPersonalToken(alice.id, { name: 'to-revoke', scopes: ['speech.api'] });
    const expired = await t.accounts.createPersonalToken(alice.id, { name: 'to-expire', scopes: ['speech.api'], expiresInDays: 1 });
    // Both work before.
    expect((await get('/api/speech/transcribe/status', { authorization: `Bearer ${revoked.token}` })).statusCode).toBe(200);
    expect((await get('/api/speech/transcribe/status', { authorization: `Bearer ${expired.token}` })).statusCode).toBe(200);
    await t.accounts.revokePersonalToken(revoked.record.id);
    await sql(`update personal_access_tokens set expires_at = now() - interval '1 second' where id = ?`, [expired.record.id]);
    for (const r of ROUTES) {
      for (const token of [revoked.token, expired.token]) {
        const res = await call(r, { authorization: `Bearer ${token}` });
        expect(res.statusCode, `${r.method} ${r.url}`).toBe(401);
        expect(res.json()).toMatchObject({ ok: false, reason: 'unauthenticated' });
      }
    }
    expect(await jobCount()).toBe(0);
  });

  it('403 for a token without scope speech.api and for owners lacking speech.api or speech.use', async () => {
    for (const r of ROUTES) {
      for (const [what, headers] of [
        ['scope ai.assistant', { authorization: `Bearer ${wrongScope}` }],
        ['owner without speech.api', noApi.bearer],
        ['owner without speech.use', noUse.bearer],
      ] as const) {
        const res = await call(r, headers);
        expect(res.statusCode, `${r.method} ${r.url} with ${what}`).toBe(403);
        expect(res.json()).toMatchObject({ ok: false, reason: 'forbidden' });
      }
    }
    expect(await jobCount()).toBe(0);
  });

  it('accepts the legacy X-Api-Key header and apikey query parameter', async () => {
    const viaHeader = await get('/api/speech/transcribe/status', { 'x-api-key': alice.token });
    expect(viaHeader.statusCode, viaHeader.body).toBe(200);
    const viaQuery = await get(`/api/speech/transcribe/jobs?apikey=${encodeURIComponent(alice.token)}&limit=5`);
    expect(viaQuery.statusCode, viaQuery.body).toBe(200);
    expect(viaQuery.json()).toMatchObject({ ok: true, jobs: [] });
    const created = await submit({ 'x-api-key': alice.token }, { callback_url: CALLBACK, source_url: 'https://media.example.org/legacy.mp3' });
    expect(created.statusCode, created.body).toBe(201);
    const viaQueryPost = await submit(
      {},
      { callback_url: CALLBACK, source_url: 'https://media.example.org/legacy2.mp3' },
      `/api/speech/transcribe?apikey=${alice.token}`,
    );
    expect(viaQueryPost.statusCode, viaQueryPost.body).toBe(201);
    for (const id of [created.json().job.id, viaQueryPost.json().job.id]) {
      const rows = await sql<{ owner_id: number; api_token_id: number }>('select owner_id, api_token_id from speech_jobs where id = ?', [id]);
      expect(rows[0]).toEqual({ owner_id: alice.id, api_token_id: alice.tokenId });
    }
    // The DNS-style api_key parameter is not a speech transport.
    expect((await get(`/api/speech/transcribe/status?api_key=${alice.token}`)).statusCode).toBe(401);
  });
});

describe('POST /api/speech/transcribe', () => {
  it('queues a URL job (JSON) with exactly the documented response shape', async () => {
    const res = await submit(alice.bearer, {
      callback_url: CALLBACK,
      source_url: 'https://media.example.org/interview.mp4',
      source_label: 'Interview',
      source_note: 'Board meeting',
      model: 'large',
      language: 'sv',
      analysis_language: 'en',
      'translation_target_languages[]': ['de', 'fr'],
    });
    expect(res.statusCode, res.body).toBe(201);
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual(['job', 'message', 'ok']);
    expect(body.ok).toBe(true);
    expect(body.message).toEqual(expect.any(String));
    const job = body.job;
    expect(job).toMatchObject({
      id: expect.any(Number),
      queue_channel: 'api',
      queue_channel_label: 'API queue',
      status: 'queued',
      status_label: 'Queued',
      source_type: 'url',
      source_label: 'Interview',
      source_note: 'Board meeting',
      model: 'large',
      language: 'sv',
      analysis_language: 'en',
      translation_target_languages: ['de', 'fr'],
      owner: { id: alice.id, username: alice.name },
    });
    expect(job.callback).toEqual({ url: CALLBACK, status: 'pending', http_status: null, last_attempt_at: null, delivered_at: null, error: null, attempts: 0 });
    expect(job.share).toBeNull();

    const rows = await sql<{ queue_channel: string; callback_url: string; callback_status: string; callback_cycle: number; api_token_id: number }>(
      'select queue_channel, callback_url, callback_status, callback_cycle, api_token_id from speech_jobs where id = ?',
      [job.id],
    );
    expect(rows[0]).toEqual({ queue_channel: 'api', callback_url: CALLBACK, callback_status: 'pending', callback_cycle: 1, api_token_id: alice.tokenId });

    const detail = await get(`/api/speech/transcribe/jobs/${job.id}`, alice.bearer);
    expect(detail.statusCode).toBe(200);
    expect(detail.json().job).toMatchObject({
      id: job.id,
      queue_channel: 'api',
      status: 'queued',
      callback: job.callback,
      share: null,
      diarization: { requested: true, state: 'pending' },
      liveness: { state: 'inactive' },
    });
    expect(detail.json().job.runtime_log[0]).toMatchObject({ event: 'queued', message: expect.stringContaining('api channel') });
  });

  it('queues a multipart media_file upload with callback_url', async () => {
    const before = await incomingFiles();
    const res = await upload(alice.bearer, [
      { name: 'callback_url', value: CALLBACK },
      { name: 'source_label', value: 'Greeting' },
      { name: 'translation_target_languages[]', value: 'sv' },
      { name: 'media_file', filename: 'f.wav', data: wav },
    ]);
    expect(res.statusCode, res.body).toBe(201);
    const job = res.json().job;
    expect(job).toMatchObject({
      queue_channel: 'api',
      status: 'queued',
      source_type: 'upload',
      source_label: 'Greeting',
      source_filename: 'f.wav',
      source_size_bytes: wav.length,
      translation_target_languages: ['sv'],
      callback: { url: CALLBACK, status: 'pending', http_status: null, last_attempt_at: null, delivered_at: null, error: null, attempts: 0 },
      share: null,
    });
    expect(job.source_duration_seconds).toBeGreaterThan(0.3);
    const rows = await sql<{ media_path: string; api_token_id: number }>('select media_path, api_token_id from speech_jobs where id = ?', [job.id]);
    expect(rows[0]!.media_path.startsWith(mediaDir)).toBe(true);
    expect((await readFile(rows[0]!.media_path)).equals(wav)).toBe(true);
    expect(rows[0]!.api_token_id).toBe(alice.tokenId);
    expect(await incomingFiles()).toEqual(before);
  });

  it('requires callback_url: missing, empty or not http(s) is 422 errors.callback_url and queues nothing', async () => {
    const before = await jobCount();
    const bad: Array<Record<string, unknown>> = [
      { source_url: 'https://media.example.org/a.mp3' },
      { source_url: 'https://media.example.org/a.mp3', callback_url: '' },
      { source_url: 'https://media.example.org/a.mp3', callback_url: 'not a url' },
      { source_url: 'https://media.example.org/a.mp3', callback_url: 'ftp://hooks.example.net/x' },
      { source_url: 'https://media.example.org/a.mp3', callback_url: 42 },
    ];
    for (const payload of bad) {
      const res = await submit(alice.bearer, payload);
      expect(res.statusCode, JSON.stringify(payload)).toBe(422);
      expect(res.json()).toMatchObject({ ok: false, reason: 'validation_failed' });
      expect(res.json().errors.callback_url, JSON.stringify(payload)).toEqual([expect.any(String)]);
    }
    expect((await submit(alice.bearer, { source_url: 'https://media.example.org/a.mp3' })).json().errors.callback_url).toEqual(['callback_url is required']);

    // The same for a multipart upload; the streamed file is not kept.
    const incoming = await incomingFiles();
    const res = await upload(alice.bearer, [{ name: 'media_file', filename: 'f.wav', data: wav }]);
    expect(res.statusCode).toBe(422);
    expect(res.json().errors.callback_url).toEqual(['callback_url is required']);
    const invalid = await upload(alice.bearer, [
      { name: 'callback_url', value: 'javascript:alert(1)' },
      { name: 'media_file', filename: 'f.wav', data: wav },
    ]);
    expect(invalid.statusCode).toBe(422);
    expect(invalid.json().errors.callback_url).toEqual(['must be an http:// or https:// URL']);
    expect(await incomingFiles()).toEqual(incoming);
    expect(await jobCount()).toBe(before);
  });

  it('requires exactly one of source_url and media_file (422)', async () => {
    const before = await jobCount();
    const incoming = await incomingFiles();
    const neither = await submit(alice.bearer, { callback_url: CALLBACK });
    expect(neither.statusCode).toBe(422);
    expect(Object.keys(neither.json().errors).sort()).toEqual(['media_file', 'source_url']);

    const neitherMultipart = await upload(alice.bearer, [
      { name: 'callback_url', value: CALLBACK },
      { name: 'source_label', value: 'x' },
    ]);
    expect(neitherMultipart.statusCode).toBe(422);
    expect(Object.keys(neitherMultipart.json().errors).sort()).toEqual(['media_file', 'source_url']);

    const both = await upload(alice.bearer, [
      { name: 'callback_url', value: CALLBACK },
      { name: 'source_url', value: 'https://media.example.org/a.mp3' },
      { name: 'media_file', filename: 'f.wav', data: wav },
    ]);
    expect(both.statusCode).toBe(422);
    expect(both.json().errors.source_url[0]).toMatch(/either source_url or media_file/);
    // The file arriving before source_url is refused after the form is read.
    const fileFirst = await upload(alice.bearer, [
      { name: 'media_file', filename: 'f.wav', data: wav },
      { name: 'callback_url', value: CALLBACK },
      { name: 'source_url', value: 'https://media.example.org/a.mp3' },
    ]);
    expect(fileFirst.statusCode).toBe(422);
    expect(fileFirst.json().errors.media_file[0]).toMatch(/either source_url or media_file/);

    const fileAsJson = await submit(alice.bearer, { callback_url: CALLBACK, source_url: 'https://media.example.org/a.mp3', media_file: 'f.wav' });
    expect(fileAsJson.statusCode).toBe(422);
    expect(fileAsJson.json().errors.media_file).toEqual(['a file must be sent as multipart/form-data']);

    const twoFiles = await upload(alice.bearer, [
      { name: 'callback_url', value: CALLBACK },
      { name: 'media_file', filename: 'a.wav', data: wav },
      { name: 'media_file', filename: 'b.wav', data: wav },
    ]);
    expect(twoFiles.statusCode).toBe(422);
    expect(twoFiles.json().errors.media_file).toBeDefined();

    const badSource = await submit(alice.bearer, { callback_url: CALLBACK, source_url: 'file:///etc/passwd' });
    expect(badSource.statusCode).toBe(422);
    expect(badSource.json().errors.source_url).toBeDefined();
    expect(await jobCount()).toBe(before);
    expect(await incomingFiles()).toEqual(incoming);
  });

  it('keeps diarization for absent and false-like disable_diarization, skips it for truthy values (JSON and multipart)', async () => {
    const cases: Array<[string | boolean | undefined, boolean]> = [
      [undefined, true],
      [false, true],
      ['false', true],
      ['0', true],
      ['', true],
      [true, false],
      ['1', false],
      ['true', false],
    ];
    for (const [value, requested] of cases) {
      const job = await apiJob(bob, value === undefined ? {} : { disable_diarization: value });
      const d = (await get(`/api/speech/transcribe/jobs/${job.id}`, bob.bearer)).json().job;
      expect(d.diarization, `JSON disable_diarization=${JSON.stringify(value)}`).toMatchObject({ requested, state: requested ? 'pending' : 'skipped' });
    }
    for (const [value, requested] of cases) {
      if (typeof value === 'boolean') continue;
      const parts: FormPart[] = [
        { name: 'callback_url', value: CALLBACK },
        { name: 'media_file', filename: 'f.wav', data: wav },
      ];
      if (value !== undefined) parts.unshift({ name: 'disable_diarization', value });
      const res = await upload(bob.bearer, parts);
      expect(res.statusCode, res.body).toBe(201);
      const d = (await get(`/api/speech/transcribe/jobs/${res.json().job.id}`, bob.bearer)).json().job;
      expect(d.diarization, `multipart disable_diarization=${JSON.stringify(value)}`).toMatchObject({ requested, state: requested ? 'pending' : 'skipped' });
    }
  });

  it('validates the other fields under their names (422)', async () => {
    const res = await submit(alice.bearer, { callback_url: CALLBACK, source_url: 'https://media.example.org/a.mp3', language: 'not a language!' });
    expect(res.statusCode).toBe(422);
    expect(res.json().errors.language).toBeDefined();
    const model = await submit(alice.bearer, { callback_url: CALLBACK, source_url: 'https://media.example.org/a.mp3', model: 'no-such-model' });
    expect(model.statusCode).toBe(422);
    expect(model.json().errors.model).toEqual(['no registered worker serves model "no-such-model"; served models: large, small, turbo']);
  });
});

describe('API-channel visibility (GET routes)', () => {
  it('lists only the caller’s API-queue jobs; web-queue and other users’ jobs are 404', async () => {
    const mine = await apiJob(alice, { source_label: 'visible' });
    const web = await webJob(alice);
    expect(web.queue_channel).toBe('web');
    const bobs = await apiJob(bob);

    const list = await get('/api/speech/transcribe/jobs?limit=500', alice.bearer);
    expect(list.statusCode).toBe(200);
    const jobs = list.json().jobs as Array<{ id: number; queue_channel: string; owner: { id: number }; callback: unknown }>;
    const aliceApi = await sql<{ id: number }>(`select id from speech_jobs where owner_id = ? and queue_channel = 'api' order by id desc`, [alice.id]);
    expect(jobs.map((j) => j.id)).toEqual(aliceApi.map((r) => r.id));
    expect(jobs.map((j) => j.id)).toContain(mine.id);
    expect(jobs.every((j) => j.queue_channel === 'api' && j.owner.id === alice.id)).toBe(true);
    expect(jobs.find((j) => j.id === mine.id)!.callback).toMatchObject({ url: CALLBACK, status: 'pending' });

    const limited = await get('/api/speech/transcribe/jobs?limit=1', alice.bearer);
    expect(limited.json().jobs.map((j: { id: number }) => j.id)).toEqual([aliceApi[0]!.id]);

    // A web-queue job is not an API job, even for its owner.
    const webDetail = await get(`/api/speech/transcribe/jobs/${web.id}`, alice.bearer);
    expect(webDetail.statusCode).toBe(404);
    expect(webDetail.json()).toMatchObject({ ok: false, reason: 'not_found' });
    // Another user's API job and an unknown id are 404 too.
    expect((await get(`/api/speech/transcribe/jobs/${bobs.id}`, alice.bearer)).statusCode).toBe(404);
    expect((await get('/api/speech/transcribe/jobs/99999999', alice.bearer)).statusCode).toBe(404);
    expect((await get(`/api/speech/transcribe/jobs/${mine.id}`, alice.bearer)).statusCode).toBe(200);

    // The signed-in API shows the API job with its channel and callback.
    const signedIn = (await get(`/api/speech/jobs/${mine.id}`, alice.jwt)).json().job;
    expect(signedIn).toMatchObject({ queue_channel: 'api', queue_channel_label: 'API queue', callback: { url: CALLBACK, status: 'pending' }, share: null });
    const webSigned = (await get(`/api/speech/jobs/${web.id}`, alice.jwt)).json().job;
    expect(webSigned.callback).toBeNull();
  });

  it('managers see every API job, still not web-queue jobs', async () => {
    const bobs = await apiJob(bob);
    const web = await webJob(bob);
    expect((await get(`/api/speech/transcribe/jobs/${bobs.id}`, manager.bearer)).statusCode).toBe(200);
    expect((await get(`/api/speech/transcribe/jobs/${web.id}`, manager.bearer)).statusCode).toBe(404);
    const ids = (await get('/api/speech/transcribe/jobs?limit=500', manager.bearer)).json().jobs.map((j: { id: number }) => j.id);
    const allApi = await sql<{ id: number }>(`select id from speech_jobs where queue_channel = 'api' order by id desc`);
    expect(ids).toEqual(allApi.map((r) => r.id));
    expect(ids).not.toContain(web.id);
  });

  it('status counts the API channel of the owner (managers: all API jobs) and reports the config', async () => {
    const job = await apiJob(alice);
    await sql(`update speech_jobs set status = 'failed' where id = ?`, [job.id]);
    const processing = await apiJob(alice);
    await sql(`update speech_jobs set status = 'transcribing' where id = ?`, [processing.id]);
    await webJob(alice); // not counted

    const count = async (where: string, params: unknown[]) => {
      const rows = await sql<{ status: string; n: string }>(
        `select status, count(*) as n from speech_jobs where queue_channel = 'api' ${where} group by status`,
        params,
      );
      const n = (s: string[]) => rows.filter((r) => s.includes(r.status)).reduce((a, r) => a + Number(r.n), 0);
      return { queued: n(['queued']), processing: n(['downloading', 'transcribing', 'finalizing']), completed: n(['completed']), failed: n(['failed']) };
    };
    const res = await get('/api/speech/transcribe/status', alice.bearer);
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual(['config', 'connected_models', 'models', 'ok', 'summary']);
    const expected = await count('and owner_id = ?', [alice.id]);
    expect(body.summary).toEqual(expected);
    expect(expected.failed).toBe(1);
    expect(expected.processing).toBe(1);
    expect(body.config).toEqual((await get('/api/speech/status', alice.jwt)).json().config);
    expect(body.config).toMatchObject({ enabled: true, default_model: 'small', upload_max_mb: expect.any(Number) });

    const managed = (await get('/api/speech/transcribe/status', manager.bearer)).json();
    expect(managed.summary).toEqual(await count('', []));
    expect(managed.summary.queued).toBeGreaterThan(expected.queued);
  });

  it('validates limit and job ids (422)', async () => {
    for (const url of [
      '/api/speech/transcribe/jobs?limit=0',
      '/api/speech/transcribe/jobs?limit=501',
      '/api/speech/transcribe/jobs?limit=x',
      '/api/speech/transcribe/jobs/abc',
      '/api/speech/transcribe/jobs/0',
    ]) {
      const res = await get(url, alice.bearer);
      expect(res.statusCode, url).toBe(422);
      expect(res.json()).toMatchObject({ ok: false, reason: 'validation_failed' });
    }
  });
});

describe('throttle and OpenAPI', () => {
  it('answers 429 to the 121st request in a minute from one client on every route', async () => {
    for (const r of ROUTES) {
      const address = `198.51.100.${ROUTES.indexOf(r) + 10}`;
      // Requests are counted before authentication, so unauthenticated ones exhaust the budget cheaply.
      const statuses: number[] = [];
      for (let i = 0; i < 120; i++) statuses.push((await call(r, {}, address)).statusCode);
      expect(
        statuses.every((s) => s === 401),
        `${r.method} ${r.url}`,
      ).toBe(true);
      const limited = await call(r, alice.bearer, address);
      expect(limited.statusCode, `${r.method} ${r.url}`).toBe(429);
      expect(limited.json()).toMatchObject({ ok: false, reason: 'rate_limited' });
      expect(limited.headers['retry-after']).toBeDefined();
      // Another client is not affected.
      expect((await call({ method: 'GET', url: '/api/speech/transcribe/status' }, alice.bearer, '198.51.100.99')).statusCode).toBe(200);
    }
  });

  it('documents every route with tag speech-api, personalToken security and its errors', async () => {
    const doc = (await get('/openapi.json')).json();
    for (const r of ROUTES) {
      const p = r.url.replace(/\/1$/, '/{jobId}');
      const op = doc.paths[p]?.[r.method.toLowerCase()];
      expect(op, `${r.method} ${p}`).toBeDefined();
      expect(op.tags).toEqual(['speech-api']);
      expect(op.security).toEqual([{ personalToken: [] }]);
      expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(['401', '403', '422', '429']));
    }
    expect(doc.paths['/api/speech/transcribe/jobs/{jobId}'].get.responses['404']).toBeDefined();
    const create = doc.paths['/api/speech/transcribe'].post;
    expect(Object.keys(create.requestBody.content).sort()).toEqual(['application/json', 'application/x-www-form-urlencoded', 'multipart/form-data']);
    const schema = create.requestBody.content['multipart/form-data'].schema;
    expect(schema.required).toContain('callback_url');
    expect(schema.properties.media_file).toMatchObject({ type: 'string', format: 'binary' });
    expect(Object.keys(schema.properties)).toEqual(
      expect.arrayContaining([
        'callback_url',
        'source_url',
        'source_label',
        'source_note',
        'model',
        'language',
        'analysis_language',
        'translation_target_languages[]',
        'disable_diarization',
      ]),
    );
    const job = create.responses['201'].content['application/json'].schema.properties.job;
    expect(Object.keys(job.properties)).toEqual(expect.arrayContaining(['id', 'queue_channel', 'queue_channel_label', 'status', 'callback', 'share']));
    expect(JSON.stringify(job.properties.callback)).toContain('last_attempt_at');
    expect(doc.paths['/api/speech/transcribe/jobs'].get.parameters.map((p: { name: string }) => p.name)).toEqual(['limit']);
    expect(doc.paths['/api/speech/transcribe/status'].get.responses['200'].content['application/json'].schema.properties.summary.required).toEqual(
      expect.arrayContaining(['queued', 'processing', 'completed', 'failed']),
    );
    // The other new speech routes are documented too.
    expect(doc.paths['/api/speech/run-now']?.post?.tags).toEqual(['speech']);
    expect(doc.paths['/api/speech/jobs/{jobId}/share']?.post).toBeDefined();
    expect(doc.paths['/api/speech/jobs/{jobId}/share']?.delete).toBeDefined();
  });
});
