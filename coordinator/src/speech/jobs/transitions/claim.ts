import type { Knex } from '@mikro-orm/postgresql';
import { LOCAL_ALLOWLIST_SQL } from '../../local-models.js';
import { sql } from '../../../db/sql.js';
import { DIARIZATION_TRANSITIONS, JOB_TRANSITIONS, sqlStates, toStatus } from '../job-transitions.js';
import type { StatedSpeakers } from '../entities.js';
import type { JobStore, StatusRow } from './store.js';

/**
 * Claims (JOB_TRANSITIONS.claim, DIARIZATION_TRANSITIONS.start of a rerun): a worker asks for work
 * and gets a lease on the next job it may run, or nothing.
 */

export interface ClaimingWorker {
  id: number;
  name: string;
  sessionId: string | null;
  models: string[];
  local: boolean;
  canFetchUrls: boolean;
  /** Advertises a working diarizer (contract 3+): may take auto jobs that ask for speaker labels, and reruns. */
  diarization: boolean;
  /** Speaks contract 3+ (understands JobAssignment.task): may be given diarization reruns at all (pinned ones even without a diarizer). */
  diarizeTasks: boolean;
  /** Speaks contract 5+ (honours JobAssignment.num_speakers / min_speakers / max_speakers): may be given jobs and reruns with a stated speaker count. */
  speakerCounts: boolean;
}

export interface ClaimedJob {
  jobId: number;
  attempt: number;
  pass: number;
  forced: boolean;
  expiresAt: number;
  model: string;
  language: string | null;
  sourceType: 'url' | 'upload';
  sourceUrl: string | null;
  mediaPath: string | null;
  mediaSha256: string | null;
  sizeBytes: number;
  filename: string | null;
  durationSeconds: number;
  diarization: boolean;
  /** A transcription attempt, or a diarization rerun of a completed job. */
  task: 'transcribe' | 'diarize';
  /** A rerun whose pass has no timestamped segments: transcribe first, then diarize. */
  regenerateSegments: boolean;
  /** The speaker count stated for the diarization (only ever claimed by a worker with `speakerCounts`). */
  speakers: StatedSpeakers | null;
}

export interface ClaimRequest {
  worker: ClaimingWorker;
  tokenHash: string;
  /** The hash of the token a diarization rerun's lease gets instead (its token says `diarize`, see isDiarizeToken). */
  diarizeTokenHash: string;
}

/**
 * A diarization rerun's lease token starts with this prefix, so Complete knows which kind of
 * lease it ends without reading it first; the fence (token hash and `kind`) still decides.
 */
export const DIARIZE_TOKEN_PREFIX = 'd.';
export const isDiarizeToken = (token: string) => token.startsWith(DIARIZE_TOKEN_PREFIX);

export interface ClaimOptions {
  ttlSeconds: number;
  presenceTtlSeconds: number;
  /** SPEECH_LOCAL_MODELS: the seed of the local model allowlist (the administrator's setting in app_settings wins). */
  localModels: string[];
}

/** A claimed job as the claim statements return it: the assignment and the live status to publish. */
type ClaimedRow = ClaimedJob & StatusRow;

/** The worker's capabilities, as the eligibility fragments (CLAIMABLE, REMOTE_PRESENT) bind them. */
interface EligibilityParams {
  isLocal: boolean;
  models: string[];
  allow: string[];
  presence: number;
  canFetch: boolean;
  diarize: boolean;
  /** ClaimingWorker.speakerCounts: false keeps jobs with a stated speaker count away from the worker. */
  counts: boolean;
}

const eligibility = (w: ClaimingWorker, opts: ClaimOptions): EligibilityParams => ({
  isLocal: w.local,
  models: w.models,
  allow: opts.localModels,
  presence: opts.presenceTtlSeconds,
  canFetch: w.canFetchUrls,
  diarize: w.diarization,
  counts: w.speakerCounts,
});

/** A remote worker (not the local runner) has fresh presence: local execution of `auto` work stands by. */
const REMOTE_PRESENT = `select 1 from speech_workers w
   where w.revoked_at is null and w.last_seen_at > now() - make_interval(secs => :presence)
     and coalesce((w.capabilities->>'local')::boolean, false) = false`;

