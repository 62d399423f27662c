import type { Knex } from '@mikro-orm/postgresql';
import type { JobStatus, LeaseRefMsg } from '@sonar/shared';
import type { Orm } from '../../db/orm.js';
import type { JobEventSink } from './job-events.js';
import type { ListedJob } from './presenter.js';
import { sql } from '../../db/sql.js';
import type { StoredTurn } from './speakers.js';
import type { StatedSpeakers } from './entities.js';
import * as admin from './transitions/admin.js';
import * as ai from './transitions/ai.js';
import * as claim from './transitions/claim.js';
import * as create from './transitions/create.js';
import * as diarization from './transitions/diarization.js';
import * as edits from './transitions/edits.js';
import * as expire from './transitions/expire.js';
import * as finish from './transitions/finish.js';
import * as progress from './transitions/progress.js';
import * as segmentCount from './transitions/segment-count.js';
import * as staging from './transitions/staging.js';
import { JobStore, type AiAvailability, type EventLevel } from './transitions/store.js';

export { StaleLeaseError, hashLeaseToken, type AiAvailability, type EventLevel } from './transitions/store.js';
export { DIARIZE_TOKEN_PREFIX, isDiarizeToken, type ClaimRequest, type ClaimedJob, type ClaimingWorker } from './transitions/claim.js';
export type { ProgressBatch } from './transitions/progress.js';
export type { NewJobEvent } from './transitions/create.js';
export type { DiarizationOutcome, FinishRequest, FinishResult } from './transitions/finish.js';
export type { LeaseEnd } from './transitions/expire.js';
export type { LabelledPass } from './transitions/diarization.js';
export type { AiKind, AiOutcome, AiTaskRef } from './transitions/ai.js';

/**
 * The one owner of speech job state: the only code that writes speech_jobs.status, attempts, stage
 * fields, leases, the runtime log (speech_job_events), the callback status and the notification
 * outbox. Each transition is one SQL statement (data-modifying CTEs) in jobs/transitions/, guarded
 * by the states the transition tables (job-transitions.ts) allow it from and writing the states
 * they allow it to, checked against the database clock; it publishes the new live status after it
 * commits. A terminal transition writes its notification row in the same statement, so no path
 * can end a job without its callback and report (see NotificationOutbox). This class is the facade
 * the services call.
 */
export class JobRepository {
  private readonly store: JobStore;

  constructor(
    orm: Orm,
    sink: JobEventSink,
    /** Completion reports are enabled (SMTP_URL is set): owners with an address are notified too. */
    reportsEnabled: boolean,
    /** Whether analysis, translations and titles can run (a provider is configured), and why not. */
    aiAvailability: AiAvailability = { configured: false, noProvider: 'No AI provider is configured.', noAccess: 'The owner has no AI-provider access.' },
  ) {
    this.store = new JobStore(orm, sink, reportsEnabled, aiAvailability);
  }

  get knex(): Knex {
    return this.store.knex;
  }

  /** Called after transitions that wrote speech_ai_tasks rows (the AI dispatcher drains them). */
  onAiWork(listener: () => void) {
    this.store.onAiWork(listener);
  }

  /** Called after transitions that ended jobs; `notified` when they wrote notification rows (the outbox dispatcher drains them). */
  onTerminal(listener: (jobs: Array<{ jobId: number; status: JobStatus }>, notified: boolean) => void) {
    this.store.onTerminal(listener);
  }

  // ---- a new job (transitions/create.ts) ----
  queueUrlJob = (job: create.NewUrlJob, events: create.NewJobEvent[]) => create.queueUrlJob(this.store, job, events);

  // ---- people's moves and the runtime log (transitions/admin.ts) ----
  log = (jobId: number, event: string, message: string, level: EventLevel = 'info', data: Record<string, unknown> | null = null) =>
    admin.log(this.store, jobId, event, message, level, data);
  restart = (ids: number[], retries: number, message: string) => admin.restart(this.store, ids, retries, message);
  oldestFailed = (limit: number) => admin.oldestFailed(this.store, limit);
  requestCancel = (jobId: number, by: string) => admin.requestCancel(this.store, jobId, by);
  delete = (jobId: number) => admin.deleteJob(this.store, jobId);
  setTarget = (jobId: number, mode: string, workerId: number | null, message: string) => admin.setTarget(this.store, jobId, mode, workerId, message);
  retranscribe = (req: Parameters<typeof admin.retranscribe>[1]) => admin.retranscribe(this.store, req);
  updateMetadata = (jobId: number, change: { label?: string | null; note?: string | null }, by: string) => admin.updateMetadata(this.store, jobId, change, by);
  recordCallback = (jobId: number, cycle: number, outcome: Parameters<typeof admin.recordCallback>[3]) =>
    admin.recordCallback(this.store, jobId, cycle, outcome);

