import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import { accessJwtPayload } from '../../coordinator/src/accounts/auth-plugin.js';
import type { AuthUser } from '../../coordinator/src/accounts/types.js';
import { loadConfig } from '../../coordinator/src/config.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { createTestDatabase, randomName, testEnv, type TestDatabase } from '../support/harness.js';
import { SimWorker } from '../support/sim-worker.js';

/**
 * The auxiliary TXT copy of a completed transcript (the specification's "TXT artifact" beside the
 * database transcript), with a real coordinator and a simulated worker over gRPC: written at
 * completion with the bytes of the transcript.txt download; when it cannot be written the job
 * still completes and reports degraded storage, and the next write (a speaker rename) clears it; a
 * correction writes it again;
 * deleting the job removes it.
 */
let db: TestDatabase;
let svc: RunningCoordinator;
let sim: SimWorker;
let owner: AuthUser;
let jwt = '';
const media = mkdtempSync(path.join(tmpdir(), 'sonar-transcript-file-'));

beforeAll(async () => {
  db = await createTestDatabase();
  svc = await startCoordinator(loadConfig(testEnv(db, { SPEECH_LEASE_TTL_SECONDS: '600', SPEECH_MEDIA_DIR: media })));
  const accounts = new AccountService(svc.orm);
  owner = (await accounts.createUser({ username: randomName('txtcopy'), permissions: ['speech.use'] })).user;
  jwt = svc.app.jwt.sign(await accessJwtPayload(accounts, owner.id));
  sim = await SimWorker.start(svc, 'sim-transcript-file');
}, 60_000);

afterAll(async () => {
  sim?.close();
  await svc?.close();
  await db?.drop();
});

const call = (method: 'GET' | 'PUT' | 'PATCH' | 'DELETE', url: string, payload?: Record<string, unknown>) =>
  svc.app.inject({ method, url, headers: { authorization: `Bearer ${jwt}` }, ...(payload === undefined ? {} : { payload }) });
const fileState = async (id: number) =>
  (await call('GET', `/api/speech/jobs/${id}`)).json<{
    job: { status: string; transcript_file: { state: string; written_at: string | null; error: string | null } };
  }>().job;
const copyOf = (id: number) => path.join(media, 'transcripts', `${id}.txt`);

async function completedJob(): Promise<number> {
  const job = await svc.speech.jobs.create(owner, { channel: 'web', source: { type: 'url', url: 'https://media.example.org/talk.mp3' } });
  expect((await fileState(job.id)).transcript_file).toEqual({ state: 'none', written_at: null, error: null });
  await sim.run(job.id, { segments: ['Good morning, everyone.', 'Thank you for coming.'], speakers: [0, 1] });
  return job.id;
}

describe('the TXT copy of a completed transcript', () => {
  it('is degraded storage, not a failed job, when it cannot be written; a later write clears it; the job’s deletion removes it', async () => {
    // A file where the transcripts folder belongs: creating the folder fails (also as root).
    writeFileSync(path.join(media, 'transcripts'), 'not a folder');
    const first = await completedJob();
    const degraded = await fileState(first);
    expect(degraded.status).toBe('completed');
    expect(degraded.transcript_file).toMatchObject({ state: 'degraded', written_at: null, error: expect.stringMatching(/^(EEXIST|ENOTDIR): /) });
    // The database transcript is whole: its download answers as always.
    const download = await call('GET', `/api/speech/jobs/${first}/transcript.txt`);
    expect(download.statusCode).toBe(200);
    expect(download.body).toContain('Thank you for coming.');

    // The folder can be made again: the next job's copy is written with the download's bytes.
    rmSync(path.join(media, 'transcripts'));
    const second = await completedJob();
    expect((await fileState(second)).transcript_file).toMatchObject({ state: 'written', written_at: expect.any(String), error: null });
    expect(readFileSync(copyOf(second), 'utf8')).toBe((await call('GET', `/api/speech/jobs/${second}/transcript.txt`)).body);

    // A speaker rename writes the first job's copy (its names are in it) and clears the degraded state.
    expect((await call('PUT', `/api/speech/jobs/${first}/speakers`, { speakers: { S1: 'Ada', S2: 'Grace' } })).statusCode).toBe(200);
    expect((await fileState(first)).transcript_file).toMatchObject({ state: 'written', error: null });
    const renamed = (await call('GET', `/api/speech/jobs/${first}/transcript.txt`)).body;
    expect(renamed).toContain('Ada');
    expect(readFileSync(copyOf(first), 'utf8')).toBe(renamed);
    // So does a correction of the text (the corrected pass is what every output reads).
    expect((await call('PATCH', `/api/speech/jobs/${first}/segments/0`, { text: 'Good evening, everyone.' })).statusCode).toBe(200);
    const corrected = (await call('GET', `/api/speech/jobs/${first}/transcript.txt`)).body;
    expect(corrected).toContain('Good evening, everyone.');
    expect(readFileSync(copyOf(first), 'utf8')).toBe(corrected);

    expect((await call('DELETE', `/api/speech/jobs/${second}`)).statusCode).toBe(200);
    expect(existsSync(copyOf(second))).toBe(false);
    expect(existsSync(copyOf(first))).toBe(true);
  });
});
