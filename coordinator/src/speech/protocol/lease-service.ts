import { createHash, randomBytes } from 'node:crypto';
import type { Knex } from '@mikro-orm/postgresql';
import { JOB_STATUS_LABELS, type JobAssignmentMsg, type JobStatus, type LeaseRefMsg, type ProgressUpdateMsg } from '@sonar/shared';
import type { Config } from '../../config.js';
import type { Orm } from '../../db/orm.js';
import type { JobEventSink, WorkAvailable } from '../jobs/job-events.js';
import type { WorkerCapabilities } from '../workers/entities.js';
import { sourceRouting, workerFetchRule } from '../jobs/url-sources.js';

/** A (job, attempt, token) that no longer holds its job. The only way a worker learns it lost a lease. */
export class StaleLeaseError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StaleLeaseError';
  }
}

export interface ClaimingWorker {
  id: number;
  name: string;
  capabilities: WorkerCapabilities;
  local: boolean;
}

/** Called once per attempt that ends a job in a terminal state (callbacks and reports hook in here). */
export type TerminalListener = (jobId: number, status: 'completed' | 'failed') => void;

// Raw rows from the driver carry timestamps as strings; normalise at the edge.
const ms = (v: Date | string | null | undefined): number => (v === null || v === undefined ? NaN : new Date(v).getTime());

const hashToken = (token: string) => createHash('sha256').update(token).digest('hex');
/** Cumulative transcript kept while a job runs; the full text is rebuilt from segments at completion. */
const MAX_RUNNING_TEXT = 64 * 1024;

interface LeaseRow {
  lease_id: number;
  job_id: number;
  attempt: number;
  worker_id: number;
  ended_at: Date | string | null;
  outcome: string | null;
  expires_at: Date | string;
  token_hash: string;
  status: JobStatus;
  current_pass: number;
  cancel_requested_at: Date | string | null;
}

/**
 * Leases: the fencing between workers and jobs. A claim picks the next eligible job under a row
 * lock (skip locked), so two workers never get the same job; every later call must present the
 * job id, attempt and token of a live lease, so a worker that lost its lease (expired and
 * reclaimed, cancelled, released) can no longer touch the job. PostgreSQL is the only truth.
 */
export class LeaseService {
  private readonly terminalListeners: TerminalListener[] = [];

  constructor(
    private readonly orm: Orm,
    private readonly config: Config,
    private readonly work: WorkAvailable,
    private readonly sink: JobEventSink,
  ) {}

  private get knex(): Knex {
    return this.orm.em.getConnection().getKnex();
  }

  onTerminal(listener: TerminalListener) {
    this.terminalListeners.push(listener);
  }

  private emitTerminal(jobId: number, status: 'completed' | 'failed') {
    for (const l of this.terminalListeners) {
      try {
        l(jobId, status);
      } catch {
        // Listeners own their errors; a failing notifier never affects the job.
      }
    }
  }

  private ttlMs() {
    return this.config.SPEECH_LEASE_TTL_SECONDS * 1000;
  }

  /** Whether any remote (non-local) worker has fresh presence: local execution then stands by. */
  private async remoteFresh(trx: Knex.Transaction | Knex): Promise<boolean> {
    const { rows } = await trx.raw<{ rows: Array<{ fresh: boolean }> }>(
      `select exists (
         select 1 from speech_workers
          where revoked_at is null and last_seen_at > now() - make_interval(secs => ?)
            and coalesce((capabilities->>'local')::boolean, false) = false
       ) as fresh`,
      [this.config.WORKER_PRESENCE_TTL_MS / 1000],
    );
    return rows[0]?.fresh === true;
  }

