import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { WORKER_CONTRACT_VERSION, type CapabilitiesMsg, type JobAssignmentMsg } from '@sonar/shared';
import { CoordinatorClient, workerErrorReason } from '../../worker/src/coordinator-client.js';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import type { AuthUser } from '../../coordinator/src/accounts/types.js';
import { loadConfig } from '../../coordinator/src/config.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { createTestDatabase, randomName, testEnv, type TestDatabase } from '../support/harness.js';
import { registerModelWorker } from '../support/model-workers.js';

/**
 * The worker protocol against a real coordinator over gRPC on loopback, with simulated workers:
 * claim order and atomicity, lease fencing, idempotent completion, heartbeats with cancellation,
 * stale recovery up to the retry limit, forced targets, local standby, hand-back and media download.
 */
let db: TestDatabase;
let svc: RunningCoordinator;
let accounts: AccountService;
let admin: AuthUser;
let alice: AuthUser;
const mediaDir = mkdtempSync(path.join(tmpdir(), 'sonar-media-'));
const clients: CoordinatorClient[] = [];

const caps = (models: string[], extra: Partial<CapabilitiesMsg> = {}): CapabilitiesMsg => ({
  models,
  engines: ['test'],
  diarization: true,
  diarization_engine: 'test',
  diarization_error: '',
  can_fetch_urls: true,
  device: 'cpu',
  model_languages: [],
  ...extra,
});

async function worker(name: string, capabilities: CapabilitiesMsg, local = false) {
  const { secret } = await svc.workers.createWorker(name);
  const client = new CoordinatorClient(`127.0.0.1:${svc.grpcPort}`, secret);
  clients.push(client);
  const hello = await client.hello({ contract_version: WORKER_CONTRACT_VERSION, agent_version: 't', hostname: 'h', capabilities, local });
  return { client, session: hello.session_id, name };
}

/** A worker says Hello again (a new session), as an agent does after a restart or a long silence. */
async function rehello(w: { client: CoordinatorClient; session: string }, capabilities: CapabilitiesMsg, local = false) {
  const hello = await w.client.hello({ contract_version: WORKER_CONTRACT_VERSION, agent_version: 't', hostname: 'h', capabilities, local });
  w.session = hello.session_id;
}

async function urlJob(owner: AuthUser, extra: { model?: string } = {}) {
  return svc.speech.jobs.create(owner, { channel: 'web', source: { type: 'url', url: 'https://media.example.org/a.mp3' }, ...extra });
}

async function claim(w: { client: CoordinatorClient; session: string }, waitMs = 0): Promise<JobAssignmentMsg | null> {
  const res = await w.client.claim({ session_id: w.session, wait_ms: waitMs });
  return res.has_job ? res.job : null;
}

/** Why each long poll of `work` woke, in order ('job', 'news', 'time'); restore `wait` after. */
function recordWakes(work: typeof svc.speech.work) {
  const reasons: string[] = [];
  const realWait = work.wait.bind(work);
  const wait = vi.spyOn(work, 'wait').mockImplementation((...args) =>
    realWait(...args).then((reason) => {
      reasons.push(reason);
      return reason;
    }),
  );
  return { reasons, wait };
}

/** Jobs not yet finished; each test leaves none behind so the next sees a clean queue. */
async function queueLeft() {
  const rows = await svc.orm.em.getConnection().execute<Array<{ id: number }>>(`select id from speech_jobs where status not in ('completed', 'failed')`);
  return rows.map((r) => r.id);
}

async function jobRow(id: number) {
  const rows = await svc.orm.em
    .getConnection()
    .execute<Array<{ status: string; attempt: number; failure_error: string | null; transcript_text: string | null; worker_id: number | null }>>(
      'select status, attempt, failure_error, transcript_text, worker_id from speech_jobs where id = ?',
      [id],
    );
  return rows[0]!;
}

const done = (job: JobAssignmentMsg, extra: Partial<Parameters<CoordinatorClient['complete']>[0]> = {}) => ({
  lease: job.lease,
  success: true,
  error: '',
  segment_count: 0,
  duration_seconds: 1,
  engine: 'test',
  engine_model: job.model,
  cancelled: false,
  ...extra,
});

/** Breaks state on purpose instead of waiting for the TTL: the job's open lease expired a second ago (database clock). */
async function expireLease(jobId: number) {
  await svc.orm.em.getConnection().execute(`update speech_leases set expires_at = now() - interval '1 second' where job_id = ? and ended_at is null`, [jobId]);
}

async function expectStale(p: Promise<unknown>) {
  const err = (await p.then(
    () => null,
    (e: unknown) => e,
  )) as grpc.ServiceError | null;
  expect(err, 'expected a stale-lease refusal').not.toBeNull();
  expect(err!.code).toBe(grpc.status.ABORTED);
  expect(workerErrorReason(err)).toBe('stale_lease');
}

beforeAll(async () => {
  db = await createTestDatabase();
  svc = await startCoordinator(
    loadConfig(
      testEnv(db, {
        SPEECH_MEDIA_DIR: mediaDir,
        SPEECH_LEASE_TTL_SECONDS: '5',
        SPEECH_MAX_ATTEMPTS: '2',
        SPEECH_STALE_SWEEP_SECONDS: '3600', // the tests sweep explicitly
        // Long enough that no session expires between a test's steps on a loaded machine (3 s did in
        // CI); the tests that need stale presence set last_seen_at themselves.
        WORKER_PRESENCE_TTL_MS: '60000',
        OUTBOUND_ALLOW_RANGES: '127.0.0.0/8', // the staging test serves its source from loopback
      }),
    ),
  );
  accounts = new AccountService(svc.orm);
  admin = (await accounts.createUser({ username: randomName('adm'), isAdmin: true })).user;
  alice = (await accounts.createUser({ username: randomName('alice'), permissions: ['speech.use'] })).user;
  // Jobs are only accepted for models a registered worker serves (this one never connects).
  await registerModelWorker(svc.orm, 'models', ['small', 'large', 'turbo']);
});
afterAll(async () => {
  clients.forEach((c) => c.close());
  await svc?.close();
  await db?.drop();
});

