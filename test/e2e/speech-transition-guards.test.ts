import type { DiarizationState, JobStatus } from '@sonar/shared';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openOrm, type Orm } from '../../coordinator/src/db/orm.js';
import type { JobEventSink } from '../../coordinator/src/speech/jobs/job-events.js';
import { JobRepository, hashLeaseToken } from '../../coordinator/src/speech/jobs/job-repository.js';
import {
  CALLBACK_TRANSITIONS,
  DIARIZATION_TRANSITIONS,
  JOB_TRANSITIONS,
  type CallbackStatus,
  type JobTransition,
} from '../../coordinator/src/speech/jobs/job-transitions.js';
import { createTestDatabase, type TestDatabase } from '../support/harness.js';

/**
 * Every transition of the tables in job-transitions.ts, run against a job in each state outside its
 * `from`: the guard in its SQL must move zero rows (status and updated_at unchanged). One state
 * inside `from` is moved, and only to a state in `to`, so a driver that never reaches its
 * statement cannot pass for a guard.
 */

const STATUSES: JobStatus[] = ['queued', 'downloading', 'transcribing', 'finalizing', 'completed', 'failed'];
const DIARIZATION_STATES: DiarizationState[] = ['pending', 'running', 'completed', 'failed', 'unavailable', 'skipped'];
const CALLBACK_STATES: CallbackStatus[] = ['pending', 'retrying', 'delivered', 'failed'];

const sink: JobEventSink = { segment() {}, status() {}, diarization() {}, ai() {}, changed() {} };

let db: TestDatabase;
let orm: Orm;
let repo: JobRepository;
let owner: number;
let worker: number;

const TOKEN = 'lease-token';
const ref = (job: number) => ({ job_id: job, attempt: 1, lease_token: TOKEN });

interface Seed {
  status: JobStatus;
  diarization?: DiarizationState;
  callback?: CallbackStatus;
  /** The seeded lease is past its expiry. */
  expired?: boolean;
}

/** One job (alone in the table) in the given state, with a lease of attempt 1 held by `worker`. */
async function seed(s: Seed): Promise<number> {
  const knex = repo.knex;
  await knex.raw('delete from speech_jobs');
  const { rows } = await knex.raw<{ rows: Array<{ id: number }> }>(
    `insert into speech_jobs (owner_id, source_type, source_filename, media_path, model, status, attempt, execution_target, diarization_requested, diarization_state,
                              callback_url, callback_status, updated_at)
     values (:owner, 'upload', 'a.wav', '/media/a.wav', 'tiny', :status, 1, 'auto', false, :diar, :url, :callback, now() - interval '1 hour')
     returning id`,
    {
      owner,
      status: s.status,
      diar: s.diarization ?? 'skipped',
      url: s.callback ? 'http://127.0.0.1:9/cb' : null,
      callback: s.callback ?? null,
    },
  );
  const id = rows[0]!.id;
  await knex.raw(
    `insert into speech_leases (job_id, attempt, worker_id, token_hash, expires_at) values (:id, 1, :worker, :hash, now() + make_interval(secs => :secs))`,
    { id, worker, hash: hashLeaseToken(TOKEN), secs: s.expired ? -60 : 3600 },
  );
  return id;
}

async function state(id: number) {
  const { rows } = await repo.knex.raw<{
    rows: Array<{ status: JobStatus; diarization_state: DiarizationState; callback_status: CallbackStatus | null; moved: boolean }>;
  }>(`select status, diarization_state, callback_status, updated_at > now() - interval '30 minutes' as moved from speech_jobs where id = ?`, [id]);
  return rows[0]!;
}

const ignoreStale = (p: Promise<unknown>) => p.catch((err: unknown) => expect((err as Error).name).toBe('StaleLeaseError'));