  /** Leases the next job this worker may run, or returns null. Admin-owned jobs first, then oldest. */
  async claim(worker: ClaimingWorker): Promise<JobAssignmentMsg | null> {
    const token = randomBytes(24).toString('base64url');
    // URL jobs a worker may download itself; the others (proxy, pages for yt-dlp) need staged media.
    const fetchRule = workerFetchRule(await sourceRouting(this.config));
    const assignment = await this.knex.transaction(async (trx) => {
      const remoteFresh = worker.local ? await this.remoteFresh(trx) : false;
      const { rows } = await trx.raw<{ rows: Array<{ id: number; forced: boolean }> }>(
        `select j.id, (j.execution_target <> 'auto') as forced
           from speech_jobs j join users u on u.id = j.owner_id
          where j.status = 'queued' and j.cancel_requested_at is null
            and (
              (j.execution_target = 'worker' and j.target_worker_id = :wid)
              or (j.execution_target = 'local' and :isLocal)
              or (j.execution_target = 'auto' and j.model = any(:models::text[])
                  and (not :isLocal or (j.model = any(:allow::text[]) and not :remoteFresh)))
            )
            and (j.source_type = 'upload' or j.media_path is not null
                 or (:canFetch and :workersMayFetch and j.source_url ~* :fetchable))
          order by u.is_admin desc, j.created_at asc, j.id asc
          for update of j skip locked
          limit 1`,
        {
          wid: worker.id,
          isLocal: worker.local,
          models: worker.capabilities.models,
          allow: this.config.SPEECH_LOCAL_MODELS,
          remoteFresh,
          canFetch: worker.capabilities.canFetchUrls,
          workersMayFetch: fetchRule.workersMayFetch,
          fetchable: fetchRule.pattern,
        },
      );
      const picked = rows[0];
      if (!picked) return null;
      const { rows: jobs } = await trx.raw<{ rows: Array<Record<string, unknown>> }>(
        `update speech_jobs set
            status = 'transcribing', attempt = attempt + 1, worker_id = :wid,
            started_at = coalesce(started_at, now()), finished_at = null, failure_error = null,
            stage_label = :stage, stage_detail = null, audio_position_seconds = 0, transcript_text = null, updated_at = now()
          where id = :id
          returning id, attempt, current_pass, model, language, source_type, source_url, media_path, media_sha256,
                    source_size_bytes, source_filename, source_duration_seconds, diarization_requested`,
        { id: picked.id, wid: worker.id, stage: `Claimed by ${worker.name}` },
      );
      const job = jobs[0]!;
      const { rows: leases } = await trx.raw<{ rows: Array<{ expires_at: Date | string }> }>(
        `insert into speech_leases (job_id, attempt, worker_id, token_hash, expires_at)
         values (?, ?, ?, ?, now() + make_interval(secs => ?)) returning expires_at`,
        [picked.id, job.attempt, worker.id, hashToken(token), this.ttlMs() / 1000],
      );
      // A new attempt starts the pass from scratch: segments of an abandoned attempt go.
      await trx.raw('delete from speech_segments where job_id = ? and pass = ?', [picked.id, job.current_pass]);
      await trx.raw(`insert into speech_job_events (job_id, event, message, data) values (?, 'claimed', ?, ?::jsonb)`, [
        picked.id,
        `Attempt ${job.attempt} claimed by worker ${worker.name}${picked.forced ? ' (pinned target)' : ''}.`,
        JSON.stringify({ worker: worker.name, attempt: job.attempt }),
      ]);
      const mediaOnCoordinator = job.media_path !== null;
      return {
        lease: { job_id: picked.id, attempt: Number(job.attempt), lease_token: token },
        lease_expires_unix_ms: ms(leases[0]!.expires_at),
        pass: Number(job.current_pass),
        model: String(job.model),
        language: (job.language as string | null) ?? '',
        source_type: job.source_type as 'url' | 'upload',
        source_url: mediaOnCoordinator ? '' : String(job.source_url ?? ''),
        media_from_coordinator: mediaOnCoordinator,
        media_sha256: (job.media_sha256 as string | null) ?? '',
        media_size_bytes: Number(job.source_size_bytes ?? 0),
        source_filename: (job.source_filename as string | null) ?? '',
        duration_seconds: Number(job.source_duration_seconds ?? 0),
        diarization: job.diarization_requested === true,
        forced: picked.forced,
      } satisfies JobAssignmentMsg;
    });
    if (assignment) this.publishStatus(assignment.lease.job_id);
    return assignment;
  }

  /** Loads and checks a lease reference; throws StaleLeaseError unless it is the job's live lease. */
  private async liveLease(trx: Knex | Knex.Transaction, workerId: number, ref: LeaseRefMsg, lock = false): Promise<LeaseRow> {
    const { rows } = await trx.raw<{ rows: LeaseRow[] }>(
      `select l.id as lease_id, l.job_id, l.attempt, l.worker_id, l.ended_at, l.outcome, l.expires_at, l.token_hash,
              j.status, j.current_pass, j.cancel_requested_at
         from speech_leases l join speech_jobs j on j.id = l.job_id
        where l.job_id = ? and l.attempt = ? ${lock ? 'for update of l, j' : ''}`,
      [ref.job_id, ref.attempt],
    );
    const row = rows[0];
    if (!row || row.worker_id !== workerId || row.token_hash !== hashToken(ref.lease_token)) {
      throw new StaleLeaseError(`no lease for job ${ref.job_id} attempt ${ref.attempt} with this token`);
    }
    return row;
  }

