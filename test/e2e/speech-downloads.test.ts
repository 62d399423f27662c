import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WORKER_CONTRACT_VERSION, type JobAssignmentMsg } from '@sonar/shared';
import { CoordinatorClient } from '../../worker/src/coordinator-client.js';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import type { AuthUser } from '../../coordinator/src/accounts/types.js';
import { loadConfig } from '../../coordinator/src/config.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { browserLogin, createTestDatabase, randomName, testEnv, type TestDatabase } from '../support/harness.js';
import { registerModelWorker } from '../support/model-workers.js';

/**
 * The same transcript from every door, and one segment count wherever a count is shown, on a job
 * run through the real worker protocol: an uploaded `talk.wav` (an API-queue job with a callback,
 * whose owner gets completion reports) transcribed with word times and diarized so that a segment
 * is split where the speaker changes, with named speakers. The signed-in API and the public share
 * page must give the same TXT, SRT, WebVTT, JSON (but `job_id`), DOCX and RTTM, named `talk.*`;
 * the DOCX is read with `unzip`. The job header, the API, the callback (received over HTTP) and the
 * report (received over SMTP) must all say the count the transcript shows, also after a
 * diarization rerun splits the segments anew.
 */

let db: TestDatabase;
let svc: RunningCoordinator;
let owner: AuthUser & { jwt: string; password: string };
let client: CoordinatorClient;
let session: string;
let callbackServer: Server;
let smtp: SMTPServer;
const callbacks: string[] = [];
const mails: string[] = [];
const dir = mkdtempSync(path.join(tmpdir(), 'sonar-downloads-'));
const FORMATS = ['txt', 'srt', 'vtt', 'json', 'docx', 'rttm'] as const;

const word = (text: string, start: number, end: number) => ({ text, start, end });
/** Three reported segments: the first one's words change speaker at 2.0 s, the second has no words. */
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
  turns: turns.map(([start, end, speaker]) => ({ start, end, speaker })),
  error: '',
});

const complete = (job: JobAssignmentMsg, extra: Partial<Parameters<CoordinatorClient['complete']>[0]> = {}) => ({
  lease: job.lease,
  success: true,
  error: '',
  segment_count: WORDED.length,
  duration_seconds: 8,
  engine: 'test',
  engine_model: job.model,
  cancelled: false,
  ...extra,
});

async function claim(): Promise<JobAssignmentMsg> {
  const res = await client.claim({ session_id: session, wait_ms: 0 });
  if (!res.has_job || !res.job) throw new Error('no job to claim');
  return res.job;
}