/**
 * A worker below contract 5 (:counts false) would ignore a stated speaker count: it is never handed
 * a job that has one, whatever the target (a pinned job waits for its worker to be upgraded).
 */
const HONOURS_COUNT = '(:counts or j.diarization_speakers is null)';

/**
 * Jobs a worker may claim; `pinned` says which pinned (execution_target 'worker') jobs are its own.
 * The status guard is written out as literals from JOB_TRANSITIONS.claim.from: the partial index
 * speech_jobs_claim_idx (where status = 'queued') must match it under a generic plan.
 */
const CLAIMABLE = (pinned: string) => `j.status in (${sqlStates(JOB_TRANSITIONS.claim.from)}) and j.cancel_requested_at is null
  and (
    (j.execution_target = 'worker' and ${pinned})
    or (j.execution_target = 'local' and :isLocal)
    or (j.execution_target = 'auto' and j.model = any(:models::text[])
        and (not j.diarization_requested or :diarize)
        and (not :isLocal or (j.model = any(${LOCAL_ALLOWLIST_SQL}) and not exists (${REMOTE_PRESENT}))))
  )
  and (j.source_type = 'upload' or j.media_path is not null or (:canFetch and j.worker_fetchable))
  and ${HONOURS_COUNT}`;

/** The columns of a claimed job (CTEs `job` and `lease`), named and typed as ClaimedRow. */
const CLAIMED_COLUMNS = (task: 'transcribe' | 'diarize', regenerate: string) => `job.id, job.status, job.stage_label, job.stage_detail,
    job.audio_position_seconds, job.attempt, job.id as "jobId", job.current_pass as pass, job.forced,
    floor(extract(epoch from lease.expires_at) * 1000)::float8 as "expiresAt", job.model, job.language, job.source_type as "sourceType",
    job.source_url as "sourceUrl", job.media_path as "mediaPath", job.media_sha256 as "mediaSha256",
    coalesce(job.source_size_bytes, 0)::float8 as "sizeBytes", job.source_filename as filename,
    coalesce(job.source_duration_seconds, 0)::float8 as "durationSeconds", job.diarization_requested as diarization,
    job.diarization_speakers as speakers, '${task}'::text as task, ${regenerate} as "regenerateSegments"`;

/** The parameters of LEASE_CTES. */
interface LeaseParams {
  ttl: number;
  /** JOB_TRANSITIONS.claim.to */
  to: string;
}

/**
 * Leases the assigned jobs (CTE `a`: id, wid, name, session, hash, forced): queued → :to with a new
 * attempt each, its lease, its runtime-log entry, and the pass's segments of an abandoned attempt removed.
 * CTEs `job` (with a.hash) and `lease`; the statement selects CLAIMED_COLUMNS from them.
 */
const LEASE_CTES = `job as (
    update speech_jobs j set
       status = :to, attempt = j.attempt + 1, worker_id = a.wid,
       started_at = coalesce(j.started_at, now()), finished_at = null, failure_error = null, outcome = null,
       stage_label = 'Claimed by ' || a.name, stage_detail = null, audio_position_seconds = 0, transcript_text = null, updated_at = now()
      from a where j.id = a.id
    returning j.id, j.attempt, j.current_pass, j.model, j.language, j.source_type, j.source_url, j.media_path, j.media_sha256,
              j.source_size_bytes, j.source_filename, j.source_duration_seconds, j.diarization_requested, j.diarization_speakers,
              j.status, j.stage_label, j.stage_detail, j.audio_position_seconds, a.forced, a.wid, a.name, a.session, a.hash
  ), lease as (
    insert into speech_leases (job_id, attempt, worker_id, session_id, token_hash, expires_at)
    select id, attempt, wid, session, hash, now() + make_interval(secs => :ttl) from job
    returning job_id, expires_at
  ), cleared as (
    -- a new attempt starts the pass from scratch: segments of an abandoned attempt go
    delete from speech_segments s using job where s.job_id = job.id and s.pass = job.current_pass
  ), ev as (
    insert into speech_job_events (job_id, event, message, data)
    select id, 'claimed', 'Attempt ' || attempt || ' claimed by worker ' || name || case when forced then ' (pinned target)' else '' end || '.',
           jsonb_build_object('worker', name, 'attempt', attempt)
      from job
  )`;

