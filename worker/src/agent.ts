import { hostname } from 'node:os';
import { status, type ServiceError } from '@grpc/grpc-js';
import { CLAIM_NEXT_CONTRACT_VERSION, WORKER_CONTRACT_VERSION, type CapabilitiesMsg, type JobAssignmentMsg } from '@sonar/shared';
import { workerErrorReason, type CoordinatorClient } from './coordinator-client.js';
import type { JobOutcome, NextClaim, StopReason } from './job-runner.js';

export interface AgentLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** Errors after which retrying cannot help: the operator has to act. */
export class FatalAgentError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

export interface AgentOptions {
  client: CoordinatorClient;
  capabilities: CapabilitiesMsg;
  agentVersion: string;
  local: boolean;
  logger: AgentLogger;
  /**
   * Runs one claimed job; without it the agent only keeps its presence (no jobs are claimed). Its
   * completion claims the next job through `next` (contract 4) when the agent allows it.
   */
  runJob?: (job: JobAssignmentMsg, stop: AbortSignal, next: NextClaim) => Promise<JobOutcome>;
  /** How long a claim long-poll may wait on the coordinator. */
  claimWaitMs?: number;
  /** On shutdown, how long the running job may still finish before it is handed back. */
  shutdownGraceMs?: number;
  minBackoffMs?: number;
  maxBackoffMs?: number;
}

interface ActiveJob {
  job: JobAssignmentMsg;
  stop: AbortController;
  done: Promise<JobOutcome>;
}

/**
 * The worker agent: Hello (contract check), heartbeats that renew the leases it holds and carry
 * cancellations back, and a claim loop that runs one job at a time. A job's completion claims the
 * next one in the same call when the coordinator speaks contract 4 (CompleteRequest.claim_next);
 * Claim is called only when that brought nothing. Reconnects with capped exponential backoff and
 * jitter; on stop() it claims nothing more, lets the running job finish within the grace period,
 * then hands it back (and a job its last completion claimed, unstarted).
 */
export class WorkerAgent {
  private stopping = false;
  private sessionId: string | null = null;
  private heartbeatMs = 15_000;
  private active: ActiveJob | null = null;
  /** A job the last completion claimed (CompleteResponse.next), not started yet. */
  private handed: JobAssignmentMsg | null = null;
  /** The contract version the coordinator said Hello with (claim_next from 4). */
  private coordinatorContract = 0;
  private readonly wakers = new Set<() => void>();
  private fatal: FatalAgentError | null = null;
  /** Cancels the claim long-poll in flight, so stop() does not wait for it to time out. */
  private readonly claimAbort = new AbortController();

  constructor(private readonly opts: AgentOptions) {}

  get currentJobId(): number | null {
    return this.active?.job.lease.job_id ?? null;
  }

  /** Runs until stop(); rejects with FatalAgentError on authentication or contract refusal. */
  async run(): Promise<void> {
    const heartbeats = this.heartbeatLoop();
    try {
      await this.claimLoop();
    } finally {
      this.stopping = true;
      this.wakeAll();
      await heartbeats;
    }
    if (this.fatal) throw this.fatal;
  }

  /** Claims nothing more; the running job may finish within `grace` ms (default: shutdownGraceMs), then it is handed back. */
  stop(grace = this.opts.shutdownGraceMs ?? 60_000) {
    if (this.stopping) return;
    this.stopping = true;
    this.claimAbort.abort();
    this.wakeAll();
    const active = this.active;
    if (active) {
      this.opts.logger.info({ job: active.job.lease.job_id, graceMs: grace }, 'finishing the running job before stopping');
      const timer = setTimeout(() => active.stop.abort('shutdown' satisfies StopReason), grace);
      void active.done.finally(() => clearTimeout(timer));
    }
  }

  private helloing: Promise<void> | null = null;

  /** Says Hello unless a Hello is already under way (the claim loop and the heartbeat loop both may ask). */
  private ensureSession(): Promise<void> {
    this.helloing ??= this.hello().finally(() => (this.helloing = null));
    return this.helloing;
  }

  private async hello(): Promise<void> {
    const { client, logger } = this.opts;
    let attempt = 0;
    while (!this.stopping) {
      try {
        const hello = await client.hello({
          contract_version: WORKER_CONTRACT_VERSION,
          agent_version: this.opts.agentVersion,
          hostname: hostname(),
          capabilities: this.opts.capabilities,
          local: this.opts.local,
          // The coordinator ends every other open lease of this worker at once (an earlier process's):
          // the running job's and one its completion claimed are this process's.
          held_leases: [this.active?.job, this.handed].flatMap((job) => (job ? [job.lease] : [])),
        });
        this.sessionId = hello.session_id;
        this.coordinatorContract = hello.coordinator_contract_version;
        this.heartbeatMs = hello.heartbeat_interval_ms || this.heartbeatMs;
        logger.info({ worker: hello.worker_name, session: hello.session_id, models: this.opts.capabilities.models }, 'connected to coordinator');
        this.wakeAll(); // restart the heartbeat timer at the interval the coordinator asked for
        return;
      } catch (err) {
        this.checkFatal(err);
        const delay = this.backoff(attempt++);
        const e = err as ServiceError;
        logger.warn({ code: e.code, details: e.details ?? String(err), retryInMs: delay }, 'coordinator unreachable; retrying');
        await this.sleep(delay);
      }
    }
  }

  private checkFatal(err: unknown) {
    const e = err as ServiceError;
    if (e.code === status.UNAUTHENTICATED) this.fatal = new FatalAgentError(`coordinator refused the worker secret: ${e.details}`, 3);
    else if (e.code === status.FAILED_PRECONDITION) this.fatal = new FatalAgentError(`coordinator refused this worker: ${e.details}`, 2);
    if (this.fatal) {
      this.stopping = true;
      this.wakeAll();
      throw this.fatal;
    }
  }

