import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { io, type Socket } from 'socket.io-client';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import type { AuthUser } from '../../coordinator/src/accounts/types.js';
import { loadConfig } from '../../coordinator/src/config.js';
import { startCoordinator } from '../../coordinator/src/service.js';
import { aiTaskJobId } from '../../coordinator/src/speech/ai/ai-queue.js';
import { NO_ACCESS_REASON, NO_PROVIDER_REASON } from '../../coordinator/src/speech/ai/provider.js';
import type { CallbackEnvelope } from '../../coordinator/src/speech/notifications/callback-service.js';
import { browserLogin, createTestDatabase, randomName, testEnv, type TestDatabase } from '../support/harness.js';
import { OpenAiStub } from '../support/openai-stub.js';
import { SimWorker } from '../support/sim-worker.js';

/**
 * Transcript analysis, translations and automatic titles against real coordinators (PostgreSQL,
 * Redis/BullMQ, gRPC with a simulated worker) and a local OpenAI-compatible server over real HTTP
 * (test/support/openai-stub.ts): the provider's requests, retries and failures, the permission
 * matrix, the title rules, map-reduce of long transcripts, streaming replies, the callback and the
 * report, a coordinator restart in the middle of an analysis, and a diarization rerun that finds
 * more speakers.
 */

type Json = Record<string, any>;
type User = AuthUser & { jwt: string; password: string };

const stub = new OpenAiStub();
const dir = mkdtempSync(path.join(tmpdir(), 'sonar-ai-'));
let clip = '';

beforeAll(async () => {
  await stub.start();
  clip = path.join(dir, 'clip.wav');
  execFileSync('sox', ['-n', '-r', '16000', '-c', '1', '-b', '16', clip, 'synth', '6', 'sine', '300']);
});
afterAll(async () => {
  await stub.close();
  rmSync(dir, { recursive: true, force: true });
});

const providerEnv = (extra: Record<string, string> = {}) => ({
  OPENAI_BASE_URL: stub.baseUrl,
  OPENAI_API_KEY: 'sk-test-key',
  OPENAI_MODEL: 'stub-model',
  OPENAI_MAX_RETRIES: '2',
  OPENAI_TIMEOUT_SECONDS: '30',
  ...extra,
});

