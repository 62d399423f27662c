import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import { loadConfig } from '../../coordinator/src/config.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { deliveryJobId } from '../../coordinator/src/speech/notifications/callback-service.js';
import { createTestDatabase, randomName, testEnv, type TestDatabase } from '../support/harness.js';
import { DedicatedRedis } from '../support/outage.js';
import { freePort } from '../support/processes.js';
import { SimWorker } from '../support/sim-worker.js';

/**
 * A callback waiting to retry when Redis loses its data (killed, restarted without persistence):
 * its BullMQ delivery is gone, but PostgreSQL still says the callback is owed, so the coordinator
 * queues it again once Redis is back, and the receiver gets exactly one request.
 */
let db: TestDatabase;
let redis: DedicatedRedis;
let svc: RunningCoordinator;
let receiver: Server | null = null;
const deliveryIds: Array<[string, string]> = [];
const received: string[] = [];

beforeAll(async () => {
  redis = await DedicatedRedis.create();
  db = await createTestDatabase();
  svc = await startCoordinator(
    loadConfig(
      testEnv(db, {
        REDIS_URL: redis.url,
        PUBLIC_BASE_URL: 'https://speech.example.org',
        OUTBOUND_ALLOW_RANGES: '127.0.0.0/8',
        // The retry after the refused first attempt is far off: only a re-queued delivery can arrive in time.
        SPEECH_CALLBACK_BACKOFF_MS: '3600000',
      }),
    ),
  );
});
afterAll(async () => {
  await svc?.close();
  await redis?.kill();
  await new Promise<void>((resolve) => (receiver ? receiver.close(() => resolve()) : resolve()));
  await db?.drop();
});

const callbackStatus = async (id: number) =>
  (await svc.orm.em.getConnection().execute<Array<{ callback_status: string }>>('select callback_status from speech_jobs where id = ?', [id]))[0]!
    .callback_status;

describe('Redis restarted empty while a callback waits to retry', () => {
  it('queues the owed callback again from PostgreSQL and delivers it once', async () => {
    const accounts = new AccountService(svc.orm);
    const owner = (await accounts.createUser({ username: randomName('api'), permissions: ['speech.use', 'speech.api'] })).user;
    const token = await accounts.createPersonalToken(owner.id, { name: 'integration', scopes: ['speech.api'] });
    const worker = await SimWorker.start(svc, randomName('w')); // submissions need a worker serving the model
    const port = await freePort(); // nothing listens yet: the first attempt is refused
    const res = await fetch(`${svc.url}/api/speech/transcribe`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ callback_url: `http://127.0.0.1:${port}/hook`, source_url: 'https://media.example.org/talk.mp3', model: 'small' }),
    });
    expect(res.status).toBe(201);
    const id = ((await res.json()) as { job: { id: number } }).job.id;
    try {
      await worker.run(id, { segments: ['Hello', 'there.'] });
    } finally {
      worker.close();
    }
    await expect.poll(() => callbackStatus(id), { timeout: 20_000, interval: 50 }).toBe('retrying');
    const first = await svc.notifications.callbacks.queue.getJob(deliveryJobId(id, 1));
    expect(first).toBeTruthy();
    const firstDeliveryId = (first!.data as { deliveryId: string }).deliveryId;

    // The receiver comes up; Redis loses everything, the delayed retry included.
    receiver = createServer((req, reply) => {
      req.resume();
      req.on('end', () => {
        received.push(req.url ?? '');
        deliveryIds.push([String(req.headers['x-sonar-delivery']), String(req.headers['idempotency-key'])]);
        reply.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((resolve) => receiver!.listen(port, '127.0.0.1', () => resolve()));
    await redis.kill();
    await redis.start();

    await expect.poll(() => callbackStatus(id), { timeout: 20_000, interval: 100 }).toBe('delivered');
    expect(received).toEqual(['/hook']);
    // The re-queued delivery carries the id the first attempt had (docs/speech.md: the same on every retry).
    expect(deliveryIds).toEqual([[firstDeliveryId, firstDeliveryId]]);
    // Owed no more: another sweep queues nothing, and nothing else arrives.
    expect(await svc.notifications.recovery.sweep()).toBe(0);
    const delivery = await svc.notifications.callbacks.queue.getJob(deliveryJobId(id, 1));
    await expect.poll(() => delivery?.getState(), { timeout: 10_000 }).toBe('completed');
    expect(received).toEqual(['/hook']);
  });
});
