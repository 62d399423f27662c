import type {} from '@fastify/jwt';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HOST_UPLOAD_LIMITS, megabytesLabel, uploadLimits } from '../../coordinator/src/speech/host-limits.js';
import { loadConfig } from '../../coordinator/src/config.js';
import { browserLogin, createJwtUser, createTestApp, extractCsrf, testEnv, type TestApp, type TestUser } from '../support/harness.js';
import { registerModelWorker } from '../support/model-workers.js';
import { multipartForm, type FormPart } from '../support/multipart.js';

/**
 * Signed-in speech API over the real app, PostgreSQL and Redis: submission by URL
 * and by multipart upload (probed with ffprobe, streamed to SPEECH_MEDIA_DIR), visibility, the
 * state moves of the status table, the status response, auth, CSRF, throttling and OpenAPI.
 */

let t: TestApp;
let mediaDir: string;
let fixtures: string;
let speechWav: Buffer;
let textFile: Buffer;
let alice: TestUser; // speech.use
let bob: TestUser; // speech.use
let carol: TestUser; // no permissions
let manager: TestUser; // speech.use + speech.manage
let root: TestUser; // administrator

const mkUser = (app: TestApp, permissions: string[], isAdmin = false) => createJwtUser(app, permissions, { isAdmin });

const form = (parts: FormPart[]) => multipartForm(parts);

async function listDir(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
}

async function jobCount(app: TestApp, ownerId?: number): Promise<number> {
  const rows = await app.orm.em
    .getConnection()
    .execute<Array<{ n: string }>>(
      ownerId === undefined ? 'select count(*) as n from speech_jobs' : 'select count(*) as n from speech_jobs where owner_id = ?',
      ownerId === undefined ? [] : [ownerId],
    );
  return Number(rows[0]!.n);
}

async function setStatus(app: TestApp, jobId: number, status: string) {
  await app.orm.em.getConnection().execute('update speech_jobs set status = ? where id = ?', [status, jobId]);
}

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

function post(url: string, headers: Record<string, string>, payload?: unknown) {
  return t.app.inject({ method: 'POST', url, headers, ...(payload === undefined ? {} : { payload: payload as string }) });
}

async function createUrlJob(user: TestUser, extra: Record<string, unknown> = {}) {
  const res = await post('/api/speech/jobs', user.auth, { source_url: 'https://media.example.org/talk.mp3', ...extra });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().job as { id: number; [k: string]: unknown };
}

async function upload(user: TestUser, parts: FormPart[], app: TestApp = t) {
  const { payload, contentType } = form(parts);
  return app.app.inject({ method: 'POST', url: '/api/speech/jobs', headers: { ...user.auth, 'content-type': contentType }, payload });
}

beforeAll(async () => {
  fixtures = await mkdtemp(path.join(os.tmpdir(), 'sonar-speech-fixtures-'));
  mediaDir = await mkdtemp(path.join(os.tmpdir(), 'sonar-speech-media-'));
  const wav = path.join(fixtures, 'speech.wav');
  execFileSync('espeak-ng', ['-w', wav, 'Hello from the speech queue. This is a short test recording.']);
  speechWav = await readFile(wav);
  expect(speechWav.subarray(8, 12).toString()).toBe('WAVE');
  await writeFile(path.join(fixtures, 'notes.txt'), 'Meeting notes: not audio at all.\n'.repeat(200));
  textFile = await readFile(path.join(fixtures, 'notes.txt'));
  // A connected worker with the product's models (presence lasts the whole file), so queued jobs wait normally.
  // This file makes a few hundred API requests a minute from one address: a budget of 400 (the
  // throttle test below uses up whatever the budget is; the default, 120, is checked there too).
  t = await createTestApp({ env: { SPEECH_MEDIA_DIR: mediaDir, WORKER_PRESENCE_TTL_MS: '900000', SPEECH_RATE_LIMIT_PER_MINUTE: '400' } });
  await registerModelWorker(t.orm, 'models', ['small', 'large', 'turbo'], { present: true });
  alice = await mkUser(t, ['speech.use']);
  bob = await mkUser(t, ['speech.use']);
  carol = await mkUser(t, []);
  manager = await mkUser(t, ['speech.use', 'speech.manage']);
  root = await mkUser(t, [], true);
});

afterAll(async () => {
  await t?.close();
  await rm(mediaDir, { recursive: true, force: true });
  await rm(fixtures, { recursive: true, force: true });
});

const ROUTES: Array<{ method: 'GET' | 'POST' | 'PUT' | 'DELETE'; url: string; payload?: Record<string, unknown> }> = [
  { method: 'GET', url: '/api/speech/status' },
  { method: 'GET', url: '/api/speech/jobs' },
  { method: 'POST', url: '/api/speech/jobs', payload: { source_url: 'https://example.org/a.mp3' } },
  { method: 'GET', url: '/api/speech/jobs/1' },
  { method: 'GET', url: '/api/speech/jobs/1/segments' },
  { method: 'POST', url: '/api/speech/jobs/1/cancel' },
  { method: 'POST', url: '/api/speech/jobs/1/restart' },
  { method: 'DELETE', url: '/api/speech/jobs/1' },
  { method: 'PUT', url: '/api/speech/jobs/1/target', payload: { mode: 'local' } },
];

