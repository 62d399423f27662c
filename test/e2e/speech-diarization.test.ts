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
import { parseRttm, rttmSpeakerAt } from '../support/rttm.js';
import { makeTwoVoiceRecording, type VoiceTurn } from '../support/two-voice.js';

/**
 * Speaker diarization on the real worker agent (a child process over gRPC on loopback): a
 * two-voice recording made with espeak-ng is transcribed by pocketsphinx and diarized by the
 * default engine (Silero VAD, MFCC statistics, clustering) in the same attempt; the coordinator
 * labels every segment and a socket.io client hears the result. Then a rerun is claimed by the
 * same agent as a `diarize` task and completes without transcribing again.
 */
const MODEL = 'pocketsphinx-en-us';
let db: TestDatabase;
let svc: RunningCoordinator;
let owner: AuthUser;
let jwt: string;
const dir = mkdtempSync(path.join(tmpdir(), 'sonar-diarization-'));
const procs: Proc[] = [];
const sockets: Socket[] = [];
let recording: { wavPath: string; turns: VoiceTurn[] };

async function api(method: string, url: string) {
  const res = await fetch(`${svc.url}${url}`, { method, headers: { authorization: `Bearer ${jwt}` } });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}
const detail = async (id: number) => (await api('GET', `/api/speech/jobs/${id}`)).body.job as Record<string, any>;