describe('claims', () => {
  it('hands out admin-owned jobs first, then the oldest, each to exactly one worker', async () => {
    const a1 = await urlJob(alice);
    const a2 = await urlJob(alice);
    const ad = await urlJob(admin);
    const w1 = await worker('w-order-1', caps(['small']));
    const w2 = await worker('w-order-2', caps(['small']));
    const claims = await Promise.all([claim(w1), claim(w2), claim(w1), claim(w2)]);
    const ids = claims.filter(Boolean).map((c) => c!.lease.job_id);
    expect(new Set(ids).size).toBe(ids.length); // never the same job twice
    expect(ids.sort()).toEqual([a1.id, a2.id, ad.id].sort());
    // Order: a single worker draining a fresh queue sees the admin job first.
    const b1 = await urlJob(alice);
    const bAdmin = await urlJob(admin);
    const first = await claim(w1);
    expect(first!.lease.job_id).toBe(bAdmin.id);
    const next = await claim(w1);
    expect(next!.lease.job_id).toBe(b1.id);
    for (const c of [...claims, first, next]) if (c) await w1.client.complete(done(c)).catch(() => w2.client.complete(done(c)));
    expect(await queueLeft()).toEqual([]);
  });

  it('is capability-gated: a worker without the model does not get the job; a long poll wakes when one appears', async () => {
    const w = await worker('w-turbo', caps(['turbo']));
    const small = await urlJob(alice, { model: 'small' });
    expect(await claim(w, 300)).toBeNull();
    const started = Date.now();
    const pending = claim(w, 10_000);
    // The claim found nothing and is parked on the work signal: the job submitted now must wake it.
    await expect.poll(() => svc.speech.work.waiting(), { timeout: 5_000, interval: 10 }).toBe(1);
    const turbo = await urlJob(alice, { model: 'turbo' });
    const got = await pending;
    expect(got?.lease.job_id).toBe(turbo.id);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(got!.lease_expires_unix_ms).toBeGreaterThan(Date.now());
    await w.client.complete(done(got!));
    await svc.speech.jobs.remove(admin, small.id);
  });

  it('an idle group does not ask the database again right after an empty claim; news still wakes its long poll', async () => {
    const w = await worker('w-idle', caps(['idle-model']));
    const looks = vi.spyOn(svc.speech.leases, 'claim');
    try {
      // Three long polls of 50 ms back to back: each would look when it starts and when it ends
      // (6 claim statements); within a second of an empty look with no news, they wait instead.
      for (let i = 0; i < 3; i++) expect(await claim(w, 50)).toBeNull();
      expect(looks.mock.calls.length).toBeGreaterThanOrEqual(1);
      expect(looks.mock.calls.length).toBeLessThan(6);
      // A plain poll (wait_ms 0) always looks.
      const before = looks.mock.calls.length;
      expect(await claim(w, 0)).toBeNull();
      expect(looks.mock.calls.length).toBe(before + 1);
      const pending = claim(w, 10_000);
      await expect.poll(() => svc.speech.work.waiting(), { timeout: 5_000, interval: 10 }).toBe(1);
      const job = await urlJob(alice, { model: 'idle-model' });
      const got = await pending;
      expect(got?.lease.job_id).toBe(job.id);
      await w.client.complete(done(got!));
    } finally {
      looks.mockRestore();
    }
  });

  it('a burst of new jobs for waiting long polls costs one claim per job, not two', async () => {
    const model = 'burst-model';
    const ws = await Promise.all([0, 1, 2, 3].map((i) => worker(`w-burst-${i}`, caps([model]))));
    const work = svc.speech.work;
    const looks = vi.spyOn(svc.speech.leases, 'claim');
    const found = vi.spyOn(work, 'found');
    const { reasons, wait } = recordWakes(work);
    try {
      const polls = ws.map((w) => claim(w, 10_000).then((job) => ({ w, job })));
      await expect.poll(() => work.waiting(), { timeout: 5_000, interval: 10 }).toBe(4);
      const parked = looks.mock.calls.length;
      const ids: number[] = [];
      for (let i = 0; i < 3; i++) ids.push((await urlJob(alice, { model })).id);
      // Three long polls get the three jobs; the fourth waits on.
      await expect.poll(() => reasons.filter((r) => r === 'job').length, { timeout: 5_000, interval: 10 }).toBe(3);
      await expect.poll(() => work.waiting(), { timeout: 5_000, interval: 10 }).toBe(1);
      const timedOut = reasons.filter((r) => r === 'time').length;
      const extraLooks = looks.mock.calls.length - parked - ids.length;
      // Each job woke one waiter, which leased it without waking the next one. (A waiter whose
      // recheck timer fired meanwhile on a slow machine looks once more and may pass it on.)
      if (timedOut === 0) {
        expect(found).not.toHaveBeenCalled();
        expect(extraLooks).toBe(0);
      } else expect(extraLooks).toBeLessThanOrEqual(2 * timedOut);
      ids.push((await urlJob(alice, { model })).id); // the fourth long poll's job
      const got = await Promise.all(polls);
      expect(got.map((g) => g.job?.lease.job_id).sort()).toEqual([...ids].sort());
      for (const g of got) await g.w.client.complete(done(g.job!));
    } finally {
      looks.mockRestore();
      found.mockRestore();
      wait.mockRestore();
    }
  });

  it('a URL job is queued in one statement with its runtime log (after the model catalog read)', async () => {
    const knex = svc.orm.em.getConnection().getKnex();
    const sent: string[] = [];
    const onQuery = (q: { sql?: string; options?: { name?: string } }) => sent.push(q.options?.name ?? (q.sql ?? '').trim().split(/\s+/)[0]!);
    knex.on('query', onQuery);
    let job;
    try {
      job = await svc.speech.jobs.create(alice, {
        channel: 'api',
        source: { type: 'url', url: 'https://media.example.org/b.mp3' },
        label: 'lbl',
        model: 'large',
        translationTargetLanguages: ['de'],
        diarization: false,
      });
    } finally {
      knex.removeListener('query', onQuery);
    }
    expect(sent).toEqual(['model_catalog_snapshot', 'speech_queue_url_job']);
    expect(job).toMatchObject({
      status: 'queued',
      queueChannel: 'api',
      sourceType: 'url',
      sourceUrl: 'https://media.example.org/b.mp3',
      sourceLabel: 'lbl',
      model: 'large',
      translationTargetLanguages: ['de'],
      diarizationRequested: false,
      diarizationState: 'skipped',
      stageLabel: 'Waiting for a worker',
      callbackUrl: null,
      callbackStatus: null,
      attempt: 0,
      maxAttempts: 2,
    });
    expect(job.owner.id).toBe(alice.id);
    expect(job.createdAt).toBeInstanceOf(Date);
    const events = await svc.orm.em
      .getConnection()
      .execute<Array<{ event: string; level: string; message: string }>>('select event, level, message from speech_job_events where job_id = ? order by id', [
        job.id,
      ]);
    // The only worker serving `large` never connected: the job says so in its log too.
    expect(events).toEqual([
      { event: 'queued', level: 'info', message: 'Queued on the api channel with model large.' },
      { event: 'no_worker', level: 'warn', message: expect.stringMatching(/; the job waits until one connects\.$/) as string },
    ]);
    await svc.speech.jobs.remove(admin, job.id);
  });

  it('job creation reuses a catalog that accepts with a connected worker for a second; a refusal or an offline model is read again', async () => {
    await worker('w-catalog', caps(['catalog-model']));
    const knex = svc.orm.em.getConnection().getKnex();
    const sent: string[] = [];
    const onQuery = (q: { sql?: string; options?: { name?: string } }) => sent.push(q.options?.name ?? (q.sql ?? '').trim().split(/\s+/)[0]!);
    const create = async (model = 'catalog-model') => {
      sent.length = 0;
      knex.on('query', onQuery);
      try {
        return await urlJob(alice, { model });
      } finally {
        knex.removeListener('query', onQuery);
      }
    };
    const events = async (id: number) =>
      (await svc.orm.em.getConnection().execute<Array<{ event: string }>>('select event from speech_job_events where job_id = ? order by id', [id])).map(
        (e) => e.event,
      );
    vi.useFakeTimers({ toFake: ['Date'] }); // the clock stands still unless the test moves it
    const jobs = [];
    try {
      jobs.push(await create());
      expect(sent).toEqual(['model_catalog_snapshot', 'speech_queue_url_job']);
      jobs.push(await create());
      expect(sent).toEqual(['speech_queue_url_job']); // reused
      await expect(create('not-served')).rejects.toThrow(/no registered worker serves model "not-served"/);
      expect(sent).toEqual(['model_catalog_snapshot']); // a refusal is never taken from the cache
      // The worker goes offline: within the second the cached answer stands ...
      await svc.orm.em.getConnection().execute(`update speech_workers set last_seen_at = now() - interval '1 hour' where name = 'w-catalog'`);
      jobs.push(await create());
      expect(sent).toEqual(['speech_queue_url_job']);
      expect(await events(jobs.at(-1)!.id)).toEqual(['queued']);
      // ... after it, the catalog is read again and the job is flagged.
      vi.setSystemTime(Date.now() + 1_001);
      jobs.push(await create());
      expect(sent).toEqual(['model_catalog_snapshot', 'speech_queue_url_job']);
      expect(await events(jobs.at(-1)!.id)).toEqual(['queued', 'no_worker']);
      // An offline answer is not reused either.
      jobs.push(await create());
      expect(sent).toEqual(['model_catalog_snapshot', 'speech_queue_url_job']);
    } finally {
      vi.useRealTimers();
      for (const j of jobs) await svc.speech.jobs.remove(admin, j.id);
    }
  });

  it('a long poll woken for a new job that fails before leasing it passes the job on to the next waiter', async () => {
    const model = 'handoff-model';
    const [a, b] = [await worker('w-handoff-a', caps([model])), await worker('w-handoff-b', caps([model]))];
    const work = svc.speech.work;
    const leases = svc.speech.leases;
    const realClaim = leases.claim.bind(leases);
    // Once both wait, A's next look fails (as a database error or an ended session would): it is woken for the job.
    let failA = false;
    const looks = vi
      .spyOn(leases, 'claim')
      .mockImplementation((w, ...rest) => (failA && w.name === a.name ? Promise.reject(new Error('injected failure')) : realClaim(w, ...rest)));
    const { reasons, wait } = recordWakes(work);
    try {
      const first = claim(a, 10_000).catch((err: unknown) => err);
      await expect.poll(() => work.waiting(), { timeout: 5_000, interval: 10 }).toBe(1);
      const second = claim(b, 10_000);
      await expect.poll(() => work.waiting(), { timeout: 5_000, interval: 10 }).toBe(2);
      failA = true;
      const job = await urlJob(alice, { model });
      expect(await first).toBeInstanceOf(Error);
      const got = await second;
      expect(got?.lease.job_id).toBe(job.id);
      // B was woken by A's hand-on, not by its own recheck timer two seconds later.
      expect(reasons.slice(0, 2)).toEqual(['job', 'news']);
      await b.client.complete(done(got!));
    } finally {
      looks.mockRestore();
      wait.mockRestore();
    }
  });

  it('a long poll its worker cancels stops waiting at once', async () => {
    const w = await worker('w-abort', caps(['abort-model']));
    const abort = new AbortController();
    const pending = w.client.claim({ session_id: w.session, wait_ms: 20_000 }, abort.signal).catch((err: unknown) => err);
    await expect.poll(() => svc.speech.work.waiting(), { timeout: 5_000, interval: 10 }).toBe(1);
    abort.abort();
    await pending;
    await expect.poll(() => svc.speech.work.waiting(), { timeout: 5_000, interval: 10 }).toBe(0);
  });

  it('refuses Claim on an unknown session with session_unknown', async () => {
    const w = await worker('w-nosession', caps(['small']));
    const err = (await w.client.claim({ session_id: 'nope', wait_ms: 0 }).catch((e: unknown) => e)) as grpc.ServiceError;
    expect(err.code).toBe(grpc.status.NOT_FOUND);
    expect(workerErrorReason(err)).toBe('session_unknown');
  });
});

