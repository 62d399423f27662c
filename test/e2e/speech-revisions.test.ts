import { execFileSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import { loadConfig } from '../../coordinator/src/config.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { UNAVAILABLE } from '../../coordinator/src/speech/jobs/retranscription.js';
import { browserLogin, createJwtUser, createTestDatabase, extractCsrf, randomName, testEnv, type TestDatabase, type TestUser } from '../support/harness.js';
import { registerModelWorker } from '../support/model-workers.js';
import { multipartForm } from '../support/multipart.js';
import { startNode, type Proc } from '../support/processes.js';
import { SimWorker } from '../support/sim-worker.js';

/**
 * Re-transcription with read-only revisions (who may start one, when it is
 * unavailable, the revision records) on a real coordinator (PostgreSQL, Redis/BullMQ, gRPC): the first pass of each job
 * is run by a simulated worker with model `small`; the new pass runs on the real worker agent
 * (pocketsphinx), remote for uploads and the local runner for URL sources. Callbacks go to a
 * loopback HTTP receiver.
 */
const SPHINX = 'pocketsphinx-en-us';
const dir = mkdtempSync(path.join(tmpdir(), 'sonar-revisions-'));
let db: TestDatabase;
let svc: RunningCoordinator;
let sim: SimWorker;
let alice: TestUser; // owner: speech.use + speech.api
let bob: TestUser; // speech.use
let manager: TestUser; // speech.use + speech.manage
let root: TestUser; // administrator
let personalToken: string;
let wav: Buffer;
const procs: Proc[] = [];

/** Receives callbacks on loopback and keeps their bodies by path. */
const received = new Map<string, string[]>();
let receiver: Server;
let receiverPort = 0;
const callbackUrl = () => `http://127.0.0.1:${receiverPort}/cb/${randomName('p')}`;
const callbacksAt = (url: string) => (received.get(new URL(url).pathname) ?? []).map((b) => JSON.parse(b) as { event: string; job: Record<string, unknown> });

const sql = <T = Record<string, unknown>>(q: string, params: unknown[] = []) => svc.orm.em.getConnection().execute<T[]>(q, params);

async function startAgent(name: string, extra: string[] = []) {
  const { secret } = await svc.workers.createWorker(name);
  const p = startNode('worker/dist/bin.js', ['--coordinator', `127.0.0.1:${svc.grpcPort}`, '--work-dir', dir, ...extra], { WORKER_SECRET: secret });
  procs.push(p);
  await p.waitFor(/connected to coordinator/);
  return p;
}

const inject = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, headers: Record<string, string> = {}, payload?: unknown) =>
  svc.app.inject({ method, url, headers, ...(payload === undefined ? {} : { payload: payload as string }) });

const revisions = async (id: number, who: TestUser = alice, query = '') => {
  const res = await inject('GET', `/api/speech/jobs/${id}/revisions${query}`, who.auth);
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
};
const retranscribe = (id: number, model: unknown, headers: Record<string, string> = alice.auth) =>
  inject('POST', `/api/speech/jobs/${id}/retranscribe`, headers, model === undefined ? {} : { model });
const jobOf = async (id: number) => (await inject('GET', `/api/speech/jobs/${id}`, alice.auth)).json().job;
const waitCompleted = (id: number) => expect.poll(async () => (await jobOf(id)).status, { timeout: 60_000, interval: 200 }).toBe('completed');

/**
 * Alice uploads the recording (model small, without speaker labels: the real agent has no
 * diarizer, and `auto` jobs that ask for labels wait for one); the simulated worker completes its
 * first pass with `segments`.
 */
async function completedJob(segments: string[], opts: { callback?: string } = {}): Promise<number> {
  const parts = [
    { name: 'model', value: 'small' },
    { name: 'disable_diarization', value: '1' },
    { name: 'source_label', value: 'Standup' },
    ...(opts.callback ? [{ name: 'callback_url', value: opts.callback }] : []),
    { name: 'media_file', filename: 'talk.wav', data: wav },
  ];
  const { payload, contentType } = multipartForm(parts);
  const headers = opts.callback ? { authorization: `Bearer ${personalToken}` } : alice.auth;
  const res = await inject('POST', opts.callback ? '/api/speech/transcribe' : '/api/speech/jobs', { ...headers, 'content-type': contentType }, payload);
  expect(res.statusCode, res.body).toBe(201);
  const id = res.json().job.id as number;
  await sim.run(id, { segments });
  expect((await jobOf(id)).status).toBe('completed');
  return id;
}

