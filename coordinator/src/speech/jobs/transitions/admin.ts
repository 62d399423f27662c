import { sql } from '../../../db/sql.js';
import { CALLBACK_TRANSITIONS, PROCESSING_STATUSES, fromStatuses, toStatus, type CallbackStatus } from '../job-transitions.js';
import { STATUS_COLUMNS, type EventLevel, type JobStore, type StatusRow } from './store.js';

/**
 * People's moves and the runtime log: restart (JOB_TRANSITIONS.restart), cancellation requests,
 * deletion, the execution target, re-transcription (JOB_TRANSITIONS.retranscribe), the metadata
 * form, and the callback's delivery state (CALLBACK_TRANSITIONS.attempt).
 */

/** LOG — one runtime-log entry. Parameters: :job, :event, :message, :level, :data (JSON or null). Returns nothing. */
const LOG = sql<{ job: number; event: string; message: string; level: EventLevel; data: string | null }>(
  `insert into speech_job_events (job_id, event, message, level, data) values (:job, :event, :message, :level, :data::jsonb)`,
);

/**
 * RESTART — JOB_TRANSITIONS.restart: :from → :to with a fresh retry budget (attempts only grow:
 * the next claim is attempt + 1). A failed job starts the next notification cycle (callback
 * :callbackPending again, CALLBACK_TRANSITIONS.newCycle). The pass's segments of the previous
 * attempt go: they must not show as the current transcript while the job waits.
 * Parameters: :ids, :retries, :from, :to, :failed, :callbackPending, :message.
 * Guard: status in :from; the media of an upload still exists. Returns: the status columns of the jobs moved.
 */
const RESTART = sql<{ ids: number[]; retries: number; from: string[]; to: string; failed: string; callbackPending: string; message: string }, StatusRow>(
  `with moved as (
     update speech_jobs j set
        status = :to, max_attempts = j.attempt + :retries, failure_error = null, outcome = null,
        cancel_requested_at = null, stage_label = 'Waiting for a worker', stage_detail = null,
        audio_position_seconds = 0, transcript_text = null, finished_at = null, updated_at = now(),
        callback_cycle = j.callback_cycle + (j.status = :failed)::int,
        callback_status = case when j.status <> :failed then j.callback_status when j.callback_url is null then null else :callbackPending end,
        callback_http_status = case when j.status = :failed then null else j.callback_http_status end,
        callback_last_attempt_at = case when j.status = :failed then null else j.callback_last_attempt_at end,
        callback_delivered_at = case when j.status = :failed then null else j.callback_delivered_at end,
        callback_error = case when j.status = :failed then null else j.callback_error end,
        callback_attempts = case when j.status = :failed then 0 else j.callback_attempts end,
        report_sent_at = case when j.status = :failed then null else j.report_sent_at end
      where j.id = any(:ids::int[]) and j.status = any(:from::text[])
        and not (j.source_type = 'upload' and j.media_path is null)
      returning ${STATUS_COLUMNS}
   ), cleared as (
     delete from speech_segments s using speech_jobs jj, moved
      where jj.id = moved.id and s.job_id = jj.id and s.pass = jj.current_pass
   ), ev as (
     insert into speech_job_events (job_id, event, message) select id, 'restarted', :message from moved
   )
   select * from moved order by id`,
);

/** OLDEST_FAILED — the oldest :limit failed jobs whose media still exists. Returns their ids. */
const OLDEST_FAILED = sql<{ limit: number }, { id: number }>(
  `select id from speech_jobs where status = 'failed' and not (source_type = 'upload' and media_path is null)
    order by created_at asc, id asc limit :limit`,
);

/**
 * REQUEST_CANCEL — cooperative cancellation (no status move: the runner stops at its next heartbeat).
 * Parameters: :id, :processing, :message. Guard: a processing status. Returns: the job (0 or 1 rows).
 */
const REQUEST_CANCEL = sql<{ id: number; processing: string[]; message: string }, { id: number }>(
  `with j as (
     update speech_jobs set cancel_requested_at = coalesce(cancel_requested_at, now()), updated_at = now()
      where id = :id and status = any(:processing::text[]) returning id
   ), ev as (insert into speech_job_events (job_id, event, message) select id, 'cancel_requested', :message from j)
   select id from j`,
);

