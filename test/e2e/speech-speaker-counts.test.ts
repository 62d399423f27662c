import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLAIM_NEXT_CONTRACT_VERSION, WORKER_CONTRACT_VERSION, type CapabilitiesMsg, type JobAssignmentMsg } from '@sonar/shared';
import { CoordinatorClient } from '../../worker/src/coordinator-client.js';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import type { AuthUser } from '../../coordinator/src/accounts/types.js';
import { loadConfig } from '../../coordinator/src/config.js';
import type { StatedSpeakers } from '../../coordinator/src/speech/jobs/entities.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { browserLogin, createTestDatabase, extractCsrf, randomName, testEnv, type TestDatabase } from '../support/harness.js';
import { registerModelWorker } from '../support/model-workers.js';
import { multipartForm } from '../support/multipart.js';
import { streamSegments } from '../support/sim-worker.js';

/**
 * Stated speaker counts (issue 37, part 1) over the real coordinator, with simulated workers on
 * the real gRPC protocol: num_speakers or min_speakers/max_speakers on every submission path (JWT
 * API, token API as JSON and multipart, tus metadata, the /speech form) and on the diarization
 * rerun (API body and the job page's form); every invalid count is a 422 under its field; the count
 * is stored, shown as `diarization.requested_speakers`, sent in the claim (contract 5), and a
 * worker of an older contract is never handed a job or rerun that states one.
 */
let db: TestDatabase;
let svc: RunningCoordinator;
let owner: AuthUser & { jwt: string; token: string };
let ownerPassword: string;
const dir = mkdtempSync(path.join(tmpdir(), 'sonar-speaker-counts-'));
const clients: CoordinatorClient[] = [];
let clip: string;

const CALLBACK = 'https://hooks.example.net/speech/done';
const SOURCE = 'https://media.example.org/talk.mp3';

const caps: CapabilitiesMsg = {
  models: ['small'],
  engines: ['test'],
  diarization: true,
  diarization_engine: 'test-diarizer',
  diarization_error: '',
  can_fetch_urls: false,
  device: 'cpu',
  model_languages: [],
};

type Sim = { client: CoordinatorClient; session: string };

async function worker(name: string, contract: number): Promise<Sim> {
  const { secret } = await svc.workers.createWorker(randomName(name));
  const client = new CoordinatorClient(`127.0.0.1:${svc.grpcPort}`, secret);
  clients.push(client);
  const hello = await client.hello({ contract_version: contract, agent_version: 't', hostname: 'h', capabilities: caps, local: false });
  return { client, session: hello.session_id };
}

async function claim(w: Sim): Promise<JobAssignmentMsg | null> {
  const res = await w.client.claim({ session_id: w.session, wait_ms: 0 });
  return res.has_job ? res.job : null;
}

/** An uploaded recording (retained, so reruns may use it), created by the service as a submission would. */
async function uploadJob(speakers: StatedSpeakers | null = null) {
  const bytes = readFileSync(clip);
  const temp = path.join(dir, `${randomName('up')}.part`);
  writeFileSync(temp, bytes);
  return svc.speech.jobs.create(owner, {
    channel: 'web',
    model: 'small',
    speakers,
    source: { type: 'upload', tempPath: temp, filename: 'talk.wav', sizeBytes: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') },
  });
}

async function finish(w: Sim, job: JobAssignmentMsg, speakers: number[], transcribe = true) {
  if (transcribe)
    await streamSegments(
      w.client,
      job.lease,
      speakers.map((s) => `Speaker ${s} talks.`),
    );
  return w.client.complete({
    lease: job.lease,
    success: true,
    error: '',
    segment_count: transcribe ? speakers.length : 0,
    duration_seconds: 8,
    engine: 'test',
    engine_model: job.model,
    cancelled: false,
    diarization: {
      state: 'completed',
      engine: 'test-diarizer',
      speaker_count: new Set(speakers).size,
      turns: speakers.map((speaker, i) => ({ start: i * 2, end: i * 2 + 2, speaker })),
      error: '',
    },
  });
}

/** `seconds` of a 300 Hz tone as a 16 kHz mono 16-bit WAV file. */
function sineWav(seconds: number): Buffer {
  const n = seconds * 16000;
  const wav = Buffer.alloc(44 + n * 2);
  wav.write('RIFF', 0);
  wav.writeUInt32LE(36 + n * 2, 4);
  wav.write('WAVEfmt ', 8);
  wav.writeUInt32LE(16, 16);
  wav.writeUInt16LE(1, 20);
  wav.writeUInt16LE(1, 22);
  wav.writeUInt32LE(16000, 24);
  wav.writeUInt32LE(32000, 28);
  wav.writeUInt16LE(2, 32);
  wav.writeUInt16LE(16, 34);
  wav.write('data', 36);
  wav.writeUInt32LE(n * 2, 40);
  for (let i = 0; i < n; i++) wav.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * 300 * i) / 16000)), 44 + i * 2);
  return wav;
}

