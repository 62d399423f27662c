import { createHash } from 'node:crypto';
import { LOCAL_ALLOWLIST_SQL } from '../local-models.js';
import type { Knex } from '@mikro-orm/postgresql';
import { JOB_STATUS_LABELS, type DiarizationState, type JobStatus, type LeaseRefMsg } from '@sonar/shared';
import type { Orm } from '../../db/orm.js';
import { PreparedStatement, inTransaction } from '../../db/prepared.js';
import type { JobEventSink } from './job-events.js';
import type { SpeakerLabels, StoredTurn } from './speakers.js';
import { splitSegmentsBySpeaker, type SourceSegment, type Word } from './word-speakers.js';
import { AI_TRANSITIONS, DIARIZATION_TRANSITIONS, PROCESSING_STATUSES, fromStatuses, type AiState, type JobOutcome } from './job-transitions.js';

/** A (job, attempt, token) that no longer holds its job. The only way a worker learns it lost a lease. */
export class StaleLeaseError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StaleLeaseError';
  }
}

export const hashLeaseToken = (token: string) => createHash('sha256').update(token).digest('hex');

export type EventLevel = 'info' | 'warn' | 'error';

/** Raw rows carry timestamps as strings or Dates; normalise at the edge. */
export const epochMs = (v: Date | string | null | undefined): number => (v === null || v === undefined ? NaN : new Date(v).getTime());

/** The columns every transition returns: enough to publish the live status without another read. */
const STATUS_COLUMNS = 'id, status, stage_label, stage_detail, audio_position_seconds, attempt';
interface StatusRow {
  id: number;
  status: JobStatus;
  stage_label: string | null;
  stage_detail: string | null;
  audio_position_seconds: number;
  attempt: number;
}

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
}

export interface FinishRequest {
  workerId: number;
  ref: LeaseRefMsg;
  success: boolean;
  error: string;
  cancelled: boolean;
  segmentCount: number;
  durationSeconds: number;
  engine: string;
  engineModel: string;
  shareToken: string;
  /** The diarization the attempt ran (null: none; recorded as unavailable when the job asked for one). */
  diarization: DiarizationOutcome | null;
}

/** A worker's diarization of one pass (CompleteRequest.diarization). */
export interface DiarizationOutcome {
  state: 'completed' | 'failed' | 'unavailable';
  engine: string;
  speakerCount: number;
  turns: StoredTurn[];
  error: string;
}

export interface FinishResult {
  duplicate: boolean;
  status: JobStatus;
  /** The job's diarization afterwards (absent for a duplicate). */
  diarization?: { state: DiarizationState; speakerCount: number | null };
}

export interface ProgressBatch {
  ref: LeaseRefMsg;
  workerId: number;
  stage: JobStatus;
  stageDetail: string;
  position: number;
  durationSeconds: number;
  engine: string;
  engineModel: string;
  segments: Array<{ seq: number; start: number; end: number; text: string; words?: readonly Word[] }>;
  /** The worker started diarizing this attempt (ProgressUpdate.diarization_state "running"). */
  diarizing: boolean;
}

/** The runtime-log line of a diarization result (columns of the CTE `job`). */
const DIARIZATION_EVENT_MESSAGE = `case diarization_state
    when 'completed' then 'Speaker diarization completed: ' || diarization_speaker_count ||
      case when diarization_speaker_count = 1 then ' speaker' else ' speakers' end || coalesce(' (' || diarization_engine || ')', '') || '.'
    when 'failed' then 'Speaker diarization failed: ' || coalesce(diarization_error, 'no reason given')
    else 'Speaker diarization unavailable: ' || coalesce(diarization_error, 'no reason given') end`;

/** Words kept per segment (a 30 s whisper window holds under 200). */
const MAX_SEGMENT_WORDS = 2000;

/** A pass labelled by diarization: its segments as now stored, and how many speakers own speech in them. */
export interface LabelledPass {
  segments: Array<{ seq: number; start: number; end: number; text: string; speaker: string | null }>;
  speakerCount: number;
}

/** Cumulative transcript kept while a job runs; the full text is rebuilt from segments at completion. */
const MAX_RUNNING_TEXT = 64 * 1024;

/** The lease fence as a predicate on speech_leases `l`: this worker's live lease with this token, by the database clock. */
const LIVE_LEASE = `l.job_id = :job and l.attempt = :attempt and l.worker_id = :wid and l.token_hash = :hash
  and l.ended_at is null and l.expires_at > now()`;

/**
 * Whether a job that just ended (the CTE `job`, returning queue_channel, callback_url and owner_id)
 * has anyone to notify: a token-API callback URL, or an owner with an e-mail address while reports
 * are enabled (:reports). Only then does it get a notification row.
 */
const WANTS_NOTIFICATION = `((job.queue_channel = 'api' and job.callback_url is not null)
  or (:reports and exists (select 1 from users u where u.id = job.owner_id and coalesce(btrim(u.email), '') <> '')))`;

export type AiKind = 'analysis' | 'translation' | 'title';

/** One unit of AI work: a row of speech_ai_tasks and the BullMQ job it becomes. */
export interface AiTaskRef {
  jobId: number;
  pass: number;
  kind: AiKind;
  /** The translation's target language ('' for the analysis and the title). */
  language: string;
  generation: number;
}

/** Whether AI work can run at all, and the reasons it is unavailable (bindings :aiOn, :noProvider, :noAccess). */
/** How a task ended: its result, or why not (and the runtime-log line either way). */
export type AiOutcome<T> = { state: 'completed'; result: T; message: string } | { state: 'failed' | 'unavailable'; error: string; message: string };

export interface AiAvailability {
  configured: boolean;
  noProvider: string;
  noAccess: string;
}

/** The analysis record of speech_jobs.analysis as built in SQL (see README "AI analysis, translations and titles"). */
const aiRecord = (state: string, language: string, generation: string, error: string) =>
  `jsonb_build_object('state', ${state}, 'language', ${language}, 'generation', ${generation}, 'provider', null, 'model', null,
     'result', null, 'error', ${error}, 'updated_at', now())`;

/** The automatic-title record of speech_jobs.auto_title. */
const titleRecord = (state: string, error: string) =>
  `jsonb_build_object('state', ${state}, 'title', null, 'applied', false, 'error', ${error}, 'updated_at', now())`;

/** An uploaded file whose title is still its file name and that the owner never titled (spec "Titles"); columns of `j`. */
const TITLE_ELIGIBLE = `(j.source_type = 'upload' and not j.source_label_edited and (j.source_label is null or j.source_label = j.source_filename))`;

const LANGUAGE_WORDS = (column: string) => `coalesce(${column}, 'the transcript''s language')`;

/** A job whose lease ended without its worker: its status afterwards, and whether a diarization rerun waits for a runner again. */
export interface LeaseEnd {
  jobId: number;
  status: JobStatus;
  diarizationRequeued: boolean;
}

/** Tries a diarization rerun gets before it fails (a transcription attempt's budget is the job's max_attempts). */
const DIARIZATION_TRIES = 3;

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

/** A remote worker (not the local runner) has fresh presence: local execution of `auto` work stands by. */
const REMOTE_PRESENT = `select 1 from speech_workers w
   where w.revoked_at is null and w.last_seen_at > now() - make_interval(secs => :presence)
     and coalesce((w.capabilities->>'local')::boolean, false) = false`;

/** Queued jobs a worker may run; `pinned` says which pinned (execution_target 'worker') jobs are its own. */
const CLAIMABLE = (pinned: string) => `j.status = 'queued' and j.cancel_requested_at is null
  and (
    (j.execution_target = 'worker' and ${pinned})
    or (j.execution_target = 'local' and :isLocal)
    or (j.execution_target = 'auto' and j.model = any(:models::text[])
        and (not j.diarization_requested or :diarize)
        and (not :isLocal or (j.model = any(${LOCAL_ALLOWLIST_SQL}) and not exists (${REMOTE_PRESENT}))))
  )
  and (j.source_type = 'upload' or j.media_path is not null or (:canFetch and j.worker_fetchable))`;

/** Leases the assigned jobs (CTE `a`: id, wid, name, session, hash, forced): a new attempt each, with its runtime-log entry. */
const LEASE_ASSIGNED = `job as (
    update speech_jobs j set
       status = 'transcribing', attempt = j.attempt + 1, worker_id = a.wid,
       started_at = coalesce(j.started_at, now()), finished_at = null, failure_error = null, outcome = null,
       stage_label = 'Claimed by ' || a.name, stage_detail = null, audio_position_seconds = 0, transcript_text = null, updated_at = now()
      from a where j.id = a.id
    returning j.id, j.attempt, j.current_pass, j.model, j.language, j.source_type, j.source_url, j.media_path, j.media_sha256,
              j.source_size_bytes, j.source_filename, j.source_duration_seconds, j.diarization_requested,
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
  )
  select job.id, job.attempt, job.current_pass, job.model, job.language, job.source_type, job.source_url, job.media_path, job.media_sha256,
         job.source_size_bytes, job.source_filename, job.source_duration_seconds, job.diarization_requested,
         job.status, job.stage_label, job.stage_detail, job.audio_position_seconds, job.forced, lease.expires_at
    from job join lease on lease.job_id = job.id`;

const claimBindings = (w: ClaimingWorker, opts: ClaimOptions) => ({
  isLocal: w.local,
  models: w.models,
  allow: opts.localModels,
  presence: opts.presenceTtlSeconds,
  canFetch: w.canFetchUrls,
  diarize: w.diarization,
});

function claimedOf(j: Record<string, unknown>): ClaimedJob & { row: StatusRow } {
  return {
    jobId: Number(j.id),
    attempt: Number(j.attempt),
    pass: Number(j.current_pass),
    forced: j.forced === true,
    expiresAt: epochMs(j.expires_at as string),
    model: String(j.model),
    language: (j.language as string | null) ?? null,
    sourceType: j.source_type as 'url' | 'upload',
    sourceUrl: (j.source_url as string | null) ?? null,
    mediaPath: (j.media_path as string | null) ?? null,
    mediaSha256: (j.media_sha256 as string | null) ?? null,
    sizeBytes: Number(j.source_size_bytes ?? 0),
    filename: (j.source_filename as string | null) ?? null,
    durationSeconds: Number(j.source_duration_seconds ?? 0),
    diarization: j.diarization_requested === true,
    task: j.task === 'diarize' ? 'diarize' : 'transcribe',
    regenerateSegments: j.regenerate === true,
    row: j as unknown as StatusRow,
  };
}

const stripRow = ({ row: _row, ...claimed }: ClaimedJob & { row: StatusRow }): ClaimedJob => claimed;

