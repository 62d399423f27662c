import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedBucketKey } from '../../coordinator/src/http/rate-limits.js';
import { createTestDatabase, randomName, testEnv, type TestDatabase } from '../support/harness.js';
import { DedicatedRedis, startCoordinatorProcess } from '../support/outage.js';

/**
 * The sign-in budget holds while Redis is down: the coordinator counts in its own process instead
 * of letting every attempt through (the rate-limit plugin's `skipOnError`), says so in its log, and
 * counts in Redis again once Redis is back.
 */
const BUDGET = 3;

let redis: DedicatedRedis;
let db: TestDatabase;
let env: Record<string, string>;
let coordinator: Awaited<ReturnType<typeof startCoordinatorProcess>>;

beforeAll(async () => {
  redis = await DedicatedRedis.create();
  db = await createTestDatabase();
  env = testEnv(db, { REDIS_URL: redis.url, LOGIN_RATE_LIMIT_PER_MINUTE: String(BUDGET) });
  coordinator = await startCoordinatorProcess(env);
});

afterAll(async () => {
  await coordinator?.proc.stop();
  await redis?.kill();
  await db?.drop();
});

const attempt = (username: string) =>
  fetch(`${coordinator.url}/api/account/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username, password: 'not-the-password' }),
  }).then(async (res) => ({ status: res.status, retryAfter: res.headers.get('retry-after') }));

describe('sign-in rate limit while Redis is down', () => {
  it('still refuses attempts over the budget, logs the fallback, and counts in Redis again afterwards', async () => {
    await redis.kill();

    const statuses: number[] = [];
    for (let i = 0; i < BUDGET + 2; i++) statuses.push((await attempt(randomName('guess'))).status);
    expect(statuses).toEqual([...Array<number>(BUDGET).fill(401), 429, 429]);
    await coordinator.proc.waitFor(/rate limits are counted in this process/, 5_000);

    await redis.start(); // empty
    // Once the connection is ready again the budget is counted in Redis (a fresh window there).
    const probe = new Redis(redis.url);
    try {
      const key = sharedBucketKey(env.REDIS_KEY_PREFIX!, 'login', '127.0.0.1');
      await expect
        .poll(
          async () => {
            await attempt(randomName('again'));
            return Number(await probe.get(key));
          },
          { timeout: 20_000, interval: 200 },
        )
        .toBeGreaterThan(0);
      await coordinator.proc.waitFor(/rate limits are counted in Redis again/, 5_000);
    } finally {
      probe.disconnect();
    }
    expect(coordinator.alive).toBe(true);
  });
});