  // ---- workers (transitions/claim.ts, progress.ts, finish.ts, expire.ts) ----
  claimMany = (requests: claim.ClaimRequest[], opts: claim.ClaimOptions) => claim.claimMany(this.store, requests, opts);
  liveLease = (workerId: number, ref: LeaseRefMsg) => progress.liveLease(this.store, workerId, ref);
  renew = (workerId: number, refs: LeaseRefMsg[], ttlSeconds: number) => progress.renew(this.store, workerId, refs, ttlSeconds);
  writeProgress = (batch: progress.ProgressBatch) => progress.writeProgress(this.store, batch);
  handBack = (workerId: number, ref: LeaseRefMsg, reason: string) => progress.handBack(this.store, workerId, ref, reason);
  finishMany = (items: finish.FinishRequest[]) => finish.finishMany(this.store, items);
  expireLeases = () => expire.expireLeases(this.store);
  abandonUnheld = (workerId: number, sessionId: string, held: LeaseRefMsg[]) => expire.abandonUnheld(this.store, workerId, sessionId, held);

  // ---- diarization (transitions/diarization.ts) ----
  labelSegments = (workerId: number, ref: LeaseRefMsg, turns: StoredTurn[]) => diarization.labelSegments(this.store, workerId, ref, turns);
  finishDiarization = (workerId: number, ref: LeaseRefMsg, result: Parameters<typeof diarization.finishDiarization>[3]) =>
    diarization.finishDiarization(this.store, workerId, ref, result);
  /** After a rerun relabelled (and so re-split) a completed pass's segments: its count (transitions/segment-count.ts). */
  recountSegments = (jobId: number) => segmentCount.recountSegments(this.store, jobId);
  requestDiarization = (jobId: number, by: string, speakers: StatedSpeakers | null = null) => diarization.requestDiarization(this.store, jobId, by, speakers);
  setSpeakerLabels = (jobId: number, labels: Record<string, string>, by: string) => diarization.setSpeakerLabels(this.store, jobId, labels, by);

  /** The current pass as the job page's reading view reads it (READING_SEGMENTS): plain rows, word start times computed in SQL. */
  readingSegments = (jobId: number, pass: number): Promise<ReadingRow[]> => READING_SEGMENTS.rows(this.knex, { job: jobId, pass });

  // ---- the owner's corrections of the current pass (transitions/edits.ts) ----
  editText = (jobId: number, author: { id: number; name: string }, seq: number, text: string) => edits.editText(this.store, jobId, author, seq, text);
  moveToSpeaker = (jobId: number, author: { id: number; name: string }, change: Parameters<typeof edits.moveToSpeaker>[3]) =>
    edits.moveToSpeaker(this.store, jobId, author, change);
  mergeSpeakers = (jobId: number, author: { id: number; name: string }, from: string, into: string) =>
    edits.mergeSpeakers(this.store, jobId, author, from, into);
  undoEdit = (jobId: number, by: string, expected?: number) => edits.undoLatest(this.store, jobId, by, expected);
  listEdits = (jobId: number) => edits.listEdits(this.store, jobId);
  supersedeEdits = (jobId: number, by: string) => edits.supersedeEdits(this.store, jobId, by);

  // ---- analysis, translations and automatic titles (transitions/ai.ts) ----
  requestAnalysis = (jobId: number, by: string) => ai.requestAnalysis(this.store, jobId, by);
  startAi = (ref: ai.AiTaskRef, provider: { label: string; model: string }) => ai.startAi(this.store, ref, provider);
  finishAnalysis = (ref: ai.AiTaskRef, outcome: ai.AiOutcome<unknown>) => ai.finishAnalysis(this.store, ref, outcome);
  finishTranslation = (ref: ai.AiTaskRef, outcome: Parameters<typeof ai.finishTranslation>[2]) => ai.finishTranslation(this.store, ref, outcome);
  finishTitle = (ref: ai.AiTaskRef, outcome: ai.AiOutcome<string>) => ai.finishTitle(this.store, ref, outcome);

