import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import { openOrm } from '../../coordinator/src/db/orm.js';
import { randomName, testEnv } from '../support/harness.js';
import { DedicatedPostgres, postgresBinDir, startCoordinatorProcess } from '../support/outage.js';

/**
 * PostgreSQL frozen (SIGSTOP on every server process: connections stay open, nothing answers) under
 * a running coordinator: DB-backed routes answer 503 with Retry-After within the wait bound
 * (DATABASE_WAIT_TIMEOUT_MS, here 2 s) instead of hanging for the whole stall, more requests at
 * once than the pool has connections included; after SIGCONT they answer 200 again without a
 * restart.
 */
const bin = postgresBinDir();
const WAIT_MS = 2_000;
const POOL = 3;

let pg: DedicatedPostgres;
let coordinator: Awaited<ReturnType<typeof startCoordinatorProcess>>;
let token: string;
let frozen = false;

/** GET /api/speech/jobs with the user's JWT, given up (status 0) after `limitMs`; with its duration. */
async function listJobs(limitMs = 30_000) {
  const started = Date.now();
  try {
    const res = await fetch(`${coordinator.url}/api/speech/jobs`, {
      headers: { authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(limitMs),
    });
    const body = (await res.json()) as { reason?: string };
    return { status: res.status, retryAfter: res.headers.get('retry-after'), reason: body.reason ?? null, ms: Date.now() - started };
  } catch {
    return { status: 0, retryAfter: null, reason: 'no answer', ms: Date.now() - started };
  }
}

describe.skipIf(!bin)('PostgreSQL frozen (SIGSTOP)', () => {
  beforeAll(async () => {
    pg = await DedicatedPostgres.create(bin!);
    const name = `sonar_frozen_${randomName('pg')}`;
    const url = await pg.createDatabase(name);
    coordinator = await startCoordinatorProcess(
      testEnv({ name, url, drop: async () => undefined }, { DATABASE_WAIT_TIMEOUT_MS: String(WAIT_MS), DATABASE_POOL_MAX: String(POOL) }),
    );
    const orm = await openOrm({ databaseUrl: url, poolMax: 1 });
    try {
      const created = await new AccountService(orm).createUser({ username: randomName('frozen'), permissions: ['speech.use'] });
      const login = await fetch(`${coordinator.url}/api/account/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username: created.user.username, password: created.password }),
      });
      expect(login.status).toBe(200);
      token = ((await login.json()) as { token: string }).token;
    } finally {
      await orm.close(true);
    }
  });

  afterAll(async () => {
    if (frozen) pg.signalAll('SIGCONT');
    await coordinator?.proc.stop();
    await pg?.destroy();
  });

  it('answers 503 with Retry-After within the wait bound, then recovers by itself', async () => {
    // Every pool connection open and idle before the freeze, so requests meet both kinds of wait:
    // a statement on an open connection, and a connection the pool cannot get.
    const warm = await Promise.all(Array.from({ length: POOL }, () => listJobs()));
    expect(warm.map((r) => r.status)).toEqual(Array<number>(POOL).fill(200));

    pg.signalAll('SIGSTOP');
    frozen = true;
    const during = await Promise.all(Array.from({ length: POOL * 2 }, () => listJobs(20_000)));
    for (const r of during) {
      expect(r).toMatchObject({ status: 503, retryAfter: expect.stringMatching(/^[1-9]\d*$/), reason: 'service_unavailable' });
      // The wait bound plus the client's one-second grace, with room for a loaded machine.
      expect(r.ms).toBeLessThan(WAIT_MS * 3 + 1_000);
    }
    // A later request is refused within the bound too (a connection freed by a timeout is not reused stuck).
    const again = await listJobs(20_000);
    expect(again.status).toBe(503);
    expect(again.ms).toBeLessThan(WAIT_MS * 3 + 1_000);
    // The liveness probe still answers; the readiness probe says what is down, within the bound.
    const get = (path: string) => fetch(`${coordinator.url}${path}`, { signal: AbortSignal.timeout(20_000) });
    expect((await get('/api/platform')).status).toBe(200);
    const started = Date.now();
    const notReady = await get('/api/platform/ready');
    expect(notReady.status).toBe(503);
    expect(await notReady.json()).toMatchObject({ ok: false, reason: 'service_unavailable', message: 'Not ready: PostgreSQL does not answer.' });
    expect(Date.now() - started).toBeLessThan(WAIT_MS * 3 + 1_000);

    pg.signalAll('SIGCONT');
    frozen = false;
    await expect.poll(async () => (await listJobs()).status, { timeout: 20_000, interval: 200 }).toBe(200);
    expect(await (await get('/api/platform/ready')).json()).toEqual({ ok: true, postgres: 'ok', redis: 'ok' });
    expect(coordinator.alive).toBe(true);
  });
});
