import type {} from '@fastify/jwt';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { browserLogin, createJwtUser, createTestApp, extractCsrf, randomName, type TestApp, type TestUser } from '../support/harness.js';
import { registerModelWorker } from '../support/model-workers.js';

/**
 * `POST /api/speech/run-now` (signed-in API): the queue manager's helper that
 * queues the oldest failed jobs again on request and always wakes the workers.
 */

let t: TestApp;
let alice: TestUser; // speech.use
let manager: TestUser; // speech.use + speech.manage
let root: TestUser; // administrator

const mkUser = (permissions: string[], isAdmin = false) => createJwtUser(t, permissions, { isAdmin, prefix: 'run' });

async function sql<T>(query: string, params: unknown[] = []): Promise<T[]> {
  return t.orm.em.getConnection().execute<T[]>(query, params);
}

/** A failed job submitted `minutesAgo` minutes ago. */
async function failedJob(owner: TestUser, minutesAgo: number, extra = '') {
  const res = await t.app.inject({
    method: 'POST',
    url: '/api/speech/jobs',
    headers: owner.auth,
    payload: { source_url: `https://media.example.org/${minutesAgo}.mp3` },
  });
  expect(res.statusCode, res.body).toBe(201);
  const id = res.json().job.id as number;
  await sql(
    `update speech_jobs set status = 'failed', attempt = 3, failure_error = 'engine crashed', stage_label = 'Failed', finished_at = now(),
       created_at = now() - (? || ' minutes')::interval ${extra} where id = ?`,
    [String(minutesAgo), id],
  );
  return id;
}

async function row(id: number) {
  const rows = await sql<{ status: string; attempt: number; failure_error: string | null; finished_at: Date | null }>(
    'select status, attempt, failure_error, finished_at from speech_jobs where id = ?',
    [id],
  );
  return rows[0]!;
}

async function queuedCount() {
  return Number((await sql<{ n: string }>(`select count(*) as n from speech_jobs where status = 'queued'`))[0]!.n);
}

function runNow(user: TestUser | Record<string, string>, payload?: unknown) {
  const headers = ('auth' in user ? user.auth : user) as Record<string, string>;
  return t.app.inject({ method: 'POST', url: '/api/speech/run-now', headers, ...(payload === undefined ? {} : { payload: payload as string }) });
}

beforeAll(async () => {
  t = await createTestApp();
  // Jobs are only accepted for models a registered worker serves.
  await registerModelWorker(t.orm, 'models', ['small', 'large', 'turbo']);
  alice = await mkUser(['speech.use']);
  manager = await mkUser(['speech.use', 'speech.manage']);
  root = await mkUser([], true);
});

afterAll(async () => {
  await t?.close();
});

describe('POST /api/speech/run-now', () => {
  it('401 without credentials or with a personal token; 403 without speech.manage', async () => {
    expect((await runNow({}, { reset_failed: true })).statusCode).toBe(401);
    const { token } = await t.accounts.createPersonalToken(manager.id, { name: 'api', scopes: ['speech.api'] });
    expect((await runNow({ authorization: `Bearer ${token}` }, {})).statusCode).toBe(401);
    const failed = await failedJob(alice, 500);
    const res = await runNow(alice, { reset_failed: true, limit: 5 });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toMatchObject({ ok: false, reason: 'forbidden' });
    expect((await row(failed)).status).toBe('failed');
    await sql('delete from speech_jobs where id = ?', [failed]);
  });

  it('queues the oldest `limit` failed jobs again, logs the restart and wakes the workers', async () => {
    const oldest = await failedJob(alice, 300);
    const older = await failedJob(manager, 200);
    const newest = await failedJob(alice, 100);
    const released = await failedJob(alice, 400); // an upload whose media is gone cannot run again
    await sql(`update speech_jobs set source_type = 'upload', source_url = null, source_filename = 'x.wav', media_path = null where id = ?`, [released]);
    const queuedBefore = await queuedCount();

    const notify = vi.spyOn(t.app.deps.speech.work, 'notify');
    const res = await runNow(manager, { limit: 2, reset_failed: true });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual(['message', 'ok', 'queued', 'requeued', 'workers_fresh']);
    expect(body).toMatchObject({ ok: true, requeued: 2, queued: queuedBefore + 2, workers_fresh: 0 });
    expect(body.message).toEqual(expect.any(String));
    expect(notify).toHaveBeenCalledTimes(1); // claim long-polls (here and on other coordinators) wake up
    notify.mockRestore();

    // Attempts only grow (the next claim is attempt 4); the retry budget is fresh on top of them.
    for (const id of [oldest, older]) {
      expect(await row(id)).toEqual({ status: 'queued', attempt: 3, failure_error: null, finished_at: null });
      const log = (await t.app.inject({ method: 'GET', url: `/api/speech/jobs/${id}`, headers: manager.auth })).json().job.runtime_log;
      expect(log.at(-1)).toMatchObject({ event: 'restarted', message: expect.stringContaining(manager.name) });
    }
    expect((await row(newest)).status).toBe('failed');
    expect((await row(released)).status).toBe('failed');

    // Default limit 1: the next oldest.
    const next = await runNow(manager, { reset_failed: true });
    expect(next.json()).toMatchObject({ requeued: 1, queued: queuedBefore + 3 });
    expect((await row(newest)).status).toBe('queued');
    expect((await row(released)).status).toBe('failed');
  });

  it('without reset_failed only wakes the workers and reports fresh workers', async () => {
    const failed = await failedJob(alice, 50);
    const { id } = await t.app.deps.workers.createWorker(randomName('w'));
    const stale = await t.app.deps.workers.createWorker(randomName('w'));
    await sql('update speech_workers set last_seen_at = now() where id = ?', [id]);
    await sql(`update speech_workers set last_seen_at = now() - interval '1 hour' where id = ?`, [stale.id]);

    const notify = vi.spyOn(t.app.deps.speech.work, 'notify');
    for (const payload of [undefined, {}, { reset_failed: false, limit: 50 }]) {
      const res = await runNow(root, payload);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toMatchObject({ ok: true, requeued: 0, queued: await queuedCount(), workers_fresh: 1 });
    }
    expect(notify).toHaveBeenCalledTimes(3);
    notify.mockRestore();
    expect((await row(failed)).status).toBe('failed');
  });

  it('validates limit (1 to 100) and reset_failed (422)', async () => {
    const failed = await failedJob(alice, 40);
    for (const payload of [{ limit: 0 }, { limit: 101 }, { limit: 1.5 }, { limit: 'x' }, { reset_failed: 'maybe' }]) {
      const res = await runNow(manager, { reset_failed: true, ...payload });
      expect(res.statusCode, JSON.stringify(payload)).toBe(422);
      expect(res.json()).toMatchObject({ ok: false, reason: 'validation_failed' });
    }
    expect((await row(failed)).status).toBe('failed');
    expect((await runNow(manager, { limit: 100, reset_failed: true })).json().requeued).toBeGreaterThanOrEqual(1);
    expect((await row(failed)).status).toBe('queued');
  });

  it('a browser session needs the CSRF token', async () => {
    const { jar } = await browserLogin(t.app, manager.name, manager.password);
    const cookie = jar.header();
    const refused = await runNow({ cookie }, {});
    expect(refused.statusCode).toBe(403);
    expect(refused.json().reason).toBe('csrf_invalid');
    const csrf = extractCsrf((await t.app.inject({ method: 'GET', url: '/account', headers: { cookie } })).body);
    expect((await runNow({ cookie, 'x-csrf-token': csrf }, {})).statusCode).toBe(200);
  });
});