beforeAll(async () => {
  db = await createTestDatabase();
  svc = await startCoordinator(
    loadConfig(
      testEnv(db, {
        SPEECH_MEDIA_DIR: path.join(dir, 'media'),
        PUBLIC_BASE_URL: 'https://speech.example.org',
        OUTBOUND_ALLOW_RANGES: '127.0.0.0/8', // the callback receiver listens on loopback
        SPEECH_LOCAL_MODELS: `small,${SPHINX}`,
        WORKER_HEARTBEAT_INTERVAL_MS: '1000',
        WORKER_PRESENCE_TTL_MS: '900000', // the simulated worker's session outlives the file without heartbeats
      }),
    ),
  );
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const key = req.url ?? '/';
      received.set(key, [...(received.get(key) ?? []), Buffer.concat(chunks).toString('utf8')]);
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverPort = (receiver.address() as AddressInfo).port;

  const t = { app: svc.app, accounts: new AccountService(svc.orm) };
  alice = await createJwtUser(t, ['speech.use', 'speech.api']);
  bob = await createJwtUser(t, ['speech.use']);
  manager = await createJwtUser(t, ['speech.use', 'speech.manage']);
  root = await createJwtUser(t, [], { isAdmin: true });
  personalToken = (await t.accounts.createPersonalToken(alice.id, { name: 'provider_speech_api', scopes: ['speech.api'] })).token;

  // Two sentences with a second of silence between them, in the voice pocketsphinx hears best.
  const silence = path.join(dir, 'silence.wav');
  execFileSync('sox', ['-n', '-r', '22050', '-c', '1', '-b', '16', silence, 'trim', '0', '1.0']);
  const parts = ['hello world.', 'good morning everyone.'].map((sentence, i) => {
    const part = path.join(dir, `part-${i}.wav`);
    execFileSync('espeak-ng', ['-v', 'en-us', '-w', part, sentence]);
    return part;
  });
  execFileSync('sox', [parts[0]!, silence, parts[1]!, silence, path.join(dir, 'talk.wav')]);
  wav = readFileSync(path.join(dir, 'talk.wav'));

  // `small`: a simulated remote worker that claims only when a test runs it. pocketsphinx: the real agent.
  sim = await SimWorker.start(svc, 'sim', ['small']);
  await startAgent('sphinx');
});

afterAll(async () => {
  sim?.close();
  await Promise.all(procs.map((p) => p.stop('SIGKILL')));
  await svc?.close();
  await db?.drop();
  await new Promise<void>((resolve) => (receiver ? receiver.close(() => resolve()) : resolve()));
  rmSync(dir, { recursive: true, force: true });
});

