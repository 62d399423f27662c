import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import { loadConfig } from '../../coordinator/src/config.js';
import { startCoordinator } from '../../coordinator/src/service.js';
import {
  deliveryJobId,
  fullJitterBackoff,
  signCallback,
  verifyCallbackSignature,
  type CallbackEnvelope,
} from '../../coordinator/src/speech/notifications/callback-service.js';
import { createTestDatabase, randomName, testEnv } from '../support/harness.js';
import { SimWorker, waitFor } from '../support/sim-worker.js';

/**
 * Terminal callbacks against a real coordinator (PostgreSQL, Redis/BullMQ, gRPC) and a real HTTP
 * receiver on loopback: signed envelopes, retries with backoff, refusal by the outbound policy,
 * exhaustion, one delivery per (job, cycle).
 */

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  answered: number;
}

type Script = (n: number) => { status: number; location?: string; delayMs?: number };

/** HTTP receiver: each path has a script of answers (status per request number); records everything. */
class Receiver {
  readonly received: Received[] = [];
  private readonly scripts = new Map<string, Script>();
  private server!: Server;
  port = 0;

  async start() {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const path = req.url ?? '/';
        const n = this.received.filter((r) => r.path === path).length + 1;
        const answer = (this.scripts.get(path) ?? ((): ReturnType<Script> => ({ status: 200 })))(n);
        this.received.push({ path, headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), answered: answer.status });
        setTimeout(() => {
          res.writeHead(answer.status, answer.location ? { location: answer.location } : {});
          res.end('ok');
        }, answer.delayMs ?? 0);
      });
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  /** A fresh path with its answer script; returns the callback URL. */
  endpoint(script: Script = () => ({ status: 200 })): string {
    const path = `/cb/${randomName('p')}`;
    this.scripts.set(path, script);
    return `http://127.0.0.1:${this.port}${path}`;
  }

  at(url: string) {
    const path = new URL(url).pathname;
    return this.received.filter((r) => r.path === path);
  }

  close() {
    return new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

interface CallbackRow {
  callback_status: string | null;
  callback_http_status: number | null;
  callback_last_attempt_at: Date | null;
  callback_delivered_at: Date | null;
  callback_error: string | null;
  callback_attempts: number;
  callback_cycle: number;
  share_token: string | null;
}

/** One coordinator with its own database, an owner, a speech.api token and a simulated worker. */
async function setup(env: Record<string, string>, models?: string[]) {
  const db = await createTestDatabase();
  const svc = await startCoordinator(loadConfig(testEnv(db, { PUBLIC_BASE_URL: 'https://speech.example.org', ...env })));
  const accounts = new AccountService(svc.orm);
  const owner = (await accounts.createUser({ username: randomName('api'), permissions: ['speech.use', 'speech.api'] })).user;
  const token = await accounts.createPersonalToken(owner.id, { name: 'provider_speech_api', scopes: ['speech.api'] });
  const worker = await SimWorker.start(svc, randomName('w'), models);
  const sql = <T>(q: string, params: unknown[] = []) => svc.orm.em.getConnection().execute<T[]>(q, params);

  /** An API-queue job submitted by the token with `callbackUrl` (what the token route does). */
  async function apiJob(callbackUrl: string, channel: 'api' | 'web' = 'api') {
    const job = await svc.speech.jobs.create(owner, { channel, source: { type: 'url', url: 'https://media.example.org/talk.mp3' }, label: 'Board meeting' });
    await sql(`update speech_jobs set callback_url = ?, api_token_id = ?, callback_status = 'pending' where id = ?`, [callbackUrl, token.record.id, job.id]);
    return job.id;
  }
  const row = async (id: number) =>
    (
      await sql<CallbackRow>(
        `select callback_status, callback_http_status, callback_last_attempt_at, callback_delivered_at, callback_error,
              callback_attempts, callback_cycle, share_token from speech_jobs where id = ?`,
        [id],
      )
    )[0]!;
  /** The outbox row of (job, cycle) was dispatched and its BullMQ delivery (if any) finished: nothing more will be sent. */
  const finished = async (id: number, cycle = 1) => {
    // A job with nobody to notify has no row (it is written with the terminal state, or never).
    await expect
      .poll(
        async () =>
          (
            await sql<{ dispatched: boolean }>('select dispatched_at is not null as dispatched from speech_notifications where job_id = ? and cycle = ?', [
              id,
              cycle,
            ])
          )[0]?.dispatched ?? 'no row',
        { timeout: 20_000 },
      )
      .not.toBe(false);
    const job = await svc.notifications.callbacks.queue.getJob(deliveryJobId(id, cycle));
    if (job) await expect.poll(() => job.getState(), { timeout: 20_000 }).toMatch(/^(completed|failed)$/);
    return job ?? null;
  };
  const settled = (id: number) =>
    waitFor(
      async () => {
        const r = await row(id);
        return r.callback_status === 'delivered' || r.callback_status === 'failed' ? r : null;
      },
      20_000,
      `callback of job ${id} to settle`,
    );
  return {
    db,
    svc,
    owner,
    token,
    worker,
    sql,
    apiJob,
    row,
    settled,
    finished,
    async close() {
      worker.close();
      await svc.close();
      await db.drop();
    },
  };
}

const receiver = new Receiver();
beforeAll(() => receiver.start());
afterAll(() => receiver.close());

function expectSigned(r: Received, secret: string) {
  const ts = String(r.headers['x-sonar-timestamp']);
  expect(ts).toMatch(/^\d+$/);
  expect(Math.abs(Number(ts) - Date.now() / 1000)).toBeLessThan(60);
  expect(verifyCallbackSignature(secret, ts, r.body, r.headers['x-sonar-signature'] as string)).toBe(true);
  expect(r.headers['content-type']).toBe('application/json');
  expect(r.headers['user-agent']).toMatch(/^sonar-callbacks\/\d+\.\d+\.\d+/);
  expect(r.headers['x-sonar-delivery']).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
  expect(r.headers['idempotency-key']).toBe(r.headers['x-sonar-delivery']);
}

describe('delivery with retries (OUTBOUND_ALLOW_RANGES=127.0.0.0/8)', () => {
  let ctx: Awaited<ReturnType<typeof setup>>;
  beforeAll(async () => {
    ctx = await setup({ OUTBOUND_ALLOW_RANGES: '127.0.0.0/8', SPEECH_CALLBACK_BACKOFF_MS: '200', SPEECH_CALLBACK_MAX_ATTEMPTS: '3' });
  });
  afterAll(() => ctx?.close());

  it('retries 503 twice, delivers on the third attempt, signed, with one delivery id and the {ok, event, job} envelope', async () => {
    const url = receiver.endpoint((n) => ({ status: n <= 2 ? 503 : 200 }));
    const id = await ctx.apiJob(url);
    await ctx.worker.run(id, { segments: ['Good morning', 'everyone.'] });
    const final = await ctx.settled(id);
    await ctx.finished(id); // nothing more may arrive
    const got = receiver.at(url);
    expect(got).toHaveLength(3);
    expect(got.map((r) => r.answered)).toEqual([503, 503, 200]);
    expect(got.filter((r) => r.answered >= 200 && r.answered < 300)).toHaveLength(1);
    expect(new Set(got.map((r) => r.headers['x-sonar-delivery'])).size).toBe(1);
    for (const r of got) {
      expectSigned(r, ctx.token.callbackSecret);
      expect(r.headers['x-sonar-event']).toBe('speech.job.completed');
    }

    const body = JSON.parse(got[2]!.body) as CallbackEnvelope;
    expect(final.share_token).toBeTruthy();
    const shareUrl = `https://speech.example.org/shared/speech/transcript/${final.share_token}`;
    expect(body).toEqual({
      ok: true,
      event: 'speech.job.completed',
      job: {
        job_id: id,
        status: 'completed',
        status_label: 'Completed',
        queue_channel: 'api',
        queue_channel_label: 'API queue',
        source: 'Board meeting',
        model: 'small',
        language: null,
        job_url: `https://speech.example.org/speech/jobs/${id}`,
        share_url: shareUrl,
        transcript_text: 'Good morning everyone.',
        segment_count: 2,
        analysis_text: null,
        translations: [],
        share: { url: shareUrl },
        speaker_aware_transcript: null,
      },
    });

    expect(final.callback_status).toBe('delivered');
    expect(final.callback_http_status).toBe(200);
    expect(final.callback_attempts).toBe(3);
    expect(final.callback_delivered_at).not.toBeNull();
    expect(final.callback_last_attempt_at).not.toBeNull();
    expect(final.callback_error).toBeNull();

    const log = await ctx.sql<{ event: string; message: string }>('select event, message from speech_job_events where job_id = ? order by id', [id]);
    expect(log.at(-1)).toEqual({ event: 'callback_delivered', message: 'Callback delivered (HTTP 200).' });
    // Another terminal event of the same cycle sends nothing: the outbox has one row per cycle, and the queue refuses a second.
    expect(await ctx.svc.notifications.callbacks.enqueue(id, 1, 'completed')).toBeNull();
    expect(await ctx.svc.notifications.outbox.drain()).toBe(0);
    expect(receiver.at(url)).toHaveLength(3);
  });

  it('a failed job sends speech.job.failed with failure_error and no transcript or share', async () => {
    const url = receiver.endpoint();
    const id = await ctx.apiJob(url);
    await ctx.worker.run(id, { success: false, error: 'decoder exploded', segments: ['partial words'] });
    const final = await ctx.settled(id);
    expect(final.callback_status).toBe('delivered');
    const [r] = receiver.at(url);
    expectSigned(r!, ctx.token.callbackSecret);
    expect(r!.headers['x-sonar-event']).toBe('speech.job.failed');
    const body = JSON.parse(r!.body) as CallbackEnvelope;
    expect(body.ok).toBe(false);
    expect(body.event).toBe('speech.job.failed');
    expect(body.job).toMatchObject({
      job_id: id,
      status: 'failed',
      status_label: 'Failed',
      failure_error: 'decoder exploded',
      share: null,
      share_url: null,
      transcript_text: null,
      segment_count: null,
    });
    expect(body.job.job_url).toBe(`https://speech.example.org/speech/jobs/${id}`);
  });

  it('exhausted retries end failed with the last HTTP status', async () => {
    const url = receiver.endpoint(() => ({ status: 500 }));
    const id = await ctx.apiJob(url);
    await ctx.worker.run(id, { segments: ['x'] });
    const final = await ctx.settled(id);
    await ctx.finished(id);
    expect(receiver.at(url)).toHaveLength(3);
    expect(final.callback_status).toBe('failed');
    expect(final.callback_http_status).toBe(500);
    expect(final.callback_attempts).toBe(3);
    expect(final.callback_error).toBe('HTTP 500');
    expect(final.callback_delivered_at).toBeNull();
  });

  it('records "retrying" between attempts', async () => {
    // The second attempt is answered only after a second, so the state in between is observable.
    const url = receiver.endpoint((n) => (n === 1 ? { status: 502 } : { status: 200, delayMs: 1000 }));
    const id = await ctx.apiJob(url);
    await ctx.worker.run(id, { segments: ['y'] });
    const retrying = await waitFor(async () => {
      const r = await ctx.row(id);
      return r.callback_status !== 'pending' ? r : null;
    });
    expect(retrying).toMatchObject({
      callback_status: 'retrying',
      callback_http_status: 502,
      callback_error: 'HTTP 502',
      callback_attempts: 1,
      callback_delivered_at: null,
    });
    const final = await ctx.settled(id);
    expect(final).toMatchObject({ callback_status: 'delivered', callback_http_status: 200, callback_attempts: 2, callback_error: null });
  });

  it('a redirect to a blocked address is refused at that hop: failed, no retry', async () => {
    const url = receiver.endpoint(() => ({ status: 307, location: 'http://169.254.169.254/latest/meta-data/' }));
    const id = await ctx.apiJob(url);
    await ctx.worker.run(id, { segments: ['z'] });
    const final = await ctx.settled(id);
    await ctx.finished(id);
    expect(receiver.at(url)).toHaveLength(1);
    expect(final.callback_status).toBe('failed');
    expect(final.callback_error).toMatch(/refused by the outbound policy.*169\.254\.169\.254/);
    expect(final.callback_attempts).toBe(1);
  });

  it('a token without a callback secret gets one generated and stored, and it signs the callback', async () => {
    const url = receiver.endpoint();
    const id = await ctx.apiJob(url);
    await ctx.sql('update personal_access_tokens set callback_secret = null where id = ?', [ctx.token.record.id]);
    await ctx.worker.run(id, { segments: ['w'] });
    expect((await ctx.settled(id)).callback_status).toBe('delivered');
    const [{ callback_secret }] = (await ctx.sql<{ callback_secret: string | null }>('select callback_secret from personal_access_tokens where id = ?', [
      ctx.token.record.id,
    ])) as [{ callback_secret: string | null }];
    expect(callback_secret).toMatch(/^[0-9a-f]{64}$/);
    expect(callback_secret).not.toBe(ctx.token.callbackSecret);
    const [r] = receiver.at(url);
    expectSigned(r!, callback_secret!);
    expect(verifyCallbackSignature(ctx.token.callbackSecret, String(r!.headers['x-sonar-timestamp']), r!.body, r!.headers['x-sonar-signature'] as string)).toBe(
      false,
    );
    ctx.token.callbackSecret = callback_secret!;
  });

  it('a failed API job restarted and then completed sends a second callback (a new cycle), once even when queued twice', async () => {
    const url = receiver.endpoint();
    const id = await ctx.apiJob(url);
    await ctx.worker.run(id, { success: false, error: 'first try broke' });
    await ctx.settled(id);
    await ctx.finished(id, 1);
    const first = receiver.at(url)[0]!;
    expect(first.headers['x-sonar-event']).toBe('speech.job.failed');

    await ctx.svc.speech.jobs.restart(ctx.owner, id);
    const reset = await ctx.row(id);
    expect(reset).toMatchObject({
      callback_status: 'pending',
      callback_cycle: 2,
      callback_attempts: 0,
      callback_http_status: null,
      callback_delivered_at: null,
    });
    await ctx.worker.run(id, { segments: ['second pass'] });
    const final = await ctx.settled(id);
    // Two coordinators dispatching the same outbox row: one BullMQ job, one request.
    const [a, b] = await Promise.all([
      ctx.svc.notifications.callbacks.enqueue(id, 2, 'completed'),
      ctx.svc.notifications.callbacks.enqueue(id, 2, 'completed'),
    ]);
    expect(b).toBe(a);
    await ctx.finished(id, 2);
    const got = receiver.at(url);
    expect(got).toHaveLength(2);
    expect(got[1]!.headers['x-sonar-event']).toBe('speech.job.completed');
    expect(got[1]!.headers['x-sonar-delivery']).not.toBe(first.headers['x-sonar-delivery']);
    expect(final).toMatchObject({ callback_status: 'delivered', callback_attempts: 1, callback_cycle: 2 });
  });

  it('a source the coordinator cannot download fails the job with its callback (no silent pending)', async () => {
    const url = receiver.endpoint();
    const id = await ctx.apiJob(url);
    // What MediaStager does when the download fails.
    await ctx.svc.speech.repo.stagingFailed(id, 'HTTP 404');
    const final = await ctx.settled(id);
    expect(final.callback_status).toBe('delivered');
    const body = JSON.parse(receiver.at(url)[0]!.body) as CallbackEnvelope;
    expect(body.job).toMatchObject({ status: 'failed', failure_error: 'Could not download the source: HTTP 404' });
  });

  it('web-queue jobs send no callback', async () => {
    const url = receiver.endpoint();
    const id = await ctx.apiJob(url, 'web');
    await ctx.worker.run(id, { segments: ['web'] });
    expect(await ctx.finished(id)).toBeNull();
    expect(receiver.at(url)).toHaveLength(0);
    expect((await ctx.row(id)).callback_status).toBe('pending');
  });
});

describe('default outbound policy (no allowed private ranges)', () => {
  let ctx: Awaited<ReturnType<typeof setup>>;
  beforeAll(async () => {
    ctx = await setup({ SPEECH_CALLBACK_BACKOFF_MS: '100' });
  });
  afterAll(() => ctx?.close());

  for (const target of ['metadata', 'loopback'] as const) {
    it(`refuses a callback to a blocked address (${target}) without retrying or sending anything`, async () => {
      const url = target === 'metadata' ? 'http://169.254.169.254/latest/meta-data/' : receiver.endpoint();
      const before = receiver.received.length;
      const id = await ctx.apiJob(url);
      await ctx.worker.run(id, { segments: ['secret stuff'] });
      const final = await ctx.settled(id);
      await ctx.finished(id);
      expect(receiver.received.length).toBe(before);
      expect(final.callback_status).toBe('failed');
      expect(final.callback_http_status).toBeNull();
      expect(final.callback_attempts).toBe(1);
      expect(final.callback_error).toMatch(
        new RegExp(`refused by the outbound policy: the address ${target === 'metadata' ? '169\\.254\\.169\\.254' : '127\\.0\\.0\\.1'} is not allowed`),
      );
      const job = await ctx.svc.notifications.callbacks.queue.getJob(deliveryJobId(id, 1));
      expect(job?.attemptsMade).toBe(1);
      expect(await job?.getState()).toBe('failed');
    });
  }
});

/**
 * A callback carries job_url (and share_url) under PUBLIC_BASE_URL: a coordinator whose base URL
 * only it can reach (unset: http://localhost:$PORT, or loopback) must not send one.
 */
for (const [what, base] of [
  ['unset', ''],
  ['loopback', 'http://127.0.0.1:8080'],
] as const) {
  describe(`a coordinator without a public address (PUBLIC_BASE_URL ${what})`, () => {
    let ctx: Awaited<ReturnType<typeof setup>>;
    let bearer: { authorization: string };
    let jwt: { authorization: string };
    beforeAll(async () => {
      ctx = await setup({ PUBLIC_BASE_URL: base, OUTBOUND_ALLOW_RANGES: '127.0.0.0/8', SPEECH_CALLBACK_BACKOFF_MS: '100' }, ['small', 'large']);
      bearer = { authorization: `Bearer ${ctx.token.token}` };
      jwt = { authorization: `Bearer ${ctx.svc.app.jwt.sign({ sub: String(ctx.owner.id), typ: 'access' })}` };
    });
    afterAll(() => ctx?.close());

    const jobCount = async () => Number((await ctx.sql<{ n: string }>('select count(*) as n from speech_jobs'))[0]!.n);

    it('refuses a token-API job with a callback_url: 422 under errors.callback_url naming PUBLIC_BASE_URL, nothing queued', async () => {
      const before = await jobCount();
      const res = await ctx.svc.app.inject({
        method: 'POST',
        url: '/api/speech/transcribe',
        headers: bearer,
        payload: { callback_url: receiver.endpoint(), source_url: 'https://media.example.org/talk.mp3' },
      });
      expect(res.statusCode, res.body).toBe(422);
      const body = res.json();
      expect(body).toMatchObject({ ok: false, reason: 'validation_failed' });
      expect(Object.keys(body.errors)).toEqual(['callback_url']);
      expect(body.errors.callback_url[0]).toMatch(/PUBLIC_BASE_URL/);
      // Unset, the base URL is http://localhost:$PORT (PORT is 0 in tests).
      expect(body.errors.callback_url[0]).toContain(`(${base || 'http://localhost:0'})`);
      expect(body.errors.callback_url[0]).toMatch(/nothing was queued/);
      expect(body.message).toBe(body.errors.callback_url[0]);
      expect(await jobCount()).toBe(before);
      // Without a callback (the web queue) the same coordinator queues jobs as before.
      const web = await ctx.svc.app.inject({
        method: 'POST',
        url: '/api/speech/jobs',
        headers: jwt,
        payload: { source_url: 'https://media.example.org/talk.mp3' },
      });
      expect(web.statusCode, web.body).toBe(201);
      await ctx.worker.run(web.json().job.id as number, { segments: ['a web job'] });
    });

    it('sends nothing for a job that has a callback anyway (created before the base URL changed): failed, with the reason', async () => {
      const url = receiver.endpoint();
      const id = await ctx.apiJob(url);
      await ctx.worker.run(id, { segments: ['Good morning'] });
      const final = await ctx.settled(id);
      await ctx.finished(id);
      expect(receiver.at(url)).toEqual([]);
      expect(final.callback_status).toBe('failed');
      expect(final.callback_http_status).toBeNull();
      expect(final.callback_error).toMatch(/^not sent: .*PUBLIC_BASE_URL.*local-only/);
      const log = await ctx.sql<{ event: string; message: string }>('select event, message from speech_job_events where job_id = ? order by id', [id]);
      expect(log.find((e) => e.event === 'callback_failed')?.message).toMatch(/PUBLIC_BASE_URL/);
      const job = await ctx.svc.notifications.callbacks.queue.getJob(deliveryJobId(id, 1));
      expect(job?.attemptsMade).toBe(1);
    });

    it('refuses a re-transcription of a job with a callback (its new cycle would need one): 422 errors.callback_url', async () => {
      const url = receiver.endpoint();
      const id = await ctx.apiJob(url);
      await ctx.worker.run(id, { segments: ['first pass'] });
      await ctx.settled(id);
      await ctx.finished(id);
      // An uploaded source with its media retained: every other rule of a new pass holds.
      await ctx.sql(
        `update speech_jobs set source_type = 'upload', source_url = null, source_filename = 'talk.wav', media_path = '/retained/talk.wav', diarization_state = 'skipped' where id = ?`,
        [id],
      );
      const state = await ctx.svc.app.inject({ method: 'GET', url: `/api/speech/jobs/${id}/revisions`, headers: jwt });
      expect(state.statusCode, state.body).toBe(200);
      expect(state.json()).toMatchObject({ can_start: false, models: ['large'], unavailable_reason: expect.stringMatching(/callback.*PUBLIC_BASE_URL/) });
      const res = await ctx.svc.app.inject({ method: 'POST', url: `/api/speech/jobs/${id}/retranscribe`, headers: jwt, payload: { model: 'large' } });
      expect(res.statusCode, res.body).toBe(422);
      expect(Object.keys(res.json().errors)).toEqual(['callback_url']);
      expect(res.json().errors.callback_url[0]).toMatch(/PUBLIC_BASE_URL/);
      const [after] = await ctx.sql<{ current_pass: number; status: string }>('select current_pass, status from speech_jobs where id = ?', [id]);
      expect(after).toEqual({ current_pass: 1, status: 'completed' });
      expect(receiver.at(url)).toEqual([]);
    });
  });
}

describe('verifyCallbackSignature', () => {
  const secret = 'a'.repeat(64);
  const body = JSON.stringify({ ok: true, event: 'speech.job.completed', job: { job_id: 1 } });
  const now = Math.floor(Date.now() / 1000);

  it('accepts the genuine signature and refuses a tampered body, another secret, an old or future timestamp', () => {
    const sig = signCallback(secret, now, body);
    expect(verifyCallbackSignature(secret, String(now), body, sig)).toBe(true);
    expect(verifyCallbackSignature(secret, now, Buffer.from(body), sig)).toBe(true);
    expect(verifyCallbackSignature(secret, String(now), body.replace('"job_id":1', '"job_id":2'), sig)).toBe(false);
    expect(verifyCallbackSignature('b'.repeat(64), String(now), body, sig)).toBe(false);
    // A signature made 10 minutes ago is valid HMAC but too old; so is one checked 6 minutes later.
    const old = now - 600;
    expect(verifyCallbackSignature(secret, String(old), body, signCallback(secret, old, body))).toBe(false);
    expect(verifyCallbackSignature(secret, String(now), body, sig, 300, now + 301)).toBe(false);
    expect(verifyCallbackSignature(secret, String(now), body, sig, 300, now - 301)).toBe(false);
    // Moving the timestamp without re-signing breaks it; garbage headers too.
    expect(verifyCallbackSignature(secret, String(now - 1), body, sig)).toBe(false);
    expect(verifyCallbackSignature(secret, String(now), body, 'v1=zz')).toBe(false);
    expect(verifyCallbackSignature(secret, String(now), body, undefined)).toBe(false);
    expect(verifyCallbackSignature(secret, 'abc', body, sig)).toBe(false);
    // Several signatures (rotation): any match counts.
    expect(verifyCallbackSignature(secret, String(now), body, `v1=${'0'.repeat(64)}, ${sig}`)).toBe(true);
  });

  it('backs off exponentially with full jitter', () => {
    for (let n = 1; n <= 6; n++) {
      const samples = Array.from({ length: 200 }, () => fullJitterBackoff(n, 100));
      expect(Math.max(...samples)).toBeLessThanOrEqual(100 * 2 ** (n - 1));
      expect(Math.min(...samples)).toBeGreaterThanOrEqual(0);
      expect(new Set(samples).size).toBeGreaterThan(1); // jittered, not a constant
    }
    expect(fullJitterBackoff(40, 100, 5000)).toBeLessThanOrEqual(5000);
  });
});