async function call(method: string, url: string, opts: { auth?: string; json?: unknown; body?: Buffer; headers?: Record<string, string> } = {}) {
  const headers: Record<string, string> = { authorization: `Bearer ${opts.auth ?? owner.jwt}`, ...opts.headers };
  if (opts.json !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${svc.url}${url}`, {
    method,
    headers,
    ...(opts.json !== undefined ? { body: JSON.stringify(opts.json) } : opts.body ? { body: new Uint8Array(opts.body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : {}) as Record<string, any> };
}

const detail = async (id: number) => (await call('GET', `/api/speech/jobs/${id}`)).body.job as Record<string, any>;

/** Every refused count, the field its 422 names, and the fields as sent (JSON values; forms send their text). */
const INVALID: Array<[string, Record<string, string | number | boolean>, string]> = [
  ['a non-integer', { num_speakers: 2.5 }, 'num_speakers'],
  ['a word', { min_speakers: 'two' }, 'min_speakers'],
  ['zero', { num_speakers: 0 }, 'num_speakers'],
  ['more than 32', { max_speakers: 33 }, 'max_speakers'],
  ['min above max', { min_speakers: 4, max_speakers: 2 }, 'min_speakers'],
  ['num with a bound', { num_speakers: 3, max_speakers: 4 }, 'max_speakers'],
  ['a count with diarization disabled', { num_speakers: 2, disable_diarization: true }, 'num_speakers'],
];
const asText = (fields: Record<string, string | number | boolean>) => Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, String(v)]));

function expectRefusedUnder(res: { status: number; body: Record<string, any> }, field: string, what: string) {
  expect(res.status, what).toBe(422);
  expect(res.body, what).toMatchObject({ ok: false, reason: 'validation_failed' });
  expect(Object.keys(res.body.errors ?? {}), what).toEqual([field]);
}

beforeAll(async () => {
  db = await createTestDatabase();
  svc = await startCoordinator(
    loadConfig(
      testEnv(db, {
        SPEECH_MEDIA_DIR: path.join(dir, 'media'),
        PUBLIC_BASE_URL: 'https://sonar.example.org',
        SPEECH_STALE_SWEEP_SECONDS: '3600',
        WORKER_PRESENCE_TTL_MS: '60000',
      }),
    ),
  );
  clip = path.join(dir, 'clip.wav');
  writeFileSync(clip, sineWav(8));
  const accounts = new AccountService(svc.orm);
  const o = await accounts.createUser({ username: randomName('owner'), permissions: ['speech.use', 'speech.api'] });
  ownerPassword = o.password;
  const login = await fetch(`${svc.url}/api/account/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: o.user.username, password: o.password }),
  });
  const { token } = await accounts.createPersonalToken(o.user.id, { name: 'counts', scopes: ['speech.api'] });
  owner = Object.assign(o.user, { jwt: ((await login.json()) as { token: string }).token, token });
  await registerModelWorker(svc.orm, 'catalog', ['small']);
});
afterAll(async () => {
  clients.forEach((c) => c.close());
  await svc?.close();
  await db?.drop();
});