  private async claimLoop() {
    let failures = 0;
    while (!this.stopping) {
      if (!this.sessionId) await this.ensureSession();
      if (this.stopping) break;
      if (!this.opts.runJob) {
        await this.sleep(60_000);
        continue;
      }
      const handed = this.handed;
      if (handed) {
        this.handed = null;
        await this.execute(handed, 'completion');
        continue;
      }
      try {
        const res = await this.opts.client.claim({ session_id: this.sessionId ?? '', wait_ms: this.opts.claimWaitMs ?? 20_000 }, this.claimAbort.signal);
        failures = 0;
        if (res.has_job && res.job) await this.execute(res.job, 'claim');
      } catch (err) {
        if (this.stopping) break;
        this.checkFatal(err);
        if (workerErrorReason(err) === 'session_unknown') {
          this.sessionId = null;
          continue;
        }
        const delay = this.backoff(failures++);
        this.opts.logger.warn({ details: (err as ServiceError).details ?? String(err), retryInMs: delay }, 'claim failed; retrying');
        this.sessionId = null;
        await this.sleep(delay);
      }
    }
    if (this.active) await this.active.done;
    await this.releaseHanded();
  }

  /**
   * The completion's claim of the next job (contract 4): asked while the agent takes work, from a
   * coordinator that speaks contract 4; what comes back is run next, before any Claim.
   */
  private readonly nextClaim: NextClaim = {
    session: () => (!this.stopping && this.sessionId && this.coordinatorContract >= CLAIM_NEXT_CONTRACT_VERSION ? this.sessionId : null),
    claimed: (res) => {
      if (res.has_job && res.job) this.handed = res.job;
    },
  };

  /** Stopping with a job the last completion claimed and nobody started: hand it back at once. */
  private async releaseHanded() {
    const job = this.handed;
    if (!job) return;
    this.handed = null;
    try {
      await this.opts.client.release({ lease: job.lease, reason: 'worker shutting down' });
      this.opts.logger.warn({ job: job.lease.job_id, attempt: job.lease.attempt }, 'claimed job handed back unstarted');
    } catch (err) {
      // Its lease expires and the job is queued again.
      this.opts.logger.warn({ job: job.lease.job_id, details: (err as ServiceError).details ?? String(err) }, 'release failed');
    }
  }

  private async execute(job: JobAssignmentMsg, via: 'claim' | 'completion') {
    const stop = new AbortController();
    this.opts.logger.info({ job: job.lease.job_id, attempt: job.lease.attempt, model: job.model, forced: job.forced, via }, 'job claimed');
    const done = this.opts.runJob!(job, stop.signal, this.nextClaim).catch((err: unknown): JobOutcome => {
      this.opts.logger.error({ job: job.lease.job_id, err: String(err) }, 'job runner crashed');
      return 'failed';
    });
    this.active = { job, stop, done };
    this.wakeAll(); // send a heartbeat for the new lease soon
    try {
      await done;
    } finally {
      this.active = null;
    }
  }

  private async heartbeatLoop() {
    while (!this.stopping || this.active) {
      await this.sleep(this.active ? Math.min(this.heartbeatMs, 5_000) : this.heartbeatMs);
      if (!this.sessionId && !this.active) continue;
      const active = this.active;
      try {
        const res = await this.opts.client.heartbeat({
          session_id: this.sessionId ?? '',
          leases: active ? [active.job.lease] : [],
        });
        if (!res.session_valid && !this.stopping && this.sessionId !== null) {
          this.opts.logger.warn({}, 'coordinator forgot this session; saying hello again');
          this.sessionId = null;
          this.wakeAll();
          // While a job runs the claim loop waits for it: say Hello from here (with the held lease), so
          // the worker is present again at once. A refusal becomes the agent's fatal error (checkFatal).
          if (active) void this.ensureSession().catch(() => undefined);
        }
        if (active && res.lost_job_ids.includes(active.job.lease.job_id)) active.stop.abort('lost' satisfies StopReason);
        else if (active && res.cancel_job_ids.includes(active.job.lease.job_id)) active.stop.abort('cancel' satisfies StopReason);
      } catch (err) {
        // The coordinator may be away (a restart, the network). The session is kept: it lives in Redis,
        // not in the coordinator process, so a restarted coordinator still knows it; if not, the next
        // heartbeat says so (session_valid false). Dropping it here would leave a worker that is running
        // a job without a session until the job ends, since only the claim loop says Hello.
        this.opts.logger.warn({ details: (err as ServiceError).details ?? String(err) }, 'heartbeat failed');
        const code = (err as ServiceError).code;
        if (!this.stopping && (code === status.UNAUTHENTICATED || code === status.FAILED_PRECONDITION)) {
          // Refused, not away: the claim loop's Hello turns this into the agent's fatal error.
          this.sessionId = null;
          this.wakeAll();
        }
      }
      if (this.stopping && !this.active) break;
    }
  }

  private backoff(attempt: number): number {
    const min = this.opts.minBackoffMs ?? 500;
    const max = this.opts.maxBackoffMs ?? 30_000;
    const ceiling = Math.min(max, min * 2 ** attempt);
    return Math.round(ceiling / 2 + Math.random() * (ceiling / 2)); // "equal jitter"
  }

  private wakeAll() {
    for (const w of [...this.wakers]) w();
  }

  private sleep(ms: number) {
    return new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.wakers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.wakers.add(wake);
    });
  }
}
