import { once } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import type {
  ClaimRequest__Output,
  ClaimResponse,
  CompleteRequest__Output,
  CompleteResponse,
  HeartbeatRequest__Output,
  HeartbeatResponse,
  HelloRequest__Output,
  HelloResponse,
  MediaChunk,
  MediaRequest__Output,
  ProgressAck,
  ProgressUpdate__Output,
  ReleaseRequest__Output,
  ReleaseResponse,
  WorkerServiceHandlers,
} from '@sonar/proto';
import {
  DIARIZATION_CONTRACT_VERSION,
  HELD_LEASES_CONTRACT_VERSION,
  MIN_SUPPORTED_WORKER_CONTRACT_VERSION,
  SPEAKER_COUNT_CONTRACT_VERSION,
  WORKER_CONTRACT_VERSION,
  WORKER_ERROR_METADATA_KEY,
  isCompatibleContract,
  hasLease,
  type JobAssignmentMsg,
  type WorkerErrorReason,
} from '@sonar/shared';
import type { Logger } from 'pino';
import { unavailableDependency, unavailableMessage } from '../../infra/unavailable.js';
import type { WakeReason, WorkAvailable } from '../jobs/job-events.js';
import type { MediaStore } from '../jobs/media-store.js';
import type { MediaStager } from '../jobs/media-stager.js';
import { StaleLeaseError, type LeaseService } from '../protocol/lease-service.js';
import type { SpeechWorker } from './entities.js';
import type { WorkerRegistry, WorkerSession } from './worker-registry.js';

class RpcError extends Error {
  constructor(
    readonly code: grpc.status,
    message: string,
    readonly reason?: WorkerErrorReason,
  ) {
    super(message);
  }
}

/**
 * Workers with the same key may take the same unpinned jobs, so one of them is enough to wake for
 * one new job (WorkAvailable.notifyNew).
 */
function claimGroupKey(session: WorkerSession): string {
  const c = session.capabilities;
  const diarizeTasks = (session.contractVersion ?? 0) >= DIARIZATION_CONTRACT_VERSION;
  const speakerCounts = (session.contractVersion ?? 0) >= SPEAKER_COUNT_CONTRACT_VERSION;
  return [session.local, c.canFetchUrls, c.diarization, diarizeTasks, speakerCounts, [...c.models].sort().join(',')].join('|');
}

/** How often waiting long-polls of one capability group look for URL sources to download for them when no news came. */
const STAGE_LOOK_MS = 1_000;
/**
 * A long poll that starts (or looks again) within this long of an empty claim by its capability
 * group, with no news of work since, skips the database and waits: an idle fleet of 1,000 workers
 * would otherwise run about 100 empty claim statements a second (one when each long poll starts,
 * one when it ends). News (a new job, a release, a recovered lease, here or from another
 * coordinator) starts a new generation and wakes the waiters, so nothing announced waits for this;
 * work that appears unannounced is found at most this much later.
 */
const EMPTY_CLAIM_REUSE_MS = 1_000;

/**
 * Per capability group: when its long-polls last looked at something, and the news count then. A
 * look stays good for `ms` while no news of work came (`generation`: WorkAvailable.generation, or
 * generationOf for the group).
 */
function recentLooks(ms: number, generation: (group: string) => number) {
  const last = new Map<string, { at: number; generation: number }>();
  return {
    fresh(group: string): boolean {
      const look = last.get(group);
      return !!look && look.generation === generation(group) && Date.now() - look.at < ms;
    },
    /** `seen`: the news count when the look began (news during it makes the look stale). */
    mark(group: string, seen = generation(group)) {
      last.set(group, { at: Date.now(), generation: seen });
    },
  };
}

/** Longest a Claim long poll is held open, whatever the worker asks for. */
const MAX_CLAIM_WAIT_MS = 30_000;
/** Even without a wake-up, eligibility is re-checked this often (presence of other workers changes it). */
const CLAIM_RECHECK_MS = 2_000;
const MEDIA_CHUNK_BYTES = 256 * 1024;

export interface WorkerServiceDeps {
  registry: WorkerRegistry;
  leases: LeaseService;
  work: WorkAvailable;
  media: MediaStore;
  stager: MediaStager;
  logger: Logger;
  heartbeatIntervalMs: number;
}