/** A coordinator on its own database, users with and without AI access, and a simulated worker. */
async function stand(env: Record<string, string>, existing?: TestDatabase) {
  const db = existing ?? (await createTestDatabase());
  const svc = await startCoordinator(
    loadConfig(
      testEnv(db, {
        PUBLIC_BASE_URL: 'https://speech.example.org',
        SPEECH_MEDIA_DIR: path.join(dir, db.name),
        OUTBOUND_ALLOW_RANGES: '127.0.0.0/8',
        SPEECH_CALLBACK_BACKOFF_MS: '100',
        ...env,
      }),
    ),
  );
  const accounts = new AccountService(svc.orm);
  const signIn = async (user: AuthUser, password: string): Promise<User> => {
    const res = await fetch(`${svc.url}/api/account/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: user.username, password }),
    });
    return Object.assign(user, { jwt: ((await res.json()) as { token: string }).token, password });
  };
  const user = async (permissions: string[], isAdmin = false, email?: string) => {
    const { user: u, password } = await accounts.createUser({ username: randomName('u'), permissions, isAdmin, ...(email ? { email } : {}) });
    return signIn(u, password);
  };
  const worker = await SimWorker.start(svc, randomName('w'));
  const api = async (method: string, url: string, who: User | null, body?: unknown) => {
    const res = await fetch(`${svc.url}${url}`, {
      method,
      headers: { ...(who ? { authorization: `Bearer ${who.jwt}` } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as Json };
  };
  const detail = async (id: number, who: User) => {
    const res = await api('GET', `/api/speech/jobs/${id}`, who);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.job as Json;
  };
  const urlJob = (owner: User, opts: { analysisLanguage?: string; translations?: string[]; label?: string } = {}) =>
    svc.speech.jobs.create(owner, {
      channel: 'web',
      source: { type: 'url', url: `https://media.example.org/${randomName('talk')}.mp3` },
      ...(opts.analysisLanguage ? { analysisLanguage: opts.analysisLanguage } : {}),
      ...(opts.translations ? { translationTargetLanguages: opts.translations } : {}),
      ...(opts.label ? { label: opts.label } : {}),
    });
  const uploadJob = (owner: User, filename: string, opts: { label?: string; analysisLanguage?: string; translations?: string[] } = {}) => {
    const bytes = readFileSync(clip);
    const temp = path.join(dir, `${randomName('up')}.part`);
    writeFileSync(temp, bytes);
    return svc.speech.jobs.create(owner, {
      channel: 'web',
      source: { type: 'upload', tempPath: temp, filename, sizeBytes: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') },
      ...(opts.label ? { label: opts.label } : {}),
      ...(opts.analysisLanguage ? { analysisLanguage: opts.analysisLanguage } : {}),
      ...(opts.translations ? { translationTargetLanguages: opts.translations } : {}),
    });
  };
  const events = async (id: number) =>
    svc.orm.em
      .getConnection()
      .execute<Array<{ event: string; message: string; level: string }>>('select event, message, level from speech_job_events where job_id = ? order by id', [
        id,
      ]);
  /** The AI states of a job straight from the database (polling the API would hit its rate limit). */
  const aiOf = async (id: number) =>
    (
      await svc.orm.em.getConnection().execute<Array<{ analysis: Json | null; auto_title: Json | null; translations: Json[] }>>(
        `select analysis, auto_title,
                (select coalesce(json_agg(json_build_object('language', t.language, 'state', t.state) order by t.language), '[]')
                   from speech_translations t where t.job_id = j.id and t.pass = j.current_pass) as translations
           from speech_jobs j where id = ?`,
        [id],
      )
    )[0]!;
  return { db, svc, accounts, user, worker, api, detail, urlJob, uploadJob, events, aiOf };
}
type Stand = Awaited<ReturnType<typeof stand>>;

const SEGMENTS = ['The budget is up this quarter.', 'Then we should cut travel.', 'Agreed, I will draft the proposal.'];

describe('with an OpenAI-compatible provider', () => {
  let s: Stand;
  let ai: User;
  let plain: User;
  let admin: User;
  let manager: User;
  let other: User;
  beforeAll(async () => {
    s = await stand(providerEnv());
    ai = await s.user(['speech.use', 'speech.api', 'provider_openai']);
    plain = await s.user(['speech.use']);
    admin = await s.user([], true);
    manager = await s.user(['speech.use', 'speech.manage']);
    other = await s.user(['speech.use', 'provider_openai']);
  });
  afterAll(async () => {
    s.worker.close();
    await s.svc.close();
    await s.db.drop();
  });
  beforeEach(() => stub.reset());

  it('the upload form offers the analysis language and translations', async () => {
    const { jar } = await browserLogin(s.svc.app, ai.username, ai.password);
    const page = await s.svc.app.inject({ method: 'GET', url: '/speech', headers: { cookie: jar.header() } });
    expect(page.body).toContain('id="analysis_language"');
    expect(page.body).toContain('id="translation_target_languages"');
    expect(page.body).not.toContain('id="no-ai-provider"');
  });

  it('analyses in analysis_language from the speaker-aware transcript, logs it and publishes it live', async () => {
    const job = await s.urlJob(ai, { analysisLanguage: 'de' });
    const socket: Socket = io(s.svc.url, { transports: ['websocket'], auth: { token: ai.jwt }, reconnection: false });
    const live: Json[] = [];
    socket.on('analysis', (e: Json) => live.push(e));
    await new Promise<void>((resolve) => socket.emit('subscribe', { jobId: job.id }, () => resolve()));
    try {
      await s.worker.run(job.id, { segments: SEGMENTS, speakers: [0, 1, 0] });
      await expect.poll(async () => (await s.aiOf(job.id)).analysis?.state, { timeout: 15_000 }).toBe('completed');
      const d = await s.detail(job.id, ai);
      expect(d.analysis).toMatchObject({
        language: 'de',
        generation: 1,
        provider: `stub-model at 127.0.0.1:${stub.port}`,
        model: 'stub-model',
        error: null,
        requested_by: null,
        result: {
          summary: expect.stringMatching(/^\[de\] whole: \[00:00:00\] Speaker 1: The budget is up/),
          action_items: ['[de] follow up with Speaker 1', '[de] follow up with Speaker 2'],
          topics: ['meeting'],
        },
      });
      const [req] = stub.of('analysis');
      expect(stub.of('analysis')).toHaveLength(1);
      expect(req!.system).toContain('German (de)');
      expect(req!.user).toContain('Speaker 2: Then we should cut travel.');
      expect(req!.body).toMatchObject({ model: 'stub-model', response_format: { type: 'json_object' } });
      expect(req!.body.stream).toBeFalsy();
      expect(req!.headers.authorization).toBe('Bearer sk-test-key');
      const log = d.runtime_log.map((e: Json) => e.event);
      expect(log).toEqual(expect.arrayContaining(['analysis_pending', 'analysis_running', 'analysis_completed']));
      await expect.poll(() => live.map((e) => e.state)).toEqual(['pending', 'running', 'completed']);
      expect(live[2]).toMatchObject({ job_id: job.id, kind: 'analysis', language: 'de' });
    } finally {
      socket.close();
    }
  });

  it('translates into each language independently (one failing), with the analysis, and the callback carries both', async () => {
    const received: Json[] = [];
    const receiver: Server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push(JSON.parse(Buffer.concat(chunks).toString('utf8')) as Json);
        res.end('ok');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    try {
      stub.answer = (req) => (req.task === 'translation' && /\(fr\)/.test(req.system) ? { status: 500, message: 'translation backend down' } : undefined);
      const { token } = await s.accounts.createPersonalToken(ai.id, { name: 'provider_speech_api', scopes: ['speech.api'] });
      const res = await fetch(`${s.svc.url}/api/speech/transcribe`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          callback_url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`,
          source_url: 'https://media.example.org/board.mp3',
          source_label: 'Board meeting',
          analysis_language: 'en',
          translation_target_languages: ['de', 'fr'],
        }),
      });
      expect(res.status).toBe(201);
      const id = ((await res.json()) as Json).job.id as number;
      await s.worker.run(id, { segments: SEGMENTS });
      await expect.poll(() => received.length, { timeout: 20_000 }).toBe(1);
      const envelope = received[0] as CallbackEnvelope;
      expect(envelope.event).toBe('speech.job.completed');
      expect(envelope.job.analysis_text).toMatch(/^\[en\] whole: The budget is up this quarter\.[\s\S]*\n\nKey points:\n- \[en\] /);
      expect(envelope.job.translations).toEqual([
        {
          language: 'de',
          status: 'completed',
          text: SEGMENTS.map((t) => `[de] ${t}`).join(' '),
          analysis_text: expect.stringMatching(/^\[de\] \[en\] whole:/),
          error: null,
        },
        { language: 'fr', status: 'failed', text: null, analysis_text: null, error: expect.stringContaining('HTTP 500 translation backend down') },
      ]);
      const d = await s.detail(id, ai);
      expect(d.status).toBe('completed');
      expect(d.translations[0]).toMatchObject({
        language: 'de',
        state: 'completed',
        segments: SEGMENTS.map((t, seq) => ({ seq, text: `[de] ${t}` })),
        analysis: { summary: expect.stringMatching(/^\[de\] /) },
        provider: `stub-model at 127.0.0.1:${stub.port}`,
      });
      expect(d.translations[1]).toMatchObject({
        language: 'fr',
        state: 'failed',
        error: 'the provider answered HTTP 500 translation backend down (after 2 retries)',
      });
      // The client retried the 500 twice (OPENAI_MAX_RETRIES) before giving up; German needed one request per part.
      expect(stub.of('translation', 'fr')).toHaveLength(3);
      expect(stub.of('translation', 'de')).toHaveLength(1);
      expect(stub.of('translate-analysis', 'de')).toHaveLength(1);
      // Translations waited for the analysis, so they were made once, carrying it.
      const firstTranslation = stub.requests.findIndex((r) => r.task === 'translation');
      expect(stub.requests.findIndex((r) => r.task === 'analysis')).toBeLessThan(firstTranslation);
      expect(d.runtime_log.map((e: Json) => e.event)).toEqual(expect.arrayContaining(['translations_pending', 'translation_completed', 'translation_failed']));
    } finally {
      await new Promise<void>((resolve) => receiver.close(() => resolve()));
    }
  });

  it('retries 429 answers (Retry-After) and then succeeds', async () => {
    stub.answer = (req, n) =>
      req.task === 'analysis' && n <= 2 ? { status: 429, message: 'Rate limit reached', headers: { 'retry-after-ms': '20' } } : undefined;
    const job = await s.urlJob(ai, { analysisLanguage: 'en' });
    await s.worker.run(job.id, { segments: SEGMENTS });
    await expect.poll(async () => (await s.aiOf(job.id)).analysis?.state, { timeout: 15_000 }).toBe('completed');
    expect(stub.of('analysis')).toHaveLength(3);
  });

  it('a 500 that persists fails the analysis with the upstream reason, never the job; an invalid reply fails it too', async () => {
    stub.answer = (req) => (req.task === 'analysis' ? { status: 500, message: 'model overloaded' } : undefined);
    const job = await s.urlJob(ai, { analysisLanguage: 'en' });
    await s.worker.run(job.id, { segments: SEGMENTS });
    await expect.poll(async () => (await s.aiOf(job.id)).analysis?.state, { timeout: 20_000 }).toBe('failed');
    const d = await s.detail(job.id, ai);
    expect(d.status).toBe('completed');
    expect(d.analysis).toMatchObject({ result: null, error: 'the provider answered HTTP 500 model overloaded (after 2 retries)' });
    expect(d.runtime_log).toContainEqual(
      expect.objectContaining({ event: 'analysis_failed', level: 'warn', message: expect.stringContaining('model overloaded') }),
    );
    expect(stub.of('analysis')).toHaveLength(3);

    stub.reset();
    stub.answer = (req) => (req.task === 'analysis' ? { content: 'Sure! Here is the analysis: it went well.' } : undefined);
    const again = await s.api('POST', `/api/speech/jobs/${job.id}/analyze`, ai);
    expect(again.status, JSON.stringify(again.body)).toBe(202);
    expect(again.body.job.analysis).toMatchObject({ state: 'pending', generation: 2, requested_by: ai.username });
    await expect.poll(async () => (await s.aiOf(job.id)).analysis?.state, { timeout: 15_000 }).toBe('failed');
    expect((await s.detail(job.id, ai)).analysis.error).toMatch(/^the model's reply is not valid JSON: Sure! Here is/);
  });

  it('permission matrix: no provider_openai → unavailable and 403; AI users, admins and their analyses; 404, 422', async () => {
    // Automatic work of an owner without AI access is unavailable with the reason, never a job error.
    const job = await s.urlJob(plain, { analysisLanguage: 'en', translations: ['de'] });
    await s.worker.run(job.id, { segments: SEGMENTS });
    const d = await s.detail(job.id, plain);
    expect(d).toMatchObject({ status: 'completed', analysis: { state: 'unavailable', error: NO_ACCESS_REASON, result: null } });
    expect(d.translations).toEqual([expect.objectContaining({ language: 'de', state: 'unavailable', error: NO_ACCESS_REASON })]);
    expect((await s.api('POST', `/api/speech/jobs/${job.id}/analyze`, plain)).status).toBe(403);
    // A queue manager without AI access may see the job but not analyse it.
    expect((await s.api('POST', `/api/speech/jobs/${job.id}/analyze`, manager)).status).toBe(403);
    // Someone else's job is not even confirmed to exist.
    expect((await s.api('POST', `/api/speech/jobs/${job.id}/analyze`, other)).status).toBe(404);
    // Administrators always have AI access.
    stub.answer = (req) =>
      req.task === 'analysis' ? { content: JSON.stringify({ summary: 'slow', key_points: [], action_items: [], topics: [] }), delayMs: 1500 } : undefined;
    const byAdmin = await s.api('POST', `/api/speech/jobs/${job.id}/analyze`, admin);
    expect(byAdmin.status, JSON.stringify(byAdmin.body)).toBe(202);
    // While it is pending or running a second request is refused.
    const busy = await s.api('POST', `/api/speech/jobs/${job.id}/analyze`, admin);
    expect(busy.status).toBe(422);
    expect((busy.body as { errors: Record<string, string[]> }).errors.analysis).toEqual([expect.stringMatching(/already (pending|running)/)]);
    await expect.poll(async () => (await s.aiOf(job.id)).analysis?.state, { timeout: 15_000 }).toBe('completed');
    // The unavailable record was generation 1; the administrator's run is generation 2.
    expect((await s.detail(job.id, plain)).analysis).toMatchObject({
      language: 'en',
      generation: 2,
      requested_by: admin.username,
      result: { summary: 'slow' },
    });

    // A user with AI access analyses their own job on demand (none was asked for at submission).
    stub.reset();
    const own = await s.urlJob(ai);
    await s.worker.run(own.id, { segments: SEGMENTS });
    expect((await s.detail(own.id, ai)).analysis).toBeNull();
    expect((await s.api('POST', `/api/speech/jobs/${own.id}/analyze`, ai)).status).toBe(202);
    await expect.poll(async () => (await s.aiOf(own.id)).analysis?.state, { timeout: 15_000 }).toBe('completed');
    expect(stub.of('analysis')[0]!.system).toContain("the transcript's own language");

    // The transcript must exist.
    const queued = await s.urlJob(ai);
    const early = await s.api('POST', `/api/speech/jobs/${queued.id}/analyze`, ai);
    expect(early.status).toBe(422);
    expect(early.body.message).toMatch(/transcript does not exist yet/);
    await s.worker.run(queued.id, { segments: SEGMENTS });

    // An administrator's own job is analysed automatically.
    const adminJob = await s.urlJob(admin, { analysisLanguage: 'sv' });
    await s.worker.run(adminJob.id, { segments: SEGMENTS });
    await expect.poll(async () => (await s.aiOf(adminJob.id)).analysis?.state, { timeout: 15_000 }).toBe('completed');
  });

  describe('titles', () => {
    it('an uploaded file still named after the file gets a transcript-based title', async () => {
      const job = await s.uploadJob(ai, 'rec-0412.wav');
      expect(job.sourceLabel).toBe('rec-0412.wav');
      await s.worker.run(job.id, { segments: SEGMENTS });
      await expect.poll(async () => (await s.aiOf(job.id)).auto_title?.state, { timeout: 15_000 }).toBe('completed');
      const d = await s.detail(job.id, ai);
      expect(d).toMatchObject({
        source_label: 'Quarterly budget review',
        title_edited: false,
        auto_title: { title: 'Quarterly budget review', applied: true },
      });
      expect(stub.of('title')[0]!.user).toContain('The budget is up this quarter.');
      expect(d.runtime_log).toContainEqual(
        expect.objectContaining({ event: 'title_completed', message: 'Title generated from the transcript: "Quarterly budget review".' }),
      );
    });

    it('a user-supplied title is never replaced, and an owner without AI access gets none', async () => {
      const titled = await s.uploadJob(ai, 'rec-0413.wav', { label: 'Strategy offsite' });
      await s.worker.run(titled.id, { segments: SEGMENTS });
      const d = await s.detail(titled.id, ai);
      expect(d).toMatchObject({ source_label: 'Strategy offsite', auto_title: null });
      const noAccess = await s.uploadJob(plain, 'rec-0414.wav');
      await s.worker.run(noAccess.id, { segments: SEGMENTS });
      expect(await s.detail(noAccess.id, plain)).toMatchObject({ source_label: 'rec-0414.wav', auto_title: { state: 'unavailable', error: NO_ACCESS_REASON } });
      expect(stub.of('title')).toHaveLength(0);
    });

    it('an edit saved while the title is generated wins', async () => {
      stub.answer = (req) => (req.task === 'title' ? { content: JSON.stringify({ title: 'Generated late' }), delayMs: 1000 } : undefined);
      const job = await s.uploadJob(ai, 'rec-0415.wav');
      await s.worker.run(job.id, { segments: SEGMENTS });
      await expect.poll(() => stub.of('title').length, { timeout: 15_000 }).toBe(1);
      const saved = await s.api('PATCH', `/api/speech/jobs/${job.id}`, ai, { source_label: 'Board notes', source_note: 'Second draft' });
      expect(saved.status, JSON.stringify(saved.body)).toBe(200);
      expect(saved.body.job).toMatchObject({ source_label: 'Board notes', source_note: 'Second draft', title_edited: true });
      await expect.poll(async () => (await s.aiOf(job.id)).auto_title?.state, { timeout: 15_000 }).toBe('completed');
      expect(await s.detail(job.id, ai)).toMatchObject({ source_label: 'Board notes', auto_title: { title: 'Generated late', applied: false } });
    });

    it('a failed title generation only logs; the job stays completed', async () => {
      stub.answer = (req) => (req.task === 'title' ? { status: 500, message: 'no titles today' } : undefined);
      const job = await s.uploadJob(ai, 'rec-0416.wav');
      await s.worker.run(job.id, { segments: SEGMENTS });
      await expect.poll(async () => (await s.aiOf(job.id)).auto_title?.state, { timeout: 20_000 }).toBe('failed');
      const d = await s.detail(job.id, ai);
      expect(d).toMatchObject({ status: 'completed', source_label: 'rec-0416.wav', failure_error: null });
      expect(d.runtime_log).toContainEqual(
        expect.objectContaining({
          event: 'title_failed',
          level: 'warn',
          message: expect.stringMatching(/^Title generation failed \(the job is not affected\): .*no titles today/),
        }),
      );
    });

    it('a suggestion only answers a title; the metadata form saves it (owner only)', async () => {
      const job = await s.urlJob(ai, { label: 'Weekly sync' });
      await s.worker.run(job.id, { segments: SEGMENTS });
      const suggested = await s.api('POST', `/api/speech/jobs/${job.id}/title-suggestion`, ai);
      expect(suggested).toEqual({ status: 200, body: { ok: true, title: 'Quarterly budget review' } });
      expect((await s.detail(job.id, ai)).source_label).toBe('Weekly sync');
      expect((await s.api('PATCH', `/api/speech/jobs/${job.id}`, manager, { source_label: 'Hijacked' })).status).toBe(403);
      expect((await s.api('POST', `/api/speech/jobs/${job.id}/title-suggestion`, manager)).status).toBe(403);
      const saved = await s.api('PATCH', `/api/speech/jobs/${job.id}`, ai, { source_label: suggested.body.title });
      expect(saved.body.job).toMatchObject({ source_label: 'Quarterly budget review', title_edited: true });
      const mine = await s.urlJob(plain);
      await s.worker.run(mine.id, { segments: SEGMENTS });
      expect((await s.api('POST', `/api/speech/jobs/${mine.id}/title-suggestion`, plain)).status).toBe(403);
    });
  });

  it('the job page shows the analysis and carries the metadata form with the suggest action', async () => {
    const job = await s.uploadJob(ai, 'rec-0417.wav', { analysisLanguage: 'en', translations: ['de'] });
    await s.worker.run(job.id, { segments: SEGMENTS });
    await expect.poll(async () => (await s.aiOf(job.id)).translations[0]?.state, { timeout: 15_000 }).toBe('completed');
    const { jar, csrf } = await browserSession(s, ai);
    const page = await fetch(`${s.svc.url}/speech/jobs/${job.id}`, { headers: { cookie: jar } });
    const html = await page.text();
    expect(page.status).toBe(200);
    expect(html).toContain('id="metadata-form"');
    expect(html).toContain('id="suggest-title"');
    expect(html).toMatch(/id="analysis"[^>]*data-state="completed"/);
    expect(html).toContain('[en] whole: The budget is up this quarter.');
    expect(html).toContain('[de] The budget is up this quarter.');
    // The form posts with the session and its CSRF token.
    const saved = await fetch(`${s.svc.url}/api/speech/jobs/${job.id}`, {
      method: 'PATCH',
      headers: { cookie: jar, 'x-csrf-token': csrf, 'content-type': 'application/json' },
      body: JSON.stringify({ source_label: 'From the page', source_note: '' }),
    });
    expect(saved.status).toBe(200);
    expect(((await saved.json()) as Json).job).toMatchObject({ source_label: 'From the page', source_note: null });
  });
});

/** A browser session (cookie jar header) and its CSRF token, from the sign-in form. */
async function browserSession(s: Stand, who: User) {
  const { password } = who;
  const cookies = new Map<string, string>();
  const keep = (res: Response) => {
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const [k, v] = pair!.split('=');
      cookies.set(k!, v ?? '');
    }
  };
  const jar = () => [...cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  const form = await fetch(`${s.svc.url}/login`);
  keep(form);
  const csrfLogin = /name="_csrf" value="([^"]+)"/.exec(await form.text())![1]!;
  const res = await fetch(`${s.svc.url}/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie: jar(), 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ _csrf: csrfLogin, username: who.username, password, next: '/' }).toString(),
  });
  keep(res);
  const page = await fetch(`${s.svc.url}/speech`, { headers: { cookie: jar() } });
  keep(page);
  const csrf = /data-csrf="([^"]+)"/.exec(await page.text())![1]!;
  return { jar: jar(), csrf };
}