async function submit(file: string) {
  const bytes = readFileSync(file);
  const temp = path.join(dir, `${randomName('upload')}.part`);
  writeFileSync(temp, bytes);
  return svc.speech.jobs.create(owner, {
    channel: 'web',
    model: MODEL,
    source: { type: 'upload', tempPath: temp, filename: 'two-voices.wav', sizeBytes: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') },
  });
}

/** The voice that speaks most of the time within [start, end] of the recording. */
function voiceAt(start: number, end: number): number {
  const overlap = [0, 0];
  for (const t of recording.turns) overlap[t.voice]! += Math.max(0, Math.min(end, t.end) - Math.max(start, t.start));
  return overlap[0]! >= overlap[1]! ? 0 : 1;
}

/**
 * The stored segments of a job's pass carry pocketsphinx's words, and every word's segment has the
 * speaker of the RTTM turn that overlaps the word most: no stored segment spans two speakers.
 */
async function expectWordsFollowRttm(jobId: number) {
  const res = await fetch(`${svc.url}/api/speech/jobs/${jobId}/transcript.rttm`, { headers: { authorization: `Bearer ${jwt}` } });
  expect(res.status).toBe(200);
  const turns = parseRttm(await res.text());
  expect(new Set(turns.map((t) => t.speaker))).toEqual(new Set(['S1', 'S2']));
  type Row = { seq: number; text: string; speaker: string; words: Array<{ start: number; end: number; text: string }> | null };
  const rows = await svc.orm.em
    .fork()
    .getConnection()
    .execute<Row[]>(
      'select seq, text, speaker, words from speech_segments s join speech_jobs j on j.id = s.job_id and j.current_pass = s.pass where j.id = ? order by seq',
      [jobId],
    );
  expect(rows.length).toBeGreaterThan(0);
  expect(rows.every((r) => r.words && r.words.length > 0)).toBe(true);
  for (const r of rows) {
    expect(r.words!.map((w) => w.text).join(' ')).toBe(r.text);
    for (const w of r.words!) expect(rttmSpeakerAt(turns, w.start, w.end), `${w.text} in segment ${r.seq}`).toBe(r.speaker);
  }
}

beforeAll(async () => {
  db = await createTestDatabase();
  svc = await startCoordinator(loadConfig(testEnv(db, { SPEECH_MEDIA_DIR: path.join(dir, 'media'), WORKER_HEARTBEAT_INTERVAL_MS: '1000' })));
  const created = await new AccountService(svc.orm).createUser({ username: randomName('speaker'), permissions: ['speech.use'] });
  owner = created.user;
  const login = await fetch(`${svc.url}/api/account/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: owner.username, password: created.password }),
  });
  jwt = ((await login.json()) as { token: string }).token;
  recording = await makeTwoVoiceRecording(dir);
  const { secret } = await svc.workers.createWorker(randomName('diarizer'));
  const agent = startNode('worker/dist/bin.js', ['--coordinator', `127.0.0.1:${svc.grpcPort}`, '--work-dir', dir], { WORKER_SECRET: secret });
  procs.push(agent);
  await agent.waitFor(/connected to coordinator/);
});
afterAll(async () => {
  sockets.forEach((s) => s.close());
  await Promise.all(procs.map((p) => p.stop('SIGKILL')));
  await svc?.close();
  await db?.drop();
});

describe('speaker diarization with the real worker agent', () => {
  it('a two-voice recording ends completed with two speakers and segment labels that follow the turns', async () => {
    const job = await submit(recording.wavPath);
    const socket = io(svc.url, { transports: ['websocket'], auth: { token: jwt }, reconnection: false });
    sockets.push(socket);
    const live: Array<{
      state: string;
      speaker_count: number | null;
      speakers?: Array<{ seq: number; speaker: string }>;
      segments?: Array<{ seq: number; text: string; speaker: string | null }>;
    }> = [];
    socket.on('diarization', (d: (typeof live)[number]) => live.push(d));
    expect(await socket.timeout(5_000).emitWithAck('subscribe', { jobId: job.id })).toEqual({ ok: true });

    await expect.poll(async () => (await detail(job.id)).status, { timeout: 120_000, interval: 250 }).toBe('completed');
    const d = await detail(job.id);
    expect(d.diarization).toMatchObject({ requested: true, state: 'completed', engine: 'silero-mfcc', speaker_count: 2, error: null });
    const segments = (await api('GET', `/api/speech/jobs/${job.id}/segments`)).body.segments as Array<{
      seq: number;
      start: number;
      end: number;
      speaker: string;
    }>;
    expect(segments.length).toBeGreaterThanOrEqual(4);
    expect(segments.every((s) => s.speaker === 'S1' || s.speaker === 'S2')).toBe(true);
    // One consistent mapping from voices to speaker keys explains the labels of (nearly) every segment.
    const agree = (map: Record<number, string>) => segments.filter((s) => map[voiceAt(s.start, s.end)] === s.speaker).length;
    const best = Math.max(agree({ 0: 'S1', 1: 'S2' }), agree({ 0: 'S2', 1: 'S1' }));
    expect(best / segments.length, JSON.stringify({ segments, turns: recording.turns })).toBeGreaterThanOrEqual(0.8);
    expect(d.speaker_aware_transcript).toMatch(/^\[00:00:0\d\] Speaker [12]: /);
    // Browsers heard diarization start and end, with every segment's speaker.
    await expect.poll(() => live.map((x) => x.state)).toEqual(['running', 'completed']);
    expect(live[1]!.speakers?.length).toBe(segments.length);
    // ... and the labelled pass itself (split at speaker changes), as the API has it.
    const asApi = (list: Array<{ seq: number; text: string; speaker: string | null }>) => list.map((s) => [s.seq, s.text, s.speaker]);
    expect(asApi(live[1]!.segments ?? [])).toEqual(asApi(segments as never));
    // pocketsphinx's word times reached the coordinator, and no stored segment spans two speakers of the RTTM.
    await expectWordsFollowRttm(job.id);

    // A rerun: the same agent claims it as a diarize task; the transcript is not touched.
    const before = d;
    const rerun = await api('POST', `/api/speech/jobs/${job.id}/diarization`);
    expect(rerun.status, JSON.stringify(rerun.body)).toBe(200);
    await expect.poll(async () => (await detail(job.id)).diarization.state, { timeout: 60_000, interval: 250 }).toBe('completed');
    const after = await detail(job.id);
    expect(after).toMatchObject({ status: 'completed', transcript_text: before.transcript_text, segment_count: before.segment_count, engine: before.engine });
    expect(after.diarization).toMatchObject({ speaker_count: 2, rerun_pending: false });
    expect(after.runtime_log.map((e: { event: string }) => e.event)).toEqual(expect.arrayContaining(['diarization_requested', 'diarization_claimed']));
    // The rerun re-split the kept words with its own turns, and browsers got the new pass.
    await expectWordsFollowRttm(job.id);
    await expect.poll(() => live.map((x) => x.state)).toEqual(['running', 'completed', 'pending', 'running', 'completed']);
    const rerunSegments = (await api('GET', `/api/speech/jobs/${job.id}/segments`)).body.segments as Array<{
      seq: number;
      text: string;
      speaker: string | null;
    }>;
    expect(asApi(live.at(-1)!.segments ?? [])).toEqual(asApi(rerunSegments));
    // Transcription, diarization and a rerun by a real agent: on a loaded 2-core machine this takes
    // longer than the suite's 30 s default, and the polls above already bound each step.
  }, 240_000);
});