/** DELETE_JOB — a job that is not processing, with its segments, leases, log and outbox rows. Parameters: :id, :processing. Returns: the job (0 or 1 rows). */
const DELETE_JOB = sql<{ id: number; processing: string[] }, { id: number }>(
  `delete from speech_jobs where id = :id and not (status = any(:processing::text[])) returning id`,
);

/** SET_TARGET — where the job runs. Parameters: :id, :mode, :wid, :message. Guard: none. Returns nothing. */
const SET_TARGET = sql<{ id: number; mode: string; wid: number | null; message: string }>(
  `with j as (update speech_jobs set execution_target = :mode, target_worker_id = :wid, updated_at = now() where id = :id returning id)
   insert into speech_job_events (job_id, event, message) select id, 'target_changed', :message from j`,
);

const iso = (column: string) => `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

interface RetranscribeParams {
  id: number;
  owner: number;
  model: string;
  local: boolean;
  retries: number;
  by: string;
  from: string[];
  to: string;
  callbackPending: string;
}

/**
 * RETRANSCRIBE — JOB_TRANSITIONS.retranscribe: :from → :to with another model, in one statement
 * and so one transaction. The current pass is archived as a read-only speech_revisions row (model,
 * language, engine, transcript, duration, diarization as a DiarizationRecord, speaker labels,
 * analysis, translations; its segments stay under their pass number), and the job starts pass + 1
 * with the new model from scratch: transcript, engine, stage, outcome and diarization cleared
 * (`pending` when diarization is requested, else `skipped`), speaker labels emptied, a fresh retry
 * budget, and the next notification cycle (callback :callbackPending when a callback URL exists).
 * `local` runs the new pass on the local runner only (URL sources).
 * Parameters: RetranscribeParams.
 * Guard: the owner's job, status in :from, another model, retained media, no diarization, analysis
 * or translation pending or running.
 * Returns: the status columns, the new pass, the archived pass and the previous model (0 or 1 rows).
 */
const RETRANSCRIBE = sql<RetranscribeParams, StatusRow & { current_pass: number; from_model: string; archived_pass: number }>(
  `with cur as (
     select j.* from speech_jobs j
      where j.id = :id and j.owner_id = :owner and j.status = any(:from::text[]) and j.model <> :model
        and j.media_path is not null and j.diarization_state not in ('pending', 'running')
        -- analysis and translation work of the pass must have ended before the pass is archived
        and coalesce(j.analysis->>'state', '') not in ('pending', 'running')
        and not exists (select 1 from speech_translations t where t.job_id = j.id and t.pass = j.current_pass and t.state in ('pending', 'running'))
      for update
   ), rev as (
     insert into speech_revisions (job_id, pass, model, language, engine, engine_model, transcript_text, duration_seconds,
                                   diarization, speaker_labels, analysis, translations, completed_at, archived_by)
     select id, current_pass, model, language, engine, engine_model, transcript_text,
            coalesce(source_duration_seconds, nullif(audio_position_seconds, 0)),
            jsonb_build_object('requested', diarization_requested, 'state', diarization_state, 'engine', diarization_engine,
              'speaker_count', diarization_speaker_count, 'error', diarization_error,
              'updated_at', ${iso('diarization_updated_at')}, 'rerun_requested_at', ${iso('diarization_rerun_requested_at')},
              'turns', diarization_turns, 'requested_speakers', diarization_speakers),
            speaker_labels, analysis,
            (select coalesce(jsonb_agg(jsonb_build_object('language', t.language, 'state', t.state, 'status', t.state,
                      'text', case when t.state = 'completed' then t.text end,
                      'segments', case when t.state = 'completed' then coalesce(t.segments, '[]'::jsonb) else '[]'::jsonb end,
                      'analysis', case when t.state = 'completed' then t.analysis end, 'provider', t.provider, 'model', t.model,
                      'error', t.error, 'updated_at', ${iso('t.updated_at')}) order by t.language), '[]'::jsonb)
               from speech_translations t where t.job_id = cur.id and t.pass = cur.current_pass),
            finished_at, :owner
       from cur
     returning job_id, pass
   ), moved as (
     update speech_jobs j set
        status = :to, current_pass = cur.current_pass + 1, model = :model,
        execution_target = case when :local then 'local' else cur.execution_target end,
        target_worker_id = case when :local then null else cur.target_worker_id end,
        max_attempts = cur.attempt + :retries, transcript_text = null, engine = null, engine_model = null,
        stage_label = 'Waiting for a worker', stage_detail = null, audio_position_seconds = 0,
        outcome = null, failure_error = null, cancel_requested_at = null, started_at = null, finished_at = null,
        diarization_state = case when cur.diarization_requested then 'pending' else 'skipped' end,
        diarization_engine = null, diarization_speaker_count = null, diarization_turns = null, diarization_error = null,
        diarization_updated_at = null, diarization_rerun_requested_at = null, diarization_attempts = 0, speaker_labels = '{}'::jsonb,
        -- the new pass starts without analysis or title work (its translations are keyed by pass)
        analysis = null, auto_title = null,
        callback_cycle = cur.callback_cycle + 1,
        callback_status = case when cur.callback_url is null then null else :callbackPending end,
        callback_http_status = null, callback_last_attempt_at = null, callback_delivered_at = null, callback_error = null,
        callback_attempts = 0, report_sent_at = null, updated_at = now()
       from cur where j.id = cur.id
     returning ${STATUS_COLUMNS}, j.current_pass, cur.model as from_model, cur.current_pass as archived_pass
   ), ev as (
     insert into speech_job_events (job_id, event, message, data)
     select id, 'retranscription.started',
            'Re-transcription by ' || :by || ': ' || from_model || ' → ' || :model || ' (pass ' || archived_pass ||
            ' archived as a read-only revision; pass ' || current_pass || ' queued' ||
            case when :local then ' for the local runner' else '' end || ').',
            jsonb_build_object('from_model', from_model, 'to_model', :model::text, 'archived_pass', archived_pass, 'pass', current_pass)
       from moved
   )
   select moved.* from moved join rev on rev.job_id = moved.id`,
);

/**
 * UPDATE_METADATA — title and note. Saving a title different from the current one marks it as the owner's.
 * Parameters: :id, :setLabel, :label, :setNote, :note, :message. Guard: none. Returns: the job (0 or 1 rows).
 */
const UPDATE_METADATA = sql<{ id: number; setLabel: boolean; label: string | null; setNote: boolean; note: string | null; message: string }, { id: number }>(
  `with j as (
     update speech_jobs set
        source_label_edited = source_label_edited or (:setLabel and :label::text is distinct from source_label),
        source_label = case when :setLabel then :label::text else source_label end,
        source_note = case when :setNote then :note::text else source_note end,
        updated_at = now()
      where id = :id returning id
   ), ev as (insert into speech_job_events (job_id, event, message) select id, 'metadata_changed', :message from j)
   select id from j`,
);

/**
 * RECORD_CALLBACK — CALLBACK_TRANSITIONS.attempt: a delivery attempt of the cycle's callback ended (:from → :status).
 * Parameters: :id, :cycle, :status, :http, :error, :from. Guard: the notification cycle; callback status in :from.
 * Returns: the job (0 or 1 rows).
 */
const RECORD_CALLBACK = sql<{ id: number; cycle: number; status: CallbackStatus; http: number | null; error: string | null; from: string[] }, { id: number }>(
  `update speech_jobs set callback_status = :status, callback_http_status = :http, callback_last_attempt_at = now(),
      callback_delivered_at = case when :status = 'delivered' then now() else callback_delivered_at end,
      callback_error = :error, callback_attempts = callback_attempts + 1, updated_at = now()
    where id = :id and callback_cycle = :cycle and callback_status = any(:from::text[])
   returning id`,
);

/** One runtime-log entry, announced to the job's viewers. */
export async function log(
  store: JobStore,
  jobId: number,
  event: string,
  message: string,
  level: EventLevel = 'info',
  data: Record<string, unknown> | null = null,
) {
  await LOG.rows(store.knex, { job: jobId, event, message, level, data: data ? JSON.stringify(data) : null });
  store.sink.changed(jobId, 'log');
}

/** failed or queued → queued with a fresh retry budget (RESTART). Returns the ids moved. */
export async function restart(store: JobStore, ids: number[], retries: number, message: string): Promise<number[]> {
  if (!ids.length) return [];
  const rows = await RESTART.rows(store.knex, {
    ids,
    retries,
    from: fromStatuses('restart'),
    to: toStatus('restart', 'queued'),
    failed: 'failed',
    callbackPending: CALLBACK_TRANSITIONS.newCycle.to[0],
    message,
  });
  store.publish(rows);
  return rows.map((r) => r.id);
}

/** The oldest `limit` failed jobs whose media still exists (run-now reset_failed). */
export async function oldestFailed(store: JobStore, limit: number): Promise<number[]> {
  return (await OLDEST_FAILED.rows(store.knex, { limit })).map((r) => r.id);
}

/** Cooperative cancellation of a processing job; false when it is not processing (any more). */
export async function requestCancel(store: JobStore, jobId: number, by: string): Promise<boolean> {
  const rows = await REQUEST_CANCEL.rows(store.knex, { id: jobId, processing: [...PROCESSING_STATUSES], message: `Cancellation requested by ${by}.` });
  if (rows.length) store.sink.changed(jobId, 'cancel');
  return rows.length > 0;
}

/** Deletes a job that is not processing (with its segments, leases, log and outbox rows); false otherwise. */
export async function deleteJob(store: JobStore, jobId: number): Promise<boolean> {
  return (await DELETE_JOB.rows(store.knex, { id: jobId, processing: [...PROCESSING_STATUSES] })).length > 0;
}

export async function setTarget(store: JobStore, jobId: number, mode: string, workerId: number | null, message: string) {
  await SET_TARGET.rows(store.knex, { id: jobId, mode, wid: workerId, message });
  store.sink.changed(jobId, 'target');
}

/** A new pass with another model (RETRANSCRIBE); null when a rule no longer holds, and nothing was written. */
export async function retranscribe(
  store: JobStore,
  req: { jobId: number; ownerId: number; by: string; model: string; retries: number; local: boolean },
): Promise<{ pass: number; archivedPass: number; fromModel: string } | null> {
  const row = await RETRANSCRIBE.first(store.knex, {
    id: req.jobId,
    owner: req.ownerId,
    model: req.model,
    local: req.local,
    retries: req.retries,
    by: req.by,
    from: fromStatuses('retranscribe'),
    to: toStatus('retranscribe', 'queued'),
    callbackPending: CALLBACK_TRANSITIONS.newCycle.to[0],
  });
  if (!row) return null;
  store.publish([row]);
  return { pass: row.current_pass, archivedPass: row.archived_pass, fromModel: row.from_model };
}

/** The metadata form (owner): title and note (UPDATE_METADATA). An empty title falls back to the file name or URL when shown. */
export async function updateMetadata(store: JobStore, jobId: number, change: { label?: string | null; note?: string | null }, by: string): Promise<boolean> {
  const rows = await UPDATE_METADATA.rows(store.knex, {
    id: jobId,
    setLabel: change.label !== undefined,
    label: change.label ?? null,
    setNote: change.note !== undefined,
    note: change.note ?? null,
    message: `${change.label !== undefined ? (change.note !== undefined ? 'Title and note' : 'Title') : 'Note'} saved by ${by}.`,
  });
  if (rows.length) store.sink.changed(jobId, 'metadata');
  return rows.length > 0;
}

/** A delivery attempt of a job's callback ended (RECORD_CALLBACK); false when the cycle moved on or the callback had already ended. */
export async function recordCallback(
  store: JobStore,
  jobId: number,
  cycle: number,
  outcome: { status: 'retrying' | 'delivered' | 'failed'; httpStatus: number | null; error: string | null },
): Promise<boolean> {
  if (!(CALLBACK_TRANSITIONS.attempt.to as readonly string[]).includes(outcome.status)) throw new Error(`a callback attempt cannot end as ${outcome.status}`);
  const rows = await RECORD_CALLBACK.rows(store.knex, {
    id: jobId,
    cycle,
    status: outcome.status,
    http: outcome.httpStatus,
    error: outcome.error,
    from: [...CALLBACK_TRANSITIONS.attempt.from],
  });
  return rows.length > 0;
}