describe('lease fencing', () => {
  it('accepts progress and completion only with the live (job, attempt, token); completion is idempotent', async () => {
    const w = await worker('w-fence', caps(['small']));
    const other = await worker('w-fence-other', caps(['small']));
    const job = await urlJob(alice);
    const got = (await claim(w))!;
    expect(got.lease.job_id).toBe(job.id);
    expect(got.lease.attempt).toBe(1);

    const stream = w.client.progress(got.lease);
    stream.send({
      stage: 'transcribing',
      stage_detail: 'x',
      audio_position_seconds: 1.5,
      segments: [{ seq: 0, start: 0, end: 1.5, text: 'hello there' }],
      duration_seconds: 3,
      engine: 'test',
      engine_model: 'small',
    });
    stream.send({
      stage: 'transcribing',
      stage_detail: 'x',
      audio_position_seconds: 3,
      segments: [
        { seq: 1, start: 1.5, end: 3, text: 'general' },
        { seq: 0, start: 0, end: 1.5, text: 'dup' },
      ],
      duration_seconds: 3,
      engine: 'test',
      engine_model: 'small',
    });
    expect((await stream.end()).segments_stored).toBe(2); // the repeated seq 0 is stored once

    // A wrong token, another worker, or a wrong attempt are all stale.
    await expectStale(w.client.complete(done(got, { lease: { ...got.lease, lease_token: 'forged' } })));
    await expectStale(other.client.complete(done(got)));
    await expectStale(w.client.complete(done(got, { lease: { ...got.lease, attempt: 2 } })));

    const first = await w.client.complete(done(got, { segment_count: 2 }));
    expect(first).toEqual({ duplicate: false, status: 'completed', next: null });
    expect(await w.client.complete(done(got, { segment_count: 2 }))).toEqual({ duplicate: true, status: 'completed', next: null });
    const row = await jobRow(job.id);
    expect(row.status).toBe('completed');
    expect(row.transcript_text).toBe('hello there general');
    // A different outcome for an already completed attempt is refused.
    await expectStale(w.client.complete(done(got, { success: false, error: 'late failure' })));
  });

  it('a progress stream on a stale lease is aborted with stale_lease', async () => {
    const w = await worker('w-stale-stream', caps(['small']));
    await urlJob(alice);
    const got = (await claim(w))!;
    const stream = w.client.progress({ ...got.lease, lease_token: 'wrong' });
    stream.send({ stage: 'transcribing', stage_detail: '', audio_position_seconds: 0, segments: [], duration_seconds: 0, engine: '', engine_model: '' });
    await expectStale(stream.failed);
    await w.client.complete(done(got));
  });
});