describe('streaming replies and a small context (map-reduce)', () => {
  let s: Stand;
  let ai: User;
  beforeAll(async () => {
    s = await stand(providerEnv({ OPENAI_STREAM: 'true', OPENAI_CONTEXT_TOKENS: '600', OPENAI_MAX_OUTPUT_TOKENS: '100' }));
    ai = await s.user(['speech.use', 'provider_openai']);
  });
  afterAll(async () => {
    s.worker.close();
    await s.svc.close();
    await s.db.drop();
  });
  beforeEach(() => stub.reset());

  it('reads a streamed (server-sent events) reply', async () => {
    const job = await s.urlJob(ai, { analysisLanguage: 'en' });
    await s.worker.run(job.id, { segments: SEGMENTS.slice(0, 1) });
    await expect.poll(async () => (await s.aiOf(job.id)).analysis?.state, { timeout: 15_000 }).toBe('completed');
    expect((await s.detail(job.id, ai)).analysis.result.summary).toBe('[en] whole: The budget is up this quarter.');
    expect(stub.of('analysis')[0]!.body.stream).toBe(true);
  });

  it('a transcript longer than the context is analysed in parts and merged, and translated in batches', async () => {
    const long = Array.from({ length: 40 }, (_, i) => `Item ${i + 1}: the committee reviewed line ${i + 1} of the budget in detail.`);
    const job = await s.urlJob(ai, { analysisLanguage: 'en', translations: ['de'] });
    await s.worker.run(job.id, { segments: long });
    await expect.poll(async () => (await s.aiOf(job.id)).translations[0]?.state, { timeout: 30_000 }).toBe('completed');
    const d = await s.detail(job.id, ai);
    const parts = stub.of('analysis-part');
    expect(parts.length).toBeGreaterThanOrEqual(3);
    expect(stub.of('analysis')).toHaveLength(0);
    expect(stub.of('analysis-merge').length).toBeGreaterThanOrEqual(1);
    // Every part fits the context next to the reply: (600 − 100) tokens × 3 characters.
    for (const r of [...parts, ...stub.of('analysis-merge')]) expect(r.system.length + r.user.length).toBeLessThanOrEqual(1500);
    // The parts cover the whole transcript, in order (split at sentence ends).
    expect(parts.map((r) => r.user.replace(/\s+/g, ' ').trim()).join(' ')).toBe(long.join(' '));
    expect(d.analysis.result.summary).toMatch(/^\[en\] merged \d parts$/);
    expect(d.analysis.result.key_points).toHaveLength(parts.length);
    expect(d.runtime_log).toContainEqual(
      expect.objectContaining({ event: 'analysis_completed', message: expect.stringMatching(/\d+ parts merged in \d+ requests/) }),
    );
    expect(stub.of('translation').length).toBeGreaterThan(1);
    expect(d.translations[0].segments).toEqual(long.map((text, seq) => ({ seq, text: `[de] ${text}` })));
  });
});