  // ---- staging of URL sources and media retention (transitions/staging.ts) ----
  stagingStarted = (jobId: number) => staging.stagingStarted(this.store, jobId);
  staged = (jobId: number, media: Parameters<typeof staging.staged>[2]) => staging.staged(this.store, jobId, media);
  stagingFailed = (jobId: number, reason: string) => staging.stagingFailed(this.store, jobId, reason);
  releaseExpiredMedia = (limit: number) => staging.releaseExpiredMedia(this.store, limit);

  /** Records the TXT copy of a job's transcript (transcript-file.ts): written now (error null), or why it could not be (degraded storage). */
  async recordTranscriptFile(jobId: number, error: string | null): Promise<void> {
    await RECORD_TRANSCRIPT_FILE.rows(this.knex, { id: jobId, error });
  }

  /**
   * Jobs newest first as list entries: one prepared statement, only the columns a list shows (not
   * the transcript, the diarization turns or the AI records), plain rows instead of ORM entities
   * (the entity load of 50 jobs cost ~20 ms of CPU per request). `ownerId` null: every owner's jobs.
   */
  async listJobs(opts: { ownerId: number | null; channel?: string | undefined; limit: number }): Promise<ListedJob[]> {
    const params = { limit: opts.limit, channel: opts.channel ?? null };
    const rows = opts.ownerId === null ? await LIST_ALL_JOBS.rows(this.knex, params) : await LIST_OWN_JOBS.rows(this.knex, { ...params, owner: opts.ownerId });
    const date = (ms: number | null) => (ms === null ? null : new Date(ms));
    return rows.map(
      ({
        created_ms,
        updated_ms,
        cancel_requested_ms,
        started_ms,
        finished_ms,
        share_created_ms,
        share_disabled_ms,
        callback_last_attempt_ms,
        callback_delivered_ms,
        ...r
      }) => ({
        ...r,
        createdAt: new Date(created_ms),
        updatedAt: new Date(updated_ms),
        cancelRequestedAt: date(cancel_requested_ms),
        startedAt: date(started_ms),
        finishedAt: date(finished_ms),
        shareCreatedAt: date(share_created_ms),
        shareDisabledAt: date(share_disabled_ms),
        callbackLastAttemptAt: date(callback_last_attempt_ms),
        callbackDeliveredAt: date(callback_delivered_ms),
      }),
    );
  }
}

type ListedJobRow = Omit<
  ListedJob,
  | 'createdAt'
  | 'updatedAt'
  | 'cancelRequestedAt'
  | 'startedAt'
  | 'finishedAt'
  | 'shareCreatedAt'
  | 'shareDisabledAt'
  | 'callbackLastAttemptAt'
  | 'callbackDeliveredAt'
> & {
  created_ms: number;
  updated_ms: number;
  cancel_requested_ms: number | null;
  started_ms: number | null;
  finished_ms: number | null;
  share_created_ms: number | null;
  share_disabled_ms: number | null;
  callback_last_attempt_ms: number | null;
  callback_delivered_ms: number | null;
};

/** A character that JavaScript's String.prototype.trim() keeps (the presenter's test for "no speech"). */
const NOT_BLANK = '[^\\s\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff]';

const ms = (column: string) => `(extract(epoch from j.${column}) * 1000)::float8`;