describe('re-transcription of an uploaded job', () => {
  it('archives the completed pass read-only, runs the new model, and notifies the new cycle; DELETE removes the revisions', async () => {
    const cb = callbackUrl();
    const id = await completedJob(['first pass words', 'more old words'], { callback: cb });
    await expect.poll(() => callbacksAt(cb).length, { timeout: 20_000 }).toBe(1);
    expect(callbacksAt(cb)[0]).toMatchObject({
      event: 'speech.job.completed',
      job: { job_id: id, model: 'small', transcript_text: 'first pass words more old words' },
    });

    const before = await revisions(id);
    expect(before).toEqual({
      ok: true,
      job_id: id,
      current: { pass: 1, model: 'small', language: null, status: 'completed', engine: 'test', completed_at: expect.any(String) },
      models: [SPHINX],
      can_start: true,
      unavailable_reason: null,
      revisions: [],
    });
    // Others who may see the job read it but may not start; users who cannot see it get 404.
    for (const who of [manager, root]) {
      expect(await revisions(id, who)).toMatchObject({ can_start: false, unavailable_reason: UNAVAILABLE.notOwner, models: [SPHINX] });
    }
    expect((await inject('GET', `/api/speech/jobs/${id}/revisions`, bob.auth)).statusCode).toBe(404);

    const started = await retranscribe(id, SPHINX);
    expect(started.statusCode, started.body).toBe(200);
    expect(started.json()).toMatchObject({
      ok: true,
      message: expect.stringContaining('read-only revision'),
      job: { id, model: SPHINX, execution_target: { mode: 'auto', worker: null }, failure_error: null, callback: { status: 'pending', http_status: null } },
    });

    // The archived pass: its transcript, segments (still stored under pass 1) and metadata, read-only.
    const archived = await revisions(id, alice, '?include=segments');
    expect(archived.current).toMatchObject({ pass: 2, model: SPHINX });
    expect(archived.revisions).toEqual([
      {
        pass: 1,
        model: 'small',
        language: null,
        engine: 'test',
        engine_model: 'small',
        transcript_text: 'first pass words more old words',
        duration_seconds: expect.any(Number),
        completed_at: before.current.completed_at,
        archived_at: expect.any(String),
        segment_count: 2,
        segments: [
          { seq: 0, start: 0, end: 2, text: 'first pass words', speaker: null, speaker_name: null },
          { seq: 1, start: 2, end: 4, text: 'more old words', speaker: null, speaker_name: null },
        ],
        speaker_aware_transcript: null,
        diarization: expect.objectContaining({ requested: false, state: 'skipped', speakers: [], labelled_segment_count: 0, rerun_pending: false }),
        speaker_labels: {},
        analysis: null,
        translations: [],
      },
    ]);
    // Without ?include=segments the list stays light.
    expect((await revisions(id)).revisions[0]).not.toHaveProperty('segments');

    // The real pocketsphinx agent runs pass 2.
    await waitCompleted(id);
    const done = await jobOf(id);
    expect(done).toMatchObject({ model: SPHINX, engine: 'pocketsphinx', status: 'completed' });
    expect(done.transcript_text).toMatch(/\w/);
    expect(done.transcript_text).not.toContain('old words');
    const after = await revisions(id, alice, '?include=segments');
    expect(after).toMatchObject({ current: { pass: 2, model: SPHINX, status: 'completed', engine: 'pocketsphinx' }, models: ['small'], can_start: true });
    expect(after.revisions).toEqual(archived.revisions);
    const segments = (await inject('GET', `/api/speech/jobs/${id}/segments`, alice.auth)).json();
    expect(segments.pass).toBe(2);
    expect(segments.segments.length).toBeGreaterThan(0);
    const stored = await sql<{ pass: number; n: string }>('select pass, count(*) as n from speech_segments where job_id = ? group by pass order by pass', [id]);
    expect(stored.map((r) => [r.pass, Number(r.n)])).toEqual([
      [1, 2],
      [2, segments.segments.length],
    ]);
    const log = done.runtime_log as Array<{ event: string; message: string }>;
    expect(log.find((e) => e.event === 'retranscription.started')?.message).toContain(`small → ${SPHINX}`);

    // The new pass's notification cycle: one more callback, with the new transcript.
    await expect.poll(() => callbacksAt(cb).length, { timeout: 20_000 }).toBe(2);
    expect(callbacksAt(cb)[1]).toMatchObject({
      event: 'speech.job.completed',
      job: { job_id: id, status: 'completed', model: SPHINX, transcript_text: done.transcript_text },
    });
    expect((await sql<{ callback_cycle: number }>('select callback_cycle from speech_jobs where id = ?', [id]))[0]!.callback_cycle).toBe(2);
    await expect.poll(async () => (await jobOf(id)).callback.status, { timeout: 20_000 }).toBe('delivered');

    // DELETE takes the revision history with the job.
    expect((await inject('DELETE', `/api/speech/jobs/${id}`, alice.auth)).statusCode).toBe(200);
    expect(Number((await sql<{ n: string }>('select count(*) as n from speech_revisions where job_id = ?', [id]))[0]!.n)).toBe(0);
    expect(Number((await sql<{ n: string }>('select count(*) as n from speech_segments where job_id = ?', [id]))[0]!.n)).toBe(0);
  }, 120_000);

  it('accepts only the owner’s JWT (session cookie and personal token 401, administrators and managers 403, others 404), once', async () => {
    const id = await completedJob(['words']);
    const { jar } = await browserLogin(svc.app, alice.name, alice.password);
    const csrf = extractCsrf((await inject('GET', `/speech/jobs/${id}`, { cookie: jar.header() })).body);
    const refusals: Array<[Record<string, string>, number, string]> = [
      [{ cookie: jar.header(), 'x-csrf-token': csrf }, 401, 'unauthenticated'],
      [{ authorization: `Bearer ${personalToken}` }, 401, 'unauthenticated'],
      [root.auth, 403, 'forbidden'],
      [manager.auth, 403, 'forbidden'],
      [bob.auth, 404, 'not_found'],
    ];
    for (const [headers, status, reason] of refusals) {
      const res = await retranscribe(id, SPHINX, headers);
      expect(res.statusCode, res.body).toBe(status);
      expect(res.json()).toMatchObject({ ok: false, reason });
    }
    expect((await retranscribe(id, SPHINX, root.auth)).json().message).toBe(UNAVAILABLE.notOwner);
    expect((await jobOf(id)).model).toBe('small');
    // Two requests at once: the guarded statement moves the job once and archives the pass once.
    const both = await Promise.all([retranscribe(id, SPHINX), retranscribe(id, SPHINX)]);
    expect(both.map((r) => r.statusCode).sort()).toEqual([200, 422]);
    expect((await sql<{ pass: number }>('select pass from speech_revisions where job_id = ?', [id])).map((r) => r.pass)).toEqual([1]);
    await waitCompleted(id);
    expect((await jobOf(id)).runtime_log.filter((e: { event: string }) => e.event === 'retranscription.started')).toHaveLength(1);
  }, 90_000);

  it('guardrails: same, unsupported or missing model, released media, unfinished pass 422; diarization pending or running 422', async () => {
    const id = await completedJob(['words to keep']);
    const refused = async (model: unknown, field: string) => {
      const res = await retranscribe(id, model);
      expect(res.statusCode, res.body).toBe(422);
      expect(res.json()).toMatchObject({ ok: false, reason: 'validation_failed', errors: { [field]: [expect.any(String)] } });
      return res.json().errors[field][0] as string;
    };
    expect(await refused('small', 'model')).toContain('already used model "small"');
    expect(await refused('turbo', 'model')).toContain(`available: ${SPHINX}`);
    await refused(undefined, 'model');
    await refused('', 'model');

    // Diarization work outstanding: 422 under errors.diarization (a guardrail, like a diarization rerun then).
    const busy = async (message: string) => {
      const res = await retranscribe(id, SPHINX);
      expect(res.statusCode, res.body).toBe(422);
      expect(res.json()).toEqual({ ok: false, reason: 'validation_failed', message, errors: { diarization: [message] } });
    };
    await sql(`update speech_jobs set diarization_state = 'pending' where id = ?`, [id]);
    await busy(UNAVAILABLE.diarizationPending);
    expect(await revisions(id)).toMatchObject({ can_start: false, unavailable_reason: UNAVAILABLE.diarizationPending });
    await sql(`update speech_jobs set diarization_state = 'running' where id = ?`, [id]);
    await busy(UNAVAILABLE.diarizationRunning);
    await sql(`update speech_jobs set diarization_state = 'unavailable' where id = ?`, [id]);

    // Retention releases the media: re-transcription is no longer possible, and the reason says since when.
    await sql(`update speech_jobs set media_retained_until = now() - interval '1 day' where id = ?`, [id]);
    expect(await svc.speech.retention.releaseExpired()).toContain(id);
    const released = await revisions(id);
    expect(released.can_start).toBe(false);
    expect(released.unavailable_reason).toMatch(/^The source media was released on \d{4}-\d\d-\d\d \d\d:\d\d UTC; re-transcription is no longer possible\.$/);
    expect(await refused(SPHINX, 'media')).toBe(released.unavailable_reason);
    // Nothing moved and nothing was archived.
    expect((await jobOf(id)).model).toBe('small');
    expect((await revisions(id)).revisions).toEqual([]);

    // A job whose current pass is not completed (queued: the simulated worker does not run it).
    const { payload, contentType } = multipartForm([
      { name: 'model', value: 'small' },
      { name: 'media_file', filename: 'talk.wav', data: wav },
    ]);
    const queued = (await inject('POST', '/api/speech/jobs', { ...alice.auth, 'content-type': contentType }, payload)).json().job.id as number;
    const res = await retranscribe(queued, SPHINX);
    expect(res.statusCode).toBe(422);
    expect(res.json().errors.status).toEqual([UNAVAILABLE.notCompleted]);
    expect(await revisions(queued)).toMatchObject({
      current: { pass: 1, status: 'queued', completed_at: null },
      can_start: false,
      unavailable_reason: UNAVAILABLE.notCompleted,
    });
    expect((await inject('DELETE', `/api/speech/jobs/${queued}`, alice.auth)).statusCode).toBe(200);
  }, 60_000);
});

