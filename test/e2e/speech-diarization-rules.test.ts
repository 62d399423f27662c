import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { io } from 'socket.io-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HELD_LEASES_CONTRACT_VERSION, WORKER_CONTRACT_VERSION, type CapabilitiesMsg, type JobAssignmentMsg } from '@sonar/shared';
import { CoordinatorClient } from '../../worker/src/coordinator-client.js';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import type { AuthUser } from '../../coordinator/src/accounts/types.js';
import { loadConfig } from '../../coordinator/src/config.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { browserLogin, createTestDatabase, extractCsrf, randomName, testEnv, type TestDatabase } from '../support/harness.js';
import { registerModelWorker } from '../support/model-workers.js';
import { parseRttm, rttmSpeakerAt } from '../support/rttm.js';
import { streamSegments } from '../support/sim-worker.js';

/**
 * The diarization rules with simulated workers over the real gRPC protocol
 * (DIARIZATION_TRANSITIONS): the claim gates on the diarization capability (contract 3), a worker's result labels
 * every segment, and the rerun endpoint walks the state table row by row — including reruns run
 * under their own `diarize` lease while the job stays completed, regeneration of lost segments,
 * expiry, and refusals (422 while pending or running, without a completed transcript or after
 * the media was released, 403 for anyone but the owner).
 */
let db: TestDatabase;
let svc: RunningCoordinator;
let owner: AuthUser & { jwt: string };
let admin: AuthUser & { jwt: string };
const dir = mkdtempSync(path.join(tmpdir(), 'sonar-diar-rules-'));
const clients: CoordinatorClient[] = [];
let clip: string;
let ownerPassword: string;

const caps = (extra: Partial<CapabilitiesMsg> = {}): CapabilitiesMsg => ({
  models: ['small'],
  engines: ['test'],
  diarization: true,
  diarization_engine: 'test-diarizer',
  diarization_error: '',
  can_fetch_urls: false,
  device: 'cpu',
  model_languages: [],
  ...extra,
});

type Sim = { client: CoordinatorClient; session: string; name: string; id: number };

async function worker(name: string, capabilities: CapabilitiesMsg, contract = WORKER_CONTRACT_VERSION): Promise<Sim> {
  const unique = randomName(name);
  const { secret, id } = await svc.workers.createWorker(unique);
  const client = new CoordinatorClient(`127.0.0.1:${svc.grpcPort}`, secret);
  clients.push(client);
  const hello = await client.hello({ contract_version: contract, agent_version: 't', hostname: 'h', capabilities, local: false });
  return { client, session: hello.session_id, name: unique, id };
}

async function claim(w: Sim): Promise<JobAssignmentMsg | null> {
  const res = await w.client.claim({ session_id: w.session, wait_ms: 0 });
  return res.has_job ? res.job : null;
}

/** An uploaded recording (its media is retained on the coordinator, so reruns may use it). */
async function uploadJob(opts: { diarization?: boolean } = {}) {
  const bytes = readFileSync(clip);
  const temp = path.join(dir, `${randomName('up')}.part`);
  writeFileSync(temp, bytes);
  return svc.speech.jobs.create(owner, {
    channel: 'web',
    model: 'small',
    ...(opts.diarization === undefined ? {} : { diarization: opts.diarization }),
    source: { type: 'upload', tempPath: temp, filename: 'talk.wav', sizeBytes: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') },
  });
}

const TEXTS = ['Good morning.', 'Hello there.', 'How was the trip?', 'Long but fine.'];
/** Speaker of each segment (2 s each) as the simulated diarizer reports it. */
const TURNS = [0, 1, 0, 1];
const diarized = (speakers = TURNS) => ({
  state: 'completed',
  engine: 'test-diarizer',
  speaker_count: new Set(speakers).size,
  turns: speakers.map((speaker, i) => ({ start: i * 2, end: i * 2 + 2, speaker })),
  error: '',
});

const complete = (job: JobAssignmentMsg, extra: Partial<Parameters<CoordinatorClient['complete']>[0]> = {}) => ({
  lease: job.lease,
  success: true,
  error: '',
  segment_count: TEXTS.length,
  duration_seconds: 8,
  engine: 'test',
  engine_model: job.model,
  cancelled: false,
  ...extra,
});

/** Runs a claimed transcription attempt: four segments, then Complete with `diarization`. */
async function transcribe(w: Sim, job: JobAssignmentMsg, diarization: ReturnType<typeof diarized> | null) {
  await streamSegments(w.client, job.lease, TEXTS);
  return w.client.complete(complete(job, diarization ? { diarization } : {}));
}

async function api(method: string, url: string, who: { jwt: string }, body?: unknown) {
  const res = await fetch(`${svc.url}${url}`, {
    method,
    headers: { authorization: `Bearer ${who.jwt}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

const detail = async (id: number) => (await api('GET', `/api/speech/jobs/${id}`, owner)).body.job as Record<string, any>;
const segments = async (id: number) =>
  (await api('GET', `/api/speech/jobs/${id}/segments`, owner)).body.segments as Array<{ seq: number; text: string; speaker: string | null }>;
const rerun = (id: number, who = owner) => api('POST', `/api/speech/jobs/${id}/diarization`, who);

async function signIn(user: AuthUser, password: string) {
  const res = await fetch(`${svc.url}/api/account/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: user.username, password }),
  });
  return ((await res.json()) as { token: string }).token;
}