describe('without a provider', () => {
  let s: Stand;
  let ai: User;
  beforeAll(async () => {
    s = await stand({});
    ai = await s.user(['speech.use', 'provider_openai']);
  });
  afterAll(async () => {
    s.worker.close();
    await s.svc.close();
    await s.db.drop();
  });

  it('reports analysis, translations and titles unavailable with the reason; the actions answer 503', async () => {
    stub.reset();
    const job = await s.uploadJob(ai, 'rec-0501.wav', { analysisLanguage: 'en', translations: ['de'] });
    await s.worker.run(job.id, { segments: SEGMENTS });
    const d = await s.detail(job.id, ai);
    expect(d).toMatchObject({
      status: 'completed',
      source_label: 'rec-0501.wav',
      analysis: { state: 'unavailable', error: NO_PROVIDER_REASON },
      translations: [expect.objectContaining({ state: 'unavailable', error: NO_PROVIDER_REASON })],
      auto_title: { state: 'unavailable', error: NO_PROVIDER_REASON },
    });
    expect(d.runtime_log).toContainEqual(
      expect.objectContaining({ event: 'analysis_unavailable', message: `Transcript analysis unavailable: ${NO_PROVIDER_REASON}` }),
    );
    // The automatic title was not asked for: no runtime-log line per job says it cannot be made.
    expect((d.runtime_log as Array<{ event: string }>).map((e) => e.event)).not.toContain('title_unavailable');
    // The upload form offers no analysis or translation, and says why.
    const { jar } = await browserLogin(s.svc.app, ai.username, ai.password);
    const page = await s.svc.app.inject({ method: 'GET', url: '/speech', headers: { cookie: jar.header() } });
    expect(page.statusCode).toBe(200);
    expect(page.body).not.toContain('id="analysis_language"');
    expect(page.body).not.toContain('id="translation_target_languages"');
    expect(page.body).toContain('id="no-ai-provider"');
    const analyze = await s.api('POST', `/api/speech/jobs/${job.id}/analyze`, ai);
    expect(analyze).toMatchObject({ status: 503, body: { ok: false, reason: 'service_unavailable', message: NO_PROVIDER_REASON } });
    expect((await s.api('POST', `/api/speech/jobs/${job.id}/title-suggestion`, ai)).status).toBe(503);
    expect(stub.requests).toHaveLength(0);
  });
});