describe('a diarized pass', () => {
  it('keeps its speakers, names and speaker-aware transcript in the revision; the new pass starts without them', async () => {
    const { payload, contentType } = multipartForm([
      { name: 'model', value: 'small' },
      { name: 'media_file', filename: 'talk.wav', data: wav },
    ]);
    const id = (await inject('POST', '/api/speech/jobs', { ...alice.auth, 'content-type': contentType }, payload)).json().job.id as number;
    await sim.run(id, {
      segments: ['good morning', 'hello there', 'see you'],
      speakers: [0, 1, 0],
    });
    const named = await inject('PUT', `/api/speech/jobs/${id}/speakers`, alice.auth, { speakers: { S1: 'Alice' } });
    expect(named.statusCode, named.body).toBe(200);

    expect((await retranscribe(id, SPHINX)).statusCode).toBe(200);
    const [rev] = (await revisions(id, alice, '?include=segments')).revisions;
    expect(rev).toMatchObject({
      pass: 1,
      transcript_text: 'good morning hello there see you',
      speaker_labels: { S1: 'Alice' },
      speaker_aware_transcript: '[00:00:00] Alice: good morning\n\n[00:00:02] Speaker 2: hello there\n\n[00:00:04] Alice: see you',
      segments: [
        { seq: 0, speaker: 'S1', speaker_name: 'Alice' },
        { seq: 1, speaker: 'S2', speaker_name: 'Speaker 2' },
        { seq: 2, speaker: 'S1', speaker_name: 'Alice' },
      ],
      diarization: {
        requested: true,
        state: 'completed',
        engine: 'test-diarizer',
        speaker_count: 2,
        speakers: [
          { key: 'S1', name: 'Alice', renamed: true, segment_count: 2, seconds: 4 },
          { key: 'S2', name: 'Speaker 2', renamed: false, segment_count: 1, seconds: 2 },
        ],
        labelled_segment_count: 3,
        error: null,
        rerun_pending: false,
      },
    });
    // The new pass starts without the old speakers: whatever the real agent's diarizer finds is unnamed.
    await waitCompleted(id);
    const job = await jobOf(id);
    expect(job).toMatchObject({ model: SPHINX, diarization: { requested: true } });
    expect(job.diarization.state).not.toBe('pending');
    expect(job.diarization.speakers.filter((sp: { renamed: boolean }) => sp.renamed)).toEqual([]);
    expect(job.speaker_aware_transcript ?? '').not.toContain('Alice');
    expect((await sql<{ speaker_labels: unknown }>('select speaker_labels from speech_jobs where id = ?', [id]))[0]!.speaker_labels).toEqual({});
    expect((await revisions(id, alice, '?include=segments')).revisions).toEqual([rev]);
  }, 90_000);
});

