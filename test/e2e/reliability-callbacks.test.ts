import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { WORKER_CONTRACT_VERSION } from '@sonar/shared';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import { loadConfig } from '../../coordinator/src/config.js';
import { openOrm, type Orm } from '../../coordinator/src/db/orm.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { CALLBACK_QUEUE, deliveryJobId, verifyCallbackSignature, type CallbackEnvelope } from '../../coordinator/src/speech/notifications/callback-service.js';
import { WorkerDirectory } from '../../coordinator/src/speech/workers/worker-directory.js';
import { CoordinatorClient } from '../../worker/src/coordinator-client.js';
import { createTestDatabase, randomName, testEnv, type TestDatabase } from '../support/harness.js';
import { DedicatedRedis, startCoordinatorProcess } from '../support/outage.js';
import { freePort } from '../support/processes.js';
import { SimWorker, streamSegments } from '../support/sim-worker.js';

/**
 * Terminal callbacks survive the failures around them, and still arrive exactly once:
 * - the receiver is down (connection refused) for the first attempts and comes up while retries
 *   are pending: one request arrives, and the job records every failed try;
 * - the coordinator is SIGKILLed after the job completed but before its notification was
 *   dispatched: the restarted coordinator's outbox dispatches it, and one request arrives.
 */

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** An HTTP receiver on loopback that answers 200 and records every request. */
class Receiver {
  readonly received: Received[] = [];
  private server: Server | null = null;
  port = 0;