describe('reports name the provider', () => {
  it('the completion report has the analysis, the translations and the provider', async () => {
    stub.reset();
    const s = await stand(providerEnv({ SMTP_URL: 'smtp://127.0.0.1:9' }));
    try {
      const ai = await s.user(['speech.use', 'provider_openai'], false, `${randomName('mail')}@example.org`);
      const job = await s.urlJob(ai, { analysisLanguage: 'en', translations: ['de'] });
      await s.worker.run(job.id, { segments: SEGMENTS });
      await expect.poll(async () => (await s.aiOf(job.id)).translations[0]?.state, { timeout: 15_000 }).toBe('completed');
      const report = await s.svc.notifications.reports!.preview(job.id, 'completed');
      expect(report!.text).toContain(`AI provider: OpenAI-compatible: stub-model at 127.0.0.1:${stub.port}`);
      expect(report!.text).toContain('Analysis: completed');
      expect(report!.text).toContain('Summary: [en] whole: The budget is up this quarter.');
      expect(report!.text).toContain('Translations: de completed');
      expect(report!.html).toContain('Analysis and translations');
    } finally {
      s.worker.close();
      await s.svc.close();
      await s.db.drop();
    }
  });
});

describe('a coordinator restart in the middle of an analysis', () => {
  it('the analysis is taken up by the next coordinator and stored once', async () => {
    stub.reset();
    // The first request hangs until the coordinator goes away; later ones answer at once.
    stub.answer = (req, n) => (req.task === 'analysis' && n === 1 ? { content: '{}', delayMs: 120_000 } : undefined);
    const first = await stand(providerEnv());
    const ai = await first.user(['speech.use', 'provider_openai']);
    const job = await first.urlJob(ai, { analysisLanguage: 'en' });
    await first.worker.run(job.id, { segments: SEGMENTS });
    await expect.poll(() => stub.of('analysis').length, { timeout: 15_000 }).toBe(1);
    expect((await first.detail(job.id, ai)).analysis.state).toBe('running');
    first.worker.close();
    await first.svc.close();
    await expect.poll(() => stub.of('analysis')[0]!.aborted).toBe(true);

    const second = await stand(providerEnv(), first.db);
    try {
      await expect.poll(async () => (await second.aiOf(job.id)).analysis?.state, { timeout: 20_000 }).toBe('completed');
      const d = await second.detail(job.id, ai);
      expect(d.analysis).toMatchObject({ generation: 1, result: { summary: expect.stringMatching(/^\[en\] whole: The budget is up this quarter\./) } });
      const log = (await second.events(job.id)).map((e) => e.event);
      expect(log.filter((e) => e === 'analysis_completed')).toHaveLength(1);
      expect(log.filter((e) => e === 'analysis_resumed')).toHaveLength(1);
      expect(stub.of('analysis')).toHaveLength(2);
      // One BullMQ job for the task, done; dispatching again is a no-op.
      const task = await second.svc.ai.queue.getJob(aiTaskJobId({ jobId: job.id, pass: 1, kind: 'analysis', language: '', generation: 1 }));
      expect(await task!.getState()).toBe('completed');
      await second.svc.orm.em.getConnection().execute('update speech_ai_tasks set dispatched_at = null where job_id = ?', [job.id]);
      await second.svc.ai.drain();
      expect(await second.svc.ai.queue.getJobCounts('waiting', 'delayed', 'active')).toEqual({ waiting: 0, delayed: 0, active: 0 });
      expect((await second.detail(job.id, ai)).analysis.state).toBe('completed');
    } finally {
      second.worker.close();
      await second.svc.close();
      await first.db.drop();
    }
  });
});

