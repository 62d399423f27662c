import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedBucketKey } from '../../coordinator/src/http/rate-limits.js';
import { createTestApp, randomName, type TestApp } from '../support/harness.js';

/**
 * Read routes' rate-limit counters are kept by each coordinator and sent to Redis in one pipeline
 * every RATE_LIMIT_SYNC_MS (250 ms) instead of a Redis round trip per request; the sign-in budget
 * (and every other write budget) is still counted in Redis on each request.
 */
let t: TestApp;
const BUDGET = 5;

beforeAll(async () => {
  t = await createTestApp({ env: { IRC_API_RATE_LIMIT_MAX: String(BUDGET), LOGIN_RATE_LIMIT_PER_MINUTE: String(BUDGET) } });
});
afterAll(async () => {
  await t?.close();
});

const networks = (ip: string) => t.app.inject({ method: 'GET', url: '/irc/api/networks', remoteAddress: ip });
const login = (ip: string) =>
  t.app.inject({ method: 'POST', url: '/api/account/login', remoteAddress: ip, payload: { username: randomName('nobody'), password: 'not-the-password' } });

describe('synced read budgets', () => {
  it('one coordinator counts exactly: the request over the budget is 429 at once, another client is not affected', async () => {
    const ip = '198.51.100.31';
    const statuses: number[] = [];
    for (let i = 0; i <= BUDGET; i++) statuses.push((await networks(ip)).statusCode);
    expect(statuses).toEqual([...Array<number>(BUDGET).fill(200), 429]);
    expect((await networks('198.51.100.32')).statusCode).toBe(200);
  });

  it('the counts reach Redis (one sync later), where every coordinator reads them', async () => {
    const ip = '198.51.100.33';
    const key = sharedBucketKey(t.config.REDIS_KEY_PREFIX, 'irc', ip);
    for (let i = 0; i < 3; i++) expect((await networks(ip)).statusCode).toBe(200);
    await expect.poll(async () => Number(await t.redis.get(key)), { timeout: 10_000, interval: 50 }).toBe(3);
    expect(await t.redis.pttl(key)).toBeGreaterThan(0);
  });

  it('requests another coordinator counted in Redis use up this coordinator’s budget after the next sync', async () => {
    const ip = '198.51.100.34';
    const key = sharedBucketKey(t.config.REDIS_KEY_PREFIX, 'irc', ip);
    expect((await networks(ip)).statusCode).toBe(200);
    await expect.poll(async () => Number(await t.redis.get(key)), { timeout: 10_000, interval: 50 }).toBe(1);
    // Another coordinator answered three more requests of this client in the same window.
    await t.redis.incrby(key, 3);
    // Each request here is counted too: the first one synced after the others' requests answers 429.
    await expect.poll(async () => (await networks(ip)).statusCode, { timeout: 10_000, interval: 100 }).toBe(429);
    expect(Number(await t.redis.get(key))).toBeGreaterThan(BUDGET - 1);
  });
});

describe('the sign-in budget stays exact', () => {
  it('each attempt is in Redis when its answer arrives', async () => {
    const ip = '198.51.100.35';
    const key = sharedBucketKey(t.config.REDIS_KEY_PREFIX, 'login', ip);
    for (let i = 1; i <= BUDGET; i++) {
      expect((await login(ip)).statusCode).toBe(401);
      expect(Number(await t.redis.get(key))).toBe(i);
    }
    expect((await login(ip)).statusCode).toBe(429);
  });
});
