import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import {
  createWorkerServiceClient,
  type ClaimRequest,
  type ClaimResponse__Output,
  type CompleteRequest,
  type CompleteResponse__Output,
  type HeartbeatRequest,
  type HeartbeatResponse__Output,
  type HelloRequest,
  type HelloResponse__Output,
  type ReleaseRequest,
  type ReleaseResponse__Output,
  type WorkerServiceClient,
} from '@sonar/proto';
import {
  WORKER_ERROR_METADATA_KEY,
  hasLease,
  type ClaimResponseMsg,
  type CompleteResponseMsg,
  type LeaseRefMsg,
  type MediaChunkMsg,
  type ProgressAckMsg,
  type ProgressUpdateMsg,
  type SegmentMsg,
  type WorkerErrorReason,
} from '@sonar/shared';

/** One unary call of the generated client with its request bound, in the form called here (metadata, options, callback). */
type Unary<Res> = (metadata: grpc.Metadata, options: grpc.CallOptions, cb: grpc.requestCallback<Res>) => grpc.ClientUnaryCall;

/** The machine-readable reason a coordinator attached to a refused call, if any. */
export function workerErrorReason(err: unknown): WorkerErrorReason | null {
  const md = (err as grpc.ServiceError | undefined)?.metadata;
  const v = md?.get(WORKER_ERROR_METADATA_KEY)[0];
  return v === 'stale_lease' || v === 'session_unknown' ? v : null;
}

/** A claim's answer as the code uses it: a job only with its lease. */
function claimed(res: ClaimResponse__Output): ClaimResponseMsg {
  const job = res.job && hasLease(res.job) ? res.job : null;
  if (res.has_job && !job) throw new Error('the coordinator assigned a job without its lease');
  return { ...res, job };
}

/** One segment of a progress message; `words` only when the engine gave word times. */
export type ProgressSegment = Omit<SegmentMsg, 'words'> & { words?: SegmentMsg['words'] };

/** One progress message of an attempt, without its lease (the stream adds it); `diarization_state` only while diarizing. */
export type ProgressUpdateBody = Omit<ProgressUpdateMsg, 'lease' | 'diarization_state' | 'segments'> & {
  diarization_state?: string;
  segments: ProgressSegment[];
};

/** A progress stream for one job attempt; `done` settles when the coordinator answers or refuses. */
export interface ProgressStream {
  send(update: ProgressUpdateBody): boolean;
  end(): Promise<ProgressAckMsg>;
  /** Rejects as soon as the coordinator refuses the stream (for example a stale lease). */
  readonly failed: Promise<never>;
  cancel(): void;
}

/** Promise wrapper over the gRPC client; every call carries the worker secret. */
export class CoordinatorClient {
  private readonly client: WorkerServiceClient;

  constructor(
    address: string,
    private readonly secret: string,
    opts: { tls?: boolean; channelOptions?: grpc.ChannelOptions } = {},
  ) {
    const creds = opts.tls ? grpc.credentials.createSsl() : grpc.credentials.createInsecure();
    this.client = createWorkerServiceClient(address, creds, {
      'grpc.keepalive_time_ms': 30_000,
      'grpc.keepalive_timeout_ms': 10_000,
      ...opts.channelOptions,
    });
  }

  private metadata(): grpc.Metadata {
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${this.secret}`);
    return md;
  }

  private call<Res>(fn: Unary<Res>, timeoutMs: number, signal?: AbortSignal): Promise<Res> {
    return new Promise((resolve, reject) => {
      const call = fn(this.metadata(), { deadline: Date.now() + timeoutMs }, (err, res) => {
        signal?.removeEventListener('abort', cancel);
        if (err) reject(err);
        else resolve(res as Res);
      });
      const cancel = () => call.cancel();
      signal?.addEventListener('abort', cancel, { once: true });
    });
  }

  hello(req: HelloRequest, timeoutMs = 10_000) {
    return this.call<HelloResponse__Output>((md, options, cb) => this.client.Hello(req, md, options, cb), timeoutMs);
  }

  heartbeat(req: HeartbeatRequest, timeoutMs = 10_000) {
    return this.call<HeartbeatResponse__Output>((md, options, cb) => this.client.Heartbeat(req, md, options, cb), timeoutMs);
  }

  /** Long poll; `signal` cancels it (the agent does so when it stops). A job comes with its lease. */
  async claim(req: ClaimRequest, signal?: AbortSignal): Promise<ClaimResponseMsg> {
    return claimed(await this.call<ClaimResponse__Output>((md, options, cb) => this.client.Claim(req, md, options, cb), (req.wait_ms ?? 0) + 10_000, signal));
  }

  /**
   * Ends an attempt. With `claim_next` and `session_id` (contract 4) the answer's `next` is the
   * worker's next job, claimed after the completion was stored; null when not asked for or when
   * the coordinator predates contract 4 (claim with claim() then).
   */
  async complete(req: CompleteRequest, timeoutMs = 30_000): Promise<CompleteResponseMsg> {
    const res = await this.call<CompleteResponse__Output>((md, options, cb) => this.client.Complete(req, md, options, cb), timeoutMs);
    return { ...res, next: res.next ? claimed(res.next) : null };
  }

  release(req: ReleaseRequest, timeoutMs = 10_000) {
    return this.call<ReleaseResponse__Output>((md, options, cb) => this.client.Release(req, md, options, cb), timeoutMs);
  }

  progress(lease: LeaseRefMsg): ProgressStream {
    let settle!: { resolve: (v: ProgressAckMsg) => void; reject: (e: unknown) => void };
    const result = new Promise<ProgressAckMsg>((resolve, reject) => (settle = { resolve, reject }));
    let rejectFailed!: (e: unknown) => void;
    const failed = new Promise<never>((_, reject) => (rejectFailed = reject));
    failed.catch(() => undefined);
    result.catch(() => undefined);
    const stream = this.client.ReportProgress(this.metadata(), (err, res) => {
      if (err) {
        settle.reject(err);
        rejectFailed(err);
      } else settle.resolve(res as ProgressAckMsg);
    });
    stream.on('error', () => undefined); // surfaced through the callback above
    return {
      send: (update) => stream.write({ ...update, lease }),
      end: () => {
        stream.end();
        return result;
      },
      failed,
      cancel: () => stream.cancel(),
    };
  }

  /** Downloads lease-bound media to `file` and checks its SHA-256 against what the coordinator sent. */
  async fetchMedia(lease: LeaseRefMsg, file: string, signal?: AbortSignal): Promise<{ sizeBytes: number; sha256: string }> {
    const call = this.client.FetchMedia({ lease, offset: 0 }, this.metadata());
    const onAbort = () => call.cancel();
    signal?.addEventListener('abort', onAbort, { once: true });
    const out = createWriteStream(file);
    const hash = createHash('sha256');
    let expected = '';
    let total = 0;
    let received = 0;
    try {
      for await (const chunk of call as AsyncIterable<MediaChunkMsg>) {
        expected = chunk.sha256;
        total = Number(chunk.total_size);
        hash.update(chunk.data);
        received += chunk.data.length;
        if (!out.write(chunk.data)) await new Promise<void>((r) => out.once('drain', () => r()));
      }
    } finally {
      signal?.removeEventListener('abort', onAbort);
      await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
    }
    const sha256 = hash.digest('hex');
    if (received !== total) throw new Error(`media download incomplete: ${received} of ${total} bytes`);
    if (expected && expected !== sha256) throw new Error(`media checksum mismatch: expected ${expected}, got ${sha256}`);
    return { sizeBytes: received, sha256 };
  }

  close() {
    this.client.close();
  }
}
