import type { JobStatus, LivenessState } from '@sonar/shared';
import { isProcessing } from './job-transitions.js';

export interface LivenessInput {
  status: JobStatus;
  lease: { createdAt: Date; expiresAt: Date; lastHeartbeatAt: Date; lastProgressAt: Date | null; workerRevoked: boolean } | null;
  now: Date;
  unresponsiveAfterSeconds: number;
  /** For a queued job: why no connected worker can take it (JobAvailability.explain); null when one can. */
  waitingReason?: string | null;
}

export interface Liveness {
  state: LivenessState;
  secondsSinceHeartbeat: number | null;
  /** Why the state is `suspect`; null for the other states. */
  reason: string | null;
}

/** Heartbeats arrive but nothing has progressed for this long: the engine may be stuck on a hard part. */
export const QUIET_AFTER_SECONDS = 120;

/**
 * Liveness of a job: `inactive` when nothing runs it; `active` with fresh
 * heartbeats and progress; `quiet` with heartbeats but no progress lately; `unresponsive` after the
 * heartbeat silence limit (90 s); `stale` once the lease has expired too (automatic recovery will
 * requeue it); `suspect` when the bookkeeping disagrees (processing without a lease, or a lease held
 * by a revoked worker) or when a queued job waits for a worker that is not there (no connected
 * worker serves its model, or its pinned worker is not connected). `reason` says which.
 */
export function computeLiveness(input: LivenessInput): Liveness {
  const { status, lease, now } = input;
  const state = (s: LivenessState, secondsSinceHeartbeat: number | null = null, reason: string | null = null): Liveness => ({
    state: s,
    secondsSinceHeartbeat,
    reason,
  });
  if (status === 'queued' && input.waitingReason) return state('suspect', null, input.waitingReason);
  if (!isProcessing(status)) return state('inactive');
  if (!lease) return state('suspect', null, 'The job is processing without a live lease');
  if (lease.workerRevoked) return state('suspect', null, 'The lease is held by a revoked worker');
  const silence = (now.getTime() - lease.lastHeartbeatAt.getTime()) / 1000;
  if (lease.expiresAt.getTime() <= now.getTime()) return state('stale', silence);
  if (silence >= input.unresponsiveAfterSeconds) return state('unresponsive', silence);
  // Progress is measured from the lease start until the first progress message arrives.
  const progressAt = lease.lastProgressAt ?? lease.createdAt;
  if ((now.getTime() - progressAt.getTime()) / 1000 >= QUIET_AFTER_SECONDS) return state('quiet', silence);
  return state('active', silence);
}

/** "1 h 02 min 05 s" style durations for people. */
export function humanDuration(seconds: number | null): string | null {
  if (seconds === null || !Number.isFinite(seconds)) return null;
  const total = Math.round(seconds);
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  if (h > 0) return `${h} h ${String(m).padStart(2, '0')} min ${String(s).padStart(2, '0')} s`;
  if (m > 0) return `${m} min ${String(s).padStart(2, '0')} s`;
  return `${s} s`;
}