describe('a completion that claims the next job (contract 4)', () => {
  /** A lease row as the database holds it (open: not ended). */
  async function openLease(jobId: number) {
    const rows = await svc.orm.em
      .getConnection()
      .execute<Array<{ attempt: number; worker_id: number }>>('select attempt, worker_id from speech_leases where job_id = ? and ended_at is null', [jobId]);
    return rows;
  }
  const next = (w: { session: string }) => ({ claim_next: true, session_id: w.session });

  it('stores the completion, then leases the next job to the same worker with a live lease; an empty queue answers has_job false', async () => {
    const w = await worker('w-next', caps(['small']));
    const j1 = await urlJob(alice);
    const j2 = await urlJob(alice);
    const first = (await claim(w))!;
    expect(first.lease.job_id).toBe(j1.id);

    const res = await w.client.complete(done(first, next(w)));
    expect(res).toMatchObject({ duplicate: false, status: 'completed', next: { has_job: true } });
    expect((await jobRow(j1.id)).status).toBe('completed');
    const second = res.next!.job!;
    expect(second.lease).toMatchObject({ job_id: j2.id, attempt: 1 });
    expect(second.lease.lease_token).not.toBe(first.lease.lease_token);
    expect(second.lease_expires_unix_ms).toBeGreaterThan(Date.now());
    expect(second).toMatchObject({ model: 'small', source_type: 'url', forced: false, task: 'transcribe' });
    const [row] = await svc.orm.em.getConnection().execute<Array<{ id: number }>>('select id from speech_workers where name = ?', ['w-next']);
    expect(await jobRow(j2.id)).toMatchObject({ status: 'transcribing', attempt: 1, worker_id: row!.id });
    expect(await openLease(j2.id)).toEqual([{ attempt: 1, worker_id: row!.id }]);
    // The lease is live: it renews, and it completes (asking again, with nothing left to claim).
    const hb = await w.client.heartbeat({ session_id: w.session, leases: [second.lease] });
    expect(hb.lost_job_ids).toEqual([]);
    const last = await w.client.complete(done(second, next(w)));
    expect(last).toMatchObject({ duplicate: false, status: 'completed', next: { has_job: false, job: null } });
    expect((await jobRow(j2.id)).status).toBe('completed');
    expect(await queueLeft()).toEqual([]);
  });

  it('looks like the first look of a long poll: not again within a second of its group finding nothing, unless news came', async () => {
    const model = 'next-idle-model';
    const w1 = await worker('w-next-idle-1', caps([model]));
    const w2 = await worker('w-next-idle-2', caps([model]));
    await urlJob(alice, { model });
    await urlJob(alice, { model });
    const [j1, j2] = [(await claim(w1))!, (await claim(w2))!];
    const looks = vi.spyOn(svc.speech.leases, 'claim');
    vi.useFakeTimers({ toFake: ['Date'] }); // the clock stands still: the group's empty look stays fresh
    try {
      expect(await claim(w1)).toBeNull(); // a plain poll always looks: the group found nothing
      expect(looks).toHaveBeenCalledTimes(1);
      const res = await w1.client.complete(done(j1, next(w1)));
      expect(res.next).toMatchObject({ has_job: false, job: null });
      expect(looks).toHaveBeenCalledTimes(1); // no statement for nothing
      const j3 = await urlJob(alice, { model }); // news: the next completion looks
      const res2 = await w2.client.complete(done(j2, next(w2)));
      expect(looks).toHaveBeenCalledTimes(2);
      expect(res2.next?.job?.lease.job_id).toBe(j3.id);
      await w2.client.complete(done(res2.next!.job!));
    } finally {
      vi.useRealTimers();
      looks.mockRestore();
    }
    expect(await queueLeft()).toEqual([]);
  });

  it('a completion under a stale lease is refused with stale_lease and claims nothing', async () => {
    const w = await worker('w-next-stale', caps(['small']));
    const held = await urlJob(alice);
    const got = (await claim(w))!;
    expect(got.lease.job_id).toBe(held.id);
    const waiting = await urlJob(alice);
    const looks = vi.spyOn(svc.speech.leases, 'claim');
    try {
      await expectStale(w.client.complete(done(got, { lease: { ...got.lease, lease_token: 'forged' }, ...next(w) })));
      await expireLease(held.id);
      await expectStale(w.client.complete(done(got, next(w))));
      expect(looks).not.toHaveBeenCalled();
    } finally {
      looks.mockRestore();
    }
    expect(await jobRow(waiting.id)).toMatchObject({ status: 'queued', attempt: 0 });
    expect(await openLease(waiting.id)).toEqual([]);
    // The expired attempt is recovered as usual; both jobs drain through plain claims.
    await svc.speech.leases.sweepExpired();
    for (let job = await claim(w); job; job = await claim(w)) await w.client.complete(done(job));
    expect(await queueLeft()).toEqual([]);
  });

  it('never hands out a job pinned to another worker; the pinned worker gets it from its own completion', async () => {
    const w = await worker('w-next-bystander', caps(['small', 'large']));
    const pinned = await worker('w-next-pinned', caps(['turbo']));
    const mine = await urlJob(alice, { model: 'small' });
    const theirs = await urlJob(alice, { model: 'turbo' });
    const mineJob = (await claim(w))!;
    const theirsJob = (await claim(pinned))!;
    expect([mineJob.lease.job_id, theirsJob.lease.job_id]).toEqual([mine.id, theirs.id]);
    const forced = await urlJob(alice, { model: 'large' });
    await svc.speech.jobs.setExecutionTarget(admin, forced.id, { mode: 'worker', worker: 'w-next-pinned' });

    const res = await w.client.complete(done(mineJob, next(w)));
    expect(res.next).toMatchObject({ has_job: false, job: null });
    expect(await jobRow(forced.id)).toMatchObject({ status: 'queued', attempt: 0 });
    const res2 = await pinned.client.complete(done(theirsJob, next(pinned)));
    expect(res2.next?.job).toMatchObject({ lease: { job_id: forced.id }, forced: true, model: 'large' });
    await pinned.client.complete(done(res2.next!.job!));
    expect(await queueLeft()).toEqual([]);
  });

  it('an unknown session still stores the completion and answers no job (the worker claims, and hears session_unknown there)', async () => {
    const w = await worker('w-next-nosession', caps(['small']));
    const j1 = await urlJob(alice);
    const j2 = await urlJob(alice);
    const got = (await claim(w))!;
    const res = await w.client.complete(done(got, { claim_next: true, session_id: 'gone' }));
    expect(res).toMatchObject({ duplicate: false, status: 'completed', next: { has_job: false, job: null } });
    expect((await jobRow(j1.id)).status).toBe('completed');
    expect(await jobRow(j2.id)).toMatchObject({ status: 'queued', attempt: 0 });
    const err = (await w.client.claim({ session_id: 'gone', wait_ms: 0 }).catch((e: unknown) => e)) as grpc.ServiceError;
    expect(workerErrorReason(err)).toBe('session_unknown');
    await w.client.complete(done((await claim(w))!));
    expect(await queueLeft()).toEqual([]);
  });

  it('a completion without claim_next (a contract-3 worker) answers as before: no next, nothing claimed', async () => {
    const { secret } = await svc.workers.createWorker('w-next-old');
    const client = new CoordinatorClient(`127.0.0.1:${svc.grpcPort}`, secret);
    clients.push(client);
    const hello = await client.hello({ contract_version: 3, agent_version: 'old', hostname: 'h', capabilities: caps(['small']), local: false });
    expect(hello.coordinator_contract_version).toBe(WORKER_CONTRACT_VERSION);
    const old = { client, session: hello.session_id };
    const j1 = await urlJob(alice);
    const j2 = await urlJob(alice);
    const got = (await claim(old))!;
    expect(await client.complete(done(got))).toEqual({ duplicate: false, status: 'completed', next: null });
    expect(await jobRow(j2.id)).toMatchObject({ status: 'queued', attempt: 0 });
    const second = (await claim(old))!;
    expect(second.lease.job_id).toBe(j2.id);
    await client.complete(done(second));
    expect((await jobRow(j1.id)).status).toBe('completed');
    expect(await queueLeft()).toEqual([]);
  });
});