describe('the browser action POST /speech/jobs/{jobId}/retranscription', () => {
  it('needs the CSRF token, works as a form post without scripts, and answers JSON when asked', async () => {
    const id = await completedJob(['browser pass words']);
    const { jar } = await browserLogin(svc.app, alice.name, alice.password);
    const cookie = jar.header();
    const pageBefore = (await inject('GET', `/speech/jobs/${id}`, { cookie })).body;
    expect(pageBefore).toContain(`action="/speech/jobs/${id}/retranscription"`);
    expect(pageBefore).toContain(`<option value="${SPHINX}">`);
    const csrf = extractCsrf(pageBefore);
    const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();
    const formHeaders = { cookie, 'content-type': 'application/x-www-form-urlencoded' };

    const noCsrf = await inject('POST', `/speech/jobs/${id}/retranscription`, formHeaders, form({ model: SPHINX }));
    expect(noCsrf.statusCode).toBe(403);
    expect((await jobOf(id)).model).toBe('small');

    // A refused form post shows the page again with the reason.
    const same = await inject('POST', `/speech/jobs/${id}/retranscription`, formHeaders, form({ _csrf: csrf, model: 'small' }));
    expect(same.statusCode).toBe(422);
    expect(same.headers['content-type']).toContain('text/html');
    expect(same.body).toContain('id="retranscription-error"');
    // A script asking for JSON gets the API's error shape.
    const json = await inject('POST', `/speech/jobs/${id}/retranscription`, { cookie, 'x-csrf-token': csrf, accept: 'application/json' }, { model: 'turbo' });
    expect(json.statusCode).toBe(422);
    expect(json.json()).toMatchObject({ ok: false, reason: 'validation_failed', errors: { model: [expect.any(String)] } });

    const posted = await inject('POST', `/speech/jobs/${id}/retranscription`, formHeaders, form({ _csrf: csrf, model: SPHINX }));
    expect(posted.statusCode, posted.body).toBe(303);
    expect(posted.headers.location).toBe(`/speech/jobs/${id}?notice=retranscription-started`);
    const after = (await inject('GET', posted.headers.location as string, { cookie })).body;
    expect(after).toContain('id="notice"');
    expect(after).toContain('id="revisions"');
    expect(after).toContain('data-pass="1"');
    expect(after).toContain('browser pass words');
    expect(after).toContain('id="retranscription-unavailable"');
    await waitCompleted(id);

    // Another who may see the job reads the history but gets no form.
    const { jar: managerJar } = await browserLogin(svc.app, manager.name, manager.password);
    const managerPage = (await inject('GET', `/speech/jobs/${id}`, { cookie: managerJar.header() })).body;
    expect(managerPage).toContain(UNAVAILABLE.notOwner);
    expect(managerPage).not.toContain(`action="/speech/jobs/${id}/retranscription"`);

    // JSON success: back to small (pass 3), which the simulated worker completes.
    const back = await inject('POST', `/speech/jobs/${id}/retranscription`, { cookie, 'x-csrf-token': csrf, accept: 'application/json' }, { model: 'small' });
    expect(back.statusCode, back.body).toBe(200);
    expect(back.json()).toMatchObject({ ok: true, job: { id, model: 'small', status: 'queued' } });
    await sim.run(id, { segments: ['third pass'] });
    const history = await revisions(id);
    expect(history.current).toMatchObject({ pass: 3, model: 'small', status: 'completed' });
    expect(history.revisions.map((r: { pass: number; model: string }) => [r.pass, r.model])).toEqual([
      [2, SPHINX],
      [1, 'small'],
    ]);
  }, 90_000);
});