/** Runs one transition on the seeded job, with everything but its status guard satisfied. */
const DRIVERS: Record<JobTransition, { seed?: Partial<Seed>; run: (id: number) => Promise<unknown> }> = {
  claim: {
    run: () =>
      repo.claimMany(
        [
          {
            worker: {
              id: worker,
              name: 'w1',
              sessionId: null,
              models: ['tiny'],
              local: false,
              canFetchUrls: false,
              diarization: false,
              diarizeTasks: false,
              speakerCounts: false,
            },
            tokenHash: hashLeaseToken('claim'),
            diarizeTokenHash: hashLeaseToken('d.claim'),
          },
        ],
        { ttlSeconds: 60, presenceTtlSeconds: 60, localModels: [] },
      ),
  },
  stage: {
    run: (id) =>
      ignoreStale(
        repo.writeProgress({
          ref: ref(id),
          workerId: worker,
          stage: 'transcribing',
          stageDetail: '',
          position: 1,
          durationSeconds: 10,
          engine: '',
          engineModel: '',
          segments: [],
          diarizing: false,
        }),
      ),
  },
  complete: { run: (id) => repo.finishMany([finishRequest(id, true)]) },
  fail: { run: (id) => repo.finishMany([finishRequest(id, false)]) },
  handBack: { run: (id) => ignoreStale(repo.handBack(worker, ref(id), 'shutdown')) },
  expire: { seed: { expired: true }, run: () => repo.expireLeases() },
  stagingFailed: {
    run: async (id) => {
      await repo.knex.raw(`update speech_jobs set source_type = 'url', source_url = 'http://127.0.0.1:9/a.wav', media_path = null where id = ?`, [id]);
      return repo.stagingFailed(id, 'unreachable');
    },
  },
  restart: { run: (id) => repo.restart([id], 3, 'Restarted by the test.') },
  retranscribe: { run: (id) => repo.retranscribe({ jobId: id, ownerId: owner, by: 'test', model: 'base', retries: 3, local: false }) },
};

function finishRequest(id: number, success: boolean) {
  return {
    workerId: worker,
    ref: ref(id),
    success,
    error: success ? '' : 'broken',
    cancelled: false,
    segmentCount: 0,
    durationSeconds: 10,
    engine: 'test',
    engineModel: 'test',
    shareToken: 'share-token',
    diarization: null,
  };
}

beforeAll(async () => {
  db = await createTestDatabase();
  orm = await openOrm({ databaseUrl: db.url, poolMax: 2, migrator: false });
  repo = new JobRepository(orm, sink, false);
  const knex = repo.knex;
  owner = (await knex.raw<{ rows: Array<{ id: number }> }>(`insert into users (username, password_hash) values ('owner', 'x') returning id`)).rows[0]!.id;
  worker = (await knex.raw<{ rows: Array<{ id: number }> }>(`insert into speech_workers (name, secret_hash) values ('w1', 'x') returning id`)).rows[0]!.id;
});

afterAll(async () => {
  await orm?.close(true);
  await db?.drop();
});

describe('JOB_TRANSITIONS: every move is refused outside its from', () => {
  const cases = (Object.keys(JOB_TRANSITIONS) as JobTransition[]).flatMap((t) =>
    STATUSES.map((status) => ({ t, status, allowed: (JOB_TRANSITIONS[t].from as readonly JobStatus[]).includes(status) })),
  );

  it.each(cases.filter((c) => !c.allowed))('$t from $status moves nothing', async ({ t, status }) => {
    const id = await seed({ status, ...DRIVERS[t].seed });
    await DRIVERS[t].run(id);
    expect(await state(id)).toMatchObject({ status, moved: false });
  });

  it.each(Object.keys(JOB_TRANSITIONS) as JobTransition[])('%s moves a job in its from to its to', async (t) => {
    const from = JOB_TRANSITIONS[t].from[0];
    const id = await seed({ status: from, ...DRIVERS[t].seed });
    await DRIVERS[t].run(id);
    const after = await state(id);
    expect(after.moved).toBe(true);
    expect(JOB_TRANSITIONS[t].to).toContain(after.status);
  });
});

describe('DIARIZATION_TRANSITIONS.rerun is refused outside its from', () => {
  it.each(DIARIZATION_STATES)('rerun from %s', async (diarization) => {
    const id = await seed({ status: 'completed', diarization });
    const r = await repo.requestDiarization(id, 'test');
    const allowed = (DIARIZATION_TRANSITIONS.rerun.from as readonly DiarizationState[]).includes(diarization);
    expect(r !== null).toBe(allowed);
    expect((await state(id)).diarization_state).toBe(allowed ? DIARIZATION_TRANSITIONS.rerun.to[0] : diarization);
  });
});

describe('CALLBACK_TRANSITIONS.attempt is refused outside its from', () => {
  it.each(CALLBACK_STATES)('a delivery attempt from %s', async (callback) => {
    const id = await seed({ status: 'completed', callback });
    const recorded = await repo.recordCallback(id, 1, { status: 'delivered', httpStatus: 200, error: null });
    const allowed = (CALLBACK_TRANSITIONS.attempt.from as readonly CallbackStatus[]).includes(callback);
    expect(recorded).toBe(allowed);
    expect((await state(id)).callback_status).toBe(allowed ? 'delivered' : callback);
  });
});