describe('authentication and permissions', () => {
  it('401 unauthenticated without credentials on every route', async () => {
    for (const r of ROUTES) {
      const res = await t.app.inject({ method: r.method, url: r.url, ...(r.payload ? { payload: r.payload } : {}) });
      expect(res.statusCode, `${r.method} ${r.url}`).toBe(401);
      expect(res.json()).toMatchObject({ ok: false, reason: 'unauthenticated' });
      // Every route is throttled by the speech API's one budget (SPEECH_RATE_LIMIT_PER_MINUTE).
      expect(res.headers['x-ratelimit-limit'], `${r.method} ${r.url}`).toBe(String(t.config.SPEECH_RATE_LIMIT_PER_MINUTE));
    }
    expect(await jobCount(t)).toBe(0);
  });

  it('403 without speech.use on every route, 403 for non-administrators on /target', async () => {
    for (const r of ROUTES) {
      const res = await t.app.inject({ method: r.method, url: r.url, headers: carol.auth, ...(r.payload ? { payload: r.payload } : {}) });
      expect(res.statusCode, `${r.method} ${r.url}`).toBe(403);
      expect(res.json()).toMatchObject({ ok: false, reason: 'forbidden' });
    }
    const job = await createUrlJob(alice);
    for (const user of [alice, manager]) {
      const res = await t.app.inject({ method: 'PUT', url: `/api/speech/jobs/${job.id}/target`, headers: user.auth, payload: { mode: 'local' } });
      expect(res.statusCode).toBe(403);
      expect(res.json()).toEqual({ ok: false, reason: 'forbidden', message: 'Administrator access is required.' });
    }
  });

  it('a browser session may read; its mutations need the CSRF token', async () => {
    const { jar } = await browserLogin(t.app, alice.name, alice.password);
    const cookie = jar.header();
    expect((await t.app.inject({ method: 'GET', url: '/api/speech/jobs', headers: { cookie } })).statusCode).toBe(200);
    const before = await jobCount(t, alice.id);
    const noCsrf = await post('/api/speech/jobs', { cookie }, { source_url: 'https://example.org/csrf.mp3' });
    expect(noCsrf.statusCode).toBe(403);
    expect(noCsrf.json()).toMatchObject({ ok: false, reason: 'csrf_invalid' });
    expect(await jobCount(t, alice.id)).toBe(before);

    const csrf = extractCsrf((await t.app.inject({ method: 'GET', url: '/account', headers: { cookie } })).body);
    const ok = await post('/api/speech/jobs', { cookie, 'x-csrf-token': csrf }, { source_url: 'https://example.org/csrf.mp3' });
    expect(ok.statusCode).toBe(201);
    expect(ok.json().job.owner.username).toBe(alice.name);
    // An urlencoded form may carry the token as _csrf.
    const formRes = await post(
      '/api/speech/jobs',
      { cookie, 'content-type': 'application/x-www-form-urlencoded' },
      new URLSearchParams({ _csrf: csrf, source_url: 'https://example.org/form.mp3' }).toString(),
    );
    expect(formRes.statusCode).toBe(201);
    // A browser upload sends the token as a header; without it nothing is read or stored.
    const { payload, contentType } = form([{ name: 'media_file', filename: 'session.wav', data: speechWav }]);
    const incomingBefore = await listDir(path.join(mediaDir, 'incoming'));
    const refused = await t.app.inject({ method: 'POST', url: '/api/speech/jobs', headers: { cookie, 'content-type': contentType }, payload });
    expect(refused.statusCode).toBe(403);
    expect(refused.json().reason).toBe('csrf_invalid');
    expect(await listDir(path.join(mediaDir, 'incoming'))).toEqual(incomingBefore);
    const uploaded = await t.app.inject({
      method: 'POST',
      url: '/api/speech/jobs',
      headers: { cookie, 'x-csrf-token': csrf, 'content-type': contentType },
      payload,
    });
    expect(uploaded.statusCode).toBe(201);
    expect(uploaded.json().job).toMatchObject({ source_type: 'upload', source_filename: 'session.wav' });
    // Without the token a session cannot delete either.
    const del = await t.app.inject({ method: 'DELETE', url: `/api/speech/jobs/${ok.json().job.id}`, headers: { cookie } });
    expect(del.statusCode).toBe(403);
    expect(del.json().reason).toBe('csrf_invalid');
  });
});