/** LEASE_CTES with the claimed jobs selected. */
const LEASE_ASSIGNED = `${LEASE_CTES}
  select ${CLAIMED_COLUMNS('transcribe', 'false')}
    from job join lease on lease.job_id = job.id`;

/**
 * CLAIM_ONE — one worker's claim.
 * Parameters: the worker's eligibility, :wid, :name, :session, :hash (its token's hash), :ttl, :to.
 * Guard: CLAIMABLE (queued, not cancelled, eligible for this worker), the oldest (admin-owned first), skip locked.
 * Returns: the claimed job (0 or 1 rows).
 */
const CLAIM_ONE = sql<EligibilityParams & LeaseParams & { wid: number; name: string; session: string | null; hash: string }, ClaimedRow>(
  `with picked as (
     select j.id, (j.execution_target <> 'auto') as forced from speech_jobs j
      where ${CLAIMABLE('j.target_worker_id = :wid')}
      order by j.owner_is_admin desc, j.created_at, j.id
      limit 1
      for update of j skip locked
   ), a as (
     select picked.id, :wid::int as wid, :name::text as name, :session::text as session, :hash::text as hash, picked.forced from picked
   ), ${LEASE_ASSIGNED}`,
  'speech_claim',
);

/**
 * CLAIM_GROUP — the concurrent claims of workers with the same capabilities, in one statement:
 * the jobs they may claim are locked (skip locked, at most one per claim, in claim order), a job
 * pinned to a worker goes to that worker's claims (its first claim first), the others go in claim
 * order to the claims left, in the order the claims came; then LEASE_CTES.
 * Parameters: the group's eligibility; parallel arrays :wids, :names, :sessions, :hashes (one per
 * claim, in arrival order); :limit (the number of claims), :ttl, :to.
 * Guard: CLAIMABLE (pinned: to one of the group's workers); skip locked.
 * Returns: the claimed jobs, each with its claim's token hash and the number of candidates locked.
 */
const CLAIM_GROUP = sql<
  EligibilityParams & LeaseParams & { wids: number[]; names: string[]; sessions: Array<string | null>; hashes: string[]; limit: number },
  ClaimedRow & { hash: string; candidates: number }
>(
  `with req as (
     select r.*, row_number() over (partition by r.wid order by r.ord) as k
       from unnest(:wids::int[], :names::text[], :sessions::text[], :hashes::text[]) with ordinality as r(wid, name, session, hash, ord)
   ), cand as materialized (
     select j.id, j.execution_target, j.target_worker_id, j.owner_is_admin, j.created_at from speech_jobs j
      where ${CLAIMABLE('j.target_worker_id = any(:wids::int[])')}
      order by j.owner_is_admin desc, j.created_at, j.id
      limit :limit
      for update of j skip locked
   ), ranked as (
     select c.id, c.execution_target, c.target_worker_id,
            row_number() over (partition by case when c.execution_target = 'worker' then c.target_worker_id end order by c.owner_is_admin desc, c.created_at, c.id) as k
       from cand c
   ), pinned as (
     select p.id, r.ord from ranked p join req r on r.wid = p.target_worker_id and r.k = p.k where p.execution_target = 'worker'
   ), free_req as (
     select r.ord, row_number() over (order by r.ord) as n from req r where r.ord not in (select ord from pinned)
   ), assigned as (
     select id, ord, true as forced from pinned
     union all
     select c.id, f.ord, c.execution_target <> 'auto' from ranked c join free_req f on f.n = c.k where c.execution_target <> 'worker'
   ), a as (
     select s.id, r.wid, r.name, r.session, r.hash, s.forced from assigned s join req r on r.ord = s.ord
   ), ${LEASE_CTES}
   select ${CLAIMED_COLUMNS('transcribe', 'false')}, job.hash, (select count(*) from cand)::int as candidates
     from job join lease on lease.job_id = job.id`,
  'speech_claim_group',
);

/**
 * Whether any diarization rerun waits for a runner.
 * Parameters: none. Guard: CLAIM_DIARIZATION's, without the worker's part. Returns: one row.
 */
