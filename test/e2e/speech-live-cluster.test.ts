import { io, type Socket } from 'socket.io-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WORKER_CONTRACT_VERSION } from '@sonar/shared';
import { CoordinatorClient } from '../../worker/src/coordinator-client.js';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import { loadConfig } from '../../coordinator/src/config.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { createTestDatabase, randomName, testEnv, type TestDatabase } from '../support/harness.js';
import { registerModelWorker } from '../support/model-workers.js';

/**
 * Two coordinators on one database and one Redis: a worker streams to the first, a browser-like
 * client watches through the second, and receives every segment once, in order (Redis adapter).
 */
let db: TestDatabase;
let a: RunningCoordinator;
let b: RunningCoordinator;
let socket: Socket | null = null;
let client: CoordinatorClient | null = null;

beforeAll(async () => {
  db = await createTestDatabase();
  const env = testEnv(db);
  a = await startCoordinator(loadConfig(env));
  b = await startCoordinator(loadConfig({ ...env, DATABASE_MIGRATE_ON_START: 'false' }));
  // Jobs are only accepted for models a registered worker serves.
  await registerModelWorker(a.orm, 'models', ['small', 'large', 'turbo']);
});
afterAll(async () => {
  socket?.close();
  client?.close();
  await a?.close();
  await b?.close();
  await db?.drop();
});

describe('live segments across coordinators', () => {
  it('delivers segments published on one coordinator to a subscriber on another', async () => {
    const created = await new AccountService(a.orm).createUser({ username: randomName('watch'), permissions: ['speech.use'] });
    const job = await a.speech.jobs.create(created.user, { channel: 'web', source: { type: 'url', url: 'https://media.example.org/talk.mp3' } });
    const login = await fetch(`${b.url}/api/account/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: created.user.username, password: created.password }),
    });
    const { token } = (await login.json()) as { token: string };

    socket = io(b.url, { transports: ['websocket'], auth: { token }, reconnection: false });
    const received: number[] = [];
    const statuses: string[] = [];
    socket.on('segment', (s: { seq: number }) => received.push(s.seq));
    socket.on('status', (s: { status: string }) => statuses.push(s.status));
    expect(await socket.timeout(5_000).emitWithAck('subscribe', { jobId: job.id })).toEqual({ ok: true });

    const { secret } = await a.workers.createWorker('cluster-worker');
    client = new CoordinatorClient(`127.0.0.1:${a.grpcPort}`, secret);
    const hello = await client.hello({
      contract_version: WORKER_CONTRACT_VERSION,
      agent_version: 't',
      hostname: 'h',
      capabilities: { models: ['small'], engines: ['t'], diarization: true, can_fetch_urls: true, device: 'cpu' },
      local: false,
    });
    const claimed = await client.claim({ session_id: hello.session_id, wait_ms: 0 });
    const lease = claimed.job!.lease;
    const stream = client.progress(lease);
    for (let seq = 0; seq < 20; seq++) {
      stream.send({
        stage: 'transcribing',
        stage_detail: '',
        audio_position_seconds: seq + 1,
        segments: [{ seq, start: seq, end: seq + 1, text: `part ${seq}` }],
        duration_seconds: 20,
        engine: 't',
        engine_model: 'small',
      });
    }
    await stream.end();
    await client.complete({ lease, success: true, error: '', segment_count: 20, duration_seconds: 20, engine: 't', engine_model: 'small', cancelled: false });

    await expect.poll(() => received.length, { timeout: 5_000 }).toBe(20);
    expect(received).toEqual([...Array(20).keys()]);
    await expect.poll(() => statuses.at(-1), { timeout: 5_000 }).toBe('completed');
  });

  it('refuses a socket without credentials and a subscription to someone else’s job', async () => {
    const anon = io(b.url, { transports: ['websocket'], reconnection: false });
    const err = await new Promise<Error>((resolve) => anon.once('connect_error', resolve));
    expect(err.message).toBe('unauthenticated');
    anon.close();

    const owner = await new AccountService(a.orm).createUser({ username: randomName('own'), permissions: ['speech.use'] });
    const stranger = await new AccountService(a.orm).createUser({ username: randomName('str'), permissions: ['speech.use'] });
    const job = await a.speech.jobs.create(owner.user, { channel: 'web', source: { type: 'url', url: 'https://media.example.org/x.mp3' } });
    const res = await fetch(`${b.url}/api/account/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: stranger.user.username, password: stranger.password }),
    });
    const s = io(b.url, { transports: ['websocket'], auth: { token: ((await res.json()) as { token: string }).token }, reconnection: false });
    expect(await s.timeout(5_000).emitWithAck('subscribe', { jobId: job.id })).toEqual({ ok: false, reason: 'not_found' });
    s.close();
  });
});
