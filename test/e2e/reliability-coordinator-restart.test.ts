import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import { openOrm, type Orm } from '../../coordinator/src/db/orm.js';
import { WorkerDirectory } from '../../coordinator/src/speech/workers/worker-directory.js';
import { createTestDatabase, randomName, testEnv, type TestDatabase } from '../support/harness.js';
import { multipartForm } from '../support/multipart.js';
import { startCoordinatorProcess } from '../support/outage.js';
import { freePort, startNode, type Proc } from '../support/processes.js';

/**
 * The coordinator is SIGKILLed while a real worker agent (a child process: ffmpeg + pocketsphinx)
 * streams the segments of a job, and started again on the same gRPC port, database and Redis. The
 * agent keeps its lease (heartbeats renew it on the new process), reopens its progress stream and
 * resends the attempt's segments, and completes: the job completes exactly once, on its first and
 * only attempt, with every segment stored once and in order and the transcript made of all of them.
 */
const MODEL = 'pocketsphinx-en-us';
const SENTENCES = ['hello world', 'i would like a cup of coffee', 'please call me tomorrow morning', 'good morning everyone'];

type Coordinator = Awaited<ReturnType<typeof startCoordinatorProcess>>;

const dir = mkdtempSync(path.join(tmpdir(), 'sonar-rel-restart-'));
let db: TestDatabase;
let orm: Orm;
let env: Record<string, string>;
let coordinator: Coordinator | null = null;
let agent: Proc | null = null;

const sql = <T>(q: string, params: unknown[] = []) => orm.em.getConnection().execute<T[]>(q, params);

/** espeak-ng sentences joined by a second of silence each, so pocketsphinx ends one segment per sentence. */
function speech(name: string, sentences: string[]): string {
  const silence = path.join(dir, 'silence.wav');
  execFileSync('sox', ['-n', '-r', '22050', '-c', '1', '-b', '16', silence, 'trim', '0', '1.0']);
  const parts = sentences.flatMap((sentence, i) => {
    const part = path.join(dir, `${name}-${i}.wav`);
    execFileSync('espeak-ng', ['-v', 'en-us', '-w', part, `${sentence}.`]);
    return [part, silence];
  });
  const file = path.join(dir, `${name}.wav`);
  execFileSync('sox', [...parts, file]);
  return file;
}

beforeAll(async () => {
  db = await createTestDatabase();
  orm = await openOrm({ databaseUrl: db.url, poolMax: 2 });
  // A fixed gRPC port: the restarted coordinator must be reachable where the agent already connects.
  env = testEnv(db, {
    GRPC_PORT: String(await freePort()),
    SPEECH_MEDIA_DIR: path.join(dir, 'media'),
    // Long enough that the lease outlives the restart (the agent's heartbeats renew it on the new process);
    // the sweep runs often, so an expiry during the test would show up as a second attempt.
    SPEECH_LEASE_TTL_SECONDS: '60',
    SPEECH_STALE_SWEEP_SECONDS: '1',
    WORKER_HEARTBEAT_INTERVAL_MS: '1000',
  });
});

afterAll(async () => {
  await agent?.stop('SIGKILL');
  await coordinator?.proc.stop('SIGKILL');
  await orm?.close(true);
  await db?.drop();
  await rm(dir, { recursive: true, force: true });
});

