import type { DiarizationState, JobStatus } from '@sonar/shared';

/** Statuses in which a runner holds the job under a lease. */
export const PROCESSING_STATUSES: readonly JobStatus[] = ['downloading', 'transcribing', 'finalizing'];

/**
 * How a job ended: `cancelled` is a failed job whose cancellation was requested (it notifies as
 * `failed`, with the cancellation as its failure_error); `completed` and `failed` are what they say.
 */
export type JobOutcome = 'completed' | 'failed' | 'cancelled';

/**
 * Every move of speech_jobs.status: the statuses it starts from and the ones it may write. The
 * statements in jobs/transitions/ are the only code that changes a job's status; each binds its
 * guard (`from`) and the status it writes (`to`) from this table as parameters, so a move from
 * anywhere else is refused by the database row itself (0 rows updated), not by a check that raced
 * with it, and the table cannot drift from what the SQL writes (test/e2e/speech-transition-guards.test.ts runs
 * every move against every status outside its `from`).
 *
 * Notification cycle: every job starts in cycle 1. Each cycle sends at most one terminal callback
 * (token-API jobs with a callback URL) and one completion report (owners with an e-mail address),
 * for the first terminal state reached in it. `restart` of a failed job, run-now `reset_failed` and
 * re-transcription start the next cycle. Cancellation ends the cycle as `failed` (outcome
 * `cancelled`).
 */
export const JOB_TRANSITIONS = {
  /** A worker leased the job (attempt + 1). */
  claim: { from: ['queued'], to: ['transcribing'] },
  /** The runner reports its stage while it holds the lease. */
  stage: { from: PROCESSING_STATUSES, to: PROCESSING_STATUSES },
  /** The runner finished the attempt with a transcript. */
  complete: { from: PROCESSING_STATUSES, to: ['completed'] },
  /** The runner failed or stopped on a cancellation request. */
  fail: { from: PROCESSING_STATUSES, to: ['failed'] },
  /** The runner handed the job back (shutdown): no retry is used up. */
  handBack: { from: PROCESSING_STATUSES, to: ['queued'] },
  /** A lease expired or was abandoned: queued again while attempts remain, else failed. */
  expire: { from: PROCESSING_STATUSES, to: ['queued', 'failed'] },
  /** The coordinator could not download a URL source. */
  stagingFailed: { from: ['queued'], to: ['failed'] },
  /** A person (or run-now) queues a failed or queued job again, with a fresh retry budget. */
  restart: { from: ['failed', 'queued'], to: ['queued'] },
  /** The owner starts a new pass with another model: the completed pass becomes a read-only revision (next cycle). */
  retranscribe: { from: ['completed'], to: ['queued'] },
} as const satisfies Record<string, { from: readonly JobStatus[]; to: readonly JobStatus[] }>;

export type JobTransition = keyof typeof JOB_TRANSITIONS;

export const fromStatuses = (t: JobTransition): JobStatus[] => [...JOB_TRANSITIONS[t].from];

/** The status a transition writes, checked against its `to` (a statement binds it as a parameter). */
export function toStatus<T extends JobTransition>(t: T, status: (typeof JOB_TRANSITIONS)[T]['to'][number]): JobStatus {
  if (!(JOB_TRANSITIONS[t].to as readonly JobStatus[]).includes(status)) throw new Error(`transition ${t} cannot write status ${status}`);
  return status;
}

/** A callback's delivery state in its notification cycle (speech_jobs.callback_status; null: the job has no callback URL). */
export type CallbackStatus = 'pending' | 'retrying' | 'delivered' | 'failed';

/**
 * Every move of speech_jobs.callback_status. The job state owner writes it (jobs/transitions/);
 * CallbackService reports each delivery attempt through JobRepository.recordCallback.
 */
export const CALLBACK_TRANSITIONS = {
  /** A new notification cycle (restart of a failed job, re-transcription): pending again when the job has a callback URL. */
  newCycle: { from: ['pending', 'retrying', 'delivered', 'failed'], to: ['pending'] },
  /** A delivery attempt of the cycle's callback ended: retried later, delivered, or failed for good. */
  attempt: { from: ['pending', 'retrying'], to: ['retrying', 'delivered', 'failed'] },
} as const satisfies Record<string, { from: readonly CallbackStatus[]; to: readonly CallbackStatus[] }>;