  private assertOpen(row: LeaseRow) {
    if (row.ended_at) throw new StaleLeaseError(`the lease of job ${row.job_id} attempt ${row.attempt} ended (${row.outcome})`);
    if (ms(row.expires_at) <= Date.now()) throw new StaleLeaseError(`the lease of job ${row.job_id} attempt ${row.attempt} expired`);
  }

  /** Renews the presented leases; reports which jobs to cancel and which leases are gone. */
  async heartbeat(workerId: number, refs: LeaseRefMsg[]): Promise<{ cancel: number[]; lost: number[]; expiresAt: number }> {
    const cancel: number[] = [];
    const lost: number[] = [];
    let expiresAt = 0;
    for (const ref of refs) {
      try {
        const row = await this.liveLease(this.knex, workerId, ref);
        this.assertOpen(row);
        const { rows } = await this.knex.raw<{ rows: Array<{ expires_at: Date | string }> }>(
          `update speech_leases set expires_at = now() + make_interval(secs => ?), last_heartbeat_at = now()
            where id = ? and ended_at is null returning expires_at`,
          [this.ttlMs() / 1000, row.lease_id],
        );
        if (!rows[0]) throw new StaleLeaseError('lease ended');
        expiresAt = ms(rows[0].expires_at);
        if (row.cancel_requested_at) cancel.push(ref.job_id);
      } catch (err) {
        if (!(err instanceof StaleLeaseError)) throw err;
        lost.push(ref.job_id);
      }
    }
    return { cancel, lost, expiresAt };
  }

  /** Applies one progress message: stage and position, and each new segment exactly once. */
  async progress(workerId: number, update: ProgressUpdateMsg): Promise<number> {
    const ref = update.lease;
    const stored: Array<{ seq: number; start: number; end: number; text: string }> = [];
    let pass = 1;
    await this.knex.transaction(async (trx) => {
      const row = await this.liveLease(trx, workerId, ref);
      this.assertOpen(row);
      pass = row.current_pass;
      for (const s of update.segments) {
        if (!Number.isFinite(s.start) || !Number.isFinite(s.end) || s.end < s.start) continue;
        const { rows } = await trx.raw<{ rows: Array<{ seq: number }> }>(
          `insert into speech_segments (job_id, pass, seq, start_seconds, end_seconds, text)
           values (?, ?, ?, ?, ?, ?) on conflict (job_id, pass, seq) do nothing returning seq`,
          [row.job_id, row.current_pass, s.seq, s.start, s.end, s.text.slice(0, 10_000)],
        );
        if (rows.length) stored.push(s);
      }
      const status: JobStatus = ['downloading', 'transcribing', 'finalizing'].includes(update.stage) ? update.stage : 'transcribing';
      const addText = stored.map((s) => s.text.trim()).filter(Boolean).join(' ');
      await trx.raw(
        `update speech_jobs set
            status = :status,
            stage_label = :label,
            stage_detail = nullif(:detail::text, ''),
            audio_position_seconds = greatest(audio_position_seconds, :pos::float8),
            source_duration_seconds = coalesce(source_duration_seconds, nullif(:duration::float8, 0)),
            engine = coalesce(nullif(:engine::text, ''), engine),
            engine_model = coalesce(nullif(:engineModel::text, ''), engine_model),
            transcript_text = case when :addText::text = '' then transcript_text
              else right(concat_ws(' ', transcript_text, :addText::text), ${MAX_RUNNING_TEXT}) end,
            updated_at = now()
          where id = :id`,
        {
          id: row.job_id,
          status,
          label: `${JOB_STATUS_LABELS[status]}`,
          detail: update.stage_detail ?? '',
          pos: Number.isFinite(update.audio_position_seconds) ? update.audio_position_seconds : 0,
          duration: Number.isFinite(update.duration_seconds) ? update.duration_seconds : 0,
          engine: update.engine ?? '',
          engineModel: update.engine_model ?? '',
          addText,
        },
      );
      await trx.raw('update speech_leases set last_progress_at = now() where id = ?', [row.lease_id]);
    });
    for (const s of stored) this.sink.segment(ref.job_id, pass, { seq: s.seq, start: s.start, end: s.end, text: s.text, speaker: null });
    this.publishStatus(ref.job_id);
    return stored.length;
  }