describe('a diarization rerun that finds more speakers', () => {
  it('regenerates the analysis and its translations once; a rerun with the same speakers does not', async () => {
    stub.reset();
    const s = await stand(providerEnv());
    try {
      const ai = await s.user(['speech.use', 'provider_openai']);
      const job = await s.uploadJob(ai, 'rec-0601.wav', { label: 'Team call', analysisLanguage: 'en', translations: ['de'] });
      await s.worker.run(job.id, { segments: SEGMENTS, speakers: [0, 0, 0] });
      await expect.poll(async () => (await s.aiOf(job.id)).translations[0]?.state, { timeout: 15_000 }).toBe('completed');
      const before = await s.detail(job.id, ai);
      expect(before.analysis).toMatchObject({ state: 'completed', generation: 1, result: { action_items: ['[en] follow up with Speaker 1'] } });

      const rerun = async (speakers: number[]) => {
        expect((await s.api('POST', `/api/speech/jobs/${job.id}/diarization`, ai)).status).toBe(200);
        const task = (await s.worker.claim())!;
        expect(task).toMatchObject({ task: 'diarize' });
        await s.worker.client.complete({
          lease: task.lease,
          success: true,
          error: '',
          cancelled: false,
          segment_count: 0,
          duration_seconds: 6,
          engine: 'test',
          engine_model: task.model,
          diarization: {
            state: 'completed',
            engine: 'test-diarizer',
            speaker_count: new Set(speakers).size,
            turns: speakers.map((speaker, i) => ({ start: i * 2, end: i * 2 + 2, speaker })),
            error: '',
          },
        });
      };
      await rerun([0, 1, 2]);
      expect((await s.detail(job.id, ai)).analysis).toMatchObject({ generation: 2 });
      await expect.poll(async () => (await s.aiOf(job.id)).analysis?.state, { timeout: 15_000 }).toBe('completed');
      await expect.poll(async () => (await s.aiOf(job.id)).translations[0], { timeout: 15_000 }).toMatchObject({ state: 'completed' });
      const after = await s.detail(job.id, ai);
      expect(after.analysis.result.action_items).toEqual(['[en] follow up with Speaker 1', '[en] follow up with Speaker 2', '[en] follow up with Speaker 3']);
      expect(after.translations[0].analysis.action_items).toContain('[de] [en] follow up with Speaker 3');
      expect(stub.of('analysis')).toHaveLength(2);
      expect(stub.of('translate-analysis')).toHaveLength(2);
      expect(after.runtime_log.filter((e: Json) => e.event === 'analysis_regenerating')).toHaveLength(1);

      // The same number of speakers again: nothing is regenerated (decided in the statement that ends the rerun).
      await rerun([0, 1, 2]);
      const last = await s.detail(job.id, ai);
      expect(last.diarization).toMatchObject({ state: 'completed', speaker_count: 3 });
      expect(last.analysis).toMatchObject({ state: 'completed', generation: 2 });
      expect(last.runtime_log.filter((e: Json) => e.event === 'analysis_regenerating')).toHaveLength(1);
    } finally {
      s.worker.close();
      await s.svc.close();
      await s.db.drop();
    }
  });
});

