import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { openOrm, type Orm } from '../../coordinator/src/db/orm.js';
import type { JobEventSink } from '../../coordinator/src/speech/jobs/job-events.js';
import { JobRepository, hashLeaseToken, type ClaimRequest } from '../../coordinator/src/speech/jobs/job-repository.js';
import { createTestDatabase, type TestDatabase } from '../support/harness.js';

/**
 * Concurrent claims of workers with the same capabilities are one statement (CLAIM_GROUP): each
 * job to one claim, pinned jobs only to their worker, admin-owned first then oldest, and one round
 * trip to PostgreSQL for the whole batch (no transaction around it).
 */

const sink: JobEventSink = { segment() {}, status() {}, diarization() {}, ai() {}, changed() {} };
const OPTS = { ttlSeconds: 60, presenceTtlSeconds: 60, localModels: [] };

let db: TestDatabase;
let orm: Orm;
let repo: JobRepository;
let owner: number;
let admin: number;
const workers: number[] = [];
let token = 0;

async function job(extra: { admin?: boolean; pinnedTo?: number; model?: string } = {}): Promise<number> {
  const { rows } = await repo.knex.raw<{ rows: Array<{ id: number }> }>(
    `insert into speech_jobs (owner_id, owner_is_admin, source_type, source_filename, media_path, model, status, execution_target, target_worker_id,
                              diarization_requested, diarization_state)
     values (:owner, :isAdmin, 'upload', 'a.wav', '/media/a.wav', :model, 'queued', :target, :pinned, false, 'skipped') returning id`,
    {
      owner: extra.admin ? admin : owner,
      isAdmin: Boolean(extra.admin),
      model: extra.model ?? 'tiny',
      target: extra.pinnedTo ? 'worker' : 'auto',
      pinned: extra.pinnedTo ?? null,
    },
  );
  return rows[0]!.id;
}

function request(workerIndex: number): ClaimRequest {
  const id = workers[workerIndex]!;
  token += 1;
  return {
    worker: {
      id,
      name: `w${workerIndex}`,
      sessionId: null,
      models: ['tiny'],
      local: false,
      canFetchUrls: false,
      diarization: false,
      diarizeTasks: false,
      speakerCounts: false,
    },
    tokenHash: hashLeaseToken(`t${token}`),
    diarizeTokenHash: hashLeaseToken(`d.t${token}`),
  };
}

/** Runs claimMany and counts the statements it sent (each one round trip). */
async function claimCounted(requests: ClaimRequest[]) {
  const sent: string[] = [];
  const onQuery = (q: { sql?: string; options?: { name?: string } }) => sent.push(q.options?.name ?? q.sql ?? '');
  repo.knex.on('query', onQuery);
  try {
    const claimed = await repo.claimMany(requests, OPTS);
    return { claimed: claimed.map((c) => c?.jobId ?? null), sent };
  } finally {
    repo.knex.removeListener('query', onQuery);
  }
}

async function leases() {
  const { rows } = await repo.knex.raw<{ rows: Array<{ job_id: number; worker_id: number; attempt: number; token_hash: string }> }>(
    `select job_id, worker_id, attempt, token_hash from speech_leases order by job_id`,
  );
  return rows;
}

beforeAll(async () => {
  db = await createTestDatabase();
  orm = await openOrm({ databaseUrl: db.url, poolMax: 2, migrator: false });
  repo = new JobRepository(orm, sink, false);
  const knex = repo.knex;
  owner = (await knex.raw<{ rows: Array<{ id: number }> }>(`insert into users (username, password_hash) values ('owner', 'x') returning id`)).rows[0]!.id;
  admin = (await knex.raw<{ rows: Array<{ id: number }> }>(`insert into users (username, password_hash, is_admin) values ('adm', 'x', true) returning id`))
    .rows[0]!.id;
  for (const name of ['w0', 'w1', 'w2']) {
    workers.push(
      (await knex.raw<{ rows: Array<{ id: number }> }>(`insert into speech_workers (name, secret_hash) values (?, ?) returning id`, [name, `x-${name}`]))
        .rows[0]!.id,
    );
  }
});

beforeEach(async () => {
  await repo.knex.raw('delete from speech_jobs');
});

afterAll(async () => {
  await orm?.close(true);
  await db?.drop();
});

describe('a batch of claims of one capability group', () => {
  it('is one statement: admin-owned job first, then the oldest, each to one claim in arrival order, with its lease', async () => {
    const a1 = await job();
    const a2 = await job();
    const ad = await job({ admin: true });
    await job(); // a fourth: not claimed by three claims
    const requests = [request(0), request(1), request(2)];
    const { claimed, sent } = await claimCounted(requests);
    expect(sent).toEqual(['speech_claim_group']);
    expect(claimed).toEqual([ad, a1, a2]);
    const held = await leases();
    expect(held).toHaveLength(3);
    for (const [i, id] of claimed.entries()) {
      expect(held.find((l) => l.job_id === id)).toMatchObject({ worker_id: workers[i], attempt: 1, token_hash: requests[i]!.tokenHash });
    }
  });

  it('gives a pinned job only to its worker (its first claim), the others to the remaining claims', async () => {
    const older = await job();
    const pinned1 = await job({ pinnedTo: workers[1] });
    const pinnedOther = await job({ pinnedTo: workers[2] }); // w2 does not claim in this batch
    const newer = await job();
    const { claimed, sent } = await claimCounted([request(0), request(1), request(1)]);
    expect(sent).toEqual(['speech_claim_group']);
    expect(claimed).toEqual([older, pinned1, newer]);
    expect((await leases()).map((l) => l.job_id)).not.toContain(pinnedOther);
  });

  it('looks again one by one when pinned jobs of busier claims used up the candidates', async () => {
    // Two claims of w0 and one of w1; three jobs pinned to w0 come first, then one for anyone.
    const p = [await job({ pinnedTo: workers[0] }), await job({ pinnedTo: workers[0] }), await job({ pinnedTo: workers[0] })];
    const free = await job();
    const { claimed, sent } = await claimCounted([request(0), request(1), request(0)]);
    // The batch locks three candidates (all pinned to w0): w1's claim gets none and looks again alone.
    expect(sent).toEqual(['speech_claim_group', 'speech_claim']);
    expect(claimed).toEqual([p[0], free, p[1]]);
  });

  it('an empty queue is one statement and no claim', async () => {
    const { claimed, sent } = await claimCounted([request(0), request(1)]);
    expect(claimed).toEqual([null, null]);
    expect(sent).toEqual(['speech_claim_group']);
  });
});
