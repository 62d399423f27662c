import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { WORKER_CONTRACT_VERSION } from '@sonar/shared';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import { openOrm } from '../../coordinator/src/db/orm.js';
import { WorkerDirectory } from '../../coordinator/src/speech/workers/worker-directory.js';
import { CoordinatorClient } from '../../worker/src/coordinator-client.js';
import { streamSegments } from '../support/sim-worker.js';
import { randomName, testEnv } from '../support/harness.js';
import { registerModelWorker } from '../support/model-workers.js';
import { DedicatedPostgres, postgresBinDir, startCoordinatorProcess } from '../support/outage.js';

/**
 * PostgreSQL goes away under a running coordinator (its own cluster, stopped and started again):
 * DB-backed routes answer 503 service_unavailable with Retry-After in each route family's error
 * shape (never 500), gRPC worker calls answer UNAVAILABLE, and once PostgreSQL is back everything
 * answers again without a restart; a job queued before the outage is then claimed and completed.
 */
const bin = postgresBinDir();

let pg: DedicatedPostgres;
let coordinator: Awaited<ReturnType<typeof startCoordinatorProcess>>;
let mediaDir: string;
let token: string;
let username: string;
let password: string;
let workerSecret: string;
let client: CoordinatorClient | null = null;

const api = (method: string, url: string, body?: unknown, auth = true) =>
  fetch(`${coordinator.url}${url}`, {
    method,
    headers: { ...(auth ? { authorization: `Bearer ${token}` } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

/** The DB-backed routes probed during and after the outage, one per route family. */
const probes = () => [
  { name: 'GET /api/speech/jobs', send: () => api('GET', '/api/speech/jobs'), shape: 'ok' as const },
  { name: 'GET /api/speech/status', send: () => api('GET', '/api/speech/status'), shape: 'ok' as const },
  { name: 'GET /irc/api/networks', send: () => api('GET', '/irc/api/networks', undefined, false), shape: 'success' as const },
  { name: 'POST /api/account/login', send: () => api('POST', '/api/account/login', { username, password }, false), shape: 'ok' as const },
];

describe.skipIf(!bin)('PostgreSQL outage', () => {
  beforeAll(async () => {
    pg = await DedicatedPostgres.create(bin!);
    const name = `sonar_outage_${randomName('pg')}`;
    const url = await pg.createDatabase(name);
    mediaDir = await mkdtemp(path.join(os.tmpdir(), 'sonar-outage-media-'));
    coordinator = await startCoordinatorProcess(
      testEnv(
        { name, url, drop: async () => undefined },
        {
          SPEECH_MEDIA_DIR: mediaDir,
          // Maintenance (the stale-lease sweep) runs during the outage too and must fail harmlessly.
          SPEECH_STALE_SWEEP_SECONDS: '1',
        },
      ),
    );

    const orm = await openOrm({ databaseUrl: url, poolMax: 1 });
    try {
      const created = await new AccountService(orm).createUser({ username: randomName('outage'), permissions: ['speech.use'] });
      username = created.user.username;
      password = created.password;
      workerSecret = (await new WorkerDirectory(orm, 45_000).createWorker(randomName('pgworker'))).secret;
      // Submissions need a registered worker serving the model.
      await registerModelWorker(orm, randomName('catalog'), ['small']);
    } finally {
      await orm.close(true);
    }
    const login = await api('POST', '/api/account/login', { username, password }, false);
    expect(login.status).toBe(200);
    token = ((await login.json()) as { token: string }).token;
  });

  afterAll(async () => {
    client?.close();
    await coordinator?.proc.stop();
    await pg?.destroy();
    if (mediaDir) await rm(mediaDir, { recursive: true, force: true });
  });

  it('answers 503 with Retry-After while PostgreSQL is down and recovers by itself', async () => {
    const submitted = await api('POST', '/api/speech/jobs', { source_url: 'https://media.example.org/outage.mp3' });
    expect(submitted.status).toBe(201);
    const jobId = ((await submitted.json()) as { job: { id: number } }).job.id;
    for (const p of probes()) expect((await p.send()).status, p.name).toBe(200);

    await pg.stop();

    // Every probe settles on 503 in its family's shape; no answer in between may be a 500.
    const seen: Array<{ name: string; status: number }> = [];
    for (const p of probes()) {
      await expect
        .poll(
          async () => {
            const res = await p.send();
            seen.push({ name: p.name, status: res.status });
            if (res.status !== 503) return { status: res.status };
            return { status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.json() };
          },
          { timeout: 15_000, interval: 200 },
        )
        .toEqual({
          status: 503,
          retryAfter: expect.stringMatching(/^[1-9]\d*$/),
          body: p.shape === 'ok' ? { ok: false, reason: 'service_unavailable', message: expect.any(String) } : { success: false, error: expect.any(String) },
        });
    }
    expect(seen.filter((s) => s.status >= 500 && s.status !== 503)).toEqual([]);

    // A worker's calls are refused as UNAVAILABLE (retryable), not INTERNAL.
    client = new CoordinatorClient(`127.0.0.1:${coordinator.grpcPort}`, workerSecret);
    await expect(
      client.hello({
        contract_version: WORKER_CONTRACT_VERSION,
        agent_version: 'test',
        hostname: 'test',
        capabilities: { models: ['small'], engines: ['test'], diarization: true, can_fetch_urls: true, device: 'cpu' },
        local: false,
      }),
    ).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
    expect(coordinator.alive).toBe(true);

    await pg.start();

    // Back without a restart of the coordinator.
    for (const p of probes()) {
      await expect.poll(async () => (await p.send()).status, { timeout: 20_000, interval: 200 }).toBe(200);
    }
    const job = await api('GET', `/api/speech/jobs/${jobId}`);
    expect(job.status).toBe(200);
    expect(((await job.json()) as { job: { status: string } }).job.status).toBe('queued');

    // The job queued before the outage is claimed and completed afterwards.
    const hello = await client.hello({
      contract_version: WORKER_CONTRACT_VERSION,
      agent_version: 'test',
      hostname: 'test',
      capabilities: { models: ['small'], engines: ['test'], diarization: true, can_fetch_urls: true, device: 'cpu' },
      local: false,
    });
    const claimed = await client.claim({ session_id: hello.session_id, wait_ms: 2_000 });
    expect(claimed.has_job && claimed.job?.lease.job_id).toBe(jobId);
    const lease = claimed.job!.lease;
    await streamSegments(client, lease, ['after the outage']);
    await client.complete({ lease, success: true, error: '', cancelled: false, segment_count: 1, duration_seconds: 2, engine: 'test', engine_model: 'small' });
    await expect
      .poll(async () => ((await (await api('GET', `/api/speech/jobs/${jobId}`)).json()) as { job: { status: string } }).job.status, { timeout: 10_000 })
      .toBe('completed');
    expect(coordinator.alive).toBe(true);
  });
});