describe('a correction of the transcript', () => {
  it('marks the analysis and translations out of date; "Analyse again" brings both up to date', async () => {
    stub.reset();
    const s = await stand(providerEnv());
    try {
      const ai = await s.user(['speech.use', 'provider_openai']);
      const job = await s.uploadJob(ai, 'rec-0701.wav', { label: 'Budget call', analysisLanguage: 'en', translations: ['de'] });
      await s.worker.run(job.id, { segments: SEGMENTS, speakers: [0, 1, 0] });
      await expect.poll(async () => (await s.aiOf(job.id)).translations[0]?.state, { timeout: 15_000 }).toBe('completed');
      const { jar } = await browserLogin(s.svc.app, ai.username, ai.password);
      const page = async () => (await s.svc.app.inject({ url: `/speech/jobs/${job.id}`, headers: { cookie: jar.header() } })).body;
      expect(await page()).not.toContain('id="analysis-stale"');

      expect((await s.api('PATCH', `/api/speech/jobs/${job.id}/segments/1`, ai, { text: 'Then we should cut hotels.' })).status).toBe(200);
      const stale = await page();
      expect(stale).toContain('id="analysis-stale"');
      expect(stale).toContain('class="warning translation-stale"');

      expect((await s.api('POST', `/api/speech/jobs/${job.id}/analyze`, ai)).status).toBe(202);
      await expect.poll(async () => (await s.aiOf(job.id)).analysis?.state, { timeout: 15_000 }).toBe('completed');
      await expect.poll(async () => (await s.aiOf(job.id)).translations[0], { timeout: 15_000 }).toMatchObject({ state: 'completed' });
      // The new analysis read the corrected text.
      expect(stub.of('analysis').at(-1)?.user).toContain('cut hotels');
      const fresh = await page();
      expect(fresh).not.toContain('id="analysis-stale"');
      expect(fresh).not.toContain('translation-stale');
    } finally {
      s.worker.close();
      await s.svc.close();
      await s.db.drop();
    }
  });
});