const DIARIZATION_WAITING = sql<Record<string, never>, { waiting: boolean }>(
  `select exists (select 1 from speech_jobs j
                   where j.status = 'completed' and j.diarization_state in (${sqlStates(DIARIZATION_TRANSITIONS.start.from)})
                     and j.diarization_rerun_requested_at is not null and j.media_path is not null) as waiting`,
  'speech_diarization_waiting',
);

/**
 * CLAIM_DIARIZATION — leases a diarization rerun of a completed job as a `diarize` lease: its
 * diarization moves pending → running (DIARIZATION_TRANSITIONS.start; the job stays completed)
 * and its attempt sequence grows by one (leases are unique per job and attempt). Pinned and local
 * targets apply as for transcription; an `auto` rerun needs a worker with a diarizer, and one
 * that has the job's model when the pass's segments must be regenerated first.
 * Parameters: the worker's eligibility, :wid, :name, :session, :hash (the diarize token's hash), :ttl, :running.
 * Guard: completed, diarization pending with the rerun marker, media retained (literals: the partial index speech_jobs_diarize_idx),
 * and no stated speaker count unless the worker honours one (:counts).
 * Returns: the claimed rerun (0 or 1 rows).
 */
const CLAIM_DIARIZATION = sql<
  EligibilityParams & { wid: number; name: string; session: string | null; hash: string; ttl: number; running: string },
  ClaimedRow
>(
  `with picked as (
     select j.id, (j.execution_target <> 'auto') as forced,
            not exists (select 1 from speech_segments s where s.job_id = j.id and s.pass = j.current_pass) as regenerate
       from speech_jobs j
      where j.status = 'completed' and j.diarization_state in (${sqlStates(DIARIZATION_TRANSITIONS.start.from)}) and j.diarization_rerun_requested_at is not null
        and j.media_path is not null and ${HONOURS_COUNT}
        and ((j.execution_target = 'worker' and j.target_worker_id = :wid)
          or (j.execution_target = 'local' and :isLocal)
          or (j.execution_target = 'auto' and :diarize and (not :isLocal or not exists (${REMOTE_PRESENT}))
              and (exists (select 1 from speech_segments s where s.job_id = j.id and s.pass = j.current_pass)
                   or (j.model = any(:models::text[]) and (not :isLocal or j.model = any(${LOCAL_ALLOWLIST_SQL}))))))
      order by j.owner_is_admin desc, j.diarization_rerun_requested_at, j.id
      limit 1
      for update of j skip locked
   ), job as (
     update speech_jobs j set attempt = j.attempt + 1, diarization_state = :running, diarization_attempts = j.diarization_attempts + 1,
            diarization_error = null, diarization_updated_at = now(), updated_at = now()
       from picked where j.id = picked.id
     returning j.id, j.attempt, j.current_pass, j.model, j.language, j.source_type, j.source_url, j.media_path, j.media_sha256,
               j.source_size_bytes, j.source_filename, j.source_duration_seconds, j.diarization_requested, j.diarization_speakers, j.diarization_attempts,
               j.status, j.stage_label, j.stage_detail, j.audio_position_seconds, picked.forced, picked.regenerate
   ), lease as (
     insert into speech_leases (job_id, attempt, worker_id, session_id, token_hash, expires_at, kind)
     select id, attempt, :wid, :session, :hash, now() + make_interval(secs => :ttl), 'diarize' from job
     returning job_id, expires_at
   ), ev as (
     insert into speech_job_events (job_id, event, message, data)
     select id, 'diarization_claimed',
            'Speaker diarization (try ' || diarization_attempts || ') claimed by worker ' || :name ||
            case when regenerate then '; the timestamped segments are regenerated from the retained media first.' else '.' end,
            jsonb_build_object('worker', :name::text, 'attempt', attempt)
       from job
   )
   select ${CLAIMED_COLUMNS('diarize', 'job.regenerate')} from job join lease on lease.job_id = job.id`,
  'speech_claim_diarization',
);

/** The claimed job without its status columns (those are published, not handed to the worker). */
function claimedJob(row: ClaimedRow): ClaimedJob {
  const { id: _id, status: _status, stage_label: _label, stage_detail: _detail, audio_position_seconds: _position, ...claimed } = row;
  return claimed;
}

