import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { io, type Socket } from 'socket.io-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import type { AuthUser } from '../../coordinator/src/accounts/types.js';
import { loadConfig } from '../../coordinator/src/config.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { createTestDatabase, randomName, testEnv, type TestDatabase } from '../support/harness.js';
import { startNode, type Proc } from '../support/processes.js';

/**
 * The whole path on real processes: a job is submitted, the worker agent (a child process) claims
 * it over gRPC, decodes espeak-ng speech with ffmpeg, transcribes it with pocketsphinx and streams
 * segments, and a socket.io client sees them arrive before the job completes. Then the worker is
 * killed mid-job and the job is recovered and completed exactly once.
 */
const MODEL = 'pocketsphinx-en-us';
let db: TestDatabase;
let svc: RunningCoordinator;
let owner: AuthUser;
let password: string;
const dir = mkdtempSync(path.join(tmpdir(), 'sonar-pipeline-'));
const procs: Proc[] = [];
const sockets: Socket[] = [];

function speech(name: string, sentences: string[]): string {
  const file = path.join(dir, `${name}.wav`);
  // One recording per sentence joined with a second of silence, so the recogniser ends an
  // utterance (a segment) at each one. The en-us voice is the one pocketsphinx's model hears best.
  const silence = path.join(dir, 'silence.wav');
  execFileSync('sox', ['-n', '-r', '22050', '-c', '1', '-b', '16', silence, 'trim', '0', '1.0']);
  const parts = sentences.flatMap((sentence, i) => {
    const part = path.join(dir, `${name}-${i}.wav`);
    execFileSync('espeak-ng', ['-v', 'en-us', '-w', part, `${sentence}.`]);
    return [part, silence];
  });
  execFileSync('sox', [...parts, file]);
  return file;
}

async function submit(file: string) {
  const bytes = readFileSync(file);
  const temp = path.join(dir, `${path.basename(file)}.${Date.now()}.part`);
  writeFileSync(temp, bytes);
  return svc.speech.jobs.create(owner, {
    channel: 'web',
    model: MODEL,
    source: {
      type: 'upload',
      tempPath: temp,
      filename: path.basename(file),
      sizeBytes: bytes.length,
      sha256: createHash('sha256').update(bytes).digest('hex'),
    },
  });
}

async function startAgent(name: string, extra: string[] = []) {
  const { secret } = await svc.workers.createWorker(name);
  const p = startNode('worker/dist/bin.js', ['--coordinator', `127.0.0.1:${svc.grpcPort}`, '--work-dir', dir, ...extra], { WORKER_SECRET: secret });
  procs.push(p);
  await p.waitFor(/connected to coordinator/);
  return p;
}