  /** Listens on `port` (0: any free one). */
  async listen(port = 0) {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        this.received.push({ path: req.url ?? '/', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
  }

  at(p: string) {
    return this.received.filter((r) => r.path === p);
  }

  async close() {
    const server = this.server;
    this.server = null;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

interface CallbackRow {
  callback_status: string | null;
  callback_http_status: number | null;
  callback_error: string | null;
  callback_attempts: number;
  callback_delivered_at: Date | null;
}

const callbackRow = async (orm: Orm, id: number) =>
  (
    await orm.em
      .getConnection()
      .execute<CallbackRow[]>(
        'select callback_status, callback_http_status, callback_error, callback_attempts, callback_delivered_at from speech_jobs where id = ?',
        [id],
      )
  )[0]!;

/** POST /api/speech/transcribe with a personal token, as an integrator would. */
async function submitApiJob(baseUrl: string, token: string, callbackUrl: string): Promise<number> {
  const res = await fetch(`${baseUrl}/api/speech/transcribe`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ callback_url: callbackUrl, source_url: 'https://media.example.org/board-meeting.mp3', model: 'small' }),
  });
  expect(res.status, await res.clone().text()).toBe(201);
  return ((await res.json()) as { job: { id: number } }).job.id;
}

function expectSignedCompleted(r: Received, secret: string, jobId: number, transcript: string) {
  expect(verifyCallbackSignature(secret, String(r.headers['x-sonar-timestamp']), r.body, r.headers['x-sonar-signature'] as string)).toBe(true);
  expect(r.headers['x-sonar-event']).toBe('speech.job.completed');
  const body = JSON.parse(r.body) as CallbackEnvelope;
  expect(body).toMatchObject({ ok: true, event: 'speech.job.completed', job: { job_id: jobId, status: 'completed', transcript_text: transcript } });
}

describe('callback receiver down (connection refused), then up', () => {
  let db: TestDatabase;
  let svc: RunningCoordinator;
  const receiver = new Receiver();

  beforeAll(async () => {
    db = await createTestDatabase();
    svc = await startCoordinator(
      loadConfig(
        testEnv(db, {
          PUBLIC_BASE_URL: 'https://speech.example.org',
          OUTBOUND_ALLOW_RANGES: '127.0.0.0/8',
          // Short backoff so the retries come quickly; enough attempts that they cannot run out while the receiver is down.
          SPEECH_CALLBACK_BACKOFF_MS: '100',
          SPEECH_CALLBACK_MAX_ATTEMPTS: '30',
        }),
      ),
    );
  });
  afterAll(async () => {
    await receiver.close();
    await svc?.close();
    await db?.drop();
  });

  it('delivers exactly once when the receiver comes up, after the refused tries', async () => {
    const accounts = new AccountService(svc.orm);
    const owner = (await accounts.createUser({ username: randomName('api'), permissions: ['speech.use', 'speech.api'] })).user;
    const token = await accounts.createPersonalToken(owner.id, { name: 'integration', scopes: ['speech.api'] });
    const worker = await SimWorker.start(svc, randomName('w'));
    try {
      // A loopback port where nothing listens yet: every attempt is refused.
      const port = await freePort();
      const hook = '/hooks/speech';
      const id = await submitApiJob(svc.url, token.token, `http://127.0.0.1:${port}${hook}`);
      await worker.run(id, { segments: ['Good morning', 'everyone.'] });

      // At least two refused attempts, and the delivery is still being retried.
      await expect.poll(async () => (await callbackRow(svc.orm, id)).callback_attempts, { timeout: 20_000, interval: 20 }).toBeGreaterThanOrEqual(2);
      const refused = await callbackRow(svc.orm, id);
      expect(refused.callback_status).toBe('retrying');
      expect(refused.callback_error).toMatch(/ECONNREFUSED/);
      expect(refused.callback_http_status).toBeNull();

      await receiver.listen(port);
      await expect.poll(async () => (await callbackRow(svc.orm, id)).callback_status, { timeout: 30_000, interval: 50 }).toBe('delivered');

      // Nothing more is coming: the BullMQ delivery finished, the outbox row is dispatched.
      const delivery = await svc.notifications.callbacks.queue.getJob(deliveryJobId(id, 1));
      expect(delivery).toBeTruthy();
      await expect.poll(() => delivery!.getState(), { timeout: 10_000 }).toBe('completed');
      const [note] = await svc.orm.em
        .getConnection()
        .execute<Array<{ dispatched: boolean }>>('select dispatched_at is not null as dispatched from speech_notifications where job_id = ?', [id]);
      expect(note).toEqual({ dispatched: true });
      expect(await svc.notifications.outbox.drain()).toBe(0);
      expect(await svc.notifications.callbacks.enqueue(id, 1, 'completed')).toBeNull();

      // Exactly one request arrived, signed, with the job's transcript.
      const got = receiver.at(hook);
      expect(got).toHaveLength(1);
      expectSignedCompleted(got[0]!, token.callbackSecret, id, 'Good morning everyone.');

      // callback_attempts counts every try: each refused one (BullMQ kept their errors) plus the delivery.
      const final = await callbackRow(svc.orm, id);
      const fresh = (await svc.notifications.callbacks.queue.getJob(deliveryJobId(id, 1)))!;
      expect(final).toMatchObject({ callback_status: 'delivered', callback_http_status: 200, callback_error: null });
      expect(final.callback_delivered_at).not.toBeNull();
      expect(final.callback_attempts).toBeGreaterThanOrEqual(3);
      expect(fresh.attemptsMade).toBe(final.callback_attempts);
      const traces = fresh.stacktrace ?? [];
      expect(traces).toHaveLength(final.callback_attempts - 1);
      for (const trace of traces) expect(trace).toMatch(/ECONNREFUSED/);
      const log = await svc.orm.em
        .getConnection()
        .execute<Array<{ event: string }>>(`select event from speech_job_events where job_id = ? and event like 'callback%'`, [id]);
      expect(log.map((e) => e.event)).toEqual(['callback_delivered']);
    } finally {
      worker.close();
    }
  });
});

describe('coordinator SIGKILLed after the job completed, before its notification was dispatched', () => {
  let db: TestDatabase;
  let redis: DedicatedRedis;
  let orm: Orm;
  let mediaDir: string;
  let env: Record<string, string>;
  let coordinator: Awaited<ReturnType<typeof startCoordinatorProcess>> | null = null;
  let client: CoordinatorClient | null = null;
  const receiver = new Receiver();

  beforeAll(async () => {
    redis = await DedicatedRedis.create();
    db = await createTestDatabase();
    orm = await openOrm({ databaseUrl: db.url, poolMax: 2 });
    mediaDir = await mkdtemp(path.join(os.tmpdir(), 'sonar-rel-callbacks-'));
    await receiver.listen();
    env = testEnv(db, {
      REDIS_URL: redis.url,
      GRPC_PORT: String(await freePort()),
      SPEECH_MEDIA_DIR: mediaDir,
      PUBLIC_BASE_URL: 'https://speech.example.org',
      OUTBOUND_ALLOW_RANGES: '127.0.0.0/8',
      SPEECH_CALLBACK_BACKOFF_MS: '100',
    });
  });
  afterAll(async () => {
    client?.close();
    await coordinator?.proc.stop('SIGKILL');
    await redis?.kill();
    await receiver.close();
    await orm?.close(true);
    await db?.drop();
    if (mediaDir) await rm(mediaDir, { recursive: true, force: true });
  });

  it('the restarted coordinator dispatches it from the outbox: exactly one callback', async () => {
    coordinator = await startCoordinatorProcess(env);
    const accounts = new AccountService(orm);
    const owner = (await accounts.createUser({ username: randomName('api'), permissions: ['speech.use', 'speech.api'] })).user;
    const token = await accounts.createPersonalToken(owner.id, { name: 'integration', scopes: ['speech.api'] });
    const { secret } = await new WorkerDirectory(orm, 45_000).createWorker(randomName('w'));
    client = new CoordinatorClient(`127.0.0.1:${coordinator.grpcPort}`, secret);
    const hello = await client.hello({
      contract_version: WORKER_CONTRACT_VERSION,
      agent_version: 'test',
      hostname: 'test',
      capabilities: { models: ['small'], engines: ['test'], diarization: true, can_fetch_urls: true, device: 'cpu' },
      local: false,
    });

    const hook = '/hooks/restart';
    const id = await submitApiJob(coordinator.url, token.token, `http://127.0.0.1:${receiver.port}${hook}`);
    const claimed = await client.claim({ session_id: hello.session_id, wait_ms: 5_000 });
    expect(claimed.has_job && claimed.job?.lease.job_id).toBe(id);
    const lease = claimed.job!.lease;
    await streamSegments(client, lease, ['Minutes of the', 'board meeting.']);

    // Redis goes away just before the completion: the terminal transition (PostgreSQL) commits with its
    // outbox row, but the dispatcher cannot move the row into the callback queue.
    await redis.kill();
    const done = await client.complete({
      lease,
      success: true,
      error: '',
      cancelled: false,
      segment_count: 2,
      duration_seconds: 4,
      engine: 'test',
      engine_model: 'small',
    });
    expect(done).toMatchObject({ duplicate: false, status: 'completed' });
    await coordinator.proc.waitFor(/speech notifications not dispatched yet; will retry/, 30_000);
    const notification = async () =>
      (
        await orm.em
          .getConnection()
          .execute<Array<{ status: string; dispatched: boolean }>>(
            'select status, dispatched_at is not null as dispatched from speech_notifications where job_id = ? and cycle = 1',
            [id],
          )
      )[0];
    expect(await notification()).toEqual({ status: 'completed', dispatched: false });

    // Killed with the notification still waiting in the outbox.
    coordinator.proc.child.kill('SIGKILL');
    await coordinator.proc.exited;
    expect(await notification()).toEqual({ status: 'completed', dispatched: false });
    expect((await callbackRow(orm, id)).callback_status).toBe('pending');
    expect(receiver.at(hook)).toHaveLength(0);

    // Redis back (empty), a new coordinator process on the same database: its outbox dispatches the row.
    await redis.start();
    coordinator = await startCoordinatorProcess(env);
    await expect.poll(() => receiver.at(hook).length, { timeout: 30_000, interval: 50 }).toBe(1);
    await expect.poll(async () => (await callbackRow(orm, id)).callback_status, { timeout: 10_000, interval: 50 }).toBe('delivered');
    expect(await notification()).toEqual({ status: 'completed', dispatched: true });

    // The one BullMQ delivery finished: nothing more will be sent.
    const connection = new Redis(redis.url, { maxRetriesPerRequest: null });
    const queue = new Queue(CALLBACK_QUEUE, { connection, prefix: `${env.REDIS_KEY_PREFIX}bull` });
    try {
      const delivery = await queue.getJob(deliveryJobId(id, 1));
      expect(delivery).toBeTruthy();
      await expect.poll(() => delivery!.getState(), { timeout: 10_000 }).toBe('completed');
      expect(await queue.getJobCounts('waiting', 'delayed', 'active', 'completed', 'failed')).toEqual({
        waiting: 0,
        delayed: 0,
        active: 0,
        completed: 1,
        failed: 0,
      });
    } finally {
      await queue.close();
      await connection.quit();
    }

    const got = receiver.at(hook);
    expect(got).toHaveLength(1);
    expectSignedCompleted(got[0]!, token.callbackSecret, id, 'Minutes of the board meeting.');
    expect(await callbackRow(orm, id)).toMatchObject({ callback_status: 'delivered', callback_http_status: 200, callback_attempts: 1, callback_error: null });
    const events = (
      await orm.em.getConnection().execute<Array<{ event: string }>>('select event from speech_job_events where job_id = ? order by id', [id])
    ).map((e) => e.event);
    expect(events.filter((e) => e === 'completed')).toHaveLength(1);
    expect(events.filter((e) => e.startsWith('callback_'))).toEqual(['callback_delivered']);
    expect(coordinator.alive).toBe(true);
  }, 120_000);
});