describe('heartbeats, cancellation and stale recovery', () => {
  it('renews leases and carries a cancel request to the worker', async () => {
    const w = await worker('w-cancel', caps(['small']));
    const job = await urlJob(alice);
    const got = (await claim(w))!;
    const hb = await w.client.heartbeat({ session_id: w.session, leases: [got.lease] });
    expect(hb.cancel_job_ids).toEqual([]);
    expect(hb.lease_expires_unix_ms).toBeGreaterThan(got.lease_expires_unix_ms - 1);
    await svc.speech.jobs.cancel(alice, job.id);
    const hb2 = await w.client.heartbeat({ session_id: w.session, leases: [got.lease] });
    expect(hb2.cancel_job_ids).toEqual([job.id]);
    await w.client.complete(done(got, { success: false, cancelled: true, error: 'cancelled' }));
    expect(await jobRow(job.id)).toMatchObject({ status: 'failed', failure_error: 'Cancelled on request.' });
    const hb3 = await w.client.heartbeat({ session_id: w.session, leases: [got.lease] });
    expect(hb3.lost_job_ids).toEqual([job.id]);
  });

  it('requeues a job whose lease expired, rejects the dead attempt, and fails after the retry limit', async () => {
    const w1 = await worker('w-dies', caps(['small']));
    const w2 = await worker('w-rescues', caps(['small']));
    const job = await urlJob(alice);
    const first = (await claim(w1))!;
    expect(first.lease.job_id).toBe(job.id);
    await expireLease(job.id);
    const touched = await svc.speech.leases.sweepExpired();
    expect(touched).toContainEqual({ jobId: job.id, status: 'queued', diarizationRequeued: false });
    expect((await jobRow(job.id)).status).toBe('queued');

    await rehello(w2, caps(['small']));
    const second = (await claim(w2))!;
    expect(second?.lease).toMatchObject({ job_id: job.id, attempt: 2 });
    await expectStale(w1.client.complete(done(first)));
    expect((await w1.client.heartbeat({ session_id: w1.session, leases: [first.lease] })).lost_job_ids).toEqual([job.id]);

    // The second attempt dies too: with SPEECH_MAX_ATTEMPTS=2 the job fails with the reason.
    await expireLease(job.id);
    expect(await svc.speech.leases.sweepExpired()).toContainEqual({ jobId: job.id, status: 'failed', diarizationRequeued: false });
    const row = await jobRow(job.id);
    expect(row.status).toBe('failed');
    expect(row.failure_error).toMatch(/Gave up after 2 attempts: worker w-rescues stopped renewing its lease/);
    await expectStale(w2.client.complete(done(second)));
  });

  it('concurrent claims are leased together: each job once, a pinned job only to its worker', async () => {
    const ws = await Promise.all(Array.from({ length: 8 }, (_, i) => worker(`w-batch-${i}`, caps(['small']))));
    const pinnedTo = ws[5]!;
    const jobs = [];
    for (let i = 0; i < 10; i++) jobs.push(await urlJob(alice));
    // The oldest job is pinned to w-batch-5: nobody else may take it, whoever claims first.
    await svc.speech.jobs.setExecutionTarget(admin, jobs[0]!.id, { mode: 'worker', worker: pinnedTo.name });
    const got = await Promise.all(ws.map((w) => claim(w)));
    expect(got.every(Boolean)).toBe(true);
    const ids = got.map((g) => g!.lease.job_id);
    expect(new Set(ids).size).toBe(ws.length);
    expect(got[5]!.lease.job_id).toBe(jobs[0]!.id);
    expect(got[5]!.forced).toBe(true);
    for (const [i, g] of got.entries()) if (i !== 5) expect(g!.forced).toBe(false);
    for (const [i, g] of got.entries()) await ws[i]!.client.complete(done(g!));
    // The two left over go to whoever asks next.
    const rest = [(await claim(ws[0]!))!, (await claim(ws[1]!))!];
    expect(rest.map((r) => r.lease.job_id).sort()).toEqual(
      jobs
        .map((j) => j.id)
        .filter((id) => !ids.includes(id))
        .sort(),
    );
    for (const [i, r] of rest.entries()) await ws[i]!.client.complete(done(r));
    expect(await queueLeft()).toEqual([]);
  });

  it('restarting cancelled and failed jobs keeps the whole queue moving (attempts only grow)', async () => {
    const w = await worker('w-restart', caps(['small']));
    const cancelled = await urlJob(alice);
    const c1 = (await claim(w))!;
    await svc.speech.jobs.cancel(alice, cancelled.id);
    await w.client.complete(done(c1, { success: false, cancelled: true, error: 'cancelled' }));
    const failed = await urlJob(alice);
    const f1 = (await claim(w))!;
    await w.client.complete(done(f1, { success: false, error: 'engine crashed' }));
    expect(await jobRow(cancelled.id)).toMatchObject({ status: 'failed', failure_error: 'Cancelled on request.' });

    await svc.speech.jobs.restart(alice, cancelled.id);
    await svc.speech.jobs.restart(alice, failed.id);
    const newer = await urlJob(alice);
    const got = [(await claim(w))!, (await claim(w))!, (await claim(w))!];
    expect(got.map((g) => g.lease.job_id)).toEqual([cancelled.id, failed.id, newer.id]);
    expect(got.map((g) => g.lease.attempt)).toEqual([2, 2, 1]);
    for (const g of got) await w.client.complete(done(g));
    for (const id of [cancelled.id, failed.id, newer.id]) expect((await jobRow(id)).status).toBe('completed');
    expect(await queueLeft()).toEqual([]);
  });

  it('a worker that says Hello again without its lease gets the job requeued at once; held leases survive', async () => {
    const w = await worker('w-reborn', caps(['small']));
    const kept = await urlJob(alice);
    const lost = await urlJob(alice);
    const k = (await claim(w))!;
    const l = (await claim(w))!;
    expect([k.lease.job_id, l.lease.job_id]).toEqual([kept.id, lost.id]);
    // The agent restarted (new session) and still runs only `kept`.
    const hello = await w.client.hello({
      contract_version: WORKER_CONTRACT_VERSION,
      agent_version: 't',
      hostname: 'h',
      capabilities: caps(['small']),
      local: false,
      held_leases: [k.lease],
    });
    w.session = hello.session_id;
    expect(await jobRow(lost.id)).toMatchObject({ status: 'queued' });
    await expectStale(w.client.complete(done(l)));
    const again = (await claim(w))!;
    expect(again.lease).toMatchObject({ job_id: lost.id, attempt: 2 });
    await w.client.complete(done(k));
    await w.client.complete(done(again));
    expect((await jobRow(kept.id)).status).toBe('completed');
    expect((await jobRow(lost.id)).status).toBe('completed');
  });

  it('progress is written in batches under the fence: segments resent on a new stream are stored once, completion sees all', async () => {
    const w = await worker('w-progress', caps(['small']));
    const job = await urlJob(alice);
    const got = (await claim(w))!;
    const seg = (seq: number) => ({ seq, start: seq, end: seq + 1, text: `word${seq}` });
    const msg = (segments: ReturnType<typeof seg>[]) => ({
      stage: 'transcribing' as const,
      stage_detail: 'test',
      audio_position_seconds: segments.at(-1)?.end ?? 0,
      segments,
      duration_seconds: 10,
      engine: 'test',
      engine_model: 'small',
    });
    const first = w.client.progress(got.lease);
    for (let i = 0; i < 5; i++) first.send(msg([seg(i)]));
    first.cancel(); // the stream breaks before its acknowledgement
    await first.end().catch(() => undefined);
    // The worker resends the attempt's segments on a new stream, then more.
    const second = w.client.progress(got.lease);
    second.send(msg([0, 1, 2, 3, 4].map(seg)));
    for (let i = 5; i < 8; i++) second.send(msg([seg(i)]));
    const ack = await second.end();
    expect(ack.segments_stored).toBeLessThanOrEqual(8);
    await w.client.complete(done(got, { segment_count: 8 }));
    const row = await jobRow(job.id);
    expect(row.status).toBe('completed');
    expect(row.transcript_text).toBe('word0 word1 word2 word3 word4 word5 word6 word7');
    const n = await svc.orm.em.getConnection().execute<Array<{ n: string }>>('select count(*) as n from speech_segments where job_id = ?', [job.id]);
    expect(Number(n[0]!.n)).toBe(8);
    // A stream for a lease that ended is refused.
    const late = w.client.progress(got.lease);
    late.send(msg([seg(9)]));
    await expectStale(late.end());
  });

  it('a released job is queued again without using up a retry', async () => {
    const w = await worker('w-release', caps(['small']));
    const job = await urlJob(alice);
    const got = (await claim(w))!;
    await w.client.release({ lease: got.lease, reason: 'SIGTERM' });
    expect((await jobRow(job.id)).status).toBe('queued');
    await expectStale(w.client.complete(done(got)));
    const again = (await claim(w))!;
    expect(again.lease).toMatchObject({ job_id: job.id, attempt: 2 });
    await w.client.complete(done(again));
    expect((await jobRow(job.id)).status).toBe('completed');
  });
});

