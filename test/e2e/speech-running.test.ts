import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import { accessJwtPayload } from '../../coordinator/src/accounts/auth-plugin.js';
import type { AuthUser } from '../../coordinator/src/accounts/types.js';
import { loadConfig } from '../../coordinator/src/config.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { browserLogin, createTestDatabase, randomName, testEnv, type TestDatabase } from '../support/harness.js';
import { SimWorker } from '../support/sim-worker.js';

/**
 * A running job as the API shows it (built but untested until now, issue 41): the cumulative
 * transcript text (each progress batch appends its segments' text to `transcript_text`, kept to
 * its last 64 KiB while the job runs; at completion the whole text is rebuilt from the stored
 * segments), and liveness `unresponsive` after the heartbeat silence limit (90 s by default).
 */
let db: TestDatabase;
let svc: RunningCoordinator;
let sim: SimWorker;
let owner: AuthUser;
let jwt = '';
let password = '';

beforeAll(async () => {
  db = await createTestDatabase();
  svc = await startCoordinator(loadConfig(testEnv(db, { SPEECH_LEASE_TTL_SECONDS: '600' })));
  const accounts = new AccountService(svc.orm);
  const created = await accounts.createUser({ username: randomName('running'), permissions: ['speech.use'] });
  owner = created.user;
  password = created.password;
  jwt = svc.app.jwt.sign(await accessJwtPayload(accounts, owner.id));
  sim = await SimWorker.start(svc, 'sim-running-text');
}, 60_000);

afterAll(async () => {
  sim?.close();
  await svc?.close();
  await db?.drop();
});

const detail = async (id: number) => {
  const res = await svc.app.inject({ method: 'GET', url: `/api/speech/jobs/${id}`, headers: { authorization: `Bearer ${jwt}` } });
  return res.json<{
    job: { status: string; transcript_text: string | null; segment_count: number; liveness: { state: string; seconds_since_heartbeat: number | null } };
  }>().job;
};

describe('the running transcript text', () => {
  it('grows with each batch, keeps its last 64 KiB mid-run, and is whole at completion', async () => {
    const job = await svc.speech.jobs.create(owner, { channel: 'web', source: { type: 'url', url: 'https://media.example.org/long.mp3' } });
    const claim = await sim.claim();
    expect(claim?.lease.job_id).toBe(job.id);
    const lease = claim!.lease;
    // 90 segments of about 1,000 characters each, in three batches: 90 KB of text in all.
    const text = (seq: number) => `s${String(seq).padStart(2, '0')} ${'word '.repeat(199)}end${seq}.`;
    const send = async (from: number, count: number) => {
      const stream = sim.client.progress(lease);
      stream.send({
        stage: 'transcribing',
        stage_detail: '',
        audio_position_seconds: (from + count) * 10,
        segments: Array.from({ length: count }, (_, i) => ({ seq: from + i, start: (from + i) * 10, end: (from + i) * 10 + 9, text: text(from + i) })),
        duration_seconds: 900,
        engine: 'test',
        engine_model: 'small',
      });
      await stream.end();
    };

    await send(0, 10);
    const early = await detail(job.id);
    expect(early.status).toBe('transcribing');
    expect(early.transcript_text).toBe(Array.from({ length: 10 }, (_, i) => text(i)).join(' '));

    await send(10, 40);
    await send(50, 40);
    const capped = (await detail(job.id)).transcript_text!;
    expect(capped.length).toBe(64 * 1024);
    expect(capped.endsWith(text(89))).toBe(true);
    expect(capped).not.toContain(text(0));

    await sim.client.complete({
      lease,
      success: true,
      error: '',
      cancelled: false,
      segment_count: 90,
      duration_seconds: 900,
      engine: 'test',
      engine_model: 'small',
    });
    const done = await detail(job.id);
    expect(done).toMatchObject({ status: 'completed', segment_count: 90 });
    expect(done.transcript_text).toBe(Array.from({ length: 90 }, (_, i) => text(i)).join(' '));
  });
});

describe('liveness through the API', () => {
  it('is unresponsive after 90 s without a heartbeat, active again after one', async () => {
    const job = await svc.speech.jobs.create(owner, { channel: 'web', source: { type: 'url', url: 'https://media.example.org/quiet.mp3' } });
    const claim = await sim.claim();
    expect(claim?.lease.job_id).toBe(job.id);
    expect((await detail(job.id)).liveness.state).toBe('active');
    // The worker falls silent: its last heartbeat 91 s ago (the lease itself lasts 600 s here).
    await svc.orm.em
      .getConnection()
      .execute(`update speech_leases set last_heartbeat_at = now() - interval '91 seconds' where job_id = ? and ended_at is null`, [job.id]);
    const silent = await detail(job.id);
    expect(silent.liveness.state).toBe('unresponsive');
    expect(silent.liveness.seconds_since_heartbeat).toBeGreaterThanOrEqual(90);
    const session = (sim as unknown as { session: string }).session;
    await sim.client.heartbeat({ session_id: session, leases: [claim!.lease] });
    expect((await detail(job.id)).liveness.state).toBe('active');
  });
});

describe('times on the job page', () => {
  it('are Europe/Stockholm wall-clock times labelled with their zone (CET or CEST)', async () => {
    const job = await svc.speech.jobs.create(owner, { channel: 'web', source: { type: 'url', url: 'https://media.example.org/when.mp3' } });
    const { jar } = await browserLogin(svc.app, owner.username, password);
    const page = await svc.app.inject({ method: 'GET', url: `/speech/jobs/${job.id}`, headers: { cookie: jar.header() } });
    expect(page.statusCode).toBe(200);
    const times = [...page.body.matchAll(/<time datetime="([^"]+)">([^<]+)<\/time>/g)];
    expect(times.length).toBeGreaterThan(0);
    for (const [, iso, shown] of times) {
      // Computed here from the zone's rule, not with the product's formatter: UTC+1 (CET) or UTC+2 (CEST).
      const m = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2}) (CET|CEST)$/.exec(shown!);
      expect(m, shown).not.toBeNull();
      const [, y, mo, d, h, mi, sec, zone] = m!;
      const wall = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(sec));
      const utc = wall - (zone === 'CEST' ? 2 : 1) * 3600_000;
      expect(utc, `${shown} for ${iso}`).toBe(Math.floor(new Date(iso!).getTime() / 1000) * 1000);
    }
  });
});
