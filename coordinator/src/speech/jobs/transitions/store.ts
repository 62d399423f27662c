import { createHash } from 'node:crypto';
import type { Knex } from '@mikro-orm/postgresql';
import { JOB_STATUS_LABELS, type JobStatus, type LeaseRefMsg } from '@sonar/shared';
import type { Orm } from '../../../db/orm.js';
import { sql } from '../../../db/sql.js';
import type { JobEventSink } from '../job-events.js';

/**
 * What every transition group shares: the database, the live-event sink, the listeners of ended
 * jobs and of new AI work, and the SQL fragments of the lease fence and the notification outbox.
 * The transition groups (claim, progress, finish, expire, diarization, ai, staging, admin) are
 * functions of a JobStore; JobRepository is their facade.
 */

/** A (job, attempt, token) that no longer holds its job. The only way a worker learns it lost a lease. */
export class StaleLeaseError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StaleLeaseError';
  }
}

export const hashLeaseToken = (token: string) => createHash('sha256').update(token).digest('hex');

export type EventLevel = 'info' | 'warn' | 'error';

/** The columns every transition returns (of speech_jobs `j`): enough to publish the live status without another read. */
export const STATUS_COLUMNS = 'j.id, j.status, j.stage_label, j.stage_detail, j.audio_position_seconds, j.attempt';
export interface StatusRow {
  id: number;
  status: JobStatus;
  stage_label: string | null;
  stage_detail: string | null;
  audio_position_seconds: number;
  attempt: number;
}

/** The lease fence as a predicate on speech_leases `l`: this worker's live lease with this token, by the database clock. */
export const LIVE_LEASE = `l.job_id = :job and l.attempt = :attempt and l.worker_id = :wid and l.token_hash = :hash
  and l.ended_at is null and l.expires_at > now()`;

/** The parameters of LIVE_LEASE. */
export interface FenceParams {
  job: number;
  attempt: number;
  wid: number;
  hash: string;
}

export const fence = (workerId: number, ref: LeaseRefMsg): FenceParams => ({
  job: ref.job_id,
  attempt: ref.attempt,
  wid: workerId,
  hash: hashLeaseToken(ref.lease_token),
});

/**
 * Whether a job that just ended (the CTE `job`, returning queue_channel, callback_url and owner_id)
 * has anyone to notify: a token-API callback URL, or an owner with an e-mail address while reports
 * are enabled (:reports). Only then does it get a notification row.
 */
export const WANTS_NOTIFICATION = `((job.queue_channel = 'api' and job.callback_url is not null)
  or (:reports and exists (select 1 from users u where u.id = job.owner_id and coalesce(btrim(u.email), '') <> '')))`;

/** Whether AI work can run at all, and the reasons it is unavailable. */
export interface AiAvailability {
  configured: boolean;
  noProvider: string;
  noAccess: string;
}

/** The bindings :aiOn, :noProvider and :noAccess of a statement that plans AI work. */
export interface AiParams {
  aiOn: boolean;
  noProvider: string;
  noAccess: string;
}

type TerminalListener = (jobs: Array<{ jobId: number; status: JobStatus }>, notified: boolean) => void;

/**
 * Reads the lease of a (job, attempt) after a fenced statement matched nothing.
 * Parameters: :job, :attempt. Guard: none (a read). Returns the lease's holder, token hash, end and whether it expired.
 */
const LEASE_OF = sql<
  { job: number; attempt: number },
  { worker_id: number; token_hash: string; ended: boolean; outcome: string | null; expired: boolean }
>(`select worker_id, token_hash, (ended_at is not null) as ended, outcome, (expires_at <= now()) as expired
     from speech_leases where job_id = :job and attempt = :attempt`);

export class JobStore {
  private readonly terminalListeners: TerminalListener[] = [];
  private readonly aiListeners: Array<() => void> = [];

  constructor(
    private readonly orm: Orm,
    readonly sink: JobEventSink,
    /** Completion reports are enabled (SMTP_URL is set): owners with an address are notified too. */
    readonly reportsEnabled: boolean,
    /** Whether analysis, translations and titles can run (a provider is configured), and why not. */
    private readonly ai: AiAvailability,
  ) {}

  get knex(): Knex {
    return this.orm.em.getConnection().getKnex();
  }

  aiParams(): AiParams {
    return { aiOn: this.ai.configured, noProvider: this.ai.noProvider, noAccess: this.ai.noAccess };
  }

  onAiWork(listener: () => void) {
    this.aiListeners.push(listener);
  }

  /** Called after transitions that wrote speech_ai_tasks rows (the AI dispatcher drains them). */
  aiQueued() {
    for (const l of this.aiListeners) l();
  }

  onTerminal(listener: TerminalListener) {
    this.terminalListeners.push(listener);
  }

  /** Jobs ended; `notified` when the statement wrote notification rows (the outbox dispatcher drains them). */
  terminal(rows: ReadonlyArray<{ id: number; status: JobStatus }>, notified = true) {
    const jobs = rows.map((r) => ({ jobId: r.id, status: r.status }));
    for (const l of this.terminalListeners) l(jobs, notified);
  }

  /** Publishes the live status of the rows a transition returned (after it committed). */
  publish(rows: readonly StatusRow[]) {
    for (const j of rows) {
      this.sink.status(j.id, {
        status: j.status,
        status_label: JOB_STATUS_LABELS[j.status],
        stage_label: j.stage_label,
        stage_detail: j.stage_detail,
        audio_position_seconds: j.audio_position_seconds,
        attempt: j.attempt,
      });
    }
  }

  /** Why a fence check failed, for the worker's error message (read only after the fenced statement matched nothing). */
  async staleReason(workerId: number, ref: LeaseRefMsg): Promise<{ message: string; outcome: string | null }> {
    const r = await LEASE_OF.first(this.knex, { job: ref.job_id, attempt: ref.attempt });
    const what = `job ${ref.job_id} attempt ${ref.attempt}`;
    if (!r || r.worker_id !== workerId || r.token_hash !== hashLeaseToken(ref.lease_token))
      return { message: `no lease for ${what} with this token`, outcome: null };
    if (r.ended) return { message: `the lease of ${what} ended (${r.outcome})`, outcome: r.outcome };
    return { message: `the lease of ${what} expired`, outcome: null };
  }

  async stale(workerId: number, ref: LeaseRefMsg): Promise<never> {
    throw new StaleLeaseError((await this.staleReason(workerId, ref)).message);
  }
}