/**
 * A list of states as SQL literals, for a guard the planner must see at plan time (a partial index
 * whose predicate is the status, under the pool's generic plans); values come from these tables only.
 */
export function sqlStates(states: readonly string[]): string {
  for (const s of states) if (!/^[a-z_]+$/.test(s)) throw new Error(`not a state: ${s}`);
  return states.map((s) => `'${s}'`).join(', ');
}

export const isProcessing = (status: JobStatus) => PROCESSING_STATUSES.includes(status);

/**
 * Every move of speech_jobs.diarization_state, for the current pass.
 * JobRepository is its only writer too. A transcription attempt diarizes its own pass (pending →
 * running → a terminal state, or back to pending when the attempt fails); a rerun request on a
 * completed job sets the rerun marker, and a worker then runs it under a `diarize` lease while the
 * job stays completed. Every terminal result clears the marker. A new pass (re-transcription)
 * starts at pending (or skipped when speaker labels are off).
 */
export const DIARIZATION_TRANSITIONS = {
  /** The owner asks to run or re-run diarization (transcript completed, media retained). */
  rerun: { from: ['completed', 'failed', 'unavailable', 'skipped'], to: ['pending'] },
  /** A worker starts: a transcription attempt says so in its progress; a rerun is leased. */
  start: { from: ['pending'], to: ['running'] },
  /** The worker's result. A transcription attempt that fails leaves the diarization pending for the next one. */
  finish: { from: ['running', 'pending'], to: ['completed', 'failed', 'unavailable'] },
  /** A rerun's lease ended without its worker: pending again while tries remain, else failed. */
  expire: { from: ['running'], to: ['pending', 'failed'] },
} as const satisfies Record<string, { from: readonly DiarizationState[]; to: readonly DiarizationState[] }>;

/**
 * Every move of an analysis (speech_jobs.analysis.state), a translation (speech_translations.state)
 * and an automatic title (speech_jobs.auto_title.state) of the current pass. JobRepository is
 * their only writer; each move is one statement guarded by these `from` states and, for analyses
 * and translations, by the generation of the task (a newer request supersedes an older run, whose
 * result is then dropped). `none` is a job without an analysis record. Any statement that makes
 * work pending writes its speech_ai_tasks row in the same statement (the outbox of BullMQ queue
 * speech-ai), so a crash between the commit and the queueing loses nothing.
 */
/** State of an analysis, a translation or an automatic title. */
export type AiState = 'pending' | 'running' | 'completed' | 'failed' | 'unavailable';

export const AI_TRANSITIONS = {
  /**
   * The pass completed: the analysis (when analysis_language was given), each translation target
   * and the title of an uploaded file still named after the file become pending, or unavailable
   * (no provider configured, or the owner lacks provider_openai; admins always have it).
   * Translations wait for a pending analysis.
   */
  plan: { from: ['none'], to: ['pending', 'unavailable'] },
  /** POST /api/speech/jobs/{id}/analyze on a completed job: a new generation. */
  request: { from: ['none', 'completed', 'failed', 'unavailable'], to: ['pending'] },
  /** A diarization rerun found more speakers than before: a completed analysis is regenerated once (its translations follow). */
  regenerate: { from: ['completed'], to: ['pending'] },
  /** A queue worker takes the task; `running` again when a task interrupted by a shutdown or crash is retried. */
  start: { from: ['pending', 'running'], to: ['running'] },
  /** The provider's result, or why there is none (unavailable: the provider was unset meanwhile). */
  finish: { from: ['running'], to: ['completed', 'failed', 'unavailable'] },
  /**
   * A completed analysis queues every translation of the pass that is not unavailable again (next
   * generation), so translations carry the current analysis; an analysis that ended otherwise lets
   * waiting translations go ahead without it.
   */
  translate: { from: ['pending', 'running', 'completed', 'failed'], to: ['pending'] },
} as const satisfies Record<string, { from: ReadonlyArray<AiState | 'none'>; to: readonly AiState[] }>;