const get = (url: string, auth = true) => fetch(`${svc.url}${url}`, { headers: auth ? { authorization: `Bearer ${owner.jwt}` } : {} });
async function api(method: string, url: string, body?: unknown) {
  const res = await fetch(`${svc.url}${url}`, {
    method,
    headers: { authorization: `Bearer ${owner.jwt}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}
const detail = async (id: number) => (await api('GET', `/api/speech/jobs/${id}`)).body.job as Record<string, any>;

/** The job page's header detail ("Completed · N segments"). */
async function header(id: number): Promise<string | undefined> {
  const { jar } = await browserLogin(svc.app, owner.username, owner.password);
  const page = await svc.app.inject({ method: 'GET', url: `/speech/jobs/${id}`, headers: { cookie: jar.header() } });
  return /<span id="job-detail">([^<]*)<\/span>/.exec(page.body)?.[1];
}

/** The named part of a DOCX, read by `unzip`. */
function unzipPart(bytes: Buffer, part: string): string {
  const file = path.join(dir, `${randomName('doc')}.docx`);
  writeFileSync(file, bytes);
  return execFileSync('unzip', ['-p', file, part], { encoding: 'utf8' });
}

beforeAll(async () => {
  callbackServer = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      callbacks.push(Buffer.concat(chunks).toString('utf8'));
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((resolve) => callbackServer.listen(0, '127.0.0.1', resolve));
  smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, _session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        mails.push(Buffer.concat(chunks).toString('utf8'));
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve));

  db = await createTestDatabase();
  svc = await startCoordinator(
    loadConfig(
      testEnv(db, {
        PUBLIC_BASE_URL: 'https://speech.example.org',
        OUTBOUND_ALLOW_RANGES: '127.0.0.0/8',
        SMTP_URL: `smtp://127.0.0.1:${(smtp.server.address() as AddressInfo).port}`,
        SPEECH_MEDIA_DIR: path.join(dir, 'media'),
        SPEECH_STALE_SWEEP_SECONDS: '3600',
        WORKER_PRESENCE_TTL_MS: '60000',
      }),
    ),
  );
  const accounts = new AccountService(svc.orm);
  const o = await accounts.createUser({ username: randomName('owner'), email: `${randomName('o')}@example.org`, permissions: ['speech.use', 'speech.api'] });
  const login = await fetch(`${svc.url}/api/account/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: o.user.username, password: o.password }),
  });
  owner = Object.assign(o.user, { jwt: ((await login.json()) as { token: string }).token, password: o.password });
  await registerModelWorker(svc.orm, 'catalog', ['small']);
  const { secret } = await svc.workers.createWorker(randomName('words'));
  client = new CoordinatorClient(`127.0.0.1:${svc.grpcPort}`, secret);
  const capabilities = {
    models: ['small'],
    engines: ['test'],
    diarization: true,
    diarization_engine: 'test-diarizer',
    diarization_error: '',
    can_fetch_urls: false,
    device: 'cpu',
    model_languages: [],
  };
  session = (await client.hello({ contract_version: WORKER_CONTRACT_VERSION, agent_version: 't', hostname: 'h', capabilities, local: false })).session_id;
});

afterAll(async () => {
  client?.close();
  await svc?.close();
  await db?.drop();
  await new Promise<void>((resolve) => callbackServer?.close(() => resolve()));
  await new Promise<void>((resolve) => (smtp ? smtp.close(() => resolve()) : resolve()));
  rmSync(dir, { recursive: true, force: true });
});

/** An uploaded talk.wav on the API queue with a callback, transcribed with words and diarized with `turns`. */
async function transcribedJob(turns: Array<[number, number, number]>): Promise<number> {
  const clip = path.join(dir, 'clip.wav');
  execFileSync('sox', ['-n', '-r', '16000', '-c', '1', '-b', '16', clip, 'synth', '8', 'sine', '300']);
  const bytes = readFileSync(clip);
  const temp = path.join(dir, `${randomName('up')}.part`);
  writeFileSync(temp, bytes);
  const job = await svc.speech.jobs.create(owner, {
    channel: 'api',
    model: 'small',
    source: { type: 'upload', tempPath: temp, filename: 'talk.wav', sizeBytes: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') },
  });
  const token = await new AccountService(svc.orm).createPersonalToken(owner.id, { name: randomName('t'), scopes: ['speech.api'] });
  await svc.orm.em
    .getConnection()
    .execute(`update speech_jobs set callback_url = ?, api_token_id = ?, callback_status = 'pending' where id = ?`, [
      `http://127.0.0.1:${(callbackServer.address() as AddressInfo).port}/cb/${job.id}`,
      token.record.id,
      job.id,
    ]);
  const a = await claim();
  expect(a.lease.job_id).toBe(job.id);
  const stream = client.progress(a.lease);
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
  await client.complete(complete(a, { diarization: turnsOf(turns) }));
  return job.id;
}

