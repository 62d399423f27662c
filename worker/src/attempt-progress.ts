import * as grpc from '@grpc/grpc-js';
import type { LeaseRefMsg, ProgressAckMsg } from '@sonar/shared';
import { workerErrorReason, type CoordinatorClient, type ProgressStream, type ProgressUpdateBody } from './coordinator-client.js';

type Update = ProgressUpdateBody;

/** gRPC codes that say "the coordinator (or the way to it) is away for now": try again. */
const TRANSIENT = new Set([grpc.status.UNAVAILABLE, grpc.status.DEADLINE_EXCEEDED, grpc.status.INTERNAL, grpc.status.CANCELLED, grpc.status.UNKNOWN]);

export function isTransient(err: unknown): boolean {
  const code = (err as grpc.ServiceError | undefined)?.code;
  return workerErrorReason(err) === null && code !== undefined && TRANSIENT.has(code);
}

/** Capped exponential backoff with jitter. */
const backoff = (n: number) => Math.min(5_000, 250 * 2 ** n) * (0.5 + Math.random() / 2);
const RESEND_CHUNK = 200;

/**
 * Calls `fn` until it succeeds, a non-transient error (a stale lease above all) is thrown, or
 * `giveUpMs` passes: a coordinator restart must not fail the job (Complete is idempotent per attempt).
 */
export async function retryTransient<T>(fn: () => Promise<T>, giveUpMs: number, signal?: AbortSignal): Promise<T> {
  const deadline = Date.now() + giveUpMs;
  for (let n = 0; ; n++) {
    try {
      return await fn();
    } catch (err) {
      if (!isTransient(err) || Date.now() > deadline || signal?.aborted) throw err;
      await new Promise((r) => setTimeout(r, backoff(n)));
    }
  }
}

/**
 * The progress of one attempt over as many streams as it takes. The coordinator acknowledges a
 * stream only once everything sent on it is stored, so until then this keeps every segment of the
 * attempt; when a stream breaks (coordinator restart, network), the next message opens a new stream
 * that first resends all of them (the coordinator stores each seq once). `lost` rejects as soon as
 * the coordinator refuses the lease.
 */
export class AttemptProgress {
  private stream!: ProgressStream;
  private broken = false;
  private brokenAt = 0;
  private readonly segments: Update['segments'] = [];
  private last: Update | null = null;
  private rejectLost!: (err: unknown) => void;
  readonly lost: Promise<never>;

  constructor(
    private readonly client: CoordinatorClient,
    private readonly lease: LeaseRefMsg,
  ) {
    this.lost = new Promise<never>((_, reject) => (this.rejectLost = reject));
    this.lost.catch(() => undefined);
    this.open(false);
  }

  private open(resend: boolean) {
    const stream = this.client.progress(this.lease);
    this.stream = stream;
    this.broken = false;
    stream.failed.catch((err: unknown) => {
      if (stream !== this.stream) return;
      if (workerErrorReason(err) === 'stale_lease') this.rejectLost(err);
      else {
        this.broken = true;
        this.brokenAt = Date.now();
      }
    });
    if (resend && this.last) {
      for (let i = 0; i < this.segments.length; i += RESEND_CHUNK) stream.send({ ...this.last, segments: this.segments.slice(i, i + RESEND_CHUNK) });
      if (this.segments.length === 0) stream.send({ ...this.last, segments: [] });
    }
  }

  send(update: Update) {
    this.segments.push(...update.segments);
    this.last = { ...update, segments: [] };
    if (this.broken) {
      // Not more often than once a second while the coordinator is away.
      if (Date.now() - this.brokenAt >= 1_000) this.open(true);
      return;
    }
    this.stream.send(update);
  }

  /** Ends the attempt's progress once everything is stored (reopening and resending as needed). */
  async end(giveUpMs: number): Promise<ProgressAckMsg> {
    return retryTransient(async () => {
      if (this.broken) this.open(true);
      const stream = this.stream;
      try {
        return await stream.end();
      } catch (err) {
        if (stream === this.stream) {
          this.broken = true;
          this.brokenAt = Date.now();
        }
        throw err;
      }
    }, giveUpMs);
  }

  cancel() {
    this.stream.cancel();
  }
}