describe('POST /api/speech/jobs', () => {
  it('queues a URL job (JSON) with the documented field names', async () => {
    const res = await post('/api/speech/jobs', alice.auth, {
      source_url: 'https://media.example.org/interview.mp4',
      source_label: '  Interview  ',
      source_note: 'Board meeting',
      model: 'large',
      language: 'sv',
      analysis_language: 'en',
      translation_target_languages: 'de, fr',
    });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body).toMatchObject({ ok: true, message: expect.any(String) });
    const job = body.job;
    expect(job).toMatchObject({
      id: expect.any(Number),
      status: 'queued',
      status_label: 'Queued',
      queue_channel: 'web',
      queue_channel_label: 'Web queue',
      source_type: 'url',
      source_label: 'Interview',
      source_note: 'Board meeting',
      source_url: 'https://media.example.org/interview.mp4',
      source_mime: null,
      source_size_bytes: null,
      source_duration_seconds: null,
      source_duration_human: null,
      stage_label: 'Waiting for a worker',
      stage_detail: null,
      model: 'large',
      language: 'sv',
      analysis_language: 'en',
      translation_target_languages: ['de', 'fr'],
      owner: { id: alice.id, username: alice.name },
    });
    expect(Date.parse(job.created_at)).toBeGreaterThan(Date.now() - 60_000);
    // Liveness and the runtime log belong to the detail view only.
    expect(job).not.toHaveProperty('liveness');
    expect(job).not.toHaveProperty('runtime_log');

    const detail = await t.app.inject({ method: 'GET', url: `/api/speech/jobs/${job.id}`, headers: alice.auth });
    expect(detail.statusCode).toBe(200);
    const d = detail.json().job;
    expect(d).toMatchObject({
      id: job.id,
      status: 'queued',
      liveness: { state: 'inactive', worker: null },
      analysis: null,
      translations: [],
      diarization: { requested: true, state: 'pending' },
      share: null,
      segment_count: 0,
    });
    expect(d.runtime_log).toEqual([
      expect.objectContaining({ event: 'queued', level: 'info', message: expect.stringContaining('model large'), at: expect.any(String) }),
    ]);
  });

  it('accepts urlencoded forms with translation_target_languages[] repeated and disable_diarization', async () => {
    const body =
      'source_url=https%3A%2F%2Fexample.org%2Fa.mp3&translation_target_languages%5B%5D=sv&translation_target_languages%5B%5D=de&disable_diarization=1';
    const res = await post('/api/speech/jobs', { ...alice.auth, 'content-type': 'application/x-www-form-urlencoded' }, body);
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().job.translation_target_languages).toEqual(['sv', 'de']);
    const d = (await t.app.inject({ method: 'GET', url: `/api/speech/jobs/${res.json().job.id}`, headers: alice.auth })).json().job;
    expect(d.diarization).toMatchObject({ requested: false, state: 'skipped', speakers: [], speaker_count: null });

    const repeated = await post(
      '/api/speech/jobs',
      { ...alice.auth, 'content-type': 'application/x-www-form-urlencoded' },
      'source_url=https%3A%2F%2Fexample.org%2Fb.mp3&translation_target_languages=sv&translation_target_languages=en%2Cde',
    );
    expect(repeated.statusCode).toBe(201);
    expect(repeated.json().job.translation_target_languages).toEqual(['sv', 'en', 'de']);
  });

  it('keeps diarization for absent and false-like disable_diarization values, skips it for truthy ones', async () => {
    const cases: Array<[unknown, boolean]> = [
      [undefined, true],
      [false, true],
      ['0', true],
      ['false', true],
      ['', true],
      [true, false],
      ['true', false],
      ['yes', false],
    ];
    for (const [value, requested] of cases) {
      const job = await createUrlJob(bob, value === undefined ? {} : { disable_diarization: value });
      const d = (await t.app.inject({ method: 'GET', url: `/api/speech/jobs/${job.id}`, headers: bob.auth })).json().job;
      expect(d.diarization, `disable_diarization=${JSON.stringify(value)}`).toMatchObject({ requested, state: requested ? 'pending' : 'skipped' });
    }
  });

  it('stores a multipart upload under SPEECH_MEDIA_DIR with ffprobe’s MIME type, size and duration', async () => {
    const res = await upload(alice, [
      { name: 'source_label', value: 'Greeting' },
      { name: 'language', value: 'en' },
      { name: 'translation_target_languages[]', value: 'sv' },
      { name: 'translation_target_languages[]', value: 'fi' },
      { name: 'media_file', filename: 'greeting.wav', contentType: 'application/octet-stream', data: speechWav },
      { name: 'disable_diarization', value: '' },
    ]);
    expect(res.statusCode, res.body).toBe(201);
    const job = res.json().job;
    expect(job).toMatchObject({
      status: 'queued',
      source_type: 'upload',
      source_label: 'Greeting',
      source_filename: 'greeting.wav',
      source_url: null,
      source_mime: 'audio/wav',
      source_size_bytes: speechWav.length,
      language: 'en',
      translation_target_languages: ['sv', 'fi'],
    });
    expect(job.source_duration_seconds).toBeGreaterThan(1);
    expect(job.source_duration_seconds).toBeLessThan(30);
    expect(job.source_duration_human).toMatch(/^\d+ s$/);

    const stored = path.join(mediaDir, 'jobs', String(job.id), 'source.wav');
    expect(sha256(await readFile(stored))).toBe(sha256(speechWav));
    const row = (
      await t.orm.em
        .getConnection()
        .execute<Array<{ media_path: string; media_sha256: string }>>('select media_path, media_sha256 from speech_jobs where id = ?', [job.id])
    )[0]!;
    expect(row.media_path).toBe(stored);
    expect(row.media_sha256).toBe(sha256(speechWav));
    expect(await listDir(path.join(mediaDir, 'incoming'))).toEqual([]);

    // The label defaults to the file name.
    const unnamed = await upload(alice, [{ name: 'media_file', filename: '../../tmp/memo.wav', data: speechWav }]);
    expect(unnamed.statusCode).toBe(201);
    expect(unnamed.json().job).toMatchObject({ source_label: 'memo.wav', source_filename: 'memo.wav' });
  });

  it('refuses a non-audio file with 422 errors.media_file and stores nothing', async () => {
    const before = await jobCount(t);
    const jobsBefore = await listDir(path.join(mediaDir, 'jobs'));
    const res = await upload(alice, [{ name: 'media_file', filename: 'notes.wav', contentType: 'audio/wav', data: textFile }]);
    expect(res.statusCode).toBe(422);
    expect(res.json()).toMatchObject({
      ok: false,
      reason: 'validation_failed',
      errors: { media_file: [expect.stringContaining('not readable audio or video')] },
    });
    expect(await jobCount(t)).toBe(before);
    expect(await listDir(path.join(mediaDir, 'incoming'))).toEqual([]);
    expect(await listDir(path.join(mediaDir, 'jobs'))).toEqual(jobsBefore);
  });

  it('requires exactly one of source_url and media_file', async () => {
    const before = await jobCount(t);
    for (const parts of [
      // URL field before the file (refused before the file is read) and after it.
      [
        { name: 'source_url', value: 'https://example.org/x.mp3' },
        { name: 'media_file', filename: 'a.wav', data: speechWav },
      ],
      [
        { name: 'media_file', filename: 'a.wav', data: speechWav },
        { name: 'source_url', value: 'https://example.org/x.mp3' },
      ],
    ] satisfies FormPart[][]) {
      const both = await upload(alice, parts);
      expect(both.statusCode).toBe(422);
      expect(both.json().errors).toEqual({
        source_url: ['send either source_url or media_file, not both'],
        media_file: ['send either source_url or media_file, not both'],
      });
    }
    for (const res of [
      await post('/api/speech/jobs', alice.auth, {}),
      await post('/api/speech/jobs', alice.auth, { source_url: '   ', model: 'small' }),
      await post('/api/speech/jobs', alice.auth),
      await upload(alice, [{ name: 'source_label', value: 'only a label' }]),
      // A browser's empty file input is no file.
      await upload(alice, [{ name: 'media_file', filename: '', data: Buffer.alloc(0) }]),
    ]) {
      expect(res.statusCode).toBe(422);
      expect(res.json()).toMatchObject({
        ok: false,
        reason: 'validation_failed',
        errors: { source_url: [expect.any(String)], media_file: [expect.any(String)] },
      });
    }
    // A file is never accepted inside JSON.
    const inJson = await post('/api/speech/jobs', alice.auth, { media_file: 'aGVsbG8=' });
    expect(inJson.statusCode).toBe(422);
    expect(inJson.json().errors).toHaveProperty('media_file');
    expect(await jobCount(t)).toBe(before);
    expect(await listDir(path.join(mediaDir, 'incoming'))).toEqual([]);
  });

  it('refuses a second file in the same request', async () => {
    const before = await jobCount(t);
    const res = await upload(alice, [
      { name: 'media_file', filename: 'a.wav', data: speechWav },
      { name: 'media_file', filename: 'b.wav', data: speechWav },
    ]);
    expect(res.statusCode).toBe(422);
    expect(res.json().errors).toEqual({ media_file: ['only one file may be uploaded per request'] });
    expect(await jobCount(t)).toBe(before);
    expect(await listDir(path.join(mediaDir, 'incoming'))).toEqual([]);
  });

  it('validates source_url, model and language fields (422 under the field name)', async () => {
    const before = await jobCount(t);
    for (const url of ['ftp://example.org/a.mp3', 'not a url', 'javascript:alert(1)', 'file:///etc/passwd']) {
      const res = await post('/api/speech/jobs', alice.auth, { source_url: url });
      expect(res.statusCode, url).toBe(422);
      expect(res.json().errors.source_url).toEqual(['must be an http:// or https:// URL']);
    }
    const model = await post('/api/speech/jobs', alice.auth, { source_url: 'https://example.org/a.mp3', model: 'gigantic' });
    expect(model.statusCode).toBe(422);
    expect(model.json()).toMatchObject({
      reason: 'validation_failed',
      errors: { model: ['no registered worker serves model "gigantic"; served models: large, small, turbo'] },
    });
    const lang = await post('/api/speech/jobs', alice.auth, {
      source_url: 'https://example.org/a.mp3',
      translation_target_languages: ['sv', 'not a language'],
    });
    expect(lang.statusCode).toBe(422);
    expect(lang.json().errors).toHaveProperty('translation_target_languages');
    // The same rules for multipart fields; the uploaded file is discarded.
    const badModel = await upload(alice, [
      { name: 'model', value: 'gigantic' },
      { name: 'media_file', filename: 'a.wav', data: speechWav },
    ]);
    expect(badModel.statusCode).toBe(422);
    expect(badModel.json().errors).toEqual({ model: ['no registered worker serves model "gigantic"; served models: large, small, turbo'] });
    const badLang = await upload(alice, [
      { name: 'media_file', filename: 'a.wav', data: speechWav },
      { name: 'language', value: '12' },
    ]);
    expect(badLang.statusCode).toBe(422);
    expect(badLang.json().errors).toHaveProperty('language');
    expect(await jobCount(t)).toBe(before);
    expect(await listDir(path.join(mediaDir, 'incoming'))).toEqual([]);
  });

  it('answers 422 errors.media_file for a truncated multipart body and keeps nothing', async () => {
    const before = await jobCount(t);
    const { payload, contentType } = form([{ name: 'media_file', filename: 'cut.wav', data: speechWav }]);
    const cut = payload.subarray(0, Math.floor(payload.length / 2));
    const res = await t.app.inject({ method: 'POST', url: '/api/speech/jobs', headers: { ...alice.auth, 'content-type': contentType }, payload: cut });
    expect(res.statusCode).toBe(422);
    expect(res.json().errors).toEqual({ media_file: ['the upload ended before the whole file arrived; nothing was stored'] });
    expect(await jobCount(t)).toBe(before);
    expect(await listDir(path.join(mediaDir, 'incoming'))).toEqual([]);
  });

  it('removes the partial file when the client disconnects in the middle of an upload', async () => {
    const before = await jobCount(t);
    const address = await t.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = new URL(address);
    const big = Buffer.concat([speechWav, randomBytes(3 * 1024 * 1024)]);
    const { payload, contentType } = form([{ name: 'media_file', filename: 'big.wav', data: big }]);
    const socket = net.connect(Number(port), '127.0.0.1');
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    socket.on('error', () => {});
    socket.write(
      `POST /api/speech/jobs HTTP/1.1\r\nHost: localhost\r\nAuthorization: ${alice.auth.authorization}\r\n` +
        `Content-Type: ${contentType}\r\nContent-Length: ${payload.length}\r\n\r\n`,
    );
    socket.write(payload.subarray(0, 1024 * 1024));
    const incoming = path.join(mediaDir, 'incoming');
    await expect.poll(() => listDir(incoming), { timeout: 10_000, interval: 20, message: 'the upload never reached the temporary folder' }).not.toEqual([]);
    socket.destroy();
    await expect.poll(() => listDir(incoming), { timeout: 10_000, interval: 20, message: 'partial upload left behind' }).toEqual([]);
    expect(await jobCount(t)).toBe(before);
  });

  it('answers 422 errors.media_file when the connection ends before Content-Length (half-closed), not 400 "not valid HTTP"', async () => {
    const before = await jobCount(t);
    // Listening already when the test before it ran.
    const port = t.app.server.listening
      ? (t.app.server.address() as AddressInfo).port
      : Number(new URL(await t.app.listen({ port: 0, host: '127.0.0.1' })).port);
    const { payload, contentType } = form([{ name: 'media_file', filename: 'short.wav', data: speechWav }]);
    const socket = net.connect(Number(port), '127.0.0.1');
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    socket.on('error', () => {});
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.write(
      `POST /api/speech/jobs HTTP/1.1\r\nHost: localhost\r\nAuthorization: ${alice.auth.authorization}\r\n` +
        `Content-Type: ${contentType}\r\nContent-Length: ${payload.length}\r\n\r\n`,
    );
    socket.end(payload.subarray(0, Math.floor(payload.length / 2))); // our side ends early; the answer can still come back
    await closed;
    const answer = Buffer.concat(chunks).toString('utf8');
    expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 422 Unprocessable Entity');
    const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { reason: string; errors: Record<string, string[]> };
    expect(body).toMatchObject({ reason: 'validation_failed', errors: { media_file: ['the upload ended before the whole file arrived; nothing was stored'] } });
    expect(await jobCount(t)).toBe(before);
    expect(await listDir(path.join(mediaDir, 'incoming'))).toEqual([]);
  });
});