beforeAll(async () => {
  db = await createTestDatabase();
  svc = await startCoordinator(
    loadConfig(
      testEnv(db, {
        SPEECH_MEDIA_DIR: path.join(dir, 'media'),
        SPEECH_LEASE_TTL_SECONDS: '30',
        SPEECH_STALE_SWEEP_SECONDS: '3600', // the tests sweep explicitly
        WORKER_PRESENCE_TTL_MS: '60000',
      }),
    ),
  );
  clip = path.join(dir, 'clip.wav');
  execFileSync('sox', ['-n', '-r', '16000', '-c', '1', '-b', '16', clip, 'synth', '8', 'sine', '300']);
  const accounts = new AccountService(svc.orm);
  const o = await accounts.createUser({ username: randomName('owner'), permissions: ['speech.use'] });
  const a = await accounts.createUser({ username: randomName('admin'), isAdmin: true });
  owner = Object.assign(o.user, { jwt: await signIn(o.user, o.password) });
  ownerPassword = o.password;
  admin = Object.assign(a.user, { jwt: await signIn(a.user, a.password) });
  await registerModelWorker(svc.orm, 'catalog', ['small']);
});
afterAll(async () => {
  clients.forEach((c) => c.close());
  await svc?.close();
  await db?.drop();
});

describe('diarization on the worker protocol', () => {
  it('labels every segment from the worker’s turns and builds the speaker-aware transcript', async () => {
    const w = await worker('diarizer', caps());
    const job = await uploadJob();
    const a = (await claim(w))!;
    expect(a).toMatchObject({ diarization: true, task: 'transcribe' });
    await transcribe(w, a, diarized());
    const d = await detail(job.id);
    expect(d.status).toBe('completed');
    expect(d.diarization).toMatchObject({ requested: true, state: 'completed', engine: 'test-diarizer', speaker_count: 2, labelled_segment_count: 4 });
    expect(d.diarization.speakers.map((s: { key: string; name: string }) => [s.key, s.name])).toEqual([
      ['S1', 'Speaker 1'],
      ['S2', 'Speaker 2'],
    ]);
    expect((await segments(job.id)).map((s) => s.speaker)).toEqual(['S1', 'S2', 'S1', 'S2']);
    expect(d.speaker_aware_transcript).toBe(
      '[00:00:00] Speaker 1: Good morning.\n\n[00:00:02] Speaker 2: Hello there.\n\n[00:00:04] Speaker 1: How was the trip?\n\n[00:00:06] Speaker 2: Long but fine.',
    );
    expect(d.runtime_log.map((e: { event: string }) => e.event)).toContain('diarization_completed');
  });

  it('a job asking for speaker labels waits for a worker with a diarizer; a contract-2 worker’s claim to one is ignored', async () => {
    const plain = await worker('plain', caps({ diarization: false, diarization_engine: '' }));
    const old = await worker('old', caps(), HELD_LEASES_CONTRACT_VERSION);
    const job = await uploadJob();
    expect(await claim(plain)).toBeNull();
    expect(await claim(old)).toBeNull();
    // Without speaker labels anyone with the model takes it.
    const unlabelled = await uploadJob({ diarization: false });
    const got = (await claim(plain))!;
    expect(got.lease.job_id).toBe(unlabelled.id);
    expect(got.diarization).toBe(false);
    await transcribe(plain, got, null);
    expect((await detail(unlabelled.id)).diarization).toMatchObject({ state: 'skipped', speakers: [] });
    // A pinned worker is an exact force: it gets the job without a diarizer; the result says why.
    await svc.speech.jobs.setExecutionTarget(admin, job.id, { mode: 'worker', worker: plain.name });
    const forced = (await claim(plain))!;
    expect(forced).toMatchObject({ forced: true, diarization: true });
    await transcribe(plain, forced, null);
    const d = await detail(job.id);
    expect(d.status).toBe('completed');
    expect(d.diarization).toMatchObject({ state: 'unavailable', error: expect.stringMatching(/cannot label speakers/) });
    await svc.speech.jobs.setExecutionTarget(admin, job.id, { mode: 'auto' });
  });

  it('a diarizer failure fails only the diarization, never the transcript', async () => {
    const w = await worker('failing', caps());
    const job = await uploadJob();
    const a = (await claim(w))!;
    await transcribe(w, a, { state: 'failed', engine: 'test-diarizer', speaker_count: 0, turns: [], error: 'onnxruntime: out of memory' });
    const d = await detail(job.id);
    expect(d).toMatchObject({ status: 'completed', transcript_text: TEXTS.join(' ') });
    expect(d.diarization).toMatchObject({ state: 'failed', error: 'onnxruntime: out of memory', speaker_count: null });
    expect(d.speaker_aware_transcript).toBeNull();
  });
});