/** Words as stored in speech_segments.words (a JSON array), or null when there are none. */
function storedWords(words: readonly Word[] | null | undefined): string | null {
  const ok = (words ?? [])
    .filter((w) => Number.isFinite(w.start) && Number.isFinite(w.end) && w.end >= w.start && typeof w.text === 'string' && w.text.trim())
    .slice(0, MAX_SEGMENT_WORDS)
    .map((w) => ({ start: w.start, end: w.end, text: w.text.trim().slice(0, 200) }));
  return ok.length ? JSON.stringify(ok) : null;
}

/** A stored segment row as labelSegments reads it. */
interface StoredSegmentRow {
  seq: number | null;
  start_seconds: number;
  end_seconds: number;
  text: string;
  words: Word[] | null;
  source_seq: number | null;
  source_text: string | null;
}

/**
 * The segments the worker reported, from the stored rows of a pass: the pieces of a split segment
 * (the same source_seq) joined back into one, with the reported text and all their words.
 */
function reportedSegments(rows: readonly StoredSegmentRow[]): Array<SourceSegment & { seq: number }> {
  const out: Array<SourceSegment & { seq: number; words: Word[] | null }> = [];
  let lastSource: number | null = null;
  for (const r of rows) {
    const source = r.source_seq ?? Number(r.seq);
    const prev = out.at(-1);
    if (prev && lastSource === source && r.source_text !== null) {
      prev.end = Math.max(prev.end, r.end_seconds);
      if (r.words?.length) prev.words = [...(prev.words ?? []), ...r.words];
      continue;
    }
    lastSource = source;
    out.push({ seq: source, start: r.start_seconds, end: r.end_seconds, text: r.source_text ?? r.text, words: r.words?.length ? [...r.words] : null });
  }
  return out;
}

const fence = (workerId: number, ref: LeaseRefMsg) => ({ job: ref.job_id, attempt: ref.attempt, wid: workerId, hash: hashLeaseToken(ref.lease_token) });

/**
 * The one owner of speech job state: the only code that writes speech_jobs.status, attempts, stage
 * fields, leases, the runtime log (speech_job_events) and the notification outbox. Each transition
 * is one SQL statement (data-modifying CTEs) guarded by the statuses JOB_TRANSITIONS allows it
 * from, checked against the database clock, and publishes the new live status after it commits.
 * A terminal transition writes its notification row in the same statement, so no path can end a
 * job without its callback and report (see NotificationOutbox).
 */
export class JobRepository {
  private readonly terminalListeners: Array<(jobs: Array<{ jobId: number; status: JobStatus }>, notified: boolean) => void> = [];

  private readonly aiListeners: Array<() => void> = [];

  constructor(
    private readonly orm: Orm,
    private readonly sink: JobEventSink,
    /** Completion reports are enabled (SMTP_URL is set): owners with an address are notified too. */
    private readonly reportsEnabled: boolean,
    /** Whether analysis, translations and titles can run (a provider is configured), and why not. */
    private readonly ai: AiAvailability = { configured: false, noProvider: 'No AI provider is configured.', noAccess: 'The owner has no AI-provider access.' },
  ) {}

  /** Called after transitions that wrote speech_ai_tasks rows (the AI dispatcher drains them). */
  onAiWork(listener: () => void) {
    this.aiListeners.push(listener);
  }

  private aiQueued() {
    for (const l of this.aiListeners) l();
  }

  private aiBindings() {
    return { aiOn: this.ai.configured, noProvider: this.ai.noProvider, noAccess: this.ai.noAccess };
  }

  get knex(): Knex {
    return this.orm.em.getConnection().getKnex();
  }

  private readonly statements = new Map<string, PreparedStatement<unknown>>();

  /** Runs one of the worker protocol's hot statements as a prepared statement (see db/prepared.ts). */
  private prepared<Row>(name: string, sql: string, bindings: Record<string, unknown>): Promise<Row[]> {
    return this.statement<Row>(name, sql).run(this.knex, bindings);
  }

  private statement<Row>(name: string, sql: string): PreparedStatement<Row> {
    let statement = this.statements.get(name);
    if (!statement) this.statements.set(name, (statement = new PreparedStatement(name, sql)));
    return statement as PreparedStatement<Row>;
  }

  /** Called after transitions that ended jobs; `notified` when they wrote notification rows (the outbox dispatcher drains them). */
  onTerminal(listener: (jobs: Array<{ jobId: number; status: JobStatus }>, notified: boolean) => void) {
    this.terminalListeners.push(listener);
  }

  private terminal(rows: Array<{ id: number; status: JobStatus }>, notified = true) {
    const jobs = rows.map((r) => ({ jobId: Number(r.id), status: r.status }));
    for (const l of this.terminalListeners) l(jobs, notified);
  }

  private publish(rows: StatusRow[]) {
    for (const j of rows) {
      this.sink.status(Number(j.id), {
        status: j.status,
        status_label: JOB_STATUS_LABELS[j.status],
        stage_label: j.stage_label,
        stage_detail: j.stage_detail,
        audio_position_seconds: Number(j.audio_position_seconds),
        attempt: Number(j.attempt),
      });
    }
  }

  // ---- creation and people's moves -------------------------------------------------------------

  /** The runtime-log entry of a new job (the row itself is inserted as `queued` by JobService.create's unit of work). */
  async logQueued(trx: Knex | Knex.Transaction, jobId: number, message: string) {
    await trx.raw(`insert into speech_job_events (job_id, event, message) values (?, 'queued', ?)`, [jobId, message]);
  }

  async log(
    jobId: number,
    event: string,
    message: string,
    level: EventLevel = 'info',
    data: Record<string, unknown> | null = null,
    trx: Knex | Knex.Transaction = this.knex,
  ) {
    await trx.raw('insert into speech_job_events (job_id, event, message, level, data) values (?, ?, ?, ?, ?::jsonb)', [
      jobId,
      event,
      message,
      level,
      data ? JSON.stringify(data) : null,
    ]);
    // An entry written inside a caller's transaction is announced by that caller's own event once committed.
    if (trx === this.knex) this.sink.changed(jobId, 'log');
  }

  /**
   * failed or queued → queued with a fresh retry budget (attempts only grow: the next claim is
   * attempt + 1). A failed job starts the next notification cycle. Returns the ids moved.
   */
  async restart(ids: number[], retries: number, message: string): Promise<number[]> {
    if (!ids.length) return [];
    const { rows } = await this.knex.raw<{ rows: StatusRow[] }>(
      `with moved as (
         update speech_jobs j set
            status = 'queued', max_attempts = j.attempt + :retries, failure_error = null, outcome = null,
            cancel_requested_at = null, stage_label = 'Waiting for a worker', stage_detail = null,
            audio_position_seconds = 0, transcript_text = null, finished_at = null, updated_at = now(),
            callback_cycle = j.callback_cycle + (j.status = 'failed')::int,
            callback_status = case when j.status <> 'failed' then j.callback_status when j.callback_url is null then null else 'pending' end,
            callback_http_status = case when j.status = 'failed' then null else j.callback_http_status end,
            callback_last_attempt_at = case when j.status = 'failed' then null else j.callback_last_attempt_at end,
            callback_delivered_at = case when j.status = 'failed' then null else j.callback_delivered_at end,
            callback_error = case when j.status = 'failed' then null else j.callback_error end,
            callback_attempts = case when j.status = 'failed' then 0 else j.callback_attempts end,
            report_sent_at = case when j.status = 'failed' then null else j.report_sent_at end
          where j.id = any(:ids::int[]) and j.status = any(:from::text[])
            and not (j.source_type = 'upload' and j.media_path is null)
          returning ${STATUS_COLUMNS.split(', ')
            .map((c) => `j.${c}`)
            .join(', ')}
       ), cleared as (
         -- the next attempt starts the pass from scratch: the previous attempt's segments must not
         -- show as the current transcript while the job waits (the claim clears them too)
         delete from speech_segments s using speech_jobs jj, moved
          where jj.id = moved.id and s.job_id = jj.id and s.pass = jj.current_pass
       ), ev as (
         insert into speech_job_events (job_id, event, message) select id, 'restarted', :message from moved
       )
       select * from moved order by id`,
      { ids, retries, from: fromStatuses('restart'), message },
    );
    this.publish(rows);
    return rows.map((r) => Number(r.id));
  }

  /** The oldest `limit` failed jobs whose media still exists (run-now reset_failed). */
  async oldestFailed(limit: number): Promise<number[]> {
    const { rows } = await this.knex.raw<{ rows: Array<{ id: number }> }>(
      `select id from speech_jobs where status = 'failed' and not (source_type = 'upload' and media_path is null)
        order by created_at asc, id asc limit ?`,
      [limit],
    );
    return rows.map((r) => Number(r.id));
  }

  /** Cooperative cancellation of a processing job; false when it is not processing (any more). */
  async requestCancel(jobId: number, by: string): Promise<boolean> {
    const { rows } = await this.knex.raw<{ rows: Array<{ id: number }> }>(
      `with j as (
         update speech_jobs set cancel_requested_at = coalesce(cancel_requested_at, now()), updated_at = now()
          where id = :id and status = any(:processing::text[]) returning id
       ), ev as (insert into speech_job_events (job_id, event, message) select id, 'cancel_requested', :message from j)
       select id from j`,
      { id: jobId, processing: [...PROCESSING_STATUSES], message: `Cancellation requested by ${by}.` },
    );
    if (rows.length) this.sink.changed(jobId, 'cancel');
    return rows.length > 0;
  }

  /** Deletes a job that is not processing (with its segments, leases, log and outbox rows); false otherwise. */
  async delete(jobId: number): Promise<boolean> {
    const { rows } = await this.knex.raw<{ rows: Array<{ id: number }> }>(
      `delete from speech_jobs where id = ? and not (status = any(?::text[])) returning id`,
      [jobId, [...PROCESSING_STATUSES]],
    );
    return rows.length > 0;
  }

  async setTarget(jobId: number, mode: string, workerId: number | null, message: string) {
    await this.knex.raw(
      `with j as (update speech_jobs set execution_target = :mode, target_worker_id = :wid, updated_at = now() where id = :id returning id)
       insert into speech_job_events (job_id, event, message) select id, 'target_changed', :message from j`,
      { id: jobId, mode, wid: workerId, message },
    );
    this.sink.changed(jobId, 'target');
  }

  // ---- re-transcription (one block: the owner's new pass) ---------------------------------------