describe('validation: every invalid count is a 422 under its field, and nothing is queued', () => {
  it('on the signed-in API (JSON and multipart) and the token API (JSON and multipart)', async () => {
    const before = await svc.orm.em.fork().getConnection().execute<Array<{ n: number }>>('select count(*)::int as n from speech_jobs');
    for (const [what, fields, field] of INVALID) {
      expectRefusedUnder(await call('POST', '/api/speech/jobs', { json: { source_url: SOURCE, ...fields } }), field, `API JSON: ${what}`);
      const token = { auth: owner.token, json: { callback_url: CALLBACK, source_url: SOURCE, ...fields } };
      expectRefusedUnder(await call('POST', '/api/speech/transcribe', token), field, `token API JSON: ${what}`);
      for (const url of ['/api/speech/jobs', '/api/speech/transcribe']) {
        const parts = Object.entries({ callback_url: CALLBACK, ...asText(fields) }).map(([name, value]) => ({ name, value }));
        const { payload, contentType } = multipartForm([...parts, { name: 'media_file', filename: 'talk.wav', data: readFileSync(clip) }], 'audio/wav');
        const auth = url === '/api/speech/transcribe' ? owner.token : owner.jwt;
        expectRefusedUnder(await call('POST', url, { auth, body: payload, headers: { 'content-type': contentType } }), field, `${url} multipart: ${what}`);
      }
    }
    const after = await svc.orm.em.fork().getConnection().execute<Array<{ n: number }>>('select count(*)::int as n from speech_jobs');
    expect(after[0]!.n).toBe(before[0]!.n);
  });

  it('in the tus upload metadata, when the upload is created', async () => {
    const meta = (fields: Record<string, string>) =>
      Object.entries({ filename: 'talk.wav', ...fields })
        .map(([k, v]) => `${k} ${Buffer.from(v).toString('base64')}`)
        .join(',');
    for (const [what, fields, field] of INVALID) {
      const res = await call('POST', '/api/speech/uploads', {
        headers: { 'tus-resumable': '1.0.0', 'upload-length': String(readFileSync(clip).length), 'upload-metadata': meta(asText(fields)) },
      });
      expectRefusedUnder(res, field, `tus: ${what}`);
    }
    // A valid count is accepted at creation.
    const ok = await call('POST', '/api/speech/uploads', {
      headers: { 'tus-resumable': '1.0.0', 'upload-length': '1000', 'upload-metadata': meta({ min_speakers: '2', max_speakers: '4' }) },
    });
    expect(ok.status).toBe(201);
  });

  it('in the rerun body', async () => {
    const w = await worker('validate', WORKER_CONTRACT_VERSION);
    const job = await uploadJob();
    await finish(w, (await claim(w))!, [0, 1]);
    for (const [what, fields, field] of INVALID.filter(([, f]) => !('disable_diarization' in f))) {
      expectRefusedUnder(await call('POST', `/api/speech/jobs/${job.id}/diarization`, { json: fields }), field, `rerun: ${what}`);
    }
    expect((await detail(job.id)).diarization).toMatchObject({ state: 'completed', requested_speakers: null });
  });
});

