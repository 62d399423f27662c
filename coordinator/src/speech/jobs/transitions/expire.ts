import type { DiarizationState, JobStatus, LeaseRefMsg } from '@sonar/shared';
import { sql } from '../../../db/sql.js';
import { DIARIZATION_TRANSITIONS, fromStatuses, toStatus } from '../job-transitions.js';
import { STATUS_COLUMNS, WANTS_NOTIFICATION, hashLeaseToken, type JobStore, type StatusRow } from './store.js';

/**
 * Leases that end without their worker (JOB_TRANSITIONS.expire, DIARIZATION_TRANSITIONS.expire):
 * `expired` leases are past their expiry by the database clock; `abandoned` leases belong to an
 * earlier session of a worker that said Hello again without them.
 */

/** A job whose lease ended without its worker: its status afterwards, and whether a diarization rerun waits for a runner again. */
export interface LeaseEnd {
  jobId: number;
  status: JobStatus;
  diarizationRequeued: boolean;
}

/** Tries a diarization rerun gets before it fails (a transcription attempt's budget is the job's max_attempts). */
const DIARIZATION_TRIES = 3;

/** Leases ended per statement; a full batch is followed by another. */
const BATCH = 200;

interface EndParams {
  outcome: 'expired' | 'abandoned';
  from: string[];
  requeued: string;
  failed: string;
  diarFrom: string;
  diarPending: string;
  diarFailed: string;
  reports: boolean;
}

type EndRow = StatusRow & { requeued: boolean; diarization_state: DiarizationState | null };

/**
 * END_LEASES(select) — ends up to BATCH leases chosen by `select` and moves their jobs: a
 * transcription attempt's job is queued again (:requeued) while attempts remain and it was not
 * cancelled, else failed (:failed, with its notification row); a diarization rerun's diarization is
 * pending again (:diarPending) while tries remain, else failed (:diarFailed), the job staying completed.
 * Parameters: those of `select`, :outcome, :from (JOB_TRANSITIONS.expire.from), :requeued, :failed,
 * :diarFrom, :diarPending, :diarFailed, :reports.
 * Guard: the lease's attempt is the job's; the job's status in :from (a rerun: completed, diarization :diarFrom).
 * Returns: the jobs moved (diarization_state null) and the reruns moved (their diarization_state).
 */
const END_LEASES = (select: string) => `with pick as (
     select l.id from speech_leases l where ${select} order by l.expires_at limit ${BATCH} for update of l skip locked
   ), ended as (
     update speech_leases l set ended_at = now(), outcome = :outcome from pick where l.id = pick.id
     returning l.job_id, l.attempt, l.kind, (select name from speech_workers w where w.id = l.worker_id) as worker
   ), dj as (
     update speech_jobs j set
        diarization_state = case when j.diarization_attempts < ${DIARIZATION_TRIES} then :diarPending::text else :diarFailed::text end,
        diarization_error = case when j.diarization_attempts < ${DIARIZATION_TRIES} then null
          else 'Gave up after ' || j.diarization_attempts || ' tries: worker ' || ended.worker ||
               case when :outcome = 'expired' then ' stopped renewing its lease.' else ' restarted without this work.' end end,
        diarization_rerun_requested_at = case when j.diarization_attempts < ${DIARIZATION_TRIES} then j.diarization_rerun_requested_at end,
        diarization_updated_at = now(), updated_at = now()
       from ended
      where ended.kind = 'diarize' and j.id = ended.job_id and j.attempt = ended.attempt and j.status = 'completed' and j.diarization_state = :diarFrom
     returning j.id, j.diarization_state, ended.worker
   ), dev as (
     insert into speech_job_events (job_id, event, message, level)
     select id, 'diarization_lease_' || :outcome,
            case when diarization_state = :diarPending then 'Speaker diarization waits for a runner again: worker ' || worker ||
                   case when :outcome = 'expired' then ' stopped renewing its lease.' else ' restarted without this work.' end
                 else 'Speaker diarization failed: gave up after worker ' || worker || ' went away.' end, 'warn'
       from dj
   ), job as (
     update speech_jobs j set
        status = case when j.cancel_requested_at is null and ended.attempt < j.max_attempts then :requeued::text else :failed::text end,
        outcome = case when j.cancel_requested_at is null and ended.attempt < j.max_attempts then null
          when j.cancel_requested_at is not null then 'cancelled' else 'failed' end,
        stage_label = case when j.cancel_requested_at is null and ended.attempt < j.max_attempts then 'Waiting for a worker'
          when j.cancel_requested_at is not null then 'Cancelled' else 'Failed' end,
        stage_detail = case when j.cancel_requested_at is null and ended.attempt < j.max_attempts then 'Requeued: ' || ended.why || '.' else null end,
        failure_error = case when j.cancel_requested_at is null and ended.attempt < j.max_attempts then null
          when j.cancel_requested_at is not null then 'Cancelled; ' || ended.why || '.'
          else 'Gave up after ' || ended.attempt || ' attempts: ' || ended.why || '.' end,
        finished_at = case when j.cancel_requested_at is null and ended.attempt < j.max_attempts then null else now() end,
        audio_position_seconds = 0, transcript_text = null, updated_at = now()
       from (select e.*, case when :outcome = 'expired'
                 then 'worker ' || e.worker || ' stopped renewing its lease (attempt ' || e.attempt || ' of ' || jj.max_attempts || ')'
                 else 'worker ' || e.worker || ' restarted without this job (attempt ' || e.attempt || ' of ' || jj.max_attempts || ')' end as why
               from ended e join speech_jobs jj on jj.id = e.job_id) ended
      where j.id = ended.job_id and j.attempt = ended.attempt and j.status = any(:from::text[])
     returning ${STATUS_COLUMNS}, j.callback_cycle, j.failure_error, j.stage_detail as detail, (j.status = :requeued) as requeued,
               j.queue_channel, j.callback_url, j.owner_id
   ), ev as (
     insert into speech_job_events (job_id, event, message, level)
     select id, 'lease_' || :outcome, coalesce(failure_error, detail), case when requeued then 'warn' else 'error' end from job
   ), note as (
     insert into speech_notifications (job_id, cycle, status) select id, callback_cycle, status from job where not requeued and ${WANTS_NOTIFICATION}
     on conflict (job_id, cycle) do nothing
   )
   select id, status, stage_label, stage_detail, audio_position_seconds, attempt, requeued, null::text as diarization_state from job
   union all
   select dj.id, 'completed', null, null, 0, 0, false, dj.diarization_state from dj`;

