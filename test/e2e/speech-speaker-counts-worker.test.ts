import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import type { AuthUser } from '../../coordinator/src/accounts/types.js';
import { loadConfig } from '../../coordinator/src/config.js';
import type { StatedSpeakers } from '../../coordinator/src/speech/jobs/entities.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { createTestDatabase, randomName, testEnv, type TestDatabase } from '../support/harness.js';
import { makeLibriSpeechConversation } from '../support/librispeech-conversation.js';
import { startNode, type Proc } from '../support/processes.js';
import { parseRttm } from '../support/rttm.js';

/**
 * Stated speaker counts honoured by the real worker agent (a child process over gRPC on loopback,
 * pocketsphinx and the default diarizer): a conversation of three real LibriSpeech voices (two
 * rounds of ~3.5 s turns, ~23 s) submitted with `num_speakers: 3` ends with 3 speakers and with
 * `max_speakers: 2` with 2; a rerun of the second with `num_speakers: 3` replaces its speakers
 * with 3 (the claim carried the count, contract 5). And with no count stated, a one-speaker minute
 * read as eight utterances at levels 11 dB apart (reader 1688) comes back as ONE speaker (2 before
 * the BIC stage's allowance for one voice's variation). 1688 is one of the bench's tuning readers:
 * this is a regression test, not a quality figure; the unseen reader 2414 still splits (3 here),
 * the bench's reporting half and docs/diarization.md say where and why.
 */
const MODEL = 'pocketsphinx-en-us';
let db: TestDatabase;
let svc: RunningCoordinator;
let owner: AuthUser;
let jwt: string;
const dir = mkdtempSync(path.join(tmpdir(), 'sonar-speaker-counts-worker-'));
const procs: Proc[] = [];
let conversation: string;
let monologue: string;

async function api(method: string, url: string, body?: unknown) {
  const res = await fetch(`${svc.url}${url}`, {
    method,
    headers: { authorization: `Bearer ${jwt}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}
const detail = async (id: number) => (await api('GET', `/api/speech/jobs/${id}`)).body.job as Record<string, any>;

async function submit(speakers: StatedSpeakers | null, file = conversation) {
  const bytes = readFileSync(file);
  const temp = path.join(dir, `${randomName('upload')}.part`);
  writeFileSync(temp, bytes);
  return svc.speech.jobs.create(owner, {
    channel: 'web',
    model: MODEL,
    speakers,
    source: {
      type: 'upload',
      tempPath: temp,
      filename: path.basename(file),
      sizeBytes: bytes.length,
      sha256: createHash('sha256').update(bytes).digest('hex'),
    },
  });
}

/** Distinct speakers of the diarizer's own turns (the RTTM download). */
async function rttmSpeakers(id: number): Promise<number> {
  const res = await fetch(`${svc.url}/api/speech/jobs/${id}/transcript.rttm`, { headers: { authorization: `Bearer ${jwt}` } });
  expect(res.status).toBe(200);
  return new Set(parseRttm(await res.text()).map((t) => t.speaker)).size;
}

/** Distinct speaker keys on the stored segments of a job's current pass. */
async function segmentSpeakers(id: number): Promise<Set<string>> {
  const segments = (await api('GET', `/api/speech/jobs/${id}/segments`)).body.segments as Array<{ speaker: string | null }>;
  return new Set(segments.map((s) => s.speaker).filter((s): s is string => s !== null));
}

beforeAll(async () => {
  db = await createTestDatabase();
  svc = await startCoordinator(loadConfig(testEnv(db, { SPEECH_MEDIA_DIR: path.join(dir, 'media'), WORKER_HEARTBEAT_INTERVAL_MS: '1000' })));
  const created = await new AccountService(svc.orm).createUser({ username: randomName('counts'), permissions: ['speech.use'] });
  owner = created.user;
  const login = await fetch(`${svc.url}/api/account/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: owner.username, password: created.password }),
  });
  jwt = ((await login.json()) as { token: string }).token;
  // Three voices (M, F, M), two rounds of turns: short, so the two transcriptions and the rerun stay cheap.
  conversation = (await makeLibriSpeechConversation(dir, { speakers: ['1688', '1998', '2414'], rounds: 2, turnSeconds: 3.5 })).wavPath;
  monologue = (
    await makeLibriSpeechConversation(dir, { speakers: ['1688'], rounds: 8, turnSeconds: 8, name: 'one-reader', levelsDb: [0, -6, 2, -9, -3, 1, -7, -2] })
  ).wavPath;
  const { secret } = await svc.workers.createWorker(randomName('counter'));
  const agent = startNode('worker/dist/bin.js', ['--coordinator', `127.0.0.1:${svc.grpcPort}`, '--work-dir', dir], { WORKER_SECRET: secret });
  procs.push(agent);
  await agent.waitFor(/connected to coordinator/);
});
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop('SIGKILL')));
  await svc?.close();
  await db?.drop();
});