describe('upload limit', () => {
  let small: TestApp;
  let smallDir: string;
  let user: TestUser;
  beforeAll(async () => {
    smallDir = await mkdtemp(path.join(os.tmpdir(), 'sonar-speech-small-'));
    small = await createTestApp({ env: { SPEECH_MEDIA_DIR: smallDir, SPEECH_UPLOAD_MAX_MB: '1' } });
    await registerModelWorker(small.orm, 'models', ['small']);
    user = await mkUser(small, ['speech.use']);
  });
  afterAll(async () => {
    await small?.close();
    await rm(smallDir, { recursive: true, force: true });
  });

  it('refuses a body that cannot fit before reading it', async () => {
    const res = await upload(user, [{ name: 'media_file', filename: 'huge.wav', data: randomBytes(5 * 1024 * 1024) }], small);
    expect(res.statusCode).toBe(422);
    expect(res.json()).toEqual({
      ok: false,
      reason: 'validation_failed',
      message: 'media_file: the file is larger than the upload limit of 1 MB',
      errors: { media_file: ['the file is larger than the upload limit of 1 MB'] },
    });
    expect(res.headers.connection).toBe('close');
    // Nothing was streamed: the temporary folder was never needed.
    expect(existsSync(path.join(smallDir, 'incoming'))).toBe(false);
    expect(await jobCount(small)).toBe(0);
  });

  it('stops streaming at the limit: 422 errors.media_file, no job, no file', async () => {
    const res = await upload(user, [{ name: 'media_file', filename: 'two-mb.wav', data: Buffer.concat([speechWav, randomBytes(2 * 1024 * 1024)]) }], small);
    expect(res.statusCode).toBe(422);
    expect(res.json().errors).toEqual({ media_file: ['the file is larger than the upload limit of 1 MB'] });
    expect(await jobCount(small)).toBe(0);
    // The stream was written to the temporary folder and removed when it crossed the limit.
    expect(existsSync(path.join(smallDir, 'incoming'))).toBe(true);
    expect(await listDir(path.join(smallDir, 'incoming'))).toEqual([]);
    expect(await listDir(path.join(smallDir, 'jobs'))).toEqual([]);
    // A file under the limit is fine.
    const ok = await upload(user, [{ name: 'media_file', filename: 'ok.wav', data: speechWav }], small);
    expect(speechWav.length).toBeLessThan(1024 * 1024);
    expect(ok.statusCode).toBe(201);
  });

  it('leaves neither a job nor a file when the media cannot be moved into the job folder', async () => {
    const before = await jobCount(small);
    // A file where the job folders should be: moving the upload into place fails.
    await rm(path.join(smallDir, 'jobs'), { recursive: true, force: true });
    await writeFile(path.join(smallDir, 'jobs'), 'not a folder');
    try {
      const res = await upload(user, [{ name: 'media_file', filename: 'stuck.wav', data: speechWav }], small);
      expect(res.statusCode).toBe(500);
      expect(res.json()).toEqual({ ok: false, reason: 'internal_error', message: 'Internal server error.' });
      expect(await jobCount(small)).toBe(before);
      expect(await listDir(path.join(smallDir, 'incoming'))).toEqual([]);
    } finally {
      await rm(path.join(smallDir, 'jobs'), { force: true });
    }
  });

  it('reports the limits in the status response', async () => {
    const res = await small.app.inject({ method: 'GET', url: '/api/speech/status', headers: user.auth });
    expect(res.json().config).toMatchObject({
      upload_max_mb: 1,
      upload_limit: { configured_mb: 1, effective_max_mb: 1, effective_max_label: '1 MB', limited_by_php: false },
    });
  });

  it('computes the effective limit as the lowest of the configured and host limits', () => {
    const fileMb = HOST_UPLOAD_LIMITS.multipartFileBytes / 1024 / 1024;
    expect(uploadLimits({ SPEECH_UPLOAD_MAX_MB: 512 })).toMatchObject({
      effective_max_mb: 512,
      effective_max_label: '512 MB',
      limited_by_php: false,
      effectiveBytes: 512 * 1024 * 1024,
    });
    const capped = uploadLimits({ SPEECH_UPLOAD_MAX_MB: fileMb * 2 });
    expect(capped).toMatchObject({ configured_mb: fileMb * 2, php_upload_max_mb: fileMb, effective_max_mb: fileMb, limited_by_php: true });
    expect(capped.php_post_max_mb).toBeGreaterThan(fileMb);
    const tinyHost = uploadLimits({ SPEECH_UPLOAD_MAX_MB: 2048 }, { multipartFileBytes: 100 * 1024 * 1024, formOverheadBytes: 1024 * 1024 });
    expect(tinyHost).toMatchObject({
      php_upload_max_mb: 100,
      php_post_max_mb: 101,
      effective_max_mb: 100,
      effective_max_label: '100 MB',
      limited_by_php: true,
    });
    expect([megabytesLabel(2048), megabytesLabel(1536), megabytesLabel(1023)]).toEqual(['2 GB', '1.5 GB', '1023 MB']);
  });
});