describe('a URL source', () => {
  it('offers only local-allowlist models the local runner serves, and runs the new pass on the local runner', async () => {
    const id = await completedJob(['url pass words']);
    // The retained copy of a URL source (as the coordinator's staging leaves it).
    await sql(`update speech_jobs set source_type = 'url', source_url = 'https://media.example.org/talk.wav', source_filename = null where id = ?`, [id]);

    // No local runner yet: the remote pocketsphinx worker does not count.
    expect(await revisions(id)).toMatchObject({ models: [], can_start: false, unavailable_reason: UNAVAILABLE.noLocalModel });
    const remoteOnly = await retranscribe(id, SPHINX);
    expect(remoteOnly.statusCode).toBe(422);
    expect(remoteOnly.json().errors.model[0]).toContain('local runner');

    // A local runner whose only allowed model is the current one (turbo is not on SPEECH_LOCAL_MODELS).
    await registerModelWorker(svc.orm, 'local-small', ['small', 'turbo'], { local: true, present: true });
    expect(await revisions(id)).toMatchObject({ models: [], can_start: false, unavailable_reason: UNAVAILABLE.noLocalModel });
    expect((await retranscribe(id, 'turbo')).statusCode).toBe(422);

    // The real local runner with pocketsphinx.
    await startAgent('local-runner', ['--local']);
    expect(await revisions(id)).toMatchObject({ models: [SPHINX], can_start: true, unavailable_reason: null });
    const res = await retranscribe(id, SPHINX);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().job).toMatchObject({ model: SPHINX, execution_target: { mode: 'local', worker: null } });
    await waitCompleted(id);
    const done = await jobOf(id);
    expect(done.engine).toBe('pocketsphinx');
    const lease = await sql<{ name: string }>(
      `select w.name from speech_leases l join speech_workers w on w.id = l.worker_id where l.job_id = ? and l.attempt = ?`,
      [id, done.attempt],
    );
    expect(lease).toEqual([{ name: 'local-runner' }]);
    expect((await revisions(id)).revisions).toMatchObject([{ pass: 1, model: 'small', transcript_text: 'url pass words' }]);
  }, 90_000);
});