describe('diarization reruns (DIARIZATION_TRANSITIONS, row by row)', () => {
  let w: Sim;
  beforeAll(async () => {
    w = await worker('rerunner', caps());
  });

  /** A completed job whose first pass ended with diarization `outcome` (null: the worker reported none). */
  async function completedJob(outcome: ReturnType<typeof diarized> | null, opts: { diarization?: boolean } = {}) {
    const job = await uploadJob(opts);
    const a = (await claim(w))!;
    expect(a.lease.job_id).toBe(job.id);
    await transcribe(w, a, outcome);
    return job.id;
  }

  /** Claims the rerun the way a worker would and answers it. */
  async function runRerun(jobId: number, result: Parameters<CoordinatorClient['complete']>[0]['diarization'], success = true) {
    const task = (await claim(w))!;
    expect(task).toMatchObject({ task: 'diarize', diarization: true, media_from_coordinator: true });
    expect(task.lease.job_id).toBe(jobId);
    expect((await detail(jobId)).diarization.state).toBe('running');
    const res = await w.client.complete({ ...complete(task, { segment_count: 0 }), success, error: success ? '' : 'media decode failed', diarization: result });
    expect(res.status).toBe('completed');
    return task;
  }

  it('completed → pending → running → completed: transcript kept, no transcription, more speakers, names start afresh', async () => {
    const id = await completedJob(diarized([0, 0, 0, 0]));
    await api('PUT', `/api/speech/jobs/${id}/speakers`, owner, { speakers: { S1: 'Ada' } });
    const before = (await detail(id)) as { attempt: number; transcript_text: string };
    const res = await rerun(id);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.job.diarization).toMatchObject({ state: 'pending', rerun_pending: true });
    // pending: a second request is refused (duplicate execution).
    expect((await rerun(id)).status).toBe(422);
    const task = await runRerun(id, diarized([0, 1, 0, 2]));
    expect(task.regenerate_segments).toBe(false);
    expect(task.lease.attempt).toBe(before.attempt + 1);
    const d = await detail(id);
    expect(d).toMatchObject({ status: 'completed', transcript_text: before.transcript_text, segment_count: 4, engine: 'test', attempt: before.attempt + 1 });
    expect(d.diarization).toMatchObject({ state: 'completed', speaker_count: 3, rerun_pending: false });
    expect(d.diarization.speakers.map((s: { name: string }) => s.name)).toEqual(['Speaker 1', 'Speaker 2', 'Speaker 3']);
    expect((await segments(id)).map((s) => s.speaker)).toEqual(['S1', 'S2', 'S1', 'S3']);
    // Repeating the completion is a duplicate, not a second result.
    expect((await w.client.complete({ ...complete(task, { segment_count: 0 }), diarization: diarized([0, 1, 0, 2]) })).duplicate).toBe(true);
  });

  it('running → refused; a rerun whose runner went away waits again, then fails after its tries', async () => {
    const id = await completedJob(diarized());
    expect((await rerun(id)).status).toBe(200);
    for (let i = 1; i <= 3; i++) {
      await claim(w);
      expect((await rerun(id)).status).toBe(422); // running
      await svc.orm.em.getConnection().execute(`update speech_leases set expires_at = now() - interval '1 second' where job_id = ? and ended_at is null`, [id]);
      const touched = await svc.speech.leases.sweepExpired();
      expect(touched).toContainEqual({ jobId: id, status: 'completed', diarizationRequeued: i < 3 });
    }
    const d = await detail(id);
    expect(d.status).toBe('completed');
    expect(d.diarization).toMatchObject({ state: 'failed', rerun_pending: false, error: expect.stringMatching(/Gave up after 3 tries/) });
    // The earlier speakers stay on the transcript.
    expect((await segments(id)).map((s) => s.speaker)).toEqual(['S1', 'S2', 'S1', 'S2']);
  });

  it('skipped → pending persists the preference; unavailable and failed may run again', async () => {
    const skipped = await completedJob(null, { diarization: false });
    expect((await detail(skipped)).diarization).toMatchObject({ requested: false, state: 'skipped' });
    expect((await rerun(skipped)).body.job.diarization).toMatchObject({ requested: true, state: 'pending' });
    await runRerun(skipped, diarized());
    expect((await detail(skipped)).diarization).toMatchObject({ requested: true, state: 'completed', speaker_count: 2 });

    const unavailable = await completedJob(null);
    expect((await detail(unavailable)).diarization.state).toBe('unavailable');
    expect((await rerun(unavailable)).status).toBe(200);
    // The worker's own failure (success=false) is a failed diarization; the job stays completed.
    await runRerun(unavailable, null, false);
    const d = await detail(unavailable);
    expect(d).toMatchObject({ status: 'completed', diarization: { state: 'failed', error: 'media decode failed' } });
    expect((await rerun(unavailable)).status).toBe(200); // failed → pending
    await runRerun(unavailable, diarized());
    expect((await detail(unavailable)).diarization.state).toBe('completed');
  });

  it('regenerates lost timestamped segments from the retained media first; a failed recovery fails only the diarization', async () => {
    const id = await completedJob(diarized());
    const transcript = (await detail(id)).transcript_text;
    await svc.orm.em.getConnection().execute('delete from speech_segments where job_id = ?', [id]);
    expect((await rerun(id)).status).toBe(200);
    const task = (await claim(w))!;
    expect(task).toMatchObject({ task: 'diarize', regenerate_segments: true, model: 'small' });
    await streamSegments(w.client, task.lease, TEXTS);
    await w.client.complete({ ...complete(task), diarization: diarized([1, 0, 1, 0]) });
    const d = await detail(id);
    expect(d).toMatchObject({ status: 'completed', transcript_text: transcript, segment_count: 4, diarization: { state: 'completed', speaker_count: 2 } });
    expect((await segments(id)).map((s) => s.speaker)).toEqual(['S2', 'S1', 'S2', 'S1']);

    await svc.orm.em.getConnection().execute('delete from speech_segments where job_id = ?', [id]);
    expect((await rerun(id)).status).toBe(200);
    const again = (await claim(w))!;
    expect(again.regenerate_segments).toBe(true);
    await w.client.complete({ ...complete(again, { segment_count: 0 }), success: false, error: 'whisper: model file unreadable' });
    expect(await detail(id)).toMatchObject({
      status: 'completed',
      transcript_text: transcript,
      diarization: { state: 'failed', error: 'whisper: model file unreadable' },
    });
  });

  it('refuses without a completed transcript (422), after the media was released (422), and for anyone but the owner (403/404)', async () => {
    const queued = await uploadJob();
    const r1 = await rerun(queued.id);
    expect(r1.body.errors.diarization[0]).toMatch(/already pending/); // diarization is pending with the transcription
    expect(r1.status).toBe(422);
    const failedJob = await uploadJob({ diarization: false });
    const a = (await claim(w))!;
    expect(a.lease.job_id).toBe(queued.id);
    await w.client.complete(complete(a, { success: false, error: 'decoder crashed', segment_count: 0 }));
    const f = (await claim(w))!;
    await w.client.complete(complete(f, { success: false, error: 'decoder crashed', segment_count: 0 }));
    expect((await rerun(failedJob.id)).body).toMatchObject({
      ok: false,
      reason: 'validation_failed',
      errors: { status: [expect.stringMatching(/not completed/)] },
    });
    expect((await rerun(failedJob.id)).status).toBe(422);

    const id = await completedJob(diarized());
    expect((await rerun(id, admin)).status).toBe(403);
    const stranger = await new AccountService(svc.orm).createUser({ username: randomName('other'), permissions: ['speech.use'] });
    expect((await rerun(id, Object.assign(stranger.user, { jwt: await signIn(stranger.user, stranger.password) }))).status).toBe(404);

    await svc.orm.em.getConnection().execute(`update speech_jobs set media_retained_until = now() - interval '1 second' where id = ?`, [id]);
    expect(await svc.speech.repo.releaseExpiredMedia(100)).toContain(id);
    const purged = await rerun(id);
    expect(purged.status).toBe(422);
    expect(purged.body.errors.media[0]).toMatch(/media was released/);
  });

  it('the speaker editor names speakers in the detail, transcript and share page; owner only; known keys only', async () => {
    const id = await completedJob(diarized());
    const bad = await api('PUT', `/api/speech/jobs/${id}/speakers`, owner, { speakers: { S7: 'Nobody' } });
    expect(bad.status).toBe(422);
    expect((await api('PUT', `/api/speech/jobs/${id}/speakers`, admin, { speakers: { S1: 'Ada' } })).status).toBe(403);
    const ok = await api('PUT', `/api/speech/jobs/${id}/speakers`, owner, { speakers: { S1: 'Ada Lovelace', S2: 'Charles' } });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect(ok.body.job.speaker_aware_transcript).toMatch(/^\[00:00:00\] Ada Lovelace: Good morning\.\n\n\[00:00:02\] Charles: Hello there\./);
    // An empty name goes back to "Speaker N".
    const reset = await api('PUT', `/api/speech/jobs/${id}/speakers`, owner, { speakers: { S2: '' } });
    expect(reset.body.job.diarization.speakers.map((s: { name: string }) => s.name)).toEqual(['Ada Lovelace', 'Speaker 2']);
    const share = await api('POST', `/api/speech/jobs/${id}/share`, owner);
    expect(share.status, JSON.stringify(share.body)).toBeLessThan(300);
    const page = await (await fetch(`${svc.url}${new URL(share.body.share.url as string).pathname}?full`)).text();
    expect(page).toContain('Ada Lovelace');
    expect(page).toContain('Speaker 2');
  });

  it('the job page shows the speakers and, without script, saves names and asks for a rerun (session + CSRF)', async () => {
    const id = await completedJob(diarized());
    const { jar } = await browserLogin(svc.app, owner.username, ownerPassword);
    const get = () => svc.app.inject({ method: 'GET', url: `/speech/jobs/${id}`, headers: { cookie: jar.header() } });
    const page = await get();
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('id="speaker-editor"');
    expect(page.body).toMatch(/data-state="completed">2 speakers \(test-diarizer\)\./);
    // The reading view: the speaker's name heads the turn (with its time), the segment's text follows.
    expect(page.body).toMatch(/data-speaker="S2">Speaker 2<\/span> <a class="ts"[^>]*>[^<]*<\/a><\/span> <span class="seg"[^>]*>Hello there\./);
    const csrf = extractCsrf(page.body);
    const form = (fields: Record<string, string>) => ({
      headers: { cookie: jar.header(), 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams(fields).toString(),
    });
    // Without the CSRF token the form is refused.
    expect((await svc.app.inject({ method: 'POST', url: `/speech/jobs/${id}/speakers`, ...form({ name_S1: 'Grace' }) })).statusCode).toBe(403);
    const saved = await svc.app.inject({ method: 'POST', url: `/speech/jobs/${id}/speakers`, ...form({ _csrf: csrf, name_S1: 'Grace', name_S2: '' }) });
    expect(saved.statusCode).toBe(303);
    expect(saved.headers.location).toBe(`/speech/jobs/${id}?notice=speakers-saved`);
    const renamed = await get();
    expect(renamed.body).toMatch(/data-speaker="S1">Grace<\/span> <a class="ts"[^>]*>[^<]*<\/a><\/span> <span class="seg"[^>]*>Good morning\./);
    expect(renamed.body).toContain('value="Grace"');
    // An unknown speaker is refused on the page itself (422), nothing saved.
    const bad = await svc.app.inject({ method: 'POST', url: `/speech/jobs/${id}/speakers`, ...form({ _csrf: csrf, name_S9: 'Nobody' }) });
    expect(bad.statusCode).toBe(422);
    expect(bad.body).toMatch(/id="speakers-error">unknown speaker S9/);
    const again = await svc.app.inject({ method: 'POST', url: `/speech/jobs/${id}/diarization`, ...form({ _csrf: csrf }) });
    expect(again.statusCode).toBe(303);
    const pending = await get();
    expect(pending.body).toMatch(/data-state="pending">Waiting for a worker to identify the speakers\./);
    expect(pending.body).not.toContain('id="speaker-editor"');
    expect(pending.body).not.toContain('id="diarization-rerun"');
    await runRerun(id, diarized());
  });
});