describe('visibility', () => {
  let aliceJob: { id: number };
  let bobJob: { id: number };
  beforeAll(async () => {
    aliceJob = await createUrlJob(alice);
    bobJob = await createUrlJob(bob);
  });

  it('owners see only their own jobs; another user’s job is 404 everywhere', async () => {
    const list = await t.app.inject({ method: 'GET', url: '/api/speech/jobs', headers: bob.auth });
    expect(list.statusCode).toBe(200);
    const ids = list.json().jobs.map((j: { id: number }) => j.id);
    expect(ids).toContain(bobJob.id);
    expect(ids).not.toContain(aliceJob.id);
    expect(list.json().jobs.every((j: { owner: { id: number } }) => j.owner.id === bob.id)).toBe(true);
    // all=1 gives an ordinary user nothing more.
    const all = await t.app.inject({ method: 'GET', url: '/api/speech/jobs?all=1', headers: bob.auth });
    expect(all.json().jobs.map((j: { id: number }) => j.id)).not.toContain(aliceJob.id);

    for (const [method, url] of [
      ['GET', `/api/speech/jobs/${aliceJob.id}`],
      ['GET', `/api/speech/jobs/${aliceJob.id}/segments`],
      ['POST', `/api/speech/jobs/${aliceJob.id}/cancel`],
      ['POST', `/api/speech/jobs/${aliceJob.id}/restart`],
      ['DELETE', `/api/speech/jobs/${aliceJob.id}`],
      ['GET', '/api/speech/jobs/999999'],
    ] as const) {
      const res = await t.app.inject({ method, url, headers: bob.auth });
      expect(res.statusCode, `${method} ${url}`).toBe(404);
      expect(res.json()).toEqual({ ok: false, reason: 'not_found', message: 'Job not found.' });
    }
    expect((await t.app.inject({ method: 'GET', url: `/api/speech/jobs/${aliceJob.id}`, headers: alice.auth })).statusCode).toBe(200);
  });

  it('a speech.manage user sees every job (all=0 limits it to their own)', async () => {
    const list = await t.app.inject({ method: 'GET', url: '/api/speech/jobs?limit=500', headers: manager.auth });
    const ids = list.json().jobs.map((j: { id: number }) => j.id);
    expect(ids).toEqual(expect.arrayContaining([aliceJob.id, bobJob.id]));
    expect(ids).toEqual([...ids].sort((a: number, b: number) => b - a));
    expect((await t.app.inject({ method: 'GET', url: '/api/speech/jobs?all=0', headers: manager.auth })).json().jobs).toEqual([]);
    const detail = await t.app.inject({ method: 'GET', url: `/api/speech/jobs/${aliceJob.id}`, headers: manager.auth });
    expect(detail.statusCode).toBe(200);
    expect(detail.json().job.owner.username).toBe(alice.name);
    // Administrators too.
    expect((await t.app.inject({ method: 'GET', url: `/api/speech/jobs/${bobJob.id}`, headers: root.auth })).statusCode).toBe(200);
  });

  it('a list entry shows what the job detail shows for the same fields (list rows are read without the ORM)', async () => {
    const job = await createUrlJob(alice);
    const pinnedName = `list-pinned-${randomBytes(3).toString('hex')}`;
    const pinned = await registerModelWorker(t.orm, pinnedName, ['small']);
    const entry = async () => {
      const list = await t.app.inject({ method: 'GET', url: '/api/speech/jobs', headers: alice.auth });
      expect(list.statusCode, list.body).toBe(200);
      const found = list.json().jobs.find((j: { id: number }) => j.id === job.id) as Record<string, unknown>;
      const detail = (await t.app.inject({ method: 'GET', url: `/api/speech/jobs/${job.id}`, headers: alice.auth })).json().job as Record<string, unknown>;
      for (const [key, value] of Object.entries(found)) expect(value, key).toEqual(detail[key]);
      return found;
    };
    expect(await entry()).toMatchObject({ status: 'queued', execution_target: { mode: 'auto', worker: null }, share: null, callback: null });
    // A finished job with every optional column set; a blank transcript reads "No speech detected".
    await t.orm.em.getConnection().execute(
      `update speech_jobs set status = 'completed', transcript_text = ' \n ', started_at = now() - interval '90 seconds', finished_at = now(),
              source_size_bytes = 12345678901, source_duration_seconds = 61.5, audio_position_seconds = 61.5, source_label = 'Talk',
              execution_target = 'worker', target_worker_id = ?, engine = 'e', engine_model = 'm', attempt = 1,
              share_token = 'list-share-token', share_created_at = now(), callback_url = 'https://hooks.example.org/x', callback_status = 'delivered',
              callback_http_status = 204, callback_last_attempt_at = now(), callback_delivered_at = now(), callback_attempts = 1,
              translation_target_languages = '{de,fr}'
        where id = ?`,
      [pinned.id, job.id],
    );
    expect(await entry()).toMatchObject({
      status: 'completed',
      stage_detail: 'No speech detected',
      source_size_bytes: 12345678901,
      execution_target: { mode: 'worker', worker: pinnedName },
      translation_target_languages: ['de', 'fr'],
      share: { url: expect.stringContaining('list-share-token') },
      callback: { status: 'delivered', http_status: 204, attempts: 1 },
    });
    // Blank as JavaScript's trim() sees it: no-break and other Unicode spaces too.
    await t.orm.em.getConnection().execute(`update speech_jobs set transcript_text = ? where id = ?`, ['\u00a0\u2003\ufeff\t', job.id]);
    expect((await entry()).stage_detail).toBe('No speech detected');
    await t.orm.em.getConnection().execute(`update speech_jobs set transcript_text = 'hello' where id = ?`, [job.id]);
    expect((await entry()).stage_detail).not.toBe('No speech detected');
  });

  it('validates limit and job ids (422)', async () => {
    const limited = await t.app.inject({ method: 'GET', url: '/api/speech/jobs?limit=1', headers: manager.auth });
    expect(limited.json().jobs).toHaveLength(1);
    for (const url of ['/api/speech/jobs?limit=0', '/api/speech/jobs?limit=501', '/api/speech/jobs?limit=abc']) {
      const res = await t.app.inject({ method: 'GET', url, headers: alice.auth });
      expect(res.statusCode, url).toBe(422);
      expect(res.json().errors).toHaveProperty('limit');
    }
    for (const url of ['/api/speech/jobs/abc', '/api/speech/jobs/1.5', '/api/speech/jobs/-3', '/api/speech/jobs/99999999999/segments']) {
      const res = await t.app.inject({ method: 'GET', url, headers: alice.auth });
      expect(res.statusCode, url).toBe(422);
      expect(res.json()).toMatchObject({ reason: 'validation_failed', errors: { jobId: [expect.any(String)] } });
    }
  });

  it('returns the segments of the current pass in order', async () => {
    const conn = t.orm.em.getConnection();
    await conn.execute('update speech_jobs set current_pass = 2 where id = ?', [aliceJob.id]);
    await conn.execute(
      `insert into speech_segments (job_id, pass, seq, start_seconds, end_seconds, text, speaker) values
        (?, 1, 0, 0, 1, 'old pass', null), (?, 2, 1, 2.5, 4, 'second', 'SPEAKER_01'), (?, 2, 0, 0, 2.5, 'first', null)`,
      [aliceJob.id, aliceJob.id, aliceJob.id],
    );
    const res = await t.app.inject({ method: 'GET', url: `/api/speech/jobs/${aliceJob.id}/segments`, headers: alice.auth });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      ok: true,
      job_id: aliceJob.id,
      pass: 2,
      segments: [
        { seq: 0, start: 0, end: 2.5, text: 'first', speaker: null },
        { seq: 1, start: 2.5, end: 4, text: 'second', speaker: 'SPEAKER_01' },
      ],
    });
    expect((await t.app.inject({ method: 'GET', url: `/api/speech/jobs/${aliceJob.id}`, headers: alice.auth })).json().job.segment_count).toBe(2);
  });
});

