import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { WORKER_CONTRACT_VERSION } from '@sonar/shared';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { io, type Socket } from 'socket.io-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import { loadConfig } from '../../coordinator/src/config.js';
import { MAINTENANCE_QUEUE } from '../../coordinator/src/queue/maintenance.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { CoordinatorClient } from '../../worker/src/coordinator-client.js';
import { streamSegments } from '../support/sim-worker.js';
import { createTestDatabase, randomName, testEnv, type TestDatabase } from '../support/harness.js';
import { registerModelWorker } from '../support/model-workers.js';
import { DedicatedRedis, startCoordinatorProcess } from '../support/outage.js';

/**
 * Redis is killed under two coordinators while a job event is in flight and comes back empty
 * (no persistence). Coordinator A is a child process (a crash would end it), B runs in this
 * process (an unhandled rejection would fail the run). Neither crashes, worker calls are refused
 * as UNAVAILABLE while Redis is down, the maintenance job schedulers exist again in the new Redis,
 * and live fan-out works again: a segment a worker streams to B reaches a socket.io client on A.
 */
const SCHEDULERS = ['irc-common-terms', 'purge-expired-sessions', 'speech-media-release', 'speech-stale-sweep', 'speech-upload-expiry'];
const capabilities = { models: ['small'], engines: ['test'], diarization: true, can_fetch_urls: true, device: 'cpu' };

let redis: DedicatedRedis;
let db: TestDatabase;
let mediaDir: string;
let env: Record<string, string>;
let a: Awaited<ReturnType<typeof startCoordinatorProcess>>;
let b: RunningCoordinator;
let socket: Socket | null = null;
let client: CoordinatorClient | null = null;

/** Names of the maintenance schedulers in the dedicated Redis (a fresh connection each time). */
async function schedulerNames(): Promise<string[]> {
  const connection = new Redis(redis.url, { maxRetriesPerRequest: null });
  connection.on('error', () => undefined);
  const queue = new Queue(MAINTENANCE_QUEUE, { connection, prefix: `${env.REDIS_KEY_PREFIX}bull` });
  queue.on('error', () => undefined);
  try {
    return (await queue.getJobSchedulers()).map((s) => s.key).sort();
  } finally {
    await queue.close();
    await connection.quit().catch(() => undefined);
  }
}

beforeAll(async () => {
  redis = await DedicatedRedis.create();
  db = await createTestDatabase();
  mediaDir = await mkdtemp(path.join(os.tmpdir(), 'sonar-outage-media-'));
  env = testEnv(db, { REDIS_URL: redis.url, SPEECH_MEDIA_DIR: mediaDir });
  a = await startCoordinatorProcess(env);
  b = await startCoordinator(loadConfig({ ...env, DATABASE_MIGRATE_ON_START: 'false' }));
});

afterAll(async () => {
  socket?.close();
  client?.close();
  await a?.proc.stop();
  await b?.close();
  await redis?.kill();
  await db?.drop();
  if (mediaDir) await rm(mediaDir, { recursive: true, force: true });
});