describe('the same transcript from the API and the share page', () => {
  it('gives byte-identical TXT, SRT, WebVTT, JSON (but job_id), DOCX and RTTM, named after the title, with speaker keys and names', async () => {
    const id = await transcribedJob([
      [0, 2, 0],
      [2, 4, 1],
      [4, 8, 0],
    ]);
    expect((await api('PUT', `/api/speech/jobs/${id}/speakers`, { speakers: { S1: 'Anna Berg', S2: 'Bo' } })).status).toBe(200);
    const job = await detail(id);
    expect(job.share?.url).toBeTruthy(); // an API-queue job is shared on completion
    const share = new URL(job.share.url as string).pathname;

    const bodies = new Map<string, { api: Buffer; shared: Buffer }>();
    for (const f of FORMATS) {
      const fromApi = await get(`/api/speech/jobs/${id}/transcript.${f}`);
      const fromShare = await get(`${share}.${f}`, false);
      expect([fromApi.status, fromShare.status], f).toEqual([200, 200]);
      for (const res of [fromApi, fromShare]) {
        expect(res.headers.get('content-disposition'), f).toBe(`attachment; filename="talk.${f}"; filename*=UTF-8''talk.${f}`);
        expect(res.headers.get('content-type'), f).toBe(fromApi.headers.get('content-type'));
      }
      bodies.set(f, { api: Buffer.from(await fromApi.arrayBuffer()), shared: Buffer.from(await fromShare.arrayBuffer()) });
    }
    // Byte for byte, except the JSON's job_id, which the share page hides (docs/api.md).
    for (const f of ['txt', 'srt', 'vtt', 'docx', 'rttm'] as const) expect(bodies.get(f)!.shared.equals(bodies.get(f)!.api), f).toBe(true);
    const apiJson = bodies.get('json')!.api.toString('utf8');
    expect(apiJson).toContain(`\n  "job_id": ${id},\n`);
    expect(bodies.get('json')!.shared.toString('utf8')).toBe(apiJson.replace(`\n  "job_id": ${id},\n`, '\n  "job_id": null,\n'));

    const json = JSON.parse(apiJson) as Record<string, any>;
    expect(json).toMatchObject({ job_id: id, title: 'talk.wav', model: 'small', pass: 1, status: 'completed', transcribed_at: job.finished_at });
    expect(json.speakers).toEqual([
      { key: 'S1', name: 'Anna Berg' },
      { key: 'S2', name: 'Bo' },
    ]);
    expect(json.segments.map((s: Record<string, unknown>) => [s.text, s.speaker, s.speaker_name])).toEqual([
      ['Good morning.', 'S1', 'Anna Berg'],
      ['Hello there.', 'S2', 'Bo'],
      ['No words here.', 'S1', 'Anna Berg'],
      ['Fine thanks.', 'S1', 'Anna Berg'],
    ]);
    expect(json.segments[1].words).toEqual([
      { start: 1.8, end: 2.4, text: 'Hello', speaker: 'S2', speaker_name: 'Bo' },
      { start: 2.5, end: 3.6, text: 'there.', speaker: 'S2', speaker_name: 'Bo' },
    ]);
    // The JSON's keys join with the RTTM's speakers, whose file id is the download's name.
    const rttm = bodies.get('rttm')!.api.toString('utf8');
    expect(rttm.split('\n')[0]).toBe('SPEAKER talk 1 0.000 2.000 <NA> <NA> S1 <NA> <NA>');
    expect(rttm).toContain(' S2 <NA> <NA>');
    expect(bodies.get('txt')!.api.toString('utf8')).toBe('Anna Berg:\nGood morning.\n\nBo:\nHello there.\n\nAnna Berg:\nNo words here.\nFine thanks.\n');
    expect(bodies.get('srt')!.api.toString('utf8')).toContain('Bo: Hello there.');
    expect(bodies.get('vtt')!.api.toString('utf8')).toContain('<v Anna Berg>');

    // The DOCX, read with unzip: the title, the date, the speakers, every paragraph with its time and speaker.
    const docx = bodies.get('docx')!.api;
    expect(bodies.get('docx')!.shared.equals(docx)).toBe(true);
    const xml = unzipPart(docx, 'word/document.xml');
    const texts = [...xml.matchAll(/<w:t(?: [^>]*)?>([^<]*)<\/w:t>/g)].map((m) => m[1]).join('|');
    expect(texts).toContain('talk.wav');
    expect(texts).toMatch(/Transcribed \d/);
    expect(texts).toContain('Speakers|Anna Berg|Bo|Transcript');
    expect(texts).toContain('[00:00:00] |Anna Berg: |Good morning.');
    expect(texts).toContain('[00:00:01] |Bo: |Hello there.');
    expect(texts).toContain('[00:00:04] |Anna Berg: |No words here. Fine thanks.');
    const created = `${new Date(job.finished_at as string).toISOString().slice(0, 19)}Z`;
    expect(unzipPart(docx, 'docProps/core.xml')).toContain(`<dcterms:created xsi:type="dcterms:W3CDTF">${created}</dcterms:created>`);

    // The job page and the share page offer the DOCX.
    const { jar } = await browserLogin(svc.app, owner.username, owner.password);
    const page = await svc.app.inject({ method: 'GET', url: `/speech/jobs/${id}`, headers: { cookie: jar.header() } });
    expect(page.body).toContain(`href="/api/speech/jobs/${id}/transcript.docx"`);
    expect(await (await get(share, false)).text()).toContain(`href="${share.split('/').at(-1)}.docx"`);
  });
});