describe('word-level speakers: segments split at speaker changes, RTTM downloads', () => {
  let w: Sim;
  beforeAll(async () => {
    w = await worker('words', caps());
  });

  const word = (text: string, start: number, end: number) => ({ text, start, end });
  /**
   * Three reported segments: the first one's words change speaker at 2.0 s ("Hello" straddles the
   * change, most of it in the second turn), the second has no words, the third one speaker.
   */
  const WORDED = [
    {
      seq: 0,
      start: 0,
      end: 4,
      text: 'Good morning. Hello there.',
      words: [word('Good', 0.1, 0.5), word('morning.', 0.6, 1.2), word('Hello', 1.8, 2.4), word('there.', 2.5, 3.6)],
    },
    { seq: 1, start: 4, end: 6, text: 'No words here.', words: [] },
    { seq: 2, start: 6, end: 8, text: 'Fine thanks.', words: [word('Fine', 6.1, 6.5), word('thanks.', 6.6, 7.9)] },
  ];
  const turnsOf = (turns: Array<[number, number, number]>) => ({
    state: 'completed',
    engine: 'test-diarizer',
    speaker_count: new Set(turns.map((t) => t[2])).size,
    // a third speaker whose only turn holds no words: listed in the RTTM, not among the speakers
    turns: turns.map(([start, end, speaker]) => ({ start, end, speaker })),
    error: '',
  });
  const FIRST: Array<[number, number, number]> = [
    [0, 2, 0],
    [2, 4, 1],
    [4, 8, 0],
    [8.2, 8.6, 2],
  ];

  async function transcribeWords(turns: Array<[number, number, number]>) {
    const job = await uploadJob();
    const a = (await claim(w))!;
    expect(a.lease.job_id).toBe(job.id);
    const stream = w.client.progress(a.lease);
    stream.send({
      stage: 'transcribing',
      stage_detail: '',
      audio_position_seconds: 8,
      segments: WORDED,
      duration_seconds: 8,
      engine: 'test',
      engine_model: 'small',
    });
    await stream.end();
    await w.client.complete(complete(a, { segment_count: WORDED.length, diarization: turnsOf(turns) }));
    return job.id;
  }

  const download = (url: string, who?: { jwt: string }) => fetch(`${svc.url}${url}`, { headers: who ? { authorization: `Bearer ${who.jwt}` } : {} });
  const rows = async (id: number) => (await segments(id)).map((s: Record<string, unknown>) => [s.seq, s.start, s.end, s.text, s.speaker]);

  /** Every word lies in exactly one stored segment whose speaker is the RTTM turn that overlaps the word most. */
  async function expectWordsAgreeWithRttm(id: number) {
    const res = await download(`/api/speech/jobs/${id}/transcript.rttm`, owner);
    expect(res.status).toBe(200);
    const turns = parseRttm(await res.text());
    const stored = (await segments(id)) as unknown as Array<{ start: number; end: number; text: string; speaker: string | null }>;
    for (const seg of WORDED) {
      for (const wd of seg.words) {
        const holder = stored.filter((s) => wd.start >= s.start - 1e-9 && wd.end <= s.end + 1e-9 && s.text.split(' ').includes(wd.text));
        expect(holder, wd.text).toHaveLength(1);
        expect(holder[0]!.speaker, wd.text).toBe(rttmSpeakerAt(turns, wd.start, wd.end));
      }
    }
    return turns;
  }

  it('splits a segment whose words change speaker; the transcript, speakers, exports and RTTM agree', async () => {
    const id = await transcribeWords(FIRST);
    expect(await rows(id)).toEqual([
      [0, 0, 1.2, 'Good morning.', 'S1'],
      [1, 1.8, 4, 'Hello there.', 'S2'],
      [2, 4, 6, 'No words here.', 'S1'],
      [3, 6, 8, 'Fine thanks.', 'S1'],
    ]);
    const d = await detail(id);
    // three segments were reported, four are shown (the first was split at a change of speaker): the count is what shows
    expect(d).toMatchObject({
      status: 'completed',
      stage_detail: '4 segments',
      segment_count: 4,
      transcript_text: 'Good morning. Hello there. No words here. Fine thanks.',
    });
    expect(d.speaker_aware_transcript).toBe(
      '[00:00:00] Speaker 1: Good morning.\n\n[00:00:01] Speaker 2: Hello there.\n\n[00:00:04] Speaker 1: No words here. Fine thanks.',
    );
    // S3's only turn holds no words: it is not a speaker of the transcript
    expect(d.diarization).toMatchObject({ state: 'completed', speaker_count: 2, labelled_segment_count: 4 });
    expect(d.diarization.speakers.map((s: { key: string; segment_count: number }) => [s.key, s.segment_count])).toEqual([
      ['S1', 3],
      ['S2', 1],
    ]);

    const turns = await expectWordsAgreeWithRttm(id);
    expect(turns).toEqual([
      // the file id is the download's name (the upload talk.wav), the same at the share page
      { file: 'talk', start: 0, end: 2, speaker: 'S1' },
      { file: 'talk', start: 2, end: 4, speaker: 'S2' },
      { file: 'talk', start: 4, end: 8, speaker: 'S1' },
      { file: 'talk', start: 8.2, end: expect.closeTo(8.6, 6), speaker: 'S3' },
    ]);
    const rttm = await download(`/api/speech/jobs/${id}/transcript.rttm`, owner);
    expect(rttm.headers.get('content-disposition')).toMatch(/^attachment; filename="talk\.rttm"/);
    expect(rttm.headers.get('content-type')).toMatch(/^text\/plain/);

    // Exports keep the speakers of the split segments; subtitle cues run from the first word to the last.
    const srt = await (await download(`/api/speech/jobs/${id}/transcript.srt`, owner)).text();
    expect(srt).toContain('00:00:00,100 --> 00:00:01,200\nSpeaker 1: Good morning.');
    expect(srt).toContain('00:00:01,800 --> 00:00:03,600\nSpeaker 2: Hello there.');
    const vtt = await (await download(`/api/speech/jobs/${id}/transcript.vtt`, owner)).text();
    expect(vtt).toContain('<v Speaker 2>Hello there.');
    const json = (await (await download(`/api/speech/jobs/${id}/transcript.json`, owner)).json()) as {
      segments: Array<{ text: string; speaker: string; words?: Array<{ start: number; end: number; text: string; speaker: string }> }>;
    };
    // Every word carries its speaker.
    expect(json.segments.map((s) => s.words?.map((x) => [x.text, x.speaker]) ?? null)).toEqual([
      [
        ['Good', 'S1'],
        ['morning.', 'S1'],
      ],
      [
        ['Hello', 'S2'],
        ['there.', 'S2'],
      ],
      null,
      [
        ['Fine', 'S1'],
        ['thanks.', 'S1'],
      ],
    ]);
    expect(json.segments[1]!.words![0]).toEqual({ start: 1.8, end: 2.4, text: 'Hello', speaker: 'S2', speaker_name: 'Speaker 2' });
    expect(json.segments.map((s) => [s.text, s.speaker])).toEqual([
      ['Good morning.', 'S1'],
      ['Hello there.', 'S2'],
      ['No words here.', 'S1'],
      ['Fine thanks.', 'S1'],
    ]);
    const txt = await (await download(`/api/speech/jobs/${id}/transcript.txt`, owner)).text();
    expect(txt).toBe('Speaker 1:\nGood morning.\n\nSpeaker 2:\nHello there.\n\nSpeaker 1:\nNo words here.\nFine thanks.\n');

    // The job page offers the RTTM download.
    const { jar } = await browserLogin(svc.app, owner.username, ownerPassword);
    const page = await svc.app.inject({ method: 'GET', url: `/speech/jobs/${id}`, headers: { cookie: jar.header() } });
    expect(page.body).toContain(`href="/api/speech/jobs/${id}/transcript.rttm"`);

    // The share page: the same turns, the same file; its full view shows the split segments.
    const share = await api('POST', `/api/speech/jobs/${id}/share`, owner);
    expect(share.status).toBe(200);
    const sharePath = new URL(share.body.share.url as string).pathname;
    const shared = await fetch(`${svc.url}${sharePath}.rttm`);
    expect(shared.status).toBe(200);
    expect(await shared.text()).toBe(await (await download(`/api/speech/jobs/${id}/transcript.rttm`, owner)).text());
    expect(await (await fetch(`${svc.url}${sharePath}`)).text()).toContain(`href="${sharePath.split('/').at(-1)}.rttm"`);
    const sharedSrt = await (await fetch(`${svc.url}${sharePath}.srt`)).text();
    expect(sharedSrt).toContain('Speaker 2: Hello there.');
  });

  it('a rerun joins the pieces back and splits them again with its own turns; browsers get each labelled pass', async () => {
    const id = await transcribeWords(FIRST);
    const socket = io(svc.url, { transports: ['websocket'], auth: { token: owner.jwt }, reconnection: false });
    const live: Array<{ state: string; segments?: Array<{ seq: number; start: number; end: number; text: string; speaker: string | null }> }> = [];
    socket.on('diarization', (d: (typeof live)[number]) => live.push(d));
    expect(await socket.timeout(5_000).emitWithAck('subscribe', { jobId: id })).toEqual({ ok: true });
    /** The labelled pass of the n-th completed diarization browsers heard. */
    const completedLive = async (n: number) => {
      await expect.poll(() => live.filter((d) => d.state === 'completed').length).toBe(n);
      return live.filter((d) => d.state === 'completed')[n - 1]!.segments!.map((x) => [x.seq, x.start, x.end, x.text, x.speaker]);
    };
    const pass = async (turns: Array<[number, number, number]>) => {
      expect((await rerun(id)).status).toBe(200);
      const task = (await claim(w))!;
      expect(task).toMatchObject({ task: 'diarize', regenerate_segments: false });
      await w.client.complete({ ...complete(task, { segment_count: 0 }), diarization: turnsOf(turns) });
      expect((await detail(id)).diarization.state).toBe('completed');
    };
    // One speaker for the first segment: it is whole again, with the text the worker reported.
    await pass([
      [0, 4, 0],
      [4, 8, 1],
    ]);
    expect(await rows(id)).toEqual([
      [0, 0, 4, 'Good morning. Hello there.', 'S1'],
      [1, 4, 6, 'No words here.', 'S2'],
      [2, 6, 8, 'Fine thanks.', 'S2'],
    ]);
    expect(await completedLive(1)).toEqual(await rows(id));
    expect((await detail(id)).diarization.speaker_count).toBe(2);
    await expectWordsAgreeWithRttm(id);
    // A change inside the last segment splits it; the first is split where the new turns say.
    await pass([
      [0, 1.5, 1],
      [1.5, 6.55, 0],
      [6.55, 8, 1],
    ]);
    expect(await rows(id)).toEqual([
      [0, 0, 1.2, 'Good morning.', 'S2'],
      [1, 1.8, 4, 'Hello there.', 'S1'],
      [2, 4, 6, 'No words here.', 'S1'],
      [3, 6, 6.5, 'Fine', 'S1'],
      [4, 6.6, 8, 'thanks.', 'S2'],
    ]);
    expect(await completedLive(2)).toEqual(await rows(id));
    socket.close();
    await expectWordsAgreeWithRttm(id);
    const d = await detail(id);
    expect(d.speaker_aware_transcript).toBe(
      '[00:00:00] Speaker 2: Good morning.\n\n[00:00:01] Speaker 1: Hello there. No words here. Fine\n\n[00:00:06] Speaker 2: thanks.',
    );
    // the rerun split the segments anew: the count follows what the transcript shows
    expect(d).toMatchObject({ stage_detail: '5 segments', segment_count: 5, transcript_text: 'Good morning. Hello there. No words here. Fine thanks.' });
  });

  it('RTTM downloads: 401 without sign-in, 403 without speech.use, 404 for jobs one cannot see, 409 without a completed diarization', async () => {
    const id = await transcribeWords(FIRST);
    const url = `/api/speech/jobs/${id}/transcript.rttm`;
    const unauth = await download(url);
    expect(unauth.status).toBe(401);
    expect(await unauth.json()).toMatchObject({ ok: false, reason: 'unauthenticated' });
    const accounts = new AccountService(svc.orm);
    const noSpeech = await accounts.createUser({ username: randomName('nospeech'), permissions: [] });
    const forbidden = await download(url, { jwt: await signIn(noSpeech.user, noSpeech.password) });
    expect(forbidden.status).toBe(403);
    expect(await forbidden.json()).toMatchObject({ ok: false, reason: 'forbidden' });
    const stranger = await accounts.createUser({ username: randomName('stranger'), permissions: ['speech.use'] });
    const hidden = await download(url, { jwt: await signIn(stranger.user, stranger.password) });
    expect(hidden.status).toBe(404);
    expect(await hidden.json()).toMatchObject({ ok: false, reason: 'not_found' });
    expect((await download('/api/speech/jobs/2147483000/transcript.rttm', owner)).status).toBe(404);
    // A manager sees it.
    expect((await download(url, admin)).status).toBe(200);

    // Diarization turned off: no turns (409), and the page offers no RTTM.
    const off = await uploadJob({ diarization: false });
    const a = (await claim(w))!;
    expect(a.lease.job_id).toBe(off.id);
    await transcribe(w, a, null);
    const conflict = await download(`/api/speech/jobs/${off.id}/transcript.rttm`, owner);
    expect(conflict.status).toBe(409);
    expect(await conflict.json()).toMatchObject({ ok: false, reason: 'conflict', message: expect.stringMatching(/no speaker turns/) });
    expect((await api('POST', `/api/speech/jobs/${off.id}/share`, owner)).status).toBe(200);
    const offShare = new URL((await detail(off.id)).share.url as string).pathname;
    expect((await fetch(`${svc.url}${offShare}.rttm`)).status).toBe(409);
    expect((await fetch(`${svc.url}${offShare}x.rttm`)).status).toBe(404);
    // A failed diarization has no turns either.
    const failed = await transcribeWordsFailed();
    expect((await download(`/api/speech/jobs/${failed}/transcript.rttm`, owner)).status).toBe(409);
  });

  async function transcribeWordsFailed() {
    const job = await uploadJob();
    const a = (await claim(w))!;
    await streamSegments(w.client, a.lease, TEXTS);
    await w.client.complete(complete(a, { diarization: { state: 'failed', engine: 'test-diarizer', speaker_count: 0, turns: [], error: 'boom' } }));
    return job.id;
  }
});