describe('re-transcription', () => {
  it('archives the analysis and translations with the revision; the new pass starts without them; not while they run', async () => {
    stub.reset();
    const s = await stand(providerEnv());
    const large = await SimWorker.start(s.svc, randomName('large'), ['large']);
    try {
      const ai = await s.user(['speech.use', 'provider_openai']);
      const job = await s.uploadJob(ai, 'rec-0701.wav', { label: 'Offsite', analysisLanguage: 'en', translations: ['de'] });
      stub.answer = (req) =>
        req.task === 'analysis'
          ? { content: JSON.stringify({ summary: 'first pass', key_points: [], action_items: [], topics: [] }), delayMs: 1000 }
          : undefined;
      await s.worker.run(job.id, { segments: SEGMENTS });
      await expect.poll(async () => (await s.aiOf(job.id)).analysis?.state, { timeout: 15_000 }).toBe('running');
      const busy = await s.api('POST', `/api/speech/jobs/${job.id}/retranscribe`, ai, { model: 'large' });
      expect(busy.status).toBe(422);
      expect(busy.body.errors).toHaveProperty('analysis');
      await expect.poll(async () => (await s.aiOf(job.id)).translations[0]?.state, { timeout: 15_000 }).toBe('completed');

      const started = await s.api('POST', `/api/speech/jobs/${job.id}/retranscribe`, ai, { model: 'large' });
      expect(started.status, JSON.stringify(started.body)).toBe(200);
      const fresh = await s.detail(job.id, ai);
      expect(fresh).toMatchObject({ status: 'queued', analysis: null, translations: [], auto_title: null });
      const history = (await s.api('GET', `/api/speech/jobs/${job.id}/revisions`, ai)).body;
      expect(history.revisions[0]).toMatchObject({
        pass: 1,
        analysis: { state: 'completed', language: 'en', result: { summary: 'first pass' }, provider: `stub-model at 127.0.0.1:${stub.port}` },
        translations: [{ language: 'de', state: 'completed', text: SEGMENTS.map((t) => `[de] ${t}`).join(' '), analysis: { summary: '[de] first pass' } }],
      });

      // The new pass gets its own analysis and translations.
      stub.reset();
      await large.run(job.id, { segments: ['A second pass.'] });
      await expect.poll(async () => (await s.aiOf(job.id)).translations[0]?.state, { timeout: 15_000 }).toBe('completed');
      const second = await s.detail(job.id, ai);
      expect(second.analysis).toMatchObject({ state: 'completed', generation: 1, result: { summary: '[en] whole: A second pass.' } });
      expect(second.translations[0]).toMatchObject({ text: '[de] A second pass.' });
      expect((await s.api('GET', `/api/speech/jobs/${job.id}/revisions`, ai)).body.revisions[0].analysis.result.summary).toBe('first pass');
    } finally {
      large.close();
      s.worker.close();
      await s.svc.close();
      await s.db.drop();
    }
  });
});