/**
 * Leases the next job to each claiming worker (admin-owned first, then oldest), or null. One
 * statement for a lone claim; concurrent claims of workers with the same capabilities (batched by
 * LeaseService) are one statement too (CLAIM_GROUP: the candidates are locked with skip locked,
 * assigned in claim order, a pinned job only to its worker, and leased), one round trip instead of
 * a transaction of four (begin, lock, lease, commit).
 */
export async function claimMany(store: JobStore, requests: ClaimRequest[], opts: ClaimOptions): Promise<Array<ClaimedJob | null>> {
  const results: Array<ClaimedRow | null> = new Array<ClaimedRow | null>(requests.length).fill(null);
  const groups = new Map<string, number[]>();
  requests.forEach((r, i) => {
    const w = r.worker;
    const key = `${w.local}|${w.canFetchUrls}|${w.diarization}|${w.speakerCounts}|${[...w.models].sort().join(',')}`;
    groups.set(key, [...(groups.get(key) ?? []), i]);
  });
  for (const indexes of groups.values()) {
    if (indexes.length === 1) {
      const i = indexes[0]!;
      results[i] = await claimOne(store, requests[i]!, opts);
      continue;
    }
    const group = indexes.map((i) => requests[i]!);
    const { claimed, maybeMore } = await claimGroup(store.knex, group, opts);
    for (const [k, i] of indexes.entries()) results[i] = claimed[k] ?? null;
    // Candidates ran out on pinned jobs of other workers: the unlucky claims look again one by one.
    if (maybeMore) for (const [k, i] of indexes.entries()) if (!claimed[k]) results[i] = await claimOne(store, group[k]!, opts);
  }
  // Nothing to transcribe: diarization reruns of completed jobs (one statement each; their partial index
  // is tiny). One look first: a batch of idle workers would otherwise try one statement each for nothing.
  if (requests.some((r, i) => !results[i] && r.worker.diarizeTasks) && (await DIARIZATION_WAITING.first(store.knex, {}))?.waiting) {
    for (const [i, r] of requests.entries()) if (!results[i] && r.worker.diarizeTasks) results[i] = await claimDiarization(store, r, opts);
  }
  store.publish(results.filter((r): r is ClaimedRow => r !== null));
  return results.map((r) => (r ? claimedJob(r) : null));
}

function claimOne(store: JobStore, req: ClaimRequest, opts: ClaimOptions): Promise<ClaimedRow | null> {
  const w = req.worker;
  return CLAIM_ONE.first(store.knex, {
    ...eligibility(w, opts),
    wid: w.id,
    name: w.name,
    session: w.sessionId,
    hash: req.tokenHash,
    ttl: opts.ttlSeconds,
    to: toStatus('claim', 'transcribing'),
  });
}

async function claimGroup(knex: Knex, group: ClaimRequest[], opts: ClaimOptions): Promise<{ claimed: Array<ClaimedRow | null>; maybeMore: boolean }> {
  const rows = await CLAIM_GROUP.rows(knex, {
    ...eligibility(group[0]!.worker, opts),
    wids: group.map((r) => r.worker.id),
    names: group.map((r) => r.worker.name),
    sessions: group.map((r) => r.worker.sessionId),
    hashes: group.map((r) => r.tokenHash),
    limit: group.length,
    ttl: opts.ttlSeconds,
    to: toStatus('claim', 'transcribing'),
  });
  const byHash = new Map(rows.map(({ hash, candidates: _candidates, ...row }) => [hash, row]));
  return {
    claimed: group.map((r) => byHash.get(r.tokenHash) ?? null),
    // Every claim of the group found a candidate, yet some got none (pinned jobs of other claims): there may be more.
    maybeMore: (rows[0]?.candidates ?? 0) === group.length,
  };
}

async function claimDiarization(store: JobStore, req: ClaimRequest, opts: ClaimOptions): Promise<ClaimedRow | null> {
  const w = req.worker;
  const claimed = await CLAIM_DIARIZATION.first(store.knex, {
    ...eligibility(w, opts),
    wid: w.id,
    name: w.name,
    session: w.sessionId,
    hash: req.diarizeTokenHash,
    ttl: opts.ttlSeconds,
    running: DIARIZATION_TRANSITIONS.start.to[0],
  });
  if (claimed) store.sink.diarization(claimed.jobId, { state: 'running', speaker_count: null });
  return claimed;
}