describe('execution targets', () => {
  it('a named worker target is an exact force: only that worker, even without the model', async () => {
    const pinned = await worker('w-pinned', caps(['turbo']));
    const bystander = await worker('w-bystander', caps(['small', 'large']));
    const job = await urlJob(alice, { model: 'large' });
    await svc.speech.jobs.setExecutionTarget(admin, job.id, { mode: 'worker', worker: 'w-pinned' });
    expect(await claim(bystander)).toBeNull();
    const got = (await claim(pinned))!;
    expect(got.lease.job_id).toBe(job.id);
    expect(got.forced).toBe(true);
    expect(got.model).toBe('large');
    await pinned.client.complete(done(got));
  });

  it('local execution stands by while a remote worker has fresh presence; local allowlist is small', async () => {
    const local = await worker('w-local', caps(['small', 'large']), true);
    const largeJob = await urlJob(alice, { model: 'large' });
    await worker('w-remote', caps(['turbo']));
    const smallJob = await urlJob(alice, { model: 'small' });
    // w-remote is fresh: the local runner stands by even for a small job.
    expect(await claim(local)).toBeNull();
    // The remote workers' presence goes stale (as if they had been silent past the presence TTL).
    await svc.orm.em
      .getConnection()
      .execute(`update speech_workers set last_seen_at = now() - interval '1 hour' where coalesce((capabilities->>'local')::boolean, false) = false`);
    const got = (await claim(local))!;
    expect(got.lease.job_id).toBe(smallJob.id); // never the large one: not on the local allowlist
    await local.client.complete(done(got));
    expect(await claim(local)).toBeNull();
    // An administrator can still send the large job to the local runner explicitly.
    await svc.speech.jobs.setExecutionTarget(admin, largeJob.id, { mode: 'local' });
    const forced = (await claim(local))!;
    expect(forced.lease.job_id).toBe(largeJob.id);
    await local.client.complete(done(forced));
  }, 15_000);
});