describe('job actions', () => {
  it('cancel: 422 for a queued job, cancellation requested for a processing one', async () => {
    const job = await createUrlJob(alice);
    const queued = await post(`/api/speech/jobs/${job.id}/cancel`, alice.auth);
    expect(queued.statusCode).toBe(422);
    expect(queued.json()).toMatchObject({ reason: 'validation_failed', errors: { status: [expect.stringContaining('queued')] } });

    await setStatus(t, job.id, 'transcribing');
    const res = await post(`/api/speech/jobs/${job.id}/cancel`, alice.auth);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ ok: true, message: expect.any(String), job: { id: job.id, status: 'transcribing', cancel_requested: true } });
    // A processing job cannot be deleted.
    const del = await t.app.inject({ method: 'DELETE', url: `/api/speech/jobs/${job.id}`, headers: alice.auth });
    expect(del.statusCode).toBe(422);
    expect(del.json().errors).toHaveProperty('status');
    // A queue manager may act on other people's jobs.
    expect((await post(`/api/speech/jobs/${job.id}/cancel`, manager.auth)).statusCode).toBe(200);
  });

  it('restart: queued and failed jobs are queued again; others 422', async () => {
    const job = await createUrlJob(alice);
    const again = await post(`/api/speech/jobs/${job.id}/restart`, alice.auth);
    expect(again.statusCode).toBe(200);
    expect(again.json()).toMatchObject({ ok: true, message: expect.any(String), job: { id: job.id, status: 'queued', attempt: 0 } });

    // Attempts only grow: a restart gives a fresh retry budget on top of the attempts made, so the next
    // claim is attempt 4 and never collides with the lease of an earlier attempt.

    await t.orm.em.getConnection().execute(`update speech_jobs set status = 'failed', attempt = 3, failure_error = 'engine crashed' where id = ?`, [job.id]);
    const failed = await post(`/api/speech/jobs/${job.id}/restart`, alice.auth);
    expect(failed.statusCode).toBe(200);
    expect(failed.json().job).toMatchObject({ status: 'queued', attempt: 3, failure_error: null, stage_label: 'Waiting for a worker' });
    expect(
      (await t.orm.em.getConnection().execute<Array<{ max_attempts: number }>>('select max_attempts from speech_jobs where id = ?', [job.id]))[0]!.max_attempts,
    ).toBe(6);
    const log = (await t.app.inject({ method: 'GET', url: `/api/speech/jobs/${job.id}`, headers: alice.auth })).json().job.runtime_log;
    expect(log.map((e: { event: string }) => e.event)).toEqual(['queued', 'restarted', 'restarted']);

    for (const status of ['completed', 'transcribing']) {
      await setStatus(t, job.id, status);
      const res = await post(`/api/speech/jobs/${job.id}/restart`, alice.auth);
      expect(res.statusCode, status).toBe(422);
      expect(res.json().errors).toHaveProperty('status');
    }
  });

  it('delete removes the job, its history and its media folder', async () => {
    const res = await upload(alice, [{ name: 'media_file', filename: 'bye.wav', data: speechWav }]);
    expect(res.statusCode).toBe(201);
    const id = res.json().job.id as number;
    const folder = path.join(mediaDir, 'jobs', String(id));
    expect(existsSync(folder)).toBe(true);
    await setStatus(t, id, 'failed');
    const del = await t.app.inject({ method: 'DELETE', url: `/api/speech/jobs/${id}`, headers: alice.auth });
    expect(del.statusCode).toBe(200);
    expect(del.json()).toEqual({ ok: true, message: 'Job deleted.' });
    expect(existsSync(folder)).toBe(false);
    expect((await t.app.inject({ method: 'GET', url: `/api/speech/jobs/${id}`, headers: alice.auth })).statusCode).toBe(404);
    expect((await t.app.inject({ method: 'DELETE', url: `/api/speech/jobs/${id}`, headers: alice.auth })).statusCode).toBe(404);
    const events = await t.orm.em.getConnection().execute<Array<{ n: string }>>('select count(*) as n from speech_job_events where job_id = ?', [id]);
    expect(Number(events[0]!.n)).toBe(0);
  });

  it('administrators set the execution target', async () => {
    const job = await createUrlJob(alice);
    const res = await t.app.inject({ method: 'PUT', url: `/api/speech/jobs/${job.id}/target`, headers: root.auth, payload: { mode: 'local' } });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ ok: true, job: { id: job.id, execution_target: { mode: 'local', worker: null } } });
    const missing = await t.app.inject({
      method: 'PUT',
      url: `/api/speech/jobs/${job.id}/target`,
      headers: root.auth,
      payload: { mode: 'worker', worker: 'nobody' },
    });
    expect(missing.statusCode).toBe(422);
    expect(missing.json().errors).toHaveProperty('worker');
    const bad = await t.app.inject({ method: 'PUT', url: `/api/speech/jobs/${job.id}/target`, headers: root.auth, payload: { mode: 'elsewhere' } });
    expect(bad.statusCode).toBe(422);
    expect(bad.json().errors).toHaveProperty('mode');
    expect((await t.app.inject({ method: 'PUT', url: '/api/speech/jobs/999999/target', headers: root.auth, payload: { mode: 'auto' } })).statusCode).toBe(404);
  });
});