let cachedJwt: string | null = null;
/** One sign-in for the whole file: sign-ins are rate limited (LOGIN_RATE_LIMIT_PER_MINUTE). */
async function jwt(): Promise<string> {
  if (cachedJwt) return cachedJwt;
  const res = await fetch(`${svc.url}/api/account/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: owner.username, password }),
  });
  cachedJwt = ((await res.json()) as { token: string }).token;
  return cachedJwt;
}

interface Seen {
  segments: Array<{ seq: number; text: string; start: number; end: number }>;
  statuses: string[];
  completedAt: number | null;
  segmentTimes: number[];
}

/** Subscribes like a browser would, applying each segment once by its seq. */
async function watch(jobId: number): Promise<Seen> {
  const socket = io(svc.url, { transports: ['websocket'], auth: { token: await jwt() }, reconnection: false });
  sockets.push(socket);
  const seen: Seen = { segments: [], statuses: [], completedAt: null, segmentTimes: [] };
  const apply = (s: { seq: number; text: string; start: number; end: number }) => {
    if (seen.segments.some((x) => x.seq === s.seq)) return;
    seen.segments.push({ seq: s.seq, text: s.text, start: s.start, end: s.end });
    seen.segmentTimes.push(Date.now());
  };
  socket.on('snapshot', (snap: { segments: Seen['segments'] }) => snap.segments.forEach(apply));
  socket.on('segment', apply);
  socket.on('status', (s: { status: string }) => {
    seen.statuses.push(s.status);
    if (s.status === 'completed' && seen.completedAt === null) seen.completedAt = Date.now();
  });
  const ack = await socket.timeout(5_000).emitWithAck('subscribe', { jobId });
  expect(ack).toEqual({ ok: true });
  return seen;
}

async function job(id: number) {
  const res = await fetch(`${svc.url}/api/speech/jobs/${id}`, { headers: { authorization: `Bearer ${await jwt()}` } });
  return res.ok ? ((await res.json()) as { job: Record<string, any> }).job : null;
}

beforeAll(async () => {
  db = await createTestDatabase();
  svc = await startCoordinator(
    loadConfig(
      testEnv(db, {
        SPEECH_MEDIA_DIR: path.join(dir, 'media'),
        SPEECH_LEASE_TTL_SECONDS: '6',
        SPEECH_STALE_SWEEP_SECONDS: '1',
        WORKER_HEARTBEAT_INTERVAL_MS: '1000',
      }),
    ),
  );
  const created = await new AccountService(svc.orm).createUser({ username: randomName('speaker'), permissions: ['speech.use'] });
  owner = created.user;
  password = created.password;
});
afterAll(async () => {
  sockets.forEach((s) => s.close());
  await Promise.all(procs.map((p) => p.stop('SIGKILL')));
  await svc?.close();
  await db?.drop();
});

describe('speech pipeline end to end', () => {
  it('transcribes real speech and streams segments to a socket.io client before completion', async () => {
    const agent = await startAgent('pipeline-1');
    // Sentences pocketsphinx recognises reliably from espeak-ng's voice.
    const file = speech('hello', ['hello world', 'i would like a cup of coffee', 'please call me tomorrow morning', 'good morning everyone']);
    const j = await submit(file);
    const seen = await watch(j.id);
    await expect.poll(() => seen.completedAt, { timeout: 60_000, interval: 200 }).not.toBeNull();

    const done = (await job(j.id))!;
    expect(done.status).toBe('completed');
    expect(done.engine).toBe('pocketsphinx');
    expect(done.segment_count).toBeGreaterThanOrEqual(2);
    // Each segment arrived once, in order, and at least the first one before completion.
    expect(seen.segments.map((s) => s.seq)).toEqual([...seen.segments.keys()]);
    expect(seen.segments.length).toBe(done.segment_count);
    expect(seen.segmentTimes[0]!).toBeLessThan(seen.completedAt!);
    for (let i = 1; i < seen.segments.length; i++) expect(seen.segments[i]!.start).toBeGreaterThanOrEqual(seen.segments[i - 1]!.start);
    const text = String(done.transcript_text).toLowerCase();
    for (const word of ['coffee', 'tomorrow', 'morning']) expect(text).toContain(word);
    expect(done.runtime_log.map((e: { event: string }) => e.event)).toEqual(expect.arrayContaining(['queued', 'claimed', 'completed']));
    expect(done.liveness.state).toBe('inactive');
    expect(done.source_duration_seconds).toBeGreaterThan(3);
    await agent.stop();
  }, 90_000);

  it('a silent or empty recording completes saying "No speech detected", not with a bare empty transcript', async () => {
    const agent = await startAgent('pipeline-quiet');
    // The agent advertises what its engine hears: pocketsphinx-en-us is English only, so "de" is refused.
    const [row] = await svc.orm.em
      .getConnection()
      .execute<Array<{ capabilities: { modelLanguages?: Record<string, string[]> } }>>('select capabilities from speech_workers where name = ?', [
        'pipeline-quiet',
      ]);
    expect(row!.capabilities.modelLanguages).toEqual({ [MODEL]: ['en'] });
    const refused = await fetch(`${svc.url}/api/speech/jobs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${await jwt()}`, 'content-type': 'application/json' },
      body: JSON.stringify({ source_url: 'https://media.example.org/talk.mp3', model: MODEL, language: 'de' }),
    });
    expect(refused.status).toBe(422);
    expect(((await refused.json()) as { errors: Record<string, string[]> }).errors).toEqual({
      language: [`model "${MODEL}" transcribes only en, not "de"; leave language empty or choose another model`],
    });

    // Three seconds of digital silence from sox, two from ffmpeg's anullsrc as MP3, and a WAV with no samples at all.
    const silentWav = path.join(dir, 'silent.wav');
    execFileSync('sox', ['-n', '-r', '16000', '-c', '1', '-b', '16', silentWav, 'trim', '0', '3.0']);
    const silentMp3 = path.join(dir, 'silent.mp3');
    execFileSync('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'anullsrc=r=16000:cl=mono', '-t', '2', silentMp3]);
    const emptyWav = path.join(dir, 'empty.wav');
    execFileSync('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'anullsrc=r=16000:cl=mono', '-t', '0', emptyWav]);
    for (const file of [silentWav, silentMp3, emptyWav]) {
      const j = await submit(file);
      await expect.poll(async () => (await job(j.id))?.status, { timeout: 60_000, interval: 200 }).toBe('completed');
      const done = (await job(j.id))!;
      expect(done, path.basename(file)).toMatchObject({ status: 'completed', segment_count: 0, stage_detail: 'No speech detected', engine: 'pocketsphinx' });
      expect(done.transcript_text ?? '').toBe('');
    }
    // The worker itself says so (its final progress detail and its log), instead of finishing silently.
    await agent.waitFor(/job completed: no speech detected/);
    await agent.stop();
  }, 120_000);

  it('runs queued jobs back to back: each completion claims the next job, so two jobs cost one Claim', async () => {
    await Promise.all(procs.map((p) => p.stop('SIGKILL'))); // no other worker may take a job
    const jobs = [await submit(speech('pair-1', ['hello world'])), await submit(speech('pair-2', ['good morning everyone']))];
    const a = await startAgent('pipeline-pair');
    for (const j of jobs) await expect.poll(async () => (await job(j.id))?.status, { timeout: 60_000, interval: 200 }).toBe('completed');
    // The agent's log says how each job came: the first from Claim, the second in the first's Complete answer.
    const claimed = a.lines.flatMap((l) => {
      const entry = JSON.parse(l) as { msg?: string; job?: number; via?: string };
      return entry.msg === 'job claimed' ? [{ job: entry.job, via: entry.via }] : [];
    });
    expect(claimed).toEqual([
      { job: jobs[0]!.id, via: 'claim' },
      { job: jobs[1]!.id, via: 'completion' },
    ]);
    for (const j of jobs) {
      const done = (await job(j.id))!;
      expect(done).toMatchObject({ status: 'completed', attempt: 1 });
      expect(done.runtime_log.filter((e: { event: string }) => e.event === 'claimed')).toHaveLength(1);
    }
    await a.stop();
  }, 120_000);

  it('recovers a job whose worker was SIGKILLed mid-job and completes it exactly once', async () => {
    const a = await startAgent('doomed');
    const sentences = Array.from({ length: 3 }, () => [
      'hello world',
      'i would like a cup of coffee',
      'please call me tomorrow morning',
      'good morning everyone',
    ]).flat();
    const j = await submit(speech('long', sentences));
    const seen = await watch(j.id);
    await expect.poll(() => seen.segments.length, { timeout: 60_000, interval: 100 }).toBeGreaterThan(0);
    a.child.kill('SIGKILL');
    await a.exited;
    const during = (await job(j.id))!;
    expect(during.status).toBe('transcribing');
    expect(during.attempt).toBe(1);

    // Nobody renews the lease: after its TTL the sweep requeues the job; a second worker takes it.
    await startAgent('rescuer');
    await expect.poll(async () => (await job(j.id))?.status, { timeout: 90_000, interval: 500 }).toBe('completed');
    const done = (await job(j.id))!;
    expect(done.attempt).toBe(2);
    const events = done.runtime_log.map((e: { event: string }) => e.event);
    expect(events.filter((e: string) => e === 'lease_expired')).toHaveLength(1);
    expect(events.filter((e: string) => e === 'completed')).toHaveLength(1);
    expect(events.filter((e: string) => e === 'claimed')).toHaveLength(2);
    // The stored transcript is the second attempt's alone: seqs 0..n-1 without duplicates.
    const segs = await svc.speech.jobs.segments(j.id, 1);
    expect(segs.map((s) => s.seq)).toEqual([...segs.keys()]);
    expect(segs.length).toBe(done.segment_count);
  }, 150_000);

  it('on SIGTERM a worker hands its running job back after the grace period, and it completes elsewhere', async () => {
    await Promise.all(procs.map((p) => p.stop('SIGKILL'))); // no other worker may pick the job up meanwhile
    const a = await startAgent('stopping', ['--shutdown-grace-ms', '300']);
    const sentences = Array.from({ length: 3 }, () => [
      'hello world',
      'i would like a cup of coffee',
      'please call me tomorrow morning',
      'good morning everyone',
    ]).flat();
    const j = await submit(speech('handback', sentences));
    const seen = await watch(j.id);
    await expect.poll(() => seen.segments.length, { timeout: 60_000, interval: 100 }).toBeGreaterThan(0);
    a.child.kill('SIGTERM');
    expect(await a.exited).toBe(0);
    const after = (await job(j.id))!;
    expect(after.status).toBe('queued');
    expect(after.runtime_log.map((e: { event: string }) => e.event)).toContain('released');
    await startAgent('finisher');
    await expect.poll(async () => (await job(j.id))?.status, { timeout: 90_000, interval: 500 }).toBe('completed');
    const done = (await job(j.id))!;
    expect(done.attempt).toBe(2);
    expect(done.max_attempts).toBe(4); // the hand-back did not use up an attempt
  }, 150_000);
});
