import type { JobStatus } from '@sonar/shared';
import { sql } from '../../../db/sql.js';
import { STATUS_COLUMNS, type JobStore, type StatusRow } from './store.js';

/**
 * The one segment count of a job, wherever a count is shown (the completed job's `stage_detail` in
 * the header, the API's `segment_count`, the callback, the completion report, revisions): the
 * stored segments of the current pass that hold text, i.e. what the transcript shows. The pieces of
 * a segment split at a change of speaker count one each, as they show; the worker's own count of
 * the segments it sent is not shown as a count (the runtime log mentions it where it differs).
 */

/** Whether a stored segment `s` holds text (a segment of only whitespace shows nowhere). */
export const SHOWN_SEGMENT = `s.text ~ '\\S'`;

/** The count of the current pass of the speech_jobs row aliased `job`, as SQL. */
export const SEGMENT_COUNT = (job: string) =>
  `(select count(*)::int from speech_segments s where s.job_id = ${job}.id and s.pass = ${job}.current_pass and ${SHOWN_SEGMENT})`;

/** A completed job's `stage_detail` for a count `n` (SQL): "No speech detected", "1 segment", "6 segments". */
export const COUNT_DETAIL = (n: string) => `case when ${n} = 0 then 'No speech detected' when ${n} = 1 then '1 segment' else ${n} || ' segments' end`;

/**
 * RECOUNT — a completed job's `stage_detail` from its stored segments again, after they were
 * replaced without a completion (a diarization rerun splits them anew at its own speaker changes).
 * Parameters: :id, :completed. Guard: the job is completed and its detail says another count.
 * Returns: the job's status columns when the detail changed.
 */
const RECOUNT = sql<{ id: number; completed: JobStatus }, StatusRow>(
  `update speech_jobs j set stage_detail = ${COUNT_DETAIL(SEGMENT_COUNT('j'))}, updated_at = now()
    where j.id = :id and j.status = :completed and j.stage_detail is distinct from ${COUNT_DETAIL(SEGMENT_COUNT('j'))}
   returning ${STATUS_COLUMNS}`,
);

/** Brings a completed job's count up to date with its stored segments (RECOUNT) and publishes the new status. */
export async function recountSegments(store: JobStore, jobId: number): Promise<void> {
  const rows = await RECOUNT.rows(store.knex, { id: jobId, completed: 'completed' });
  if (rows.length) store.publish(rows);
}