describe('GET /api/speech/status', () => {
  it('has exactly the documented shape (plus models) and counts the caller’s jobs', async () => {
    const dave = await mkUser(t, ['speech.use']);
    const statuses = ['queued', 'downloading', 'transcribing', 'finalizing', 'completed', 'failed', 'failed', 'queued', 'queued'];
    for (const status of statuses) {
      const job = await createUrlJob(dave);
      await setStatus(t, job.id, status);
    }
    const res = await t.app.inject({ method: 'GET', url: '/api/speech/status', headers: dave.auth });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual(['can_manage_all', 'config', 'connected_models', 'local_worker_problem', 'models', 'ok', 'summary']);
    // Only the quick start sets it (when its local worker lacks ffmpeg or pocketsphinx).
    expect(body.local_worker_problem).toBeNull();
    expect(body.ok).toBe(true);
    expect(body.summary).toEqual({ queued: 3, processing: 3, completed: 1, failed: 2 });
    expect(body.can_manage_all).toBe(false);
    expect(Object.keys(body.config).sort()).toEqual(['default_model', 'enabled', 'upload_limit', 'upload_max_mb', 'ytdlp_configured']);
    let ytdlp = true;
    try {
      execFileSync('sh', ['-c', 'command -v yt-dlp'], { stdio: 'ignore' });
    } catch {
      ytdlp = false;
    }
    expect(body.config).toEqual({
      enabled: true,
      default_model: 'small',
      upload_max_mb: 2048,
      upload_limit: {
        configured_mb: 2048,
        php_upload_max_mb: HOST_UPLOAD_LIMITS.multipartFileBytes / 1024 / 1024,
        php_post_max_mb: (HOST_UPLOAD_LIMITS.multipartFileBytes + HOST_UPLOAD_LIMITS.formOverheadBytes) / 1024 / 1024,
        effective_max_mb: 2048,
        effective_max_label: '2 GB',
        limited_by_php: false,
      },
      ytdlp_configured: ytdlp,
    });
    expect(body.models).toEqual(['large', 'small', 'turbo']);
    expect(body.connected_models).toEqual(['large', 'small', 'turbo']);

    const managed = (await t.app.inject({ method: 'GET', url: '/api/speech/status', headers: manager.auth })).json();
    expect(managed.can_manage_all).toBe(true);
    const total = await jobCount(t);
    const m = managed.summary as { queued: number; processing: number; completed: number; failed: number };
    expect(m.queued + m.processing + m.completed + m.failed).toBe(total);
    expect(m.queued).toBeGreaterThan(3);
  });
});