  /**
   * Ends an attempt. Repeating the same completion of the same attempt is answered as a duplicate;
   * anything from an attempt that no longer holds the job is a StaleLeaseError.
   */
  async complete(
    workerId: number,
    req: { lease: LeaseRefMsg; success: boolean; error: string; cancelled: boolean; segmentCount: number; durationSeconds: number; engine: string; engineModel: string },
  ): Promise<{ duplicate: boolean; status: JobStatus }> {
    const result = await this.knex.transaction(async (trx) => {
      const row = await this.liveLease(trx, workerId, req.lease, true);
      const outcome = req.success ? 'completed' : 'failed';
      if (row.ended_at) {
        if (row.outcome === outcome) return { duplicate: true, status: row.status };
        throw new StaleLeaseError(`the lease of job ${row.job_id} attempt ${row.attempt} ended (${row.outcome})`);
      }
      if (ms(row.expires_at) <= Date.now()) throw new StaleLeaseError(`the lease of job ${row.job_id} attempt ${row.attempt} expired`);
      await trx.raw(`update speech_leases set ended_at = now(), outcome = ? where id = ?`, [outcome, row.lease_id]);
      if (req.success) {
        const { rows } = await trx.raw<{ rows: Array<{ n: string; text: string | null }> }>(
          `select count(*) as n, string_agg(btrim(text), ' ' order by seq) as text from speech_segments where job_id = ? and pass = ?`,
          [row.job_id, row.current_pass],
        );
        const stored = Number(rows[0]?.n ?? 0);
        await trx.raw(
          `update speech_jobs set status = 'completed', stage_label = 'Completed', stage_detail = ?, transcript_text = ?,
              audio_position_seconds = greatest(audio_position_seconds, ?::float8), engine = coalesce(nullif(?::text, ''), engine),
              engine_model = coalesce(nullif(?::text, ''), engine_model), finished_at = now(), updated_at = now(),
              diarization_state = case when diarization_requested then 'unavailable' else diarization_state end,
              -- Token-API jobs get a public share as soon as the transcript completes.
              share_token = case when queue_channel = 'api' and share_token is null then ? else share_token end,
              share_created_at = case when queue_channel = 'api' and share_token is null then now() else share_created_at end
            where id = ?`,
          [
            stored === req.segmentCount ? `${stored} segments` : `${stored} segments stored, worker reported ${req.segmentCount}`,
            rows[0]?.text ?? '',
            Number.isFinite(req.durationSeconds) ? req.durationSeconds : 0,
            req.engine,
            req.engineModel,
            randomBytes(24).toString('base64url'),
            row.job_id,
          ],
        );
        await this.logTx(trx, row.job_id, 'completed', `Attempt ${row.attempt} completed with ${stored} segments.`);
        return { duplicate: false, status: 'completed' as JobStatus };
      }
      const cancelled = req.cancelled || row.cancel_requested_at !== null;
      const reason = cancelled ? 'Cancelled on request.' : req.error || 'The worker reported a failure.';
      await trx.raw(
        `update speech_jobs set status = 'failed', stage_label = ?, stage_detail = null, failure_error = ?, finished_at = now(), updated_at = now() where id = ?`,
        [cancelled ? 'Cancelled' : 'Failed', reason.slice(0, 2000), row.job_id],
      );
      await this.logTx(trx, row.job_id, cancelled ? 'cancelled' : 'failed', `Attempt ${row.attempt}: ${reason}`, cancelled ? 'warn' : 'error');
      return { duplicate: false, status: 'failed' as JobStatus };
    });
    if (!result.duplicate) {
      this.publishStatus(req.lease.job_id);
      this.emitTerminal(req.lease.job_id, result.status as 'completed' | 'failed');
    }
    return result;
  }

  /** A worker hands its job back unfinished (shutdown). The hand-back does not use up a retry. */
  async release(workerId: number, ref: LeaseRefMsg, reason: string): Promise<void> {
    await this.knex.transaction(async (trx) => {
      const row = await this.liveLease(trx, workerId, ref, true);
      this.assertOpen(row);
      await trx.raw(`update speech_leases set ended_at = now(), outcome = 'released' where id = ?`, [row.lease_id]);
      await trx.raw(
        `update speech_jobs set status = 'queued', max_attempts = max_attempts + 1, stage_label = 'Waiting for a worker',
            stage_detail = ?, audio_position_seconds = 0, transcript_text = null, updated_at = now() where id = ?`,
        [`Handed back by the worker: ${reason}`.slice(0, 500), row.job_id],
      );
      await this.logTx(trx, row.job_id, 'released', `Attempt ${row.attempt} handed back: ${reason}`, 'warn');
    });
    this.work.notify();
    this.publishStatus(ref.job_id);
  }