describe('a stated count is stored, shown and sent to the worker; older workers never get it', () => {
  it('the API and the token API store the count as diarization.requested_speakers', async () => {
    const api = await call('POST', '/api/speech/jobs', { json: { source_url: SOURCE, num_speakers: 3 } });
    expect(api.status).toBe(201);
    expect((await detail(api.body.job.id)).diarization).toMatchObject({ requested: true, state: 'pending', requested_speakers: { num_speakers: 3 } });
    const parts = [
      { name: 'callback_url', value: CALLBACK },
      { name: 'min_speakers', value: '2' },
      { name: 'max_speakers', value: ' 4 ' },
      { name: 'media_file', filename: 'talk.wav', data: readFileSync(clip) },
    ];
    const { payload, contentType } = multipartForm(parts, 'audio/wav');
    const token = await call('POST', '/api/speech/transcribe', { auth: owner.token, body: payload, headers: { 'content-type': contentType } });
    expect(token.status).toBe(201);
    const d = await detail(token.body.job.id);
    expect(d.diarization.requested_speakers).toEqual({ min_speakers: 2, max_speakers: 4 });
    expect(d.runtime_log.map((e: { message: string }) => e.message)).toContainEqual(expect.stringMatching(/speakers stated: 2 to 4/));
    // null (as JSON clients send for "not set") and blank are not stated.
    const unset = await call('POST', '/api/speech/jobs', { json: { source_url: SOURCE, num_speakers: null, min_speakers: '', max_speakers: null } });
    expect(unset.status).toBe(201);
    expect((await detail(unset.body.job.id)).diarization.requested_speakers).toBeNull();
    await svc.speech.jobs.remove(owner, unset.body.job.id);
    // Neither is a job for the workers of the next test: removed.
    await svc.speech.jobs.remove(owner, api.body.job.id);
    await svc.speech.jobs.remove(owner, token.body.job.id);
  });

  it('a contract-4 worker is not handed a job or a rerun with a stated count; a contract-5 worker gets the count in the claim', async () => {
    const old = await worker('old', CLAIM_NEXT_CONTRACT_VERSION);
    const current = await worker('current', WORKER_CONTRACT_VERSION);
    const counted = await uploadJob({ num_speakers: 3 });
    const plain = await uploadJob();
    // The older worker skips the older job with a count and takes the one without.
    const a = (await claim(old))!;
    expect(a.lease.job_id).toBe(plain.id);
    expect(await claim(old)).toBeNull();
    await finish(old, a, [0, 1]);
    const b = (await claim(current))!;
    expect(b).toMatchObject({ lease: { job_id: counted.id }, diarization: true, num_speakers: 3, min_speakers: 0, max_speakers: 0 });
    await finish(current, b, [0, 1, 2]);
    expect((await detail(counted.id)).diarization).toMatchObject({ state: 'completed', speaker_count: 3, requested_speakers: { num_speakers: 3 } });

    // A rerun with bounds replaces the stated count and is, likewise, only for the contract-5 worker.
    const rerun = await call('POST', `/api/speech/jobs/${counted.id}/diarization`, { json: { max_speakers: 2 } });
    expect(rerun.status).toBe(200);
    expect(rerun.body.job.diarization).toMatchObject({ state: 'pending', requested_speakers: { max_speakers: 2 } });
    expect(await claim(old)).toBeNull();
    const c = (await claim(current))!;
    expect(c).toMatchObject({ task: 'diarize', lease: { job_id: counted.id }, num_speakers: 0, min_speakers: 0, max_speakers: 2 });
    await finish(current, c, [0, 1, 1], false);
    expect((await detail(counted.id)).diarization).toMatchObject({ state: 'completed', speaker_count: 2, requested_speakers: { max_speakers: 2 } });

    // A rerun without a count goes back to detection, and any worker of contract 3+ may run it.
    const detect = await call('POST', `/api/speech/jobs/${counted.id}/diarization`);
    expect(detect.body, JSON.stringify(detect.body)).toMatchObject({ ok: true });
    expect(detect.body.job.diarization.requested_speakers).toBeNull();
    const d = (await claim(old))!;
    expect(d).toMatchObject({ task: 'diarize', lease: { job_id: counted.id } });
    await finish(old, d, [0, 1], false);
  });

  it('the /speech form and the job page’s rerun control work without script', async () => {
    const { jar } = await browserLogin(svc.app, owner.username, ownerPassword);
    const queue = await svc.app.inject({ method: 'GET', url: '/speech', headers: { cookie: jar.header() } });
    expect(queue.body).toContain('id="submit-speakers"');
    const csrf = extractCsrf(queue.body);
    const post = (url: string, fields: Record<string, string>) =>
      svc.app.inject({
        method: 'POST',
        url,
        headers: { cookie: jar.header(), 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({ _csrf: csrf, ...fields }).toString(),
      });
    // Only the inputs of the chosen mode count: "between" ignores the exact input.
    const bad = await post('/speech', { source_url: SOURCE, speakers: 'between', num_speakers: '3', min_speakers: '5', max_speakers: '2' });
    expect(bad.statusCode).toBe(422);
    expect(bad.body).toMatch(/id="submit-error">min_speakers: must not be greater than max_speakers/);
    const created = await post('/speech', { source_url: SOURCE, speakers: 'exact', num_speakers: '2', min_speakers: '5', max_speakers: '' });
    expect(created.statusCode).toBe(303);
    const id = Number(/\/speech\/jobs\/(\d+)/.exec(created.headers.location as string)![1]);
    expect((await detail(id)).diarization.requested_speakers).toEqual({ num_speakers: 2 });
    await svc.speech.jobs.remove(owner, id);

    // The job page shows the stated count and reruns with the one chosen there.
    const w = await worker('page', WORKER_CONTRACT_VERSION);
    const job = await uploadJob({ min_speakers: 2 });
    await finish(w, (await claim(w))!, [0, 1]);
    const page = await svc.app.inject({ method: 'GET', url: `/speech/jobs/${job.id}`, headers: { cookie: jar.header() } });
    expect(page.body).toMatch(/id="requested-speakers">Speakers stated: at least 2\./);
    expect(page.body).toContain('id="rerun-speakers"');
    const refused = await post(`/speech/jobs/${job.id}/diarization`, { speakers: 'exact', num_speakers: '40' });
    expect(refused.statusCode).toBe(422);
    expect(refused.body).toMatch(/id="speakers-error">num_speakers: must be from 1 to 32/);
    const again = await post(`/speech/jobs/${job.id}/diarization`, { speakers: 'exact', num_speakers: '3', min_speakers: '2', max_speakers: '' });
    expect(again.statusCode).toBe(303);
    expect((await detail(job.id)).diarization).toMatchObject({ state: 'pending', requested_speakers: { num_speakers: 3 } });
    const task = (await claim(w))!;
    expect(task).toMatchObject({ task: 'diarize', num_speakers: 3 });
    await finish(w, task, [0, 1, 2], false);
  });
});
