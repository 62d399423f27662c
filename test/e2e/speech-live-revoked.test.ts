import { io, type Socket } from 'socket.io-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import { loadConfig } from '../../coordinator/src/config.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { browserLogin, createTestDatabase, extractCsrf, randomName, testEnv, type TestDatabase } from '../support/harness.js';
import { registerModelWorker } from '../support/model-workers.js';

/**
 * Open socket.io subscriptions end when their user loses access: disabled, password changed
 * (token version moved) or speech.use revoked, done as the CLI does it (straight in PostgreSQL,
 * no coordinator involved). Two coordinators: each drops its own sockets. A socket of a user
 * who kept access stays connected and keeps receiving events.
 */
let db: TestDatabase;
let a: RunningCoordinator;
let b: RunningCoordinator;
const sockets: Socket[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  const env = testEnv(db, { LIVE_ACCESS_RECHECK_SECONDS: '0.2' });
  a = await startCoordinator(loadConfig(env));
  b = await startCoordinator(loadConfig({ ...env, DATABASE_MIGRATE_ON_START: 'false' }));
  await registerModelWorker(a.orm, 'models', ['small']);
});
afterAll(async () => {
  for (const s of sockets) s.close();
  await a?.close();
  await b?.close();
  await db?.drop();
});

interface Watcher {
  username: string;
  socket: Socket;
  jobId: number;
  statuses: string[];
  disconnects: string[];
}

/** A user with a job, signed in on `via`, watching that job over a socket. */
async function watcher(accounts: AccountService, via: RunningCoordinator, prefix: string): Promise<Watcher> {
  const created = await accounts.createUser({ username: randomName(prefix), permissions: ['speech.use'] });
  const job = await a.speech.jobs.create(created.user, { channel: 'web', source: { type: 'url', url: 'https://media.example.org/talk.mp3' } });
  const login = await fetch(`${via.url}/api/account/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: created.user.username, password: created.password }),
  });
  const { token } = (await login.json()) as { token: string };
  const socket = io(via.url, { transports: ['websocket'], auth: { token }, reconnection: false });
  sockets.push(socket);
  const w: Watcher = { username: created.user.username, socket, jobId: job.id, statuses: [], disconnects: [] };
  socket.on('status', (s: { status: string }) => w.statuses.push(s.status));
  socket.on('disconnect', (reason) => w.disconnects.push(reason));
  expect(await socket.timeout(5_000).emitWithAck('subscribe', { jobId: job.id })).toEqual({ ok: true });
  return w;
}

const status = (text: string) => ({ status: text, status_label: text, stage_label: null, stage_detail: null, audio_position_seconds: 0, attempt: 1 });

describe('live sockets of users who lost access', () => {
  it('are disconnected on every coordinator and receive nothing more', async () => {
    const accounts = new AccountService(a.orm);
    const disabled = await watcher(accounts, a, 'off');
    const repassworded = await watcher(accounts, b, 'pw');
    const unpermitted = await watcher(accounts, b, 'perm');
    const kept = await watcher(accounts, a, 'kept');
    const all = [disabled, repassworded, unpermitted, kept];

    // Before: every socket gets its job's events.
    for (const w of all) a.speech.live.status(w.jobId, status('before'));
    await expect.poll(() => all.map((w) => w.statuses), { timeout: 5_000 }).toEqual(all.map(() => ['before']));

    await accounts.setDisabled(disabled.username, true);
    await accounts.setPassword(repassworded.username, 'a-new-password-123');
    await accounts.revokePermissions(unpermitted.username, ['speech.use']);

    const revoked = [disabled, repassworded, unpermitted];
    await expect.poll(() => revoked.map((w) => w.disconnects), { timeout: 10_000 }).toEqual(revoked.map(() => ['io server disconnect']));

    // After: events of their jobs reach nobody of them; the kept user's socket still gets its own.
    for (const w of all) b.speech.live.status(w.jobId, status('after'));
    await expect.poll(() => kept.statuses, { timeout: 5_000 }).toEqual(['before', 'after']);
    for (const w of revoked) expect(w.statuses).toEqual(['before']);
    expect(kept.socket.connected).toBe(true);
    expect(kept.disconnects).toEqual([]);
  });
});

describe('live sockets of a session that signed out', () => {
  it('are disconnected at once on every coordinator; another session of the same user stays', async () => {
    const accounts = new AccountService(a.orm);
    const created = await accounts.createUser({ username: randomName('out'), permissions: ['speech.use'] });
    const job = await a.speech.jobs.create(created.user, { channel: 'web', source: { type: 'url', url: 'https://media.example.org/talk.mp3' } });
    // Two sessions of one user, signed in on coordinator b; their sockets on coordinator a.
    const leaving = await browserLogin(b.app, created.user.username, created.password);
    const staying = await browserLogin(b.app, created.user.username, created.password);
    const open = async (cookie: string) => {
      const socket = io(a.url, { transports: ['websocket'], extraHeaders: { cookie }, reconnection: false });
      sockets.push(socket);
      const disconnects: string[] = [];
      socket.on('disconnect', (reason) => disconnects.push(reason));
      expect(await socket.timeout(5_000).emitWithAck('subscribe', { jobId: job.id })).toEqual({ ok: true });
      return { socket, disconnects };
    };
    const gone = await open(leaving.jar.header());
    const kept = await open(staying.jar.header());

    const page = await b.app.inject({ method: 'GET', url: '/account', headers: { cookie: leaving.jar.header() } });
    const out = await b.app.inject({
      method: 'POST',
      url: '/logout',
      headers: { cookie: leaving.jar.header(), 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ _csrf: extractCsrf(page.body) }).toString(),
    });
    expect(out.statusCode).toBe(303);
    // Not left to the periodic access check (LIVE_ACCESS_RECHECK_SECONDS): the user kept access.
    await expect.poll(() => gone.disconnects, { timeout: 5_000 }).toEqual(['io server disconnect']);
    expect(kept.socket.connected).toBe(true);
    expect(kept.disconnects).toEqual([]);
  });
});