describe('throttle and OpenAPI', () => {
  it('answers 429 rate_limited past the budget (120 a minute by default) from one client, all speech API routes together', async () => {
    const { SPEECH_RATE_LIMIT_PER_MINUTE: raised, ...defaults } = testEnv(t.db);
    expect(raised).toBeDefined();
    expect(loadConfig(defaults).SPEECH_RATE_LIMIT_PER_MINUTE).toBe(120);
    // The budget is the client's across /api/speech/* (the specification's 120 a minute per
    // client), not each route's: a third of it on each of three routes uses it up.
    const budget = t.config.SPEECH_RATE_LIMIT_PER_MINUTE;
    const urls = ['/api/speech/status', '/api/speech/jobs', '/api/speech/transcribe/status'];
    const statuses: number[] = [];
    for (let i = 0; i <= budget; i++) {
      const res = await t.app.inject({ method: 'GET', url: urls[i % 3]!, headers: alice.auth, remoteAddress: '198.51.100.121' });
      statuses.push(res.statusCode);
      if (res.statusCode === 429) {
        expect(res.json()).toMatchObject({ ok: false, reason: 'rate_limited' });
        expect(res.headers['retry-after']).toBeDefined();
      }
    }
    expect(statuses.slice(0, budget).filter((s) => s === 429)).toEqual([]);
    expect(statuses[budget]).toBe(429);
    // The pages count apart (per route): the same client still gets the queue page.
    expect((await t.app.inject({ method: 'GET', url: '/speech', headers: alice.auth, remoteAddress: '198.51.100.121' })).statusCode).not.toBe(429);
    // Another client is not affected.
    const other = await t.app.inject({ method: 'GET', url: '/api/speech/status', headers: alice.auth, remoteAddress: '198.51.100.122' });
    expect(other.statusCode).toBe(200);
  });

  it('documents every route with its security, errors and the multipart upload', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    for (const r of ROUTES) {
      const p = r.url.replace(/\/1(?=\/|$)/, '/{jobId}');
      const op = doc.paths[p]?.[r.method.toLowerCase()];
      expect(op, `${r.method} ${p}`).toBeDefined();
      expect(op.tags).toEqual(['speech']);
      expect(op.security).toEqual([{ session: [] }, { bearerJwt: [] }]);
      expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(['401', '403', '422', '429']));
    }
    const create = doc.paths['/api/speech/jobs'].post;
    expect(Object.keys(create.requestBody.content).sort()).toEqual(['application/json', 'application/x-www-form-urlencoded', 'multipart/form-data']);
    const props = create.requestBody.content['multipart/form-data'].schema.properties;
    expect(props.media_file).toMatchObject({ type: 'string', format: 'binary' });
    expect(Object.keys(props)).toEqual(
      expect.arrayContaining([
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
    expect(create.responses['201'].content['application/json'].schema.properties.job.properties).toHaveProperty('queue_channel_label');
    const status = doc.paths['/api/speech/status'].get.responses['200'].content['application/json'].schema;
    expect(status.properties.config.properties.upload_limit.required).toEqual(
      expect.arrayContaining(['configured_mb', 'php_upload_max_mb', 'php_post_max_mb', 'effective_max_mb', 'effective_max_label', 'limited_by_php']),
    );
    expect(doc.paths['/api/speech/jobs/{jobId}'].get.responses['404']).toBeDefined();
    expect(doc.paths['/api/speech/jobs'].get.parameters.map((p: { name: string }) => p.name).sort()).toEqual(['all', 'limit']);
  });
});