/** Leases past their expiry. */
const EXPIRE = sql<EndParams, EndRow>(END_LEASES('l.ended_at is null and l.expires_at <= now()'));

/** A worker's open leases of an earlier session (parameters :wid, :session). */
const ABANDON = sql<EndParams & { wid: number; session: string }, EndRow>(
  END_LEASES('l.worker_id = :wid and l.ended_at is null and l.session_id is distinct from :session'),
);

/**
 * MOVE_HELD — the leases a worker still holds after Hello with a new session move to that session.
 * Parameters: :session, :wid, parallel arrays :jobs, :attempts, :hashes. Guard: the worker's open leases with these tokens. Returns nothing.
 */
const MOVE_HELD = sql<{ session: string; wid: number; jobs: number[]; attempts: number[]; hashes: string[] }>(
  `update speech_leases l set session_id = :session
     from unnest(:jobs::int[], :attempts::int[], :hashes::text[]) as r(job_id, attempt, token_hash)
    where l.worker_id = :wid and l.ended_at is null and l.job_id = r.job_id and l.attempt = r.attempt and l.token_hash = r.token_hash`,
);

function endParams(store: JobStore, outcome: 'expired' | 'abandoned'): EndParams {
  return {
    outcome,
    from: fromStatuses('expire'),
    requeued: toStatus('expire', 'queued'),
    failed: toStatus('expire', 'failed'),
    diarFrom: DIARIZATION_TRANSITIONS.expire.from[0],
    diarPending: DIARIZATION_TRANSITIONS.expire.to[0],
    diarFailed: DIARIZATION_TRANSITIONS.expire.to[1],
    reports: store.reportsEnabled,
  };
}

/** Publishes what a batch moved and says which jobs ended. */
function ended(store: JobStore, rows: EndRow[]): LeaseEnd[] {
  const jobs = rows.filter((r) => r.diarization_state === null);
  store.publish(jobs);
  if (jobs.some((r) => !r.requeued)) store.terminal(jobs.filter((r) => !r.requeued));
  for (const r of rows) if (r.diarization_state !== null) store.sink.diarization(r.id, { state: r.diarization_state, speaker_count: null });
  return rows.map((r) => ({ jobId: r.id, status: r.status, diarizationRequeued: r.diarization_state === 'pending' }));
}

/** Automatic stale recovery (the speech-stale-sweep maintenance task). */
export async function expireLeases(store: JobStore): Promise<LeaseEnd[]> {
  const touched: LeaseEnd[] = [];
  for (;;) {
    const rows = await EXPIRE.rows(store.knex, endParams(store, 'expired'));
    touched.push(...ended(store, rows));
    if (rows.length < BATCH) return touched;
  }
}

/**
 * A worker said Hello with a new session: its open leases that it no longer holds end at once
 * (the agent restarted and lost those jobs); the ones it still holds move to the new session.
 */
export async function abandonUnheld(store: JobStore, workerId: number, sessionId: string, held: LeaseRefMsg[]): Promise<LeaseEnd[]> {
  if (held.length) {
    await MOVE_HELD.rows(store.knex, {
      session: sessionId,
      jobs: held.map((r) => r.job_id),
      attempts: held.map((r) => r.attempt),
      hashes: held.map((r) => hashLeaseToken(r.lease_token)),
      wid: workerId,
    });
  }
  return ended(store, await ABANDON.rows(store.knex, { ...endParams(store, 'abandoned'), wid: workerId, session: sessionId }));
}