  /**
   * completed → queued with another model (JOB_TRANSITIONS.retranscribe), in one statement and so
   * one transaction: the current pass is archived as a read-only speech_revisions row (model,
   * language, engine, transcript, duration, diarization as a DiarizationRecord, speaker labels;
   * its segments stay in speech_segments under their pass number), and the job starts pass + 1
   * with the new model from scratch: transcript, engine, stage, outcome and diarization cleared
   * (state `pending` when diarization is requested, else `skipped`), speaker labels emptied, a
   * fresh retry budget, and the next notification cycle (callback status `pending` again when a
   * callback URL exists, report not sent). `local` runs the new pass on the local runner only
   * (URL sources). The statement re-checks every rule that can change under it (owner, completed,
   * another model, retained media, no diarization pending or running); null when one no longer
   * holds, and nothing was written.
   */
  async retranscribe(req: {
    jobId: number;
    /** The caller, who must own the job (recorded as the revision's `archived_by`). */
    ownerId: number;
    /** Who started it, for the runtime log. */
    by: string;
    model: string;
    /** The retry budget of the new pass (SPEECH_MAX_ATTEMPTS). */
    retries: number;
    /** Run the new pass on the local runner only (execution_target `local`). */
    local: boolean;
  }): Promise<{ pass: number; archivedPass: number; fromModel: string } | null> {
    const iso = (column: string) => `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
    const { rows } = await this.knex.raw<{ rows: Array<StatusRow & { current_pass: number; from_model: string; archived_pass: number }> }>(
      `with cur as (
         select j.* from speech_jobs j
          where j.id = :id and j.owner_id = :owner and j.status = any(:from::text[]) and j.model <> :model
            and j.media_path is not null and j.diarization_state not in ('pending', 'running')
            -- analysis and translation work of the pass must have ended (spec "Re-transcription availability")
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
                  'turns', diarization_turns),
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
            status = 'queued', current_pass = cur.current_pass + 1, model = :model,
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
            callback_status = case when cur.callback_url is null then null else 'pending' end,
            callback_http_status = null, callback_last_attempt_at = null, callback_delivered_at = null, callback_error = null,
            callback_attempts = 0, report_sent_at = null, updated_at = now()
           from cur where j.id = cur.id
         returning ${STATUS_COLUMNS.split(', ')
           .map((c) => `j.${c}`)
           .join(', ')}, j.current_pass, cur.model as from_model, cur.current_pass as archived_pass
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
      { id: req.jobId, owner: req.ownerId, model: req.model, local: req.local, retries: req.retries, by: req.by, from: fromStatuses('retranscribe') },
    );
    const row = rows[0];
    if (!row) return null;
    this.publish([row]);
    return { pass: Number(row.current_pass), archivedPass: Number(row.archived_pass), fromModel: row.from_model };
  }

  // ---- workers -----------------------------------------------------------------------------------

  /**
   * Leases the next job to each claiming worker (admin-owned first, then oldest), or null. One
   * statement for a lone claim; concurrent claims of workers with the same capabilities (batched by
   * LeaseService) share one transaction: the candidates are locked with skip locked, assigned in
   * claim order (a pinned job only to its worker), and leased in one statement.
   */
  async claimMany(requests: ClaimRequest[], opts: ClaimOptions): Promise<Array<ClaimedJob | null>> {
    type Claimed = ClaimedJob & { row: StatusRow };
    const results: Array<Claimed | null> = new Array<Claimed | null>(requests.length).fill(null);
    const groups = new Map<string, number[]>();
    requests.forEach((r, i) => {
      const w = r.worker;
      const key = `${w.local}|${w.canFetchUrls}|${w.diarization}|${[...w.models].sort().join(',')}`;
      groups.set(key, [...(groups.get(key) ?? []), i]);
    });
    for (const indexes of groups.values()) {
      if (indexes.length === 1) {
        const i = indexes[0]!;
        results[i] = await this.claimOne(requests[i]!, opts);
        continue;
      }
      const group = indexes.map((i) => requests[i]!);
      const { claimed, maybeMore } = await this.claimGroup(group, opts);
      for (const [k, i] of indexes.entries()) results[i] = claimed[k] ?? null;
      // Candidates ran out on pinned jobs of other workers: the unlucky claims look again one by one.
      if (maybeMore) for (const [k, i] of indexes.entries()) if (!claimed[k]) results[i] = await this.claimOne(group[k]!, opts);
    }
    // Nothing to transcribe: diarization reruns of completed jobs (one statement each; their partial index is tiny).
    // One look first: a batch of idle workers would otherwise try one statement each for nothing.
    if (requests.some((r, i) => !results[i] && r.worker.diarizeTasks) && (await this.diarizationWaiting())) {
      for (const [i, r] of requests.entries()) if (!results[i] && r.worker.diarizeTasks) results[i] = await this.claimDiarization(r, opts);
    }
    const found = results.filter((r): r is Claimed => r !== null);
    this.publish(found.map((r) => r.row));
    return results.map((r) => (r ? stripRow(r) : null));
  }

  private async claimOne(req: ClaimRequest, opts: ClaimOptions): Promise<(ClaimedJob & { row: StatusRow }) | null> {
    const w = req.worker;
    const rows = await this.prepared<Record<string, unknown>>(
      'speech_claim',
      `with picked as (
         select j.id, (j.execution_target <> 'auto') as forced from speech_jobs j
          where ${CLAIMABLE('j.target_worker_id = :wid')}
          order by j.owner_is_admin desc, j.created_at, j.id
          limit 1
          for update of j skip locked
       ), a as (
         select picked.id, :wid::int as wid, :name::text as name, :session::text as session, :hash::text as hash, picked.forced from picked
       ), ${LEASE_ASSIGNED}`,
      { ...claimBindings(w, opts), wid: w.id, name: w.name, session: w.sessionId, hash: req.tokenHash, ttl: opts.ttlSeconds },
    );
    return rows[0] ? claimedOf(rows[0]) : null;
  }

  private claimGroup(group: ClaimRequest[], opts: ClaimOptions): Promise<{ claimed: Array<(ClaimedJob & { row: StatusRow }) | null>; maybeMore: boolean }> {
    const w = group[0]!.worker;
    return inTransaction(this.knex, async (connection) => {
      const candidates = await this.statement<{ id: number; execution_target: string; target_worker_id: number | null }>(
        'speech_claim_candidates',
        `select j.id, j.execution_target, j.target_worker_id from speech_jobs j
          where ${CLAIMABLE('j.target_worker_id = any(:wids::int[])')}
          order by j.owner_is_admin desc, j.created_at, j.id
          limit :limit
          for update of j skip locked`,
      ).runOn(connection, { ...claimBindings(w, opts), wids: group.map((r) => r.worker.id), limit: group.length });
      const assignment: Array<{ id: number; forced: boolean } | null> = group.map(() => null);
      for (const c of candidates) {
        const k =
          c.execution_target === 'worker'
            ? group.findIndex((r, i) => r.worker.id === c.target_worker_id && !assignment[i])
            : assignment.findIndex((a) => a === null);
        if (k >= 0) assignment[k] = { id: Number(c.id), forced: c.execution_target !== 'auto' };
      }
      const picked = group.flatMap((r, k) => (assignment[k] ? [{ r, a: assignment[k] }] : []));
      const rows = picked.length
        ? await this.statement<Record<string, unknown>>(
            'speech_claim_assign',
            `with a as (
               select * from unnest(:ids::int[], :wids::int[], :names::text[], :sessions::text[], :hashes::text[], :forced::bool[])
                 as a(id, wid, name, session, hash, forced)
             ), ${LEASE_ASSIGNED}`,
          ).runOn(connection, {
            ids: picked.map((p) => p.a.id),
            wids: picked.map((p) => p.r.worker.id),
            names: picked.map((p) => p.r.worker.name),
            sessions: picked.map((p) => p.r.worker.sessionId),
            hashes: picked.map((p) => p.r.tokenHash),
            forced: picked.map((p) => p.a.forced),
            ttl: opts.ttlSeconds,
          })
        : [];
      const byJob = new Map(rows.map((row) => [Number(row.id), claimedOf(row)]));
      return {
        claimed: assignment.map((a) => (a ? (byJob.get(a.id) ?? null) : null)),
        maybeMore: candidates.length === group.length,
      };
    });
  }

  /**
   * Leases a diarization rerun: a completed job whose diarization waits for a runner, as a `diarize`
   * lease. The job stays completed; its diarization moves pending → running and its attempt
   * sequence grows by one (leases are unique per job and attempt). Pinned and local targets apply
   * as for transcription; an `auto` rerun needs a worker with a diarizer, and one that has the
   * job's model when the pass's segments must be regenerated first.
   */
  /** Whether any diarization rerun waits for a runner (the claimDiarization guard without the worker's part). */
  private async diarizationWaiting(): Promise<boolean> {
    const rows = await this.prepared<{ waiting: boolean }>(
      'speech_diarization_waiting',
      `select exists (select 1 from speech_jobs j
                       where j.status = 'completed' and j.diarization_state = 'pending'
                         and j.diarization_rerun_requested_at is not null and j.media_path is not null) as waiting`,
      {},
    );
    return rows[0]?.waiting === true;
  }

  private async claimDiarization(req: ClaimRequest, opts: ClaimOptions): Promise<(ClaimedJob & { row: StatusRow }) | null> {
    const w = req.worker;
    const rows = await this.prepared<Record<string, unknown>>(
      'speech_claim_diarization',
      `with picked as (
         select j.id, (j.execution_target <> 'auto') as forced,
                not exists (select 1 from speech_segments s where s.job_id = j.id and s.pass = j.current_pass) as regenerate
           from speech_jobs j
          where j.status = 'completed' and j.diarization_state = 'pending' and j.diarization_rerun_requested_at is not null
            and j.media_path is not null
            and ((j.execution_target = 'worker' and j.target_worker_id = :wid)
              or (j.execution_target = 'local' and :isLocal)
              or (j.execution_target = 'auto' and :diarize and (not :isLocal or not exists (${REMOTE_PRESENT}))
                  and (exists (select 1 from speech_segments s where s.job_id = j.id and s.pass = j.current_pass)
                       or (j.model = any(:models::text[]) and (not :isLocal or j.model = any(${LOCAL_ALLOWLIST_SQL}))))))
          order by j.owner_is_admin desc, j.diarization_rerun_requested_at, j.id
          limit 1
          for update of j skip locked
       ), job as (
         update speech_jobs j set attempt = j.attempt + 1, diarization_state = 'running', diarization_attempts = j.diarization_attempts + 1,
                diarization_error = null, diarization_updated_at = now(), updated_at = now()
           from picked where j.id = picked.id
         returning j.id, j.attempt, j.current_pass, j.model, j.language, j.source_type, j.source_url, j.media_path, j.media_sha256,
                   j.source_size_bytes, j.source_filename, j.source_duration_seconds, j.diarization_requested, j.diarization_attempts,
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
       select job.*, 'diarize' as task, lease.expires_at from job join lease on lease.job_id = job.id`,
      { ...claimBindings(w, opts), wid: w.id, name: w.name, session: w.sessionId, hash: req.diarizeTokenHash, ttl: opts.ttlSeconds },
    );
    const claimed = rows[0] ? claimedOf(rows[0]) : null;
    if (claimed) this.sink.diarization(claimed.jobId, { state: 'running', speaker_count: null });
    return claimed;
  }

  /** Why a fence check failed, for the worker's error message (read only after the fenced statement matched nothing). */
  private async staleReason(workerId: number, ref: LeaseRefMsg): Promise<{ message: string; outcome: string | null }> {
    const { rows } = await this.knex.raw<{
      rows: Array<{ worker_id: number; token_hash: string; ended_at: unknown; outcome: string | null; expired: boolean }>;
    }>(`select worker_id, token_hash, ended_at, outcome, (expires_at <= now()) as expired from speech_leases where job_id = ? and attempt = ?`, [
      ref.job_id,
      ref.attempt,
    ]);
    const r = rows[0];
    const what = `job ${ref.job_id} attempt ${ref.attempt}`;
    if (!r || r.worker_id !== workerId || r.token_hash !== hashLeaseToken(ref.lease_token))
      return { message: `no lease for ${what} with this token`, outcome: null };
    if (r.ended_at) return { message: `the lease of ${what} ended (${r.outcome})`, outcome: r.outcome };
    return { message: `the lease of ${what} expired`, outcome: null };
  }

  private async stale(workerId: number, ref: LeaseRefMsg): Promise<never> {
    throw new StaleLeaseError((await this.staleReason(workerId, ref)).message);
  }

  /** The pass and cancel flag of a live lease; StaleLeaseError otherwise. */
  async liveLease(
    workerId: number,
    ref: LeaseRefMsg,
  ): Promise<{ pass: number; cancelRequested: boolean; mediaPath: string | null; mediaSha256: string | null }> {
    const rows = await this.prepared<{ current_pass: number; cancel: boolean; media_path: string | null; media_sha256: string | null }>(
      'speech_live_lease',
      `select j.current_pass, (j.cancel_requested_at is not null) as cancel, j.media_path, j.media_sha256
         from speech_leases l join speech_jobs j on j.id = l.job_id where ${LIVE_LEASE}`,
      fence(workerId, ref),
    );
    const r = rows[0];
    if (!r) return this.stale(workerId, ref);
    return { pass: Number(r.current_pass), cancelRequested: r.cancel, mediaPath: r.media_path, mediaSha256: r.media_sha256 };
  }

  /** Renews the presented live leases in one statement; returns cancel requests, lost jobs and the new expiry. */
  async renew(workerId: number, refs: LeaseRefMsg[], ttlSeconds: number): Promise<{ cancel: number[]; lost: number[]; expiresAt: number }> {
    if (!refs.length) return { cancel: [], lost: [], expiresAt: 0 };
    const rows = await this.prepared<{ job_id: number; cancel: boolean; expires_at: string | Date }>(
      'speech_renew',
      `with refs as (select * from unnest(:jobs::int[], :attempts::int[], :hashes::text[]) as r(job_id, attempt, token_hash)),
       renewed as (
         update speech_leases l set expires_at = now() + make_interval(secs => :ttl), last_heartbeat_at = now()
           from refs where l.job_id = refs.job_id and l.attempt = refs.attempt and l.token_hash = refs.token_hash
            and l.worker_id = :wid and l.ended_at is null and l.expires_at > now()
         returning l.job_id, l.expires_at
       )
       select r.job_id, r.expires_at, (j.cancel_requested_at is not null) as cancel from renewed r join speech_jobs j on j.id = r.job_id`,
      {
        jobs: refs.map((r) => r.job_id),
        attempts: refs.map((r) => r.attempt),
        hashes: refs.map((r) => hashLeaseToken(r.lease_token)),
        ttl: ttlSeconds,
        wid: workerId,
      },
    );
    const live = new Set(rows.map((r) => Number(r.job_id)));
    return {
      cancel: rows.filter((r) => r.cancel).map((r) => Number(r.job_id)),
      lost: refs.map((r) => r.job_id).filter((id) => !live.has(id)),
      expiresAt: rows.length ? Math.max(...rows.map((r) => epochMs(r.expires_at))) : 0,
    };
  }

  /**
   * Writes a batch of progress under the lease fence in one statement: new segments (deduplicated
   * by job, pass and seq), stage, position and the running text. StaleLeaseError when the lease is
   * no longer live. Returns the seqs that were new.
   */
  async writeProgress(batch: ProgressBatch): Promise<number[]> {
    const segs = batch.segments;
    const rows = await this.prepared<{ live: boolean; stored: number[] | null; id: number | null; diarization_state?: string } & Partial<StatusRow>>(
      'speech_progress',
      `with l as (
         select l.id, j.current_pass from speech_leases l join speech_jobs j on j.id = l.job_id where ${LIVE_LEASE}
       ), seg as (
         insert into speech_segments (job_id, pass, seq, start_seconds, end_seconds, text, words)
         select :job, l.current_pass, s.seq, s.st, s.en, s.tx, s.wd::jsonb
           from l, unnest(:seqs::int[], :starts::float8[], :ends::float8[], :texts::text[], :words::text[]) as s(seq, st, en, tx, wd)
         on conflict (job_id, pass, seq) do nothing
         returning seq, text
       ), added as (
         select string_agg(btrim(text), ' ' order by seq) filter (where btrim(text) <> '') as text, array_agg(seq order by seq) as seqs from seg
       ), job as (
         update speech_jobs j set
            status = case when j.status = any(:processing::text[]) then :status else j.status end,
            stage_label = :label, stage_detail = nullif(:detail::text, ''),
            audio_position_seconds = greatest(j.audio_position_seconds, :pos::float8),
            source_duration_seconds = coalesce(j.source_duration_seconds, nullif(:duration::float8, 0)),
            engine = coalesce(nullif(:engine::text, ''), j.engine),
            engine_model = coalesce(nullif(:engineModel::text, ''), j.engine_model),
            transcript_text = case when added.text is null then j.transcript_text
              else right(concat_ws(' ', j.transcript_text, added.text), ${MAX_RUNNING_TEXT}) end,
            diarization_state = case when :diarizing and j.diarization_requested and j.diarization_state = 'pending' then 'running' else j.diarization_state end,
            diarization_updated_at = case when :diarizing and j.diarization_requested and j.diarization_state = 'pending' then now() else j.diarization_updated_at end,
            updated_at = now()
           from l, added
          where j.id = :job and j.status = any(:processing::text[])
         returning j.id, j.status, j.stage_label, j.stage_detail, j.audio_position_seconds, j.attempt, j.diarization_state
       )
       -- no lease row is written here: completion locks lease then job, so progress (job only) cannot deadlock with it;
       -- liveness reads the job's updated_at as the time of the last progress
       select exists (select 1 from l) as live, (select seqs from added) as stored, job.*
         from (select 1) one left join job on true`,
      {
        ...fence(batch.workerId, batch.ref),
        seqs: segs.map((s) => s.seq),
        starts: segs.map((s) => s.start),
        ends: segs.map((s) => s.end),
        texts: segs.map((s) => s.text.slice(0, 10_000)),
        words: segs.map((s) => storedWords(s.words)),
        processing: [...PROCESSING_STATUSES],
        status: batch.stage,
        label: JOB_STATUS_LABELS[batch.stage],
        detail: batch.stageDetail,
        pos: batch.position,
        duration: batch.durationSeconds,
        engine: batch.engine,
        engineModel: batch.engineModel,
        diarizing: batch.diarizing,
      },
    );
    const r = rows[0]!;
    if (!r.live) return this.stale(batch.workerId, batch.ref);
    if (r.id !== null && r.id !== undefined) {
      this.publish([r as StatusRow]);
      if (batch.diarizing && r.diarization_state === 'running') this.sink.diarization(Number(r.id), { state: 'running', speaker_count: null });
    }
    return (r.stored ?? []).map(Number);
  }

  /**
   * Ends attempts as completed or failed (cancelled when cancellation was asked for), each with its
   * notification row, in one statement for the whole batch (concurrent completions are batched by
   * LeaseService). Repeating the same completion of the same attempt is a duplicate; anything else
   * from an attempt that no longer holds the job is a StaleLeaseError (returned in its place).
   */
  async finishMany(items: FinishRequest[]): Promise<Array<FinishResult | StaleLeaseError>> {
    const rows = await this.prepared<
      StatusRow & {
        outcome: JobOutcome;
        notified: boolean;
        diarization_state: DiarizationState;
        diarization_speaker_count: number | null;
        ai_queued: boolean;
        analysis_state: AiState | null;
        analysis_language: string | null;
        title_state: AiState | null;
      }
    >(
      'speech_finish',
      `with r as (
         select * from unnest(:jobs::int[], :attempts::int[], :wids::int[], :hashes::text[], :success::bool[], :cancelled::bool[],
                              :reported::int[], :errors::text[], :durations::float8[], :engines::text[], :engineModels::text[], :shares::text[],
                              :diarStates::text[], :diarEngines::text[], :diarErrors::text[], :diarCounts::int[], :diarTurns::text[])
           as r(job_id, attempt, wid, hash, success, cancelled, reported, error, duration, engine, engine_model, share,
                diar_state, diar_engine, diar_error, diar_count, diar_turns)
       ), l as (
         update speech_leases l set ended_at = now(), outcome = case when r.success then 'completed' else 'failed' end
           from r
          where l.job_id = r.job_id and l.attempt = r.attempt and l.worker_id = r.wid and l.token_hash = r.hash
            and l.ended_at is null and l.expires_at > now()
         returning l.job_id, l.attempt
       ), acc as (
         -- whether the pass's AI work may run: a provider is configured and the owner has AI access (admins always)
         select l.job_id, case when not :aiOn then :noProvider::text
                               when not (u.is_admin or 'provider_openai' = any(u.permissions)) then :noAccess::text end as block
           from l join speech_jobs jj on jj.id = l.job_id join users u on u.id = jj.owner_id
       ), segs as (
         -- the segments the worker reported: the pieces of a segment split at speaker changes count once
         select l.job_id, count(distinct coalesce(s.source_seq, s.seq))::int as n,
                coalesce(string_agg(btrim(s.text), ' ' order by s.seq) filter (where btrim(s.text) <> ''), '') as text
           from l join speech_jobs j on j.id = l.job_id
           left join speech_segments s on s.job_id = j.id and s.pass = j.current_pass
          group by l.job_id
       ), job as (
         update speech_jobs j set
            status = case when r.success then 'completed' else 'failed' end,
            outcome = case when r.success then 'completed' when r.cancelled or j.cancel_requested_at is not null then 'cancelled' else 'failed' end,
            stage_label = case when r.success then 'Completed' when r.cancelled or j.cancel_requested_at is not null then 'Cancelled' else 'Failed' end,
            stage_detail = case when not r.success then null
              when segs.n = 0 then 'No speech detected'
              when segs.n = r.reported then segs.n || case when segs.n = 1 then ' segment' else ' segments' end
              else segs.n || case when segs.n = 1 then ' segment' else ' segments' end || ' stored, worker reported ' || r.reported end,
            transcript_text = case when r.success then segs.text else j.transcript_text end,
            failure_error = case when r.success then null when r.cancelled or j.cancel_requested_at is not null then 'Cancelled on request.'
              else left(coalesce(nullif(r.error, ''), 'The worker reported a failure.'), 2000) end,
            audio_position_seconds = case when r.success then greatest(j.audio_position_seconds, r.duration) else j.audio_position_seconds end,
            engine = coalesce(nullif(r.engine, ''), j.engine),
            engine_model = coalesce(nullif(r.engine_model, ''), j.engine_model),
            -- the attempt's diarization (see DIARIZATION_TRANSITIONS); a failed attempt leaves it for the next one
            diarization_state = case
              when not r.success then case when j.diarization_state = 'running' then 'pending' else j.diarization_state end
              when not j.diarization_requested then j.diarization_state
              when r.diar_state in ('completed', 'failed', 'unavailable') then r.diar_state
              else 'unavailable' end,
            diarization_engine = case when r.success and j.diarization_requested then nullif(r.diar_engine, '') else j.diarization_engine end,
            diarization_speaker_count = case when r.success and j.diarization_requested
              then case when r.diar_state = 'completed' then r.diar_count end else j.diarization_speaker_count end,
            diarization_turns = case when r.success and j.diarization_requested
              then case when r.diar_state = 'completed' then r.diar_turns::jsonb end else j.diarization_turns end,
            diarization_error = case when r.success and j.diarization_requested then case
              when r.diar_state = 'completed' then null
              when r.diar_state = 'failed' then left(coalesce(nullif(r.diar_error, ''), 'The diarizer failed.'), 2000)
              when r.diar_state = 'unavailable' then left(coalesce(nullif(r.diar_error, ''), 'The worker cannot label speakers.'), 2000)
              else 'The worker that ran this job cannot label speakers (it does not report speaker turns).' end
              else j.diarization_error end,
            diarization_updated_at = case when r.success and j.diarization_requested then now() else j.diarization_updated_at end,
            -- token-API jobs get a public share as soon as the transcript completes
            share_token = case when r.success and j.queue_channel = 'api' and j.share_token is null then r.share else j.share_token end,
            share_created_at = case when r.success and j.queue_channel = 'api' and j.share_token is null then now() else j.share_created_at end,
            -- the pass's AI work (AI_TRANSITIONS.plan): pending, or unavailable with the reason
            analysis = case when r.success and j.analysis_language is not null then ${aiRecord("case when acc.block is null then 'pending' else 'unavailable' end", 'j.analysis_language', '1', 'acc.block')}
              else j.analysis end,
            auto_title = case when r.success and ${TITLE_ELIGIBLE} then ${titleRecord("case when acc.block is null then 'pending' else 'unavailable' end", 'acc.block')}
              else j.auto_title end,
            finished_at = now(), updated_at = now()
           from l join r on r.job_id = l.job_id join segs on segs.job_id = l.job_id join acc on acc.job_id = l.job_id
          where j.id = l.job_id and j.attempt = l.attempt and j.status = any(:from::text[])
         returning j.id, j.status, j.stage_label, j.stage_detail, j.audio_position_seconds, j.attempt, j.outcome, j.callback_cycle, segs.n,
                   j.queue_channel, j.callback_url, j.owner_id, r.error, r.success, j.diarization_requested, j.diarization_state,
                   j.diarization_speaker_count, j.diarization_engine, j.diarization_error, j.current_pass, j.translation_target_languages,
                   j.analysis->>'state' as analysis_state, j.analysis->>'language' as analysis_language, j.auto_title->>'state' as title_state, acc.block
       ), ai_tr as (
         insert into speech_translations (job_id, pass, language, state, error)
         select job.id, job.current_pass, t.lang, case when job.block is null then 'pending' else 'unavailable' end, job.block
           from job cross join lateral unnest(job.translation_target_languages) as t(lang)
          where job.success
         on conflict (job_id, pass, language) do nothing
         returning job_id, pass, language, state, generation
       ), ai_tasks as (
         -- translations wait for a pending analysis (they translate it too): its end queues them
         insert into speech_ai_tasks (job_id, pass, kind, language, generation)
         select id, current_pass, 'analysis', '', 1 from job where success and analysis_state = 'pending'
         union all select id, current_pass, 'title', '', 1 from job where success and title_state = 'pending'
         union all select t.job_id, t.pass, 'translation', t.language, t.generation from ai_tr t join job on job.id = t.job_id
          where t.state = 'pending' and job.analysis_state is distinct from 'pending'
         on conflict do nothing
         returning job_id
       ), ai_ev as (
         insert into speech_job_events (job_id, event, message, level)
         select id, 'analysis_' || analysis_state,
                case when analysis_state = 'pending' then 'Transcript analysis queued (' || ${LANGUAGE_WORDS('analysis_language')} || ').'
                     else 'Transcript analysis unavailable: ' || block end,
                case when analysis_state = 'pending' then 'info' else 'warn' end
           from job where success and analysis_state is not null
         union all
         select job.id, 'translations_' || min(t.state),
                case when min(t.state) = 'pending' then 'Translations queued: ' || string_agg(t.language, ', ' order by t.language) || '.'
                     else 'Translations unavailable (' || string_agg(t.language, ', ' order by t.language) || '): ' || job.block end,
                case when min(t.state) = 'pending' then 'info' else 'warn' end
           from job join ai_tr t on t.job_id = job.id group by job.id, job.block
         union all
         select id, 'title_' || title_state,
                case when title_state = 'pending' then 'A title is generated from the transcript (the title is still the file name).'
                     else 'No title is generated: ' || block end,
                case when title_state = 'pending' then 'info' else 'warn' end
           from job where success and title_state is not null
       ), dev as (
         insert into speech_job_events (job_id, event, message, level)
         select id, 'diarization_' || diarization_state, ${DIARIZATION_EVENT_MESSAGE}, case when diarization_state = 'completed' then 'info' else 'warn' end
           from job where success and diarization_requested
       ), ev as (
         insert into speech_job_events (job_id, event, message, level)
         select id, outcome,
                case when outcome = 'completed' and n = 0 then 'Attempt ' || attempt || ' completed: no speech detected.'
                     when outcome = 'completed' then 'Attempt ' || attempt || ' completed with ' || n || case when n = 1 then ' segment.' else ' segments.' end
                     when outcome = 'cancelled' then 'Attempt ' || attempt || ': cancelled on request.'
                     else 'Attempt ' || attempt || ': ' || left(coalesce(nullif(error, ''), 'The worker reported a failure.'), 2000) end,
                case when outcome = 'completed' then 'info' when outcome = 'cancelled' then 'warn' else 'error' end
           from job
       ), note as (
         insert into speech_notifications (job_id, cycle, status) select id, callback_cycle, status from job where ${WANTS_NOTIFICATION}
         on conflict (job_id, cycle) do nothing
         returning job_id
       )
       select id, status, stage_label, stage_detail, audio_position_seconds, attempt, outcome, diarization_state, diarization_speaker_count,
              exists (select 1 from note where note.job_id = job.id) as notified,
              exists (select 1 from ai_tasks where ai_tasks.job_id = job.id) as ai_queued,
              case when success then analysis_state end as analysis_state, case when success then analysis_language end as analysis_language,
              case when success then title_state end as title_state
         from job`,
      {
        jobs: items.map((i) => i.ref.job_id),
        attempts: items.map((i) => i.ref.attempt),
        wids: items.map((i) => i.workerId),
        hashes: items.map((i) => hashLeaseToken(i.ref.lease_token)),
        success: items.map((i) => i.success),
        cancelled: items.map((i) => i.cancelled),
        reported: items.map((i) => i.segmentCount),
        errors: items.map((i) => i.error),
        durations: items.map((i) => (Number.isFinite(i.durationSeconds) ? i.durationSeconds : 0)),
        engines: items.map((i) => i.engine),
        engineModels: items.map((i) => i.engineModel),
        shares: items.map((i) => i.shareToken),
        diarStates: items.map((i) => i.diarization?.state ?? ''),
        diarEngines: items.map((i) => i.diarization?.engine ?? ''),
        diarErrors: items.map((i) => i.diarization?.error ?? ''),
        diarCounts: items.map((i) => i.diarization?.speakerCount ?? 0),
        diarTurns: items.map((i) => JSON.stringify(i.diarization?.turns ?? [])),
        from: fromStatuses('complete'), // the same statuses as 'fail'
        reports: this.reportsEnabled,
        ...this.aiBindings(),
      },
    );
    if (rows.length) {
      this.publish(rows);
      for (const r of rows) {
        if (r.analysis_state) this.sink.ai(Number(r.id), { kind: 'analysis', state: r.analysis_state, language: r.analysis_language ?? null });
        if (r.title_state) this.sink.ai(Number(r.id), { kind: 'title', state: r.title_state, language: null });
      }
      if (rows.some((r) => r.ai_queued)) this.aiQueued();
      this.terminal(
        rows,
        rows.some((r) => r.notified),
      );
    }
    const ended = new Map(rows.map((r) => [Number(r.id), r]));
    return Promise.all(
      items.map(async (item): Promise<FinishResult | StaleLeaseError> => {
        const j = ended.get(item.ref.job_id);
        if (j) return { duplicate: false, status: j.status, diarization: { state: j.diarization_state, speakerCount: j.diarization_speaker_count } };
        const why = await this.staleReason(item.workerId, item.ref);
        if (why.outcome === (item.success ? 'completed' : 'failed')) {
          const { rows: now } = await this.knex.raw<{ rows: Array<{ status: JobStatus }> }>('select status from speech_jobs where id = ?', [item.ref.job_id]);
          return { duplicate: true, status: now[0]?.status ?? (item.success ? 'completed' : 'failed') };
        }
        return new StaleLeaseError(why.message);
      }),
    );
  }

  /** The worker hands its job back unfinished (shutdown): queued again without using up a retry. */
  async handBack(workerId: number, ref: LeaseRefMsg, reason: string): Promise<void> {
    const detail = `Handed back by the worker: ${reason}`.slice(0, 500);
    const rows = await this.prepared<StatusRow>(
      'speech_hand_back',
      `with l as (
         update speech_leases l set ended_at = now(), outcome = 'released' where ${LIVE_LEASE} returning l.job_id, l.attempt
       ), job as (
         update speech_jobs j set status = 'queued', max_attempts = j.max_attempts + 1, stage_label = 'Waiting for a worker',
            stage_detail = :detail, audio_position_seconds = 0, transcript_text = null, updated_at = now()
           from l where j.id = l.job_id and j.attempt = l.attempt and j.status = any(:from::text[])
         returning ${STATUS_COLUMNS.split(', ')
           .map((c) => `j.${c}`)
           .join(', ')}
       ), ev as (
         insert into speech_job_events (job_id, event, message, level) select id, 'released', 'Attempt ' || attempt || ' handed back: ' || :reason, 'warn' from job
       )
       select * from job`,
      { ...fence(workerId, ref), detail, reason: reason.slice(0, 500), from: fromStatuses('handBack') },
    );
    if (!rows.length) return this.stale(workerId, ref);
    this.publish(rows);
  }

  /**
   * Ends leases that nobody renews any more and moves their jobs: queued again while attempts remain,
   * else failed (with a notification). `expired` leases are past their expiry by the database
   * clock; `abandoned` leases belong to an earlier session of a worker that said Hello again
   * without them. Returns the jobs touched.
   */
  private async endLeases(select: string, params: Record<string, unknown>, outcome: 'expired' | 'abandoned'): Promise<Array<LeaseEnd>> {
    const { rows } = await this.knex.raw<{ rows: Array<StatusRow & { requeued: boolean; diarization_state: DiarizationState | null }> }>(
      `with pick as (
         select l.id from speech_leases l where ${select} order by l.expires_at limit 200 for update of l skip locked
       ), ended as (
         update speech_leases l set ended_at = now(), outcome = :outcome from pick where l.id = pick.id
         returning l.job_id, l.attempt, l.kind, (select name from speech_workers w where w.id = l.worker_id) as worker
       ), dj as (
         -- a diarization rerun whose runner went away: pending again while tries remain, else failed (the job stays completed)
         update speech_jobs j set
            diarization_state = case when j.diarization_attempts < ${DIARIZATION_TRIES} then 'pending' else 'failed' end,
            diarization_error = case when j.diarization_attempts < ${DIARIZATION_TRIES} then null
              else 'Gave up after ' || j.diarization_attempts || ' tries: worker ' || ended.worker ||
                   case when :outcome = 'expired' then ' stopped renewing its lease.' else ' restarted without this work.' end end,
            diarization_rerun_requested_at = case when j.diarization_attempts < ${DIARIZATION_TRIES} then j.diarization_rerun_requested_at end,
            diarization_updated_at = now(), updated_at = now()
           from ended
          where ended.kind = 'diarize' and j.id = ended.job_id and j.attempt = ended.attempt and j.status = 'completed' and j.diarization_state = 'running'
         returning j.id, j.diarization_state, ended.worker
       ), dev as (
         insert into speech_job_events (job_id, event, message, level)
         select id, 'diarization_lease_' || :outcome,
                case when diarization_state = 'pending' then 'Speaker diarization waits for a runner again: worker ' || worker ||
                       case when :outcome = 'expired' then ' stopped renewing its lease.' else ' restarted without this work.' end
                     else 'Speaker diarization failed: gave up after worker ' || worker || ' went away.' end, 'warn'
           from dj
       ), job as (
         update speech_jobs j set
            status = case when j.cancel_requested_at is null and ended.attempt < j.max_attempts then 'queued' else 'failed' end,
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
         returning ${STATUS_COLUMNS.split(', ')
           .map((c) => `j.${c}`)
           .join(', ')}, j.callback_cycle, j.failure_error, j.stage_detail as detail, (j.status = 'queued') as requeued,
                   j.queue_channel, j.callback_url, j.owner_id
       ), ev as (
         insert into speech_job_events (job_id, event, message, level)
         select id, 'lease_' || :outcome, coalesce(failure_error, detail), case when requeued then 'warn' else 'error' end from job
       ), note as (
         insert into speech_notifications (job_id, cycle, status) select id, callback_cycle, 'failed' from job where not requeued and ${WANTS_NOTIFICATION}
         on conflict (job_id, cycle) do nothing
       )
       select job.*, null as diarization_state from job
       union all
       select dj.id, 'completed', null, null, 0, 0, 0, null, null, false, null, null, null, dj.diarization_state from dj`,
      { ...params, outcome, from: fromStatuses('expire'), reports: this.reportsEnabled },
    );
    const jobs = rows.filter((r) => r.diarization_state === null);
    this.publish(jobs);
    if (jobs.some((r) => !r.requeued)) this.terminal(jobs.filter((r) => !r.requeued));
    for (const r of rows) if (r.diarization_state !== null) this.sink.diarization(Number(r.id), { state: r.diarization_state, speaker_count: null });
    return rows.map((r) => ({ jobId: Number(r.id), status: r.status, diarizationRequeued: r.diarization_state === 'pending' }));
  }

  /** Automatic stale recovery (the speech-stale-sweep maintenance task). */
  async expireLeases(): Promise<LeaseEnd[]> {
    const touched: LeaseEnd[] = [];
    for (;;) {
      const batch = await this.endLeases('l.ended_at is null and l.expires_at <= now()', {}, 'expired');
      touched.push(...batch);
      if (batch.length < 200) return touched;
    }
  }

  /**
   * A worker said Hello with a new session: its open leases that it no longer holds end at once
   * (the agent restarted and lost those jobs); the ones it still holds move to the new session.
   */
  async abandonUnheld(workerId: number, sessionId: string, held: LeaseRefMsg[]): Promise<LeaseEnd[]> {
    const hashes = held.map((r) => hashLeaseToken(r.lease_token));
    if (held.length) {
      await this.knex.raw(
        `update speech_leases l set session_id = :session
           from unnest(:jobs::int[], :attempts::int[], :hashes::text[]) as r(job_id, attempt, token_hash)
          where l.worker_id = :wid and l.ended_at is null and l.job_id = r.job_id and l.attempt = r.attempt and l.token_hash = r.token_hash`,
        { session: sessionId, jobs: held.map((r) => r.job_id), attempts: held.map((r) => r.attempt), hashes, wid: workerId },
      );
    }
    return this.endLeases(
      `l.worker_id = :wid and l.ended_at is null and l.session_id is distinct from :session`,
      { wid: workerId, session: sessionId },
      'abandoned',
    );
  }

  // ---- diarization --------------------------------------------------------------------------------

  /**
   * Labels the lease's pass from a diarization's turns, under the lease fence: segments with words
   * are labelled word by word and split where the speaker changes (splitSegmentsBySpeaker), the
   * others take the turn that overlaps them most (else the nearest). The pass's rows are replaced
   * by the labelled ones, renumbered in order; every row keeps the worker's seq (source_seq) and a
   * split piece the reported text (source_text), so a rerun joins the pieces back and splits them
   * again with its own turns. Runs before the attempt completes, so the transcript is labelled by
   * the time anyone is notified. Returns the labelled segments and how many speakers own speech;
   * null when the lease is not live (the completion that follows answers duplicate or stale).
   */
  async labelSegments(workerId: number, ref: LeaseRefMsg, turns: StoredTurn[]): Promise<LabelledPass | null> {
    return this.knex.transaction(async (trx) => {
      const { rows } = await trx.raw<{ rows: Array<StoredSegmentRow & { pass: number }> }>(
        `with l as (select j.id, j.current_pass from speech_leases l join speech_jobs j on j.id = l.job_id where ${LIVE_LEASE} for update of j)
         select l.current_pass as pass, s.seq, s.start_seconds, s.end_seconds, s.text, s.words, s.source_seq, s.source_text
           from l left join speech_segments s on s.job_id = l.id and s.pass = l.current_pass order by s.seq`,
        fence(workerId, ref),
      );
      if (!rows.length) return null;
      const stored = rows.filter((r) => r.seq !== null);
      const sources = reportedSegments(stored);
      const split = splitSegmentsBySpeaker(sources, turns);
      const segments = split.map((p, seq) => ({ seq, start: p.start, end: p.end, text: p.text, speaker: p.speaker }));
      if (stored.length) {
        await trx.raw(`delete from speech_segments where job_id = :job and pass = :pass`, { job: ref.job_id, pass: rows[0]!.pass });
        await trx.raw(
          `insert into speech_segments (job_id, pass, seq, start_seconds, end_seconds, text, speaker, words, source_seq, source_text)
           select :job, :pass, v.seq, v.st, v.en, v.tx, v.spk, v.wd::jsonb, v.src, v.stx
             from unnest(:seqs::int[], :starts::float8[], :ends::float8[], :texts::text[], :speakers::text[], :words::text[], :sources::int[], :sourceTexts::text[])
               as v(seq, st, en, tx, spk, wd, src, stx)`,
          {
            job: ref.job_id,
            pass: rows[0]!.pass,
            seqs: segments.map((x) => x.seq),
            starts: split.map((x) => x.start),
            ends: split.map((x) => x.end),
            texts: split.map((x) => x.text),
            speakers: split.map((x) => x.speaker),
            words: split.map((x) => storedWords(x.words)),
            sources: split.map((x) => sources[x.source]!.seq),
            sourceTexts: split.map((x) => (x.split ? sources[x.source]!.text : null)),
          },
        );
      }
      return { segments, speakerCount: new Set(segments.map((x) => x.speaker).filter((x) => x !== null)).size };
    });
  }

  /**
   * Ends a diarization rerun (a `diarize` lease): running → the worker's result (completed, failed
   * or unavailable; a failed attempt is failed). Any terminal result clears the rerun marker. A
   * completed rerun replaces the turns and starts the speaker names afresh (its speakers are new);
   * a failed one keeps the previous labels. Repeating the same completion is a duplicate.
   */
  async finishDiarization(
    workerId: number,
    ref: LeaseRefMsg,
    result: { success: boolean; error: string; outcome: DiarizationOutcome | null },
  ): Promise<{ duplicate: boolean; state: DiarizationState; speakerCount: number | null; previousSpeakerCount: number | null }> {
    const o = result.outcome;
    const state: DiarizationState = !result.success ? 'failed' : (o?.state ?? 'unavailable');
    const error =
      state === 'completed'
        ? null
        : (!result.success ? result.error : o?.error) || (state === 'failed' ? 'The diarizer failed.' : 'The worker cannot label speakers.');
    const { rows } = await this.knex.raw<{
      rows: Array<{
        id: number;
        diarization_state: DiarizationState;
        diarization_speaker_count: number | null;
        before: number | null;
        regenerate: boolean;
        analysis_language: string | null;
      }>;
    }>(
      `with l as (
         update speech_leases l set ended_at = now(), outcome = case when :state = 'completed' then 'completed' else 'failed' end
          where ${LIVE_LEASE} and l.kind = 'diarize'
         returning l.job_id, l.attempt
       ), prev as (
         select j.id, j.diarization_speaker_count as before, j.analysis->>'generation' as analysis_generation from speech_jobs j join l on l.job_id = j.id
       ), job as (
         update speech_jobs j set
            diarization_state = :state,
            diarization_engine = coalesce(nullif(:engine::text, ''), j.diarization_engine),
            diarization_speaker_count = case when :state = 'completed' then :count::int else j.diarization_speaker_count end,
            diarization_turns = case when :state = 'completed' then :turns::jsonb else j.diarization_turns end,
            diarization_error = left(:error::text, 2000),
            speaker_labels = case when :state = 'completed' then '{}'::jsonb else j.speaker_labels end,
            -- more speakers than before: a completed analysis is regenerated once (AI_TRANSITIONS.regenerate; its translations follow)
            analysis = case when :state = 'completed' and :count::int > coalesce(prev.before, 0) and j.analysis->>'state' = 'completed'
              then j.analysis || jsonb_build_object('state', 'pending', 'generation', (j.analysis->>'generation')::int + 1, 'result', null,
                                                    'error', null, 'requested_by', null, 'updated_at', now())
              else j.analysis end,
            diarization_rerun_requested_at = null, diarization_updated_at = now(), updated_at = now()
           from l, prev
          where j.id = l.job_id and prev.id = j.id and j.attempt = l.attempt and j.status = 'completed' and j.diarization_state = 'running'
         returning j.id, j.current_pass, j.diarization_state, j.diarization_speaker_count, j.diarization_engine, j.diarization_error, prev.before,
                   (j.analysis->>'generation') is distinct from prev.analysis_generation as regenerate, (j.analysis->>'generation')::int as generation,
                   j.analysis->>'language' as analysis_language
       ), ev as (
         insert into speech_job_events (job_id, event, message, level)
         select id, 'diarization_' || diarization_state, ${DIARIZATION_EVENT_MESSAGE}, case when diarization_state = 'completed' then 'info' else 'warn' end
           from job
         union all
         select id, 'analysis_regenerating', 'The rerun found more speakers (' || coalesce(before, 0) || ' → ' || diarization_speaker_count ||
                '): the analysis and its translations are regenerated from the speaker-aware transcript.', 'info'
           from job where regenerate
       ), regen as (
         insert into speech_ai_tasks (job_id, pass, kind, generation) select id, current_pass, 'analysis', generation from job where regenerate
         on conflict do nothing
       )
       select id, diarization_state, diarization_speaker_count, before, regenerate, analysis_language from job`,
      {
        ...fence(workerId, ref),
        state,
        engine: o?.engine ?? '',
        count: o?.speakerCount ?? 0,
        turns: JSON.stringify(o?.turns ?? []),
        error,
      },
    );
    const r = rows[0];
    if (r?.regenerate) {
      this.sink.ai(Number(r.id), { kind: 'analysis', state: 'pending', language: r.analysis_language });
      this.aiQueued();
    }
    if (r) return { duplicate: false, state: r.diarization_state, speakerCount: r.diarization_speaker_count, previousSpeakerCount: r.before };
    const why = await this.staleReason(workerId, ref);
    if (why.outcome === (state === 'completed' ? 'completed' : 'failed')) {
      const { rows: now } = await this.knex.raw<{ rows: Array<{ diarization_state: DiarizationState; diarization_speaker_count: number | null }> }>(
        'select diarization_state, diarization_speaker_count from speech_jobs where id = ?',
        [ref.job_id],
      );
      return {
        duplicate: true,
        state: now[0]?.diarization_state ?? state,
        speakerCount: now[0]?.diarization_speaker_count ?? null,
        previousSpeakerCount: null,
      };
    }
    throw new StaleLeaseError(why.message);
  }

  /**
   * A rerun request: completed | failed | unavailable | skipped → pending on a completed job whose
   * media is retained, with the rerun marker set and the preference to diarize persisted. Null when
   * the row no longer qualifies (the caller re-reads it to say why).
   */
  async requestDiarization(jobId: number, by: string): Promise<{ id: number } | null> {
    const { rows } = await this.knex.raw<{ rows: Array<{ id: number }> }>(
      `with j as (
         update speech_jobs set diarization_state = 'pending', diarization_requested = true, diarization_rerun_requested_at = now(),
                diarization_attempts = 0, diarization_error = null, diarization_updated_at = now(), updated_at = now()
          where id = :id and status = 'completed' and media_path is not null and diarization_state = any(:from::text[])
         returning id
       ), ev as (
         insert into speech_job_events (job_id, event, message) select id, 'diarization_requested', :message from j
       )
       select id from j`,
      { id: jobId, from: [...DIARIZATION_TRANSITIONS.rerun.from], message: `Speaker diarization requested by ${by}.` },
    );
    const r = rows[0];
    if (r) this.sink.diarization(jobId, { state: 'pending', speaker_count: null });
    return r ? { id: Number(r.id) } : null;
  }

  /** The speaker editor: names for speaker keys of the current pass (an empty name removes it). */
  async setSpeakerLabels(jobId: number, labels: Record<string, string>, by: string): Promise<SpeakerLabels | null> {
    const { rows } = await this.knex.raw<{ rows: Array<{ speaker_labels: SpeakerLabels | string }> }>(
      `with j as (
         update speech_jobs set speaker_labels = (
             select coalesce(jsonb_object_agg(k, v), '{}'::jsonb)
               from jsonb_each_text(speaker_labels || :labels::jsonb) as e(k, v) where btrim(v) <> ''),
                updated_at = now()
          where id = :id returning id, speaker_labels
       ), ev as (insert into speech_job_events (job_id, event, message) select id, 'speakers_renamed', :message from j)
       select speaker_labels from j`,
      { id: jobId, labels: JSON.stringify(labels), message: `Speaker names changed by ${by}.` },
    );
    const r = rows[0];
    if (!r) return null;
    this.sink.changed(jobId, 'speakers');
    return typeof r.speaker_labels === 'string' ? (JSON.parse(r.speaker_labels) as SpeakerLabels) : r.speaker_labels;
  }

  // ---- analysis, translations and automatic titles (AI_TRANSITIONS) ------------------------------

  /**
   * POST analyze: none | completed | failed | unavailable → pending, with the next generation and
   * its task row, on a completed job. Null when the job is not completed or an analysis is pending
   * or running (the caller re-reads the row to say which).
   */
  async requestAnalysis(jobId: number, by: string): Promise<AiTaskRef | null> {
    const { rows } = await this.knex.raw<{ rows: Array<{ id: number; current_pass: number; generation: number; language: string | null }> }>(
      `with job as (
         update speech_jobs j set
            analysis = ${aiRecord(`'pending'`, 'coalesce(j.analysis_language, j.language)', `coalesce((j.analysis->>'generation')::int, 0) + 1`, 'null')}
                       || jsonb_build_object('requested_by', :by::text),
            updated_at = now()
          where j.id = :id and j.status = 'completed' and coalesce(j.analysis->>'state', 'none') = any(:from::text[])
         returning j.id, j.current_pass, (j.analysis->>'generation')::int as generation, j.analysis->>'language' as language
       ), task as (
         insert into speech_ai_tasks (job_id, pass, kind, generation) select id, current_pass, 'analysis', generation from job on conflict do nothing
       ), ev as (
         insert into speech_job_events (job_id, event, message)
         select id, 'analysis_requested', 'Transcript analysis (' || ${LANGUAGE_WORDS('language')} || ') requested by ' || :by || '.' from job
       )
       select * from job`,
      { id: jobId, by, from: [...AI_TRANSITIONS.request.from] },
    );
    const r = rows[0];
    if (!r) return null;
    this.sink.ai(jobId, { kind: 'analysis', state: 'pending', language: r.language });
    this.aiQueued();
    return { jobId, pass: Number(r.current_pass), kind: 'analysis', language: '', generation: Number(r.generation) };
  }

  /**
   * A queue worker takes a task: pending → running (running → running when a task interrupted by
   * a coordinator shutdown or crash runs again). Null when the task is stale: another generation
   * or pass superseded it, or it already ended.
   */
  async startAi(ref: AiTaskRef, provider: { label: string; model: string }): Promise<{ language: string | null; sourceLanguage: string | null } | null> {
    const from = [...AI_TRANSITIONS.start.from];
    const params = { id: ref.jobId, pass: ref.pass, gen: ref.generation, lang: ref.language, from, provider: provider.label, model: provider.model };
    let rows: Array<{ id: number; language: string | null; source_language: string | null; before: AiState }>;
    if (ref.kind === 'analysis') {
      ({ rows } = await this.knex.raw(
        `with prev as (select id, analysis->>'state' as before from speech_jobs where id = :id), job as (
           update speech_jobs j set analysis = j.analysis || jsonb_build_object('state', 'running', 'provider', :provider::text, 'model', :model::text, 'updated_at', now())
             from prev
            where j.id = prev.id and j.status = 'completed' and j.current_pass = :pass
              and j.analysis->>'state' = any(:from::text[]) and (j.analysis->>'generation')::int = :gen
           returning j.id, j.analysis->>'language' as language, j.language as source_language, prev.before
         ), ev as (
           insert into speech_job_events (job_id, event, message)
           select id, case when before = 'running' then 'analysis_resumed' else 'analysis_running' end,
                  case when before = 'running' then 'Transcript analysis started again after an interruption (' else 'Transcript analysis started (' end || :provider || ').'
             from job
         )
         select * from job`,
        params,
      ));
    } else if (ref.kind === 'translation') {
      ({ rows } = await this.knex.raw(
        `with prev as (
           select t.id, t.state as before, j.language as source_language from speech_translations t
             join speech_jobs j on j.id = t.job_id and j.current_pass = t.pass and j.status = 'completed'
            where t.job_id = :id and t.pass = :pass and t.language = :lang and t.generation = :gen and t.state = any(:from::text[])
         ), tr as (
           update speech_translations t set state = 'running', provider = :provider, model = :model, error = null, updated_at = now()
             from prev where t.id = prev.id
           returning t.job_id as id, t.language, prev.source_language, prev.before
         ), ev as (
           insert into speech_job_events (job_id, event, message)
           select id, case when before = 'running' then 'translation_resumed' else 'translation_running' end,
                  case when before = 'running' then 'Translation into ' || language || ' started again after an interruption.' else 'Translation into ' || language || ' started.' end
             from tr
         )
         select * from tr`,
        params,
      ));
    } else {
      ({ rows } = await this.knex.raw(
        `update speech_jobs j set auto_title = j.auto_title || jsonb_build_object('state', 'running', 'updated_at', now())
          where j.id = :id and j.status = 'completed' and j.current_pass = :pass and j.auto_title->>'state' = any(:from::text[])
         returning j.id, j.language, j.language as source_language, 'pending' as before`,
        params,
      ));
    }
    const r = rows[0];
    if (!r) return null;
    this.sink.ai(ref.jobId, { kind: ref.kind, state: 'running', language: ref.kind === 'translation' ? ref.language : r.language });
    return { language: r.language, sourceLanguage: r.source_language };
  }

  /**
   * running → completed | failed | unavailable of the task's generation (a stale result is dropped:
   * null). A completed analysis is translated too: every translation of the pass that is not
   * unavailable is queued again with the next generation; an analysis that did not complete lets
   * the translations that waited for it go ahead.
   */
  async finishAnalysis(ref: AiTaskRef, outcome: AiOutcome<unknown>): Promise<{ translationsQueued: number } | null> {
    const { rows } = await this.knex.raw<{ rows: Array<{ id: number; language: string | null; queued: number }> }>(
      `with job as (
         update speech_jobs j set
            analysis = j.analysis || jsonb_build_object('state', :state::text, 'result', :result::jsonb, 'error', :error::text, 'updated_at', now()),
            updated_at = now()
          where j.id = :id and j.current_pass = :pass and j.analysis->>'state' = 'running' and (j.analysis->>'generation')::int = :gen
         returning j.id, j.current_pass, j.analysis->>'language' as language
       ), requeue as (
         update speech_translations t set state = 'pending', generation = t.generation + case when t.state = 'pending' then 0 else 1 end,
                error = null, updated_at = now()
           from job where :state::text = 'completed' and t.job_id = job.id and t.pass = job.current_pass and t.state <> 'unavailable'
         returning t.job_id, t.pass, t.language, t.generation
       ), waiting as (
         select t.job_id, t.pass, t.language, t.generation from speech_translations t join job on t.job_id = job.id and t.pass = job.current_pass
          where :state::text <> 'completed' and t.state = 'pending'
       ), tasks as (
         insert into speech_ai_tasks (job_id, pass, kind, language, generation)
         select job_id, pass, 'translation', language, generation from requeue
         union all select job_id, pass, 'translation', language, generation from waiting
         on conflict do nothing
         returning id
       ), ev as (
         insert into speech_job_events (job_id, event, message, level)
         select id, 'analysis_' || :state::text, :message, case when :state::text = 'completed' then 'info' else 'warn' end from job
       )
       select job.id, job.language, (select count(*) from requeue)::int + (select count(*) from waiting)::int as queued from job`,
      { ...this.outcomeBindings(ref, outcome), message: outcome.message },
    );
    const r = rows[0];
    if (!r) return null;
    this.sink.ai(ref.jobId, { kind: 'analysis', state: outcome.state, language: r.language });
    if (r.queued > 0) this.aiQueued();
    return { translationsQueued: Number(r.queued) };
  }

  /** running → completed | failed | unavailable of one translation (its generation only; a stale result is dropped: false). */
  async finishTranslation(
    ref: AiTaskRef,
    outcome: AiOutcome<{ text: string; segments: Array<{ seq: number; text: string }>; analysis: unknown }>,
  ): Promise<boolean> {
    const done = outcome.state === 'completed' ? outcome.result : null;
    const { rows } = await this.knex.raw<{ rows: Array<{ id: number }> }>(
      `with tr as (
         update speech_translations t set state = :state::text, text = :translated, segments = :segments::jsonb, analysis = :analysis::jsonb,
                error = :error::text, updated_at = now()
           from speech_jobs j
          where j.id = t.job_id and j.current_pass = t.pass and t.job_id = :id and t.pass = :pass and t.language = :lang
            and t.generation = :gen and t.state = 'running'
         returning t.job_id as id
       ), ev as (
         insert into speech_job_events (job_id, event, message, level)
         select id, 'translation_' || :state::text, :message, case when :state::text = 'completed' then 'info' else 'warn' end from tr
       )
       select id from tr`,
      {
        ...this.outcomeBindings(ref, outcome),
        // (not `text`: a binding of that name would also replace the `::text` casts)
        translated: done?.text ?? null,
        segments: done ? JSON.stringify(done.segments) : null,
        analysis: done?.analysis ? JSON.stringify(done.analysis) : null,
        message: outcome.message,
      },
    );
    if (!rows.length) return false;
    this.sink.ai(ref.jobId, { kind: 'translation', state: outcome.state, language: ref.language });
    return true;
  }

  /**
   * running → completed | failed | unavailable of the automatic title. A completed title becomes
   * the job's title only while the title is still the file name and the owner never saved one
   * (checked on the row in this statement: an edit that came first wins). Returns whether it was applied.
   */
  async finishTitle(ref: AiTaskRef, outcome: AiOutcome<string>): Promise<{ applied: boolean; title: string | null } | null> {
    const title = outcome.state === 'completed' ? outcome.result : null;
    const { rows } = await this.knex.raw<{ rows: Array<{ id: number; applied: boolean }> }>(
      `with job as (
         update speech_jobs j set
            source_label = case when :state::text = 'completed' and ${TITLE_ELIGIBLE} then :title::text else j.source_label end,
            auto_title = j.auto_title || jsonb_build_object('state', :state::text, 'title', :title::text,
              'applied', :state::text = 'completed' and ${TITLE_ELIGIBLE}, 'error', :error::text, 'updated_at', now()),
            updated_at = now()
          where j.id = :id and j.current_pass = :pass and j.auto_title->>'state' = 'running'
         returning j.id, (j.auto_title->>'applied')::boolean as applied
       ), ev as (
         insert into speech_job_events (job_id, event, message, level)
         select id, 'title_' || :state::text,
                case when :state::text <> 'completed' then :message
                     when applied then 'Title generated from the transcript: "' || :title || '".'
                     else 'A title was generated ("' || :title || '") but not applied: the title was changed meanwhile.' end,
                case when :state::text = 'completed' then 'info' else 'warn' end
           from job
       )
       select id, applied from job`,
      { ...this.outcomeBindings(ref, outcome), title, message: outcome.message },
    );
    const r = rows[0];
    if (!r) return null;
    this.sink.ai(ref.jobId, { kind: 'title', state: outcome.state, language: null, ...(r.applied && title ? { title } : {}) });
    return { applied: r.applied, title };
  }

  private outcomeBindings(ref: AiTaskRef, outcome: AiOutcome<unknown>) {
    return {
      id: ref.jobId,
      pass: ref.pass,
      gen: ref.generation,
      lang: ref.language,
      state: outcome.state,
      result: outcome.state === 'completed' && ref.kind === 'analysis' ? JSON.stringify(outcome.result) : null,
      error: outcome.state === 'completed' ? null : outcome.error.slice(0, 2000),
    };
  }

  /**
   * The metadata form (owner): title and note. Saving a title different from the current one marks
   * it as the owner's: automatic titles never replace it. An empty title falls back to the file
   * name or URL when shown.
   */
  async updateMetadata(jobId: number, change: { label?: string | null; note?: string | null }, by: string): Promise<boolean> {
    const { rows } = await this.knex.raw<{ rows: Array<{ id: number }> }>(
      `with j as (
         update speech_jobs set
            source_label_edited = source_label_edited or (:setLabel and :label::text is distinct from source_label),
            source_label = case when :setLabel then :label::text else source_label end,
            source_note = case when :setNote then :note::text else source_note end,
            updated_at = now()
          where id = :id returning id
       ), ev as (insert into speech_job_events (job_id, event, message) select id, 'metadata_changed', :message from j)
       select id from j`,
      {
        id: jobId,
        setLabel: change.label !== undefined,
        label: change.label ?? null,
        setNote: change.note !== undefined,
        note: change.note ?? null,
        message: `${change.label !== undefined ? (change.note !== undefined ? 'Title and note' : 'Title') : 'Note'} saved by ${by}.`,
      },
    );
    if (rows.length) this.sink.changed(jobId, 'metadata');
    return rows.length > 0;
  }

  // ---- coordinator-side staging of URL sources ---------------------------------------------------

  /** Marks a queued URL job as being downloaded by the coordinator; its URL, or null when it is no longer stageable. */
  async stagingStarted(jobId: number): Promise<string | null> {
    const { rows } = await this.knex.raw<{ rows: Array<StatusRow & { source_url: string }> }>(
      `update speech_jobs set stage_label = 'Downloading the source to the coordinator', updated_at = now()
        where id = ? and status = 'queued' and source_type = 'url' and media_path is null
        returning ${STATUS_COLUMNS}, source_url`,
      [jobId],
    );
    this.publish(rows);
    return rows[0]?.source_url ?? null;
  }

  /** The staged media is in place: the job waits for a worker again. False when the job is gone. */
  async staged(
    jobId: number,
    media: { path: string; sha256: string; sizeBytes: number; mime: string | null; durationSeconds: number | null; retainedUntil: Date | null },
  ): Promise<boolean> {
    const { rows } = await this.knex.raw<{ rows: StatusRow[] }>(
      `update speech_jobs set media_path = ?, media_sha256 = ?, source_size_bytes = ?, source_mime = coalesce(?, source_mime),
          source_duration_seconds = coalesce(?, source_duration_seconds), media_retained_until = ?,
          stage_label = 'Waiting for a worker', updated_at = now() where id = ? returning ${STATUS_COLUMNS}`,
      [media.path, media.sha256, media.sizeBytes, media.mime, media.durationSeconds, media.retainedUntil, jobId],
    );
    this.publish(rows);
    return rows.length > 0;
  }

  /** The coordinator could not download the source: queued → failed, with its notification. */
  async stagingFailed(jobId: number, reason: string): Promise<boolean> {
    const message = `Could not download the source: ${reason}`.slice(0, 2000);
    const { rows } = await this.knex.raw<{ rows: StatusRow[] }>(
      `with job as (
         update speech_jobs set status = 'failed', outcome = 'failed', stage_label = 'Failed', failure_error = :message,
            finished_at = now(), updated_at = now()
          where id = :id and status = any(:from::text[])
         returning ${STATUS_COLUMNS}, callback_cycle, queue_channel, callback_url, owner_id
       ), ev as (insert into speech_job_events (job_id, event, message, level) select id, 'staging_failed', :message, 'error' from job),
       note as (insert into speech_notifications (job_id, cycle, status) select id, callback_cycle, 'failed' from job where ${WANTS_NOTIFICATION}
                on conflict (job_id, cycle) do nothing)
       select * from job`,
      { id: jobId, message, from: fromStatuses('stagingFailed'), reports: this.reportsEnabled },
    );
    this.publish(rows);
    if (rows.length) this.terminal(rows);
    return rows.length > 0;
  }

  // ---- retention -----------------------------------------------------------------------------------

  /** Forgets retained media past its retention of finished jobs; returns the job ids (files are removed by the caller). */
  async releaseExpiredMedia(limit: number): Promise<number[]> {
    const { rows } = await this.knex.raw<{ rows: Array<{ id: number }> }>(
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
      { limit },
    );
    return rows.map((r) => Number(r.id));
  }
}