/** The list entry's columns (ListedJob), timestamps as epoch milliseconds. */
const LISTED_COLUMNS = `j.id, j.status, j.queue_channel as "queueChannel", j.source_type as "sourceType", j.source_label as "sourceLabel",
  j.source_filename as "sourceFilename", j.source_url as "sourceUrl", j.source_note as "sourceNote", j.source_mime as "sourceMime",
  j.source_size_bytes::float8 as "sourceSizeBytes", j.source_duration_seconds as "sourceDurationSeconds",
  j.audio_position_seconds as "audioPositionSeconds", j.model, j.language, j.analysis_language as "analysisLanguage",
  j.translation_target_languages as "translationTargetLanguages", j.diarization_requested as "diarizationRequested",
  j.stage_label as "stageLabel", j.stage_detail as "stageDetail", j.execution_target as "executionTarget",
  j.engine, j.engine_model as "engineModel", j.attempt, j.max_attempts as "maxAttempts", j.failure_error as "failureError",
  j.share_token as "shareToken", j.share_playback as "sharePlayback", j.callback_url as "callbackUrl", j.callback_status as "callbackStatus",
  j.callback_http_status as "callbackHttpStatus", j.callback_error as "callbackError", j.callback_attempts as "callbackAttempts",
  ${ms('created_at')} as created_ms, ${ms('updated_at')} as updated_ms, ${ms('cancel_requested_at')} as cancel_requested_ms,
  ${ms('started_at')} as started_ms, ${ms('finished_at')} as finished_ms, ${ms('share_created_at')} as share_created_ms,
  ${ms('share_disabled_at')} as share_disabled_ms, ${ms('callback_last_attempt_at')} as callback_last_attempt_ms,
  ${ms('callback_delivered_at')} as callback_delivered_ms,
  coalesce(j.transcript_text, '') ~ '${NOT_BLANK}' as "hasTranscript",
  json_build_object('id', u.id, 'username', u.username) as owner,
  case when w.id is null then null else json_build_object('id', w.id, 'name', w.name) end as "targetWorker"`;

/**
 * LIST_OWN_JOBS / LIST_ALL_JOBS — the newest :limit jobs of :owner (of everyone), in :channel when it is not null.
 * Two statements, so that each keeps its own plan (the owner's index, or the primary key backwards).
 */
const LIST_OWN_JOBS = sql<{ owner: number; channel: string | null; limit: number }, ListedJobRow>(
  `select ${LISTED_COLUMNS}
     from speech_jobs j join users u on u.id = j.owner_id left join speech_workers w on w.id = j.target_worker_id
    where j.owner_id = :owner and (:channel::text is null or j.queue_channel = :channel::text)
    order by j.id desc limit :limit`,
  'speech_list_own_jobs',
);
const RECORD_TRANSCRIPT_FILE = sql<{ id: number; error: string | null }>(
  `update speech_jobs
      set transcript_file_at = case when :error::text is null then now() else transcript_file_at end,
          transcript_file_error = :error::text
    where id = :id`,
);

const LIST_ALL_JOBS = sql<{ channel: string | null; limit: number }, ListedJobRow>(
  `select ${LISTED_COLUMNS}
     from speech_jobs j join users u on u.id = j.owner_id left join speech_workers w on w.id = j.target_worker_id
    where (:channel::text is null or j.queue_channel = :channel::text)
    order by j.id desc limit :limit`,
  'speech_list_all_jobs',
);

/** A segment as the reading view renders it (reading-view.ts): `w` the words' start times, when they spell the text. */
export interface ReadingRow {
  seq: number;
  start: number;
  end: number;
  text: string;
  speaker: string | null;
  w: string | null;
}

/**
 * READING_SEGMENTS — a pass's segments for the job page: no entity per row and no word objects in
 * JavaScript (a three-hour pass has tens of thousands of words). `w`: the words' starts as
 * centiseconds after the segment's start, space-separated, when the words (whitespace squashed)
 * spell the segment's text; else null (the page then shows the text alone).
 * Parameters: :job, :pass. Guard: none (a read). Returns one row per segment, in order.
 */
const READING_SEGMENTS = sql<{ job: number; pass: number }, ReadingRow>(
  `select s.seq, s.start_seconds::float8 as start, s.end_seconds::float8 as "end", s.text, s.speaker,
          case when ws.spelled = regexp_replace(btrim(s.text), '\\s+', ' ', 'g') then ws.starts end as w
     from speech_segments s
     left join lateral (
       select string_agg(regexp_replace(btrim(e.w->>'text'), '\\s+', ' ', 'g'), ' ' order by e.o) as spelled,
              string_agg(greatest(0, round(((e.w->>'start')::float8 - s.start_seconds) * 100))::int::text, ' ' order by e.o) as starts
         from jsonb_array_elements(case when jsonb_typeof(s.words) = 'array' then s.words else '[]'::jsonb end) with ordinality as e(w, o)
        where btrim(e.w->>'text') <> ''
     ) ws on true
    where s.job_id = :job and s.pass = :pass
    order by s.seq`,
  'speech_reading_segments',
);