describe('Redis restarted empty', () => {
  it('keeps the coordinators up, restores the maintenance schedulers and live fan-out', async () => {
    expect(await schedulerNames()).toEqual(SCHEDULERS);

    const created = await new AccountService(b.orm).createUser({ username: randomName('redis'), permissions: ['speech.use'] });
    await registerModelWorker(b.orm, randomName('catalog'), ['small']); // submissions need a worker serving the model
    const login = await fetch(`${a.url}/api/account/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: created.user.username, password: created.password }),
    });
    const { token } = (await login.json()) as { token: string };
    const api = (method: string, url: string, body?: unknown) =>
      fetch(`${a.url}${url}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    const submitted = await api('POST', '/api/speech/jobs', { source_url: 'https://media.example.org/redis.mp3' });
    expect(submitted.status).toBe(201);
    const jobId = ((await submitted.json()) as { job: { id: number } }).job.id;

    socket = io(a.url, { transports: ['websocket'], auth: { token }, reconnection: false });
    const segments: Array<{ job_id: number; seq: number; text: string }> = [];
    const statuses: Array<{ job_id: number; status: string }> = [];
    socket.on('segment', (s: { job_id: number; seq: number; text: string }) => segments.push(s));
    socket.on('status', (s: { job_id: number; status: string }) => statuses.push(s));
    expect(await socket.timeout(5_000).emitWithAck('subscribe', { jobId })).toEqual({ ok: true });

    await redis.kill();

    // A status event in flight during the outage: restarting a queued job publishes it. The HTTP
    // call succeeds (PostgreSQL is fine), local sockets still get it, and the failed Redis publish
    // is logged instead of crashing the process.
    const restarted = await api('POST', `/api/speech/jobs/${jobId}/restart`);
    expect(restarted.status).toBe(200);
    await expect.poll(() => statuses.some((s) => s.job_id === jobId && s.status === 'queued'), { timeout: 5_000 }).toBe(true);
    await a.proc.waitFor(/Redis publish failed/, 15_000);

    // The readiness probe names Redis; the liveness probe still answers.
    await expect
      .poll(async () => (await (await fetch(`${a.url}/api/platform/ready`)).json()) as unknown, { timeout: 15_000, interval: 200 })
      .toMatchObject({ ok: false, reason: 'service_unavailable', message: 'Not ready: Redis does not answer.' });
    expect((await fetch(`${a.url}/api/platform`)).status).toBe(200);

    // A route that needs Redis (where a finished upload's job is remembered) answers 503, never 500.
    await expect
      .poll(
        async () => {
          const res = await api('GET', '/api/speech/uploads/no-such-upload/job');
          return { status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.json() };
        },
        { timeout: 15_000, interval: 200 },
      )
      .toEqual({
        status: 503,
        retryAfter: expect.stringMatching(/^[1-9]\d*$/),
        body: { ok: false, reason: 'service_unavailable', message: expect.any(String) },
      });

    // Worker calls that need Redis (session presence) are refused as retryable.
    const { secret } = await b.workers.createWorker(randomName('rw'));
    client = new CoordinatorClient(`127.0.0.1:${b.grpcPort}`, secret);
    await expect(
      client.hello({ contract_version: WORKER_CONTRACT_VERSION, agent_version: 'test', hostname: 'test', capabilities, local: false }),
    ).rejects.toMatchObject({
      code: grpc.status.UNAVAILABLE,
    });
    expect(a.alive).toBe(true);

    await redis.start(); // empty: no persistence

    // The schedulers registered at start-up are back (re-upserted when the connection is ready again).
    await expect.poll(() => schedulerNames(), { timeout: 20_000, interval: 250 }).toEqual(SCHEDULERS);

    // Both coordinators' socket.io subscribers are back on the new Redis before anything is published.
    const probe = new Redis(redis.url);
    try {
      // One pattern subscription per coordinator's adapter (PUBSUB NUMPAT counts distinct patterns).
      const patternSubscribers = async () =>
        String(await probe.call('client', 'list'))
          .split('\n')
          .filter((l) => / psub=1 /.test(l)).length;
      await expect.poll(patternSubscribers, { timeout: 20_000, interval: 100 }).toBe(2);
    } finally {
      probe.disconnect();
    }

    // A worker on B streams a segment of the job queued before the outage; the client on A gets it.
    const hello = await client.hello({ contract_version: WORKER_CONTRACT_VERSION, agent_version: 'test', hostname: 'test', capabilities, local: false });
    const claimed = await client.claim({ session_id: hello.session_id, wait_ms: 2_000 });
    expect(claimed.has_job && claimed.job?.lease.job_id).toBe(jobId);
    const lease = claimed.job!.lease;
    await streamSegments(client, lease, ['after redis came back']);
    await expect.poll(() => segments.map((s) => [s.job_id, s.seq, s.text]), { timeout: 10_000 }).toEqual([[jobId, 0, 'after redis came back']]);
    await client.complete({ lease, success: true, error: '', cancelled: false, segment_count: 1, duration_seconds: 2, engine: 'test', engine_model: 'small' });
    await expect.poll(() => statuses.at(-1)?.status, { timeout: 10_000 }).toBe('completed');

    expect((await api('GET', '/api/speech/uploads/no-such-upload/job')).status).toBe(404);
    expect(a.alive).toBe(true);
    expect(a.proc.lines.filter((l) => /Unhandled|uncaught|MaxRetriesPerRequestError: /i.test(l) && !l.startsWith('{'))).toEqual([]);
  });
});