  /** The media file of a live lease, for FetchMedia. */
  async mediaFor(workerId: number, ref: LeaseRefMsg): Promise<{ path: string; sha256: string | null }> {
    const row = await this.liveLease(this.knex, workerId, ref);
    this.assertOpen(row);
    const { rows } = await this.knex.raw<{ rows: Array<{ media_path: string | null; media_sha256: string | null }> }>(
      'select media_path, media_sha256 from speech_jobs where id = ?',
      [row.job_id],
    );
    if (!rows[0]?.media_path) throw new StaleLeaseError(`job ${row.job_id} has no media on the coordinator`);
    return { path: rows[0].media_path, sha256: rows[0].media_sha256 };
  }

  /**
   * Automatic stale recovery: every lease past its expiry ends as `expired`; its job is queued again
   * while attempts remain, else failed with the reason. Returns the job ids it touched.
   */
  async sweepExpired(): Promise<Array<{ jobId: number; status: JobStatus }>> {
    const touched: Array<{ jobId: number; status: JobStatus }> = [];
    for (;;) {
      const one = await this.knex.transaction(async (trx) => {
        const { rows } = await trx.raw<{ rows: Array<{ lease_id: number; job_id: number; attempt: number; max_attempts: number; cancel: boolean; worker: string }> }>(
          `select l.id as lease_id, l.job_id, l.attempt, j.max_attempts, (j.cancel_requested_at is not null) as cancel, w.name as worker
             from speech_leases l join speech_jobs j on j.id = l.job_id join speech_workers w on w.id = l.worker_id
            where l.ended_at is null and l.expires_at <= now()
            order by l.expires_at
            for update of l, j skip locked
            limit 1`,
        );
        const r = rows[0];
        if (!r) return null;
        await trx.raw(`update speech_leases set ended_at = now(), outcome = 'expired' where id = ?`, [r.lease_id]);
        const silent = `worker ${r.worker} stopped renewing its lease (attempt ${r.attempt} of ${r.max_attempts})`;
        let status: JobStatus;
        if (!r.cancel && r.attempt < r.max_attempts) {
          status = 'queued';
          await trx.raw(
            `update speech_jobs set status = 'queued', stage_label = 'Waiting for a worker', stage_detail = ?,
                audio_position_seconds = 0, transcript_text = null, updated_at = now() where id = ?`,
            [`Requeued: ${silent}.`, r.job_id],
          );
          await this.logTx(trx, r.job_id, 'lease_expired', `Requeued: ${silent}.`, 'warn');
        } else {
          status = 'failed';
          const reason = r.cancel ? `Cancelled; ${silent}.` : `Gave up after ${r.attempt} attempts: ${silent}.`;
          await trx.raw(
            `update speech_jobs set status = 'failed', stage_label = 'Failed', stage_detail = null, failure_error = ?, finished_at = now(), updated_at = now() where id = ?`,
            [reason, r.job_id],
          );
          await this.logTx(trx, r.job_id, 'lease_expired', reason, 'error');
        }
        return { jobId: r.job_id, status };
      });
      if (!one) break;
      touched.push(one);
      this.publishStatus(one.jobId);
      if (one.status === 'failed') this.emitTerminal(one.jobId, 'failed');
    }
    if (touched.some((t) => t.status === 'queued')) this.work.notify();
    return touched;
  }

  private async logTx(trx: Knex.Transaction, jobId: number, event: string, message: string, level: 'info' | 'warn' | 'error' = 'info') {
    await trx.raw('insert into speech_job_events (job_id, event, message, level) values (?, ?, ?, ?)', [jobId, event, message, level]);
  }

  private publishStatus(jobId: number) {
    void this.knex
      .raw<{ rows: Array<{ status: JobStatus; stage_label: string | null; stage_detail: string | null; audio_position_seconds: number; attempt: number }> }>(
        'select status, stage_label, stage_detail, audio_position_seconds, attempt from speech_jobs where id = ?',
        [jobId],
      )
      .then(({ rows }) => {
        const j = rows[0];
        if (!j) return;
        this.sink.status(jobId, {
          status: j.status,
          status_label: JOB_STATUS_LABELS[j.status],
          stage_label: j.stage_label,
          stage_detail: j.stage_detail,
          audio_position_seconds: j.audio_position_seconds,
          attempt: j.attempt,
        });
      })
      .catch(() => undefined);
  }
}