/**
 * gRPC handlers of the worker protocol. Every call authenticates the worker secret from the
 * `authorization` metadata; domain failures become gRPC status codes here and nowhere else:
 * stale leases are ABORTED with trailer `sonar-error: stale_lease`.
 */
export function workerServiceHandlers(deps: WorkerServiceDeps): WorkerServiceHandlers {
  const { registry, leases, logger } = deps;

  async function authenticate(metadata: grpc.Metadata): Promise<SpeechWorker> {
    const header = metadata.get('authorization')[0];
    const m = typeof header === 'string' ? /^Bearer\s+(\S+)$/i.exec(header) : null;
    const worker = m?.[1] ? await registry.authenticate(m[1]) : null;
    if (!worker) throw new RpcError(grpc.status.UNAUTHENTICATED, 'worker secret missing, unknown or revoked');
    return worker;
  }

  /** When each capability group's long-polls last looked for URL sources to stage. */
  const stagingLooks = recentLooks(STAGE_LOOK_MS, (group) => deps.work.generationOf(group));
  /**
   * When a claim of each capability group last found nothing. A new job announced to a waiter of
   * the group is that waiter's: the group's other long polls keep waiting (WorkAvailable.generationOf).
   */
  const emptyClaims = recentLooks(EMPTY_CLAIM_REUSE_MS, (group) => deps.work.generationOf(group));

  async function sessionOf(worker: SpeechWorker, sessionId: string): Promise<WorkerSession> {
    const session = await registry.session(worker, sessionId);
    if (!session) throw new RpcError(grpc.status.NOT_FOUND, 'unknown or expired session; say Hello again', 'session_unknown');
    return session;
  }

  /**
   * One look for this worker's next job: the claim rule of Claim and of Complete's claim_next, in
   * one place. `group`: claimGroupKey(session). `plain`: a look that always asks the database (a
   * poll with wait_ms 0: news from another coordinator may still be on its way); otherwise (a long
   * poll, a completion's claim) it asks when woken by news or when its group's last empty look is
   * stale, and answers nothing otherwise (the long poll that follows waits for the news). `woken`:
   * why the long poll woke (null on its first look). Leases the job (LeaseService.claim:
   * eligibility, pinned targets, the grouped one-statement claim) and keeps the group's signals: an
   * empty look is remembered, a job found after news other than its own announcement passes the
   * news on, and URL sources the worker may not fetch are staged while nothing is found.
   */
  async function claimFor(
    worker: SpeechWorker,
    session: WorkerSession,
    group: string,
    look: { plain: boolean; woken: WakeReason | null },
  ): Promise<JobAssignmentMsg | null> {
    const { woken } = look;
    const generation = deps.work.generationOf(group);
    // A long poll woken by news looks (a new job announced to it is its own to look for).
    const looked = look.plain || woken === 'job' || woken === 'news' || !emptyClaims.fresh(group);
    const job = looked
      ? await leases.claim({
          id: worker.id,
          name: worker.name,
          sessionId: session.sessionId,
          models: session.capabilities.models,
          local: session.local,
          canFetchUrls: session.capabilities.canFetchUrls,
          diarization: session.capabilities.diarization,
          diarizeTasks: (session.contractVersion ?? 0) >= DIARIZATION_CONTRACT_VERSION,
          speakerCounts: (session.contractVersion ?? 0) >= SPEAKER_COUNT_CONTRACT_VERSION,
        })
      : null;
    if (job) {
      // Woken by news other than one job's announcement (a new worker, a requeue, the recheck
      // timer) and got a job: there may be more, so the next waiter of the group looks too. A
      // waiter woken for one new job does not: every new job wakes a waiter of its own, and
      // passing it on would make about two claims per job in a burst.
      if (woken && woken !== 'job') deps.work.found(group);
      logger.info({ worker: worker.name, job: job.lease.job_id, attempt: job.lease.attempt }, 'job claimed');
      return job;
    }
    if (looked) emptyClaims.mark(group, generation);
    // The coordinator downloads the URL sources this worker may not fetch itself (all of them without
    // can_fetch_urls; those needing the download proxy or yt-dlp otherwise) while the worker waits.
    // Once a second per capability group while nothing happens: an idle fleet would otherwise ask once per long-poll each.
    // A long poll woken for one new job that it did not get looks at once (that job may need staging).
    if ((looked && woken === 'job') || !stagingLooks.fresh(group)) {
      stagingLooks.mark(group);
      await deps.stager.stageFor({
        id: worker.id,
        models: session.capabilities.models,
        local: session.local,
        canFetch: session.capabilities.canFetchUrls,
      });
    }
    return null;
  }

  /**
   * Complete's claim_next: the next job after a stored completion, looked for as the first look of
   * the Claim long poll it replaces (so a worker back from a job costs the database no more than
   * before: within a second of its group's empty look, with no news since, it answers nothing and
   * the worker's long poll waits for news). The completion stands whatever happens here, so a
   * claim that cannot be made (unknown session, an unavailable database) answers no job instead of
   * failing the call: the worker then calls Claim, which says why.
   */
  async function claimAfterCompletion(worker: SpeechWorker, sessionId: string): Promise<ClaimResponse> {
    const none = () => ({ has_job: false, job: null, server_time_unix_ms: Date.now() });
    try {
      const session = await registry.session(worker, sessionId);
      if (!session) return none();
      const job = await claimFor(worker, session, claimGroupKey(session), { plain: false, woken: null });
      return job ? { has_job: true, job, server_time_unix_ms: Date.now() } : none();
    } catch (err) {
      logger.warn({ err, worker: worker.name }, 'claim after completion failed; the worker claims again');
      return none();
    }
  }

  function toServiceError(err: unknown, rpc: string): Partial<grpc.StatusObject> {
    if (err instanceof StaleLeaseError) err = new RpcError(grpc.status.ABORTED, err.message, 'stale_lease');
    if (err instanceof RpcError) {
      const metadata = new grpc.Metadata();
      if (err.reason) metadata.set(WORKER_ERROR_METADATA_KEY, err.reason);
      return { code: err.code, details: err.message, metadata };
    }
    const dependency = unavailableDependency(err);
    if (dependency) {
      // The worker's client retries UNAVAILABLE with backoff; the pools reconnect by themselves.
      logger.warn({ err, rpc, dependency }, 'worker rpc refused: backing service unavailable');
      return { code: grpc.status.UNAVAILABLE, details: unavailableMessage(dependency) };
    }
    logger.error({ err, rpc }, 'worker rpc failed');
    return { code: grpc.status.INTERNAL, details: 'internal error' };
  }

  function unary<Req, Res>(name: string, fn: (call: grpc.ServerUnaryCall<Req, Res>, worker: SpeechWorker) => Promise<Res>) {
    return (call: grpc.ServerUnaryCall<Req, Res>, callback: grpc.sendUnaryData<Res>) => {
      authenticate(call.metadata)
        .then((worker) => fn(call, worker))
        .then(
          (res) => callback(null, res),
          (err: unknown) => callback(toServiceError(err, name)),
        );
    };
  }

  return {
    Hello: unary<HelloRequest__Output, HelloResponse>('Hello', async (call, worker) => {
      const req = call.request;
      if (!isCompatibleContract(req.contract_version)) {
        logger.warn({ worker: worker.name, contract: req.contract_version }, 'worker refused: incompatible contract');
        throw new RpcError(
          grpc.status.FAILED_PRECONDITION,
          `worker contract version ${req.contract_version} is not supported; this coordinator accepts ` +
            `${MIN_SUPPORTED_WORKER_CONTRACT_VERSION}..${WORKER_CONTRACT_VERSION}. Upgrade the worker agent.`,
        );
      }
      if (req.probe) {
        // sonar-worker doctor: the secret and the contract are good; a running agent of this worker keeps its session and leases.
        logger.info({ worker: worker.name, contract: req.contract_version }, 'worker probe');
        return {
          session_id: '',
          worker_name: worker.name,
          coordinator_contract_version: WORKER_CONTRACT_VERSION,
          min_supported_contract_version: MIN_SUPPORTED_WORKER_CONTRACT_VERSION,
          heartbeat_interval_ms: deps.heartbeatIntervalMs,
          server_time_unix_ms: Date.now(),
        };
      }
      const caps = req.capabilities;
      const session = await registry.hello(worker, {
        contractVersion: req.contract_version,
        agentVersion: req.agent_version,
        hostname: req.hostname,
        local: req.local,
        capabilities: {
          models: caps?.models ?? [],
          engines: caps?.engines ?? [],
          // an older contract cannot report speaker turns, whatever it advertises
          diarization: (caps?.diarization ?? false) && req.contract_version >= DIARIZATION_CONTRACT_VERSION,
          ...(caps?.diarization_engine ? { diarizationEngine: caps.diarization_engine.slice(0, 60) } : {}),
          ...(caps?.diarization_error ? { diarizationError: caps.diarization_error.slice(0, 500) } : {}),
          canFetchUrls: caps?.can_fetch_urls ?? false,
          device: caps?.device ?? 'cpu',
          modelLanguages: Object.fromEntries((caps?.model_languages ?? []).map((m) => [m.model, m.languages])),
        },
      });
      logger.info({ worker: worker.name, session: session.sessionId, models: caps?.models, local: req.local }, 'worker hello');
      if (req.contract_version >= HELD_LEASES_CONTRACT_VERSION) {
        // The process that said Hello holds only these leases: the worker's others are gone with its earlier process.
        const abandoned = await leases.helloFrom(worker.id, session.sessionId, req.held_leases ?? []);
        if (abandoned.length) logger.warn({ worker: worker.name, abandoned }, 'leases of an earlier worker session ended');
      }
      deps.work.notifyWorker(); // a new worker may make queued jobs claimable
      return {
        session_id: session.sessionId,
        worker_name: worker.name,
        coordinator_contract_version: WORKER_CONTRACT_VERSION,
        min_supported_contract_version: MIN_SUPPORTED_WORKER_CONTRACT_VERSION,
        heartbeat_interval_ms: deps.heartbeatIntervalMs,
        server_time_unix_ms: Date.now(),
      };
    }),

    Heartbeat: unary<HeartbeatRequest__Output, HeartbeatResponse>('Heartbeat', async (call, worker) => {
      const valid = await registry.heartbeat(worker, call.request.session_id);
      registry.touch(worker.id);
      // Leases are renewed even when the session is gone: a coordinator restart must not cost running jobs.
      const result = await leases.heartbeat(worker.id, call.request.leases ?? []);
      return {
        server_time_unix_ms: Date.now(),
        session_valid: valid,
        cancel_job_ids: result.cancel,
        lost_job_ids: result.lost,
        lease_expires_unix_ms: result.expiresAt,
      };
    }),

    Claim: unary<ClaimRequest__Output, ClaimResponse>('Claim', async (call, worker) => {
      const deadline = Date.now() + Math.min(Math.max(call.request.wait_ms, 0), MAX_CLAIM_WAIT_MS);
      // The call ends (cancelled by the client, or closed after the answer: grpc-js says 'cancelled'
      // then too). Only a waiting long poll is aborted: an abort builds a DOMException and an event,
      // 2 % of the coordinator's time in a claim-heavy run when it happened after every answer.
      const cancelled = new AbortController();
      let gone = false;
      let waiting = false;
      call.on('cancelled', () => {
        gone = true;
        if (waiting) cancelled.abort();
      });
      let woken: WakeReason | null = null;
      let lastGroup: string | null = null;
      try {
        for (;;) {
          const session = await sessionOf(worker, call.request.session_id);
          const group = claimGroupKey(session);
          lastGroup = group;
          const job = await claimFor(worker, session, group, { plain: call.request.wait_ms <= 0, woken });
          if (job) return { has_job: true, job, server_time_unix_ms: Date.now() };
          const remaining = deadline - Date.now();
          if (remaining <= 0 || gone) return { has_job: false, job: null, server_time_unix_ms: Date.now() };
          waiting = true;
          try {
            woken = await deps.work.wait(Math.min(remaining, deps.work.recheckMs(CLAIM_RECHECK_MS)), group, cancelled.signal);
          } finally {
            waiting = false;
          }
          if (gone) {
            // Cancelled while it waited: it answers nobody, so it takes no job (a lease would sit
            // with a worker that never hears of it until the lease expires).
            if (woken === 'job') deps.work.found(group);
            return { has_job: false, job: null, server_time_unix_ms: Date.now() };
          }
        }
      } catch (err) {
        // Woken for a new job and failed before taking it (the session ended, the database
        // answered an error): the announcement was this waiter's alone, so
        // the next waiter of the group looks instead of the job waiting for the recheck timer.
        if (woken === 'job' && lastGroup !== null) deps.work.found(lastGroup);
        throw err;
      }
    }),

    ReportProgress: (call: grpc.ServerReadableStream<ProgressUpdate__Output, ProgressAck>, callback: grpc.sendUnaryData<ProgressAck>) => {
      void (async () => {
        let session: ReturnType<typeof leases.openProgress> | null = null;
        try {
          const worker = await authenticate(call.metadata);
          session = leases.openProgress(worker.id);
          // Messages are accepted one at a time, in the order sent, so segments reach browsers in order;
          // they are written in batches, and the ack comes once all of them are stored.
          for await (const update of call as AsyncIterable<ProgressUpdate__Output>) {
            if (!hasLease(update)) throw new RpcError(grpc.status.INVALID_ARGUMENT, 'every progress message carries its lease');
            registry.touch(worker.id);
            await session.accept(update);
          }
          const stored = await session.close();
          callback(null, { segments_stored: stored });
        } catch (err) {
          await session?.abort();
          callback(toServiceError(err, 'ReportProgress'));
          call.destroy();
        }
      })();
    },

    Complete: unary<CompleteRequest__Output, CompleteResponse>('Complete', async (call, worker) => {
      const r = call.request;
      if (!r.lease) throw new RpcError(grpc.status.INVALID_ARGUMENT, 'lease is required');
      registry.touch(worker.id);
      const res = await leases.complete(worker.id, {
        lease: r.lease,
        success: r.success,
        error: r.error,
        cancelled: r.cancelled,
        segmentCount: r.segment_count,
        durationSeconds: r.duration_seconds,
        engine: r.engine,
        engineModel: r.engine_model,
        diarization: r.diarization,
      });
      logger.info(
        { worker: worker.name, job: r.lease.job_id, attempt: r.lease.attempt, status: res.status, duplicate: res.duplicate },
        'job attempt completed',
      );
      // Contract 4: the completion is stored; now the worker's next job, by Claim's rule.
      if (!r.claim_next) return { duplicate: res.duplicate, status: res.status, next: null };
      return { duplicate: res.duplicate, status: res.status, next: await claimAfterCompletion(worker, r.session_id) };
    }),

    Release: unary<ReleaseRequest__Output, ReleaseResponse>('Release', async (call, worker) => {
      if (!call.request.lease) throw new RpcError(grpc.status.INVALID_ARGUMENT, 'lease is required');
      await leases.release(worker.id, call.request.lease, call.request.reason || 'no reason given');
      return {};
    }),

    FetchMedia: (call: grpc.ServerWritableStream<MediaRequest__Output, MediaChunk>) => {
      void (async () => {
        try {
          const worker = await authenticate(call.metadata);
          if (!call.request.lease) throw new RpcError(grpc.status.INVALID_ARGUMENT, 'lease is required');
          const media = await leases.mediaFor(worker.id, call.request.lease);
          const total = await deps.media.size(media.path);
          let offset = Math.min(Number(call.request.offset) || 0, total);
          const stream = deps.media.open(media.path, offset);
          for await (const chunk of stream as AsyncIterable<Buffer>) {
            for (let i = 0; i < chunk.length; i += MEDIA_CHUNK_BYTES) {
              const data = chunk.subarray(i, i + MEDIA_CHUNK_BYTES);
              const ok = call.write({ data, offset, total_size: total, sha256: media.sha256 ?? '' });
              offset += data.length;
              if (!ok) await once(call, 'drain');
            }
          }
          call.end();
        } catch (err) {
          call.emit('error', toServiceError(err, 'FetchMedia'));
        }
      })();
    },
  };
}