describe('coordinator SIGKILLed mid-stream and restarted', () => {
  it('the running job completes exactly once with every segment stored once and in order', async () => {
    coordinator = await startCoordinatorProcess(env);
    const grpcPort = coordinator.grpcPort;
    expect(grpcPort).toBe(Number(env.GRPC_PORT));

    const { user, password } = await new AccountService(orm).createUser({ username: randomName('rel'), permissions: ['speech.use'] });
    const { secret } = await new WorkerDirectory(orm, 45_000).createWorker(randomName('agent'));
    agent = startNode('worker/dist/bin.js', ['--coordinator', `127.0.0.1:${grpcPort}`, '--work-dir', dir], { WORKER_SECRET: secret });
    await agent.waitFor(/connected to coordinator/, 30_000);

    const login = await fetch(`${coordinator.url}/api/account/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: user.username, password }),
    });
    expect(login.status).toBe(200);
    const { token } = (await login.json()) as { token: string };

    // About 40 s of speech (16 sentences): pocketsphinx takes several seconds for it, one segment at a time.
    const wav = readFileSync(speech('long', Array.from({ length: 4 }, () => SENTENCES).flat()));
    // Without speaker labels: this test counts the segments the worker streamed, and labelling
    // splits a segment wherever its words change speaker (stored pieces, renumbered).
    const form = multipartForm([
      { name: 'model', value: MODEL },
      { name: 'disable_diarization', value: 'true' },
      { name: 'media_file', filename: 'long.wav', data: wav },
    ]);
    const submitted = await fetch(`${coordinator.url}/api/speech/jobs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': form.contentType },
      body: form.payload,
    });
    expect(submitted.status, await submitted.clone().text()).toBe(201);
    const jobId = ((await submitted.json()) as { job: { id: number } }).job.id;

    const stored = async () => Number((await sql<{ n: string }>('select count(*) as n from speech_segments where job_id = ?', [jobId]))[0]!.n);
    const jobRow = async () =>
      (
        await sql<{ status: string; attempt: number; segment_count: number; stage_detail: string | null; transcript_text: string | null }>(
          `select j.status, j.attempt, j.stage_detail, j.transcript_text,
                (select count(*)::int from speech_segments s where s.job_id = j.id and s.pass = j.current_pass) as segment_count
           from speech_jobs j where j.id = ?`,
          [jobId],
        )
      )[0]!;

    // Segments are flowing: some are stored, the job is still being transcribed.
    await expect.poll(stored, { timeout: 60_000, interval: 50 }).toBeGreaterThanOrEqual(2);
    coordinator.proc.child.kill('SIGKILL');
    await coordinator.proc.exited;
    const atKill = await stored();
    const during = await jobRow();
    expect(during.status).toBe('transcribing');
    expect(during.attempt).toBe(1);

    coordinator = await startCoordinatorProcess(env);
    expect(coordinator.grpcPort).toBe(grpcPort);

    await expect.poll(async () => (await jobRow()).status, { timeout: 90_000, interval: 250 }).toBe('completed');
    // The agent's own count of the segments it sent (its "job completed" log line).
    const doneLine = await agent.waitFor(/"msg":"job completed"/, 30_000);
    const sent = (JSON.parse(doneLine) as { job: number; attempt: number; segments: number }).segments;
    expect(JSON.parse(doneLine)).toMatchObject({ job: jobId, attempt: 1 });
    expect(sent).toBeGreaterThanOrEqual(SENTENCES.length * 2);
    // The kill really was mid-stream: segments were stored after it.
    expect(atKill).toBeLessThan(sent);

    const done = await jobRow();
    expect(done.attempt).toBe(1);
    // Stored equals reported, or the stage detail would say "n segments stored, worker reported m".
    expect(done.stage_detail).toBe(`${sent} segments`);
    expect(done.segment_count).toBe(sent);

    // Every segment once, in order: seq 0..n-1 without gaps or duplicates, in one pass.
    const segs = await sql<{ pass: number; seq: number; text: string; start_seconds: number }>(
      'select pass, seq, text, start_seconds from speech_segments where job_id = ? order by pass, seq',
      [jobId],
    );
    expect(segs.map((s) => s.seq)).toEqual([...Array(sent).keys()]);
    expect(new Set(segs.map((s) => s.pass))).toEqual(new Set([1]));
    for (let i = 1; i < segs.length; i++) expect(Number(segs[i]!.start_seconds)).toBeGreaterThan(Number(segs[i - 1]!.start_seconds));
    // The transcript is all of them, in order.
    expect(done.transcript_text).toBe(
      segs
        .map((s) => s.text.trim())
        .filter(Boolean)
        .join(' '),
    );
    const text = String(done.transcript_text).toLowerCase();
    for (const word of ['coffee', 'tomorrow', 'morning']) expect(text).toContain(word);

    // Completed exactly once: one "completed" event, one claim, no expiry or abandonment, one lease.
    const events = (await sql<{ event: string }>('select event from speech_job_events where job_id = ? order by id', [jobId])).map((e) => e.event);
    expect(events.filter((e) => e === 'completed')).toHaveLength(1);
    expect(events.filter((e) => e === 'claimed')).toHaveLength(1);
    expect(events.filter((e) => /^lease_|^released$|^failed$/.test(e))).toEqual([]);
    const leases = await sql<{ attempt: number; outcome: string | null; ended: boolean }>(
      'select attempt, outcome, ended_at is not null as ended from speech_leases where job_id = ? order by attempt',
      [jobId],
    );
    expect(leases).toEqual([{ attempt: 1, outcome: 'completed', ended: true }]);

    // The agent itself lived through it: one process, it reported the outage and carried on.
    expect(agent.child.exitCode).toBeNull();
    expect(agent.lines.filter((l) => /"msg":"job completed"/.test(l))).toHaveLength(1);
    expect(agent.lines.some((l) => /heartbeat failed/.test(l))).toBe(true);
    // Its session lives in Redis, not in the killed process: the agent keeps it (one Hello in all) and
    // the restarted coordinator counts it as connected.
    expect(agent.lines.filter((l) => /connected to coordinator/.test(l))).toHaveLength(1);
    expect(agent.lines.filter((l) => /forgot this session/.test(l))).toEqual([]);
    const url = coordinator.url;
    await expect
      .poll(async () => Number(/^speech_workers_connected (\d+)$/m.exec(await (await fetch(`${url}/metrics`)).text())?.[1]), { timeout: 10_000, interval: 250 })
      .toBe(1);
    expect(coordinator.alive).toBe(true);
  }, 180_000);
});