describe('one segment count', () => {
  it('header, API, callback and report say what the transcript shows, also after a rerun splits the segments anew', async () => {
    // The worker sends three segments; the first is split where the speaker changes: four show.
    const id = await transcribedJob([
      [0, 2, 0],
      [2, 4, 1],
      [4, 8, 0],
    ]);
    const shown = async () =>
      ((await api('GET', `/api/speech/jobs/${id}/segments`)).body.segments as Array<{ text: string }>).filter((s) => s.text.trim()).length;
    expect(await shown()).toBe(4);
    expect(await detail(id)).toMatchObject({ status: 'completed', stage_detail: '4 segments', segment_count: 4 });
    expect(await header(id)).toBe('4 segments');
    await expect.poll(() => callbacks.find((c) => JSON.parse(c).job.job_id === id), { timeout: 20_000 }).toBeTruthy();
    expect(JSON.parse(callbacks.find((c) => JSON.parse(c).job.job_id === id)!).job.segment_count).toBe(4);
    await expect.poll(() => mails.find((m) => m.includes(`/speech/jobs/${id}`)), { timeout: 20_000 }).toBeTruthy();
    expect(mails.find((m) => m.includes(`/speech/jobs/${id}`))).toMatch(/^Segments: 4\r?$/m);
    // The runtime log keeps the worker's own count, worded as such.
    const log = (await detail(id)).runtime_log as Array<{ event: string; message: string }>;
    expect(log.find((e) => e.event === 'completed')?.message).toBe('Attempt 1 completed with 4 segments (the worker sent 3).');

    // A rerun whose turns change speaker inside the first and the last segment: five show.
    expect((await api('POST', `/api/speech/jobs/${id}/diarization`)).status).toBe(200);
    const task = await claim();
    expect(task).toMatchObject({ task: 'diarize' });
    await client.complete({
      ...complete(task, { segment_count: 0 }),
      diarization: turnsOf([
        [0, 1.5, 1],
        [1.5, 6.55, 0],
        [6.55, 8, 1],
      ]),
    });
    await expect.poll(async () => (await detail(id)).diarization.state).toBe('completed');
    expect(await shown()).toBe(5);
    expect(await detail(id)).toMatchObject({ stage_detail: '5 segments', segment_count: 5 });
    expect(await header(id)).toBe('5 segments');
    expect((await svc.notifications.reports!.preview(id, 'completed'))?.text).toMatch(/^Segments: 5$/m);
  });
});
