import { sql } from '../../../db/sql.js';
import { fromStatuses, toStatus } from '../job-transitions.js';
import { STATUS_COLUMNS, WANTS_NOTIFICATION, type JobStore, type StatusRow } from './store.js';

/** Coordinator-side staging of URL sources (JOB_TRANSITIONS.stagingFailed) and the release of retained media. */

/**
 * STAGING_STARTED — marks a queued URL job as being downloaded by the coordinator (no status move).
 * Parameters: :id, :from. Guard: status in :from (JOB_TRANSITIONS.stagingFailed.from: a stageable job), a URL source without media.
 * Returns: the status columns and the URL (0 or 1 rows).
 */
const STAGING_STARTED = sql<{ id: number; from: string[] }, StatusRow & { source_url: string }>(
  `update speech_jobs j set stage_label = 'Downloading the source to the coordinator', updated_at = now()
    where j.id = :id and j.status = any(:from::text[]) and j.source_type = 'url' and j.media_path is null
    returning ${STATUS_COLUMNS}, j.source_url`,
);

interface StagedParams {
  id: number;
  path: string;
  sha256: string;
  size: number;
  mime: string | null;
  duration: number | null;
  retainedUntil: Date | null;
}

/**
 * STAGED — the staged media is in place: the job waits for a worker again (no status move).
 * Parameters: StagedParams. Guard: none (the job exists). Returns: the status columns (0 or 1 rows).
 */
const STAGED = sql<StagedParams, StatusRow>(
  `update speech_jobs j set media_path = :path, media_sha256 = :sha256, source_size_bytes = :size, source_mime = coalesce(:mime, j.source_mime),
      source_duration_seconds = coalesce(:duration, j.source_duration_seconds), media_retained_until = :retainedUntil,
      stage_label = 'Waiting for a worker', updated_at = now() where j.id = :id returning ${STATUS_COLUMNS}`,
);

/**
 * STAGING_FAILED — JOB_TRANSITIONS.stagingFailed: :from → :to, with its runtime-log entry and notification row.
 * Parameters: :id, :message, :from, :to, :reports. Guard: status in :from. Returns: the status columns (0 or 1 rows).
 */
const STAGING_FAILED = sql<{ id: number; message: string; from: string[]; to: string; reports: boolean }, StatusRow>(
  `with job as (
     update speech_jobs j set status = :to, outcome = 'failed', stage_label = 'Failed', failure_error = :message,
        finished_at = now(), updated_at = now()
      where j.id = :id and j.status = any(:from::text[])
     returning ${STATUS_COLUMNS}, j.callback_cycle, j.queue_channel, j.callback_url, j.owner_id
   ), ev as (insert into speech_job_events (job_id, event, message, level) select id, 'staging_failed', :message, 'error' from job),
   note as (insert into speech_notifications (job_id, cycle, status) select id, callback_cycle, status from job where ${WANTS_NOTIFICATION}
            on conflict (job_id, cycle) do nothing)
   select id, status, stage_label, stage_detail, audio_position_seconds, attempt from job`,
);

/**
 * RELEASE_MEDIA — forgets retained media past its retention of finished jobs (the files are removed by the caller).
 * Parameters: :limit. Guard: completed or failed; no diarization rerun waiting for or using the media; skip locked.
 * Returns: the jobs released, with their runtime-log entries written.
 */
const RELEASE_MEDIA = sql<{ limit: number }, { id: number }>(
  `with due as (
     select id, media_retained_until from speech_jobs
      where media_path is not null and media_retained_until is not null and media_retained_until <= now()
        and status in ('completed', 'failed')
        -- a diarization rerun waiting for or using the media keeps it until it ends
        and not (diarization_rerun_requested_at is not null and diarization_state in ('pending', 'running'))
      order by media_retained_until limit :limit for update skip locked
   ), released as (
     update speech_jobs j set media_path = null, updated_at = now() from due where j.id = due.id
     returning j.id, due.media_retained_until as retained_until
   ), ev as (
     insert into speech_job_events (job_id, event, message, data)
     select id, 'media_released',
            'Retained source media released (retention ended ' || to_char(retained_until at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') ||
            '); re-transcription and diarization reruns are no longer possible.',
            jsonb_build_object('retained_until', to_char(retained_until at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
       from released
   )
   select id from released`,
);

/** Marks a queued URL job as being downloaded by the coordinator; its URL, or null when it is no longer stageable. */
export async function stagingStarted(store: JobStore, jobId: number): Promise<string | null> {
  const rows = await STAGING_STARTED.rows(store.knex, { id: jobId, from: fromStatuses('stagingFailed') });
  store.publish(rows);
  return rows[0]?.source_url ?? null;
}

/** The staged media is in place: the job waits for a worker again. False when the job is gone. */
export async function staged(
  store: JobStore,
  jobId: number,
  media: { path: string; sha256: string; sizeBytes: number; mime: string | null; durationSeconds: number | null; retainedUntil: Date | null },
): Promise<boolean> {
  const rows = await STAGED.rows(store.knex, {
    id: jobId,
    path: media.path,
    sha256: media.sha256,
    size: media.sizeBytes,
    mime: media.mime,
    duration: media.durationSeconds,
    retainedUntil: media.retainedUntil,
  });
  store.publish(rows);
  return rows.length > 0;
}

/** The coordinator could not download the source: queued → failed, with its notification. */
export async function stagingFailed(store: JobStore, jobId: number, reason: string): Promise<boolean> {
  const rows = await STAGING_FAILED.rows(store.knex, {
    id: jobId,
    message: `Could not download the source: ${reason}`.slice(0, 2000),
    from: fromStatuses('stagingFailed'),
    to: toStatus('stagingFailed', 'failed'),
    reports: store.reportsEnabled,
  });
  store.publish(rows);
  if (rows.length) store.terminal(rows);
  return rows.length > 0;
}

/** Forgets retained media past its retention of finished jobs; returns the job ids. */
export async function releaseExpiredMedia(store: JobStore, limit: number): Promise<number[]> {
  return (await RELEASE_MEDIA.rows(store.knex, { limit })).map((r) => r.id);
}