describe('media', () => {
  it('streams an uploaded file lease-bound with its checksum; a stale lease gets nothing', async () => {
    const w = await worker('w-media', caps(['small'], { can_fetch_urls: false }));
    const dir = mkdtempSync(path.join(tmpdir(), 'sonar-up-'));
    const wav = path.join(dir, 'tone.wav');
    execFileSync('ffmpeg', ['-loglevel', 'error', '-f', 'lavfi', '-i', 'sine=frequency=440:duration=3', '-ac', '1', '-ar', '16000', wav]);
    const bytes = readFileSync(wav);
    const sha = createHash('sha256').update(bytes).digest('hex');
    const temp = path.join(dir, 'upload.part');
    writeFileSync(temp, bytes);
    const job = await svc.speech.jobs.create(alice, {
      channel: 'web',
      source: { type: 'upload', tempPath: temp, filename: 'tone.wav', sizeBytes: bytes.length, sha256: sha },
    });
    expect(job.sourceDurationSeconds).toBeCloseTo(3, 0);
    await urlJob(alice); // a URL job this worker cannot fetch must not be handed to it
    const got = (await claim(w))!;
    expect(got.lease.job_id).toBe(job.id);
    expect(got.media_from_coordinator).toBe(true);
    expect(got.media_sha256).toBe(sha);
    const out = path.join(dir, 'fetched');
    const res = await w.client.fetchMedia(got.lease, out);
    expect(res).toEqual({ sizeBytes: bytes.length, sha256: sha });
    expect(readFileSync(out).equals(bytes)).toBe(true);
    await expectStale(w.client.fetchMedia({ ...got.lease, lease_token: 'nope' }, path.join(dir, 'x')));
    await w.client.complete(done(got));
  });

  it('stages a URL source on the coordinator for a worker that may not fetch URLs', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'sonar-stage-'));
    const wav = path.join(dir, 'talk.wav');
    execFileSync('ffmpeg', ['-loglevel', 'error', '-f', 'lavfi', '-i', 'sine=frequency=300:duration=2', '-ac', '1', '-ar', '16000', wav]);
    const bytes = readFileSync(wav);
    const server = createServer((req, res) => {
      if (req.url === '/talk.wav') res.writeHead(200, { 'content-type': 'audio/wav' }).end(bytes);
      else res.writeHead(404).end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const w = await worker('w-nofetch', caps(['turbo'], { can_fetch_urls: false }));
      const ok = await svc.speech.jobs.create(alice, { channel: 'web', model: 'turbo', source: { type: 'url', url: `${base}/talk.wav` } });
      const got = (await claim(w, 15_000))!;
      expect(got.lease.job_id).toBe(ok.id);
      expect(got.media_from_coordinator).toBe(true);
      expect(got.source_url).toBe('');
      const sha = createHash('sha256').update(bytes).digest('hex');
      expect(got.media_sha256).toBe(sha);
      expect(await w.client.fetchMedia(got.lease, path.join(dir, 'fetched'))).toEqual({ sizeBytes: bytes.length, sha256: sha });
      await w.client.complete(done(got));

      const missing = await svc.speech.jobs.create(alice, { channel: 'web', model: 'turbo', source: { type: 'url', url: `${base}/gone.wav` } });
      expect(await claim(w, 2_000)).toBeNull();
      await expect.poll(async () => (await jobRow(missing.id)).status, { timeout: 5_000 }).toBe('failed');
      expect((await jobRow(missing.id)).failure_error).toBe(
        `Could not download the source: there is nothing at this address (${new URL(base).host} answered HTTP 404 Not Found)`,
      );
    } finally {
      server.close();
    }
  });
});