describe('stated speaker counts with the real worker agent', () => {
  it('a one-speaker minute of eight utterances at different levels, no count stated → 1 speaker', async () => {
    const job = await submit(null, monologue);
    await expect.poll(async () => (await detail(job.id)).diarization.state, { timeout: 200_000, interval: 500 }).toMatch(/^(completed|failed|unavailable)$/);
    const one = await detail(job.id);
    expect(one.diarization, JSON.stringify(one.diarization)).toMatchObject({ state: 'completed', speaker_count: 1, requested_speakers: null });
    expect(await rttmSpeakers(job.id)).toBe(1);
    expect(await segmentSpeakers(job.id)).toEqual(new Set(['S1']));
  }, 300_000);

  it('num_speakers: 3 finds 3 speakers, max_speakers: 2 finds 2, and a rerun with num_speakers: 3 replaces them with 3', async () => {
    const exact = await submit({ num_speakers: 3 });
    const bounded = await submit({ max_speakers: 2 });
    for (const id of [exact.id, bounded.id]) {
      await expect.poll(async () => (await detail(id)).diarization.state, { timeout: 150_000, interval: 500 }).toMatch(/^(completed|failed|unavailable)$/);
    }
    const three = await detail(exact.id);
    expect(three.diarization, JSON.stringify(three.diarization)).toMatchObject({
      state: 'completed',
      engine: 'silero-mfcc',
      speaker_count: 3,
      requested_speakers: { num_speakers: 3 },
    });
    expect(await rttmSpeakers(exact.id)).toBe(3);
    expect(await segmentSpeakers(exact.id)).toEqual(new Set(['S1', 'S2', 'S3']));
    const two = await detail(bounded.id);
    expect(two.diarization, JSON.stringify(two.diarization)).toMatchObject({ state: 'completed', speaker_count: 2, requested_speakers: { max_speakers: 2 } });
    expect(await rttmSpeakers(bounded.id)).toBe(2);
    expect((await segmentSpeakers(bounded.id)).size).toBe(2);

    // The rerun's count replaces the stated one and its speakers replace the two.
    const rerun = await api('POST', `/api/speech/jobs/${bounded.id}/diarization`, { num_speakers: 3 });
    expect(rerun.status, JSON.stringify(rerun.body)).toBe(200);
    expect(rerun.body.job.diarization).toMatchObject({ state: 'pending', requested_speakers: { num_speakers: 3 } });
    await expect.poll(async () => (await detail(bounded.id)).diarization.state, { timeout: 90_000, interval: 500 }).toMatch(/^(completed|failed|unavailable)$/);
    const after = await detail(bounded.id);
    expect(after.diarization, JSON.stringify(after.diarization)).toMatchObject({ state: 'completed', speaker_count: 3, rerun_pending: false });
    expect(after).toMatchObject({ status: 'completed', transcript_text: two.transcript_text });
    expect(await rttmSpeakers(bounded.id)).toBe(3);
    expect(await segmentSpeakers(bounded.id)).toEqual(new Set(['S1', 'S2', 'S3']));
  }, 300_000);
});
