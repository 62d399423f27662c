import { WORKER_CONTRACT_VERSION, type LeaseRefMsg } from '@sonar/shared';
import { CoordinatorClient } from '../../worker/src/coordinator-client.js';
import type { RunningCoordinator } from '../../coordinator/src/service.js';

/**
 * A simulated remote worker over the real gRPC protocol: hello, claim, progress with segments,
 * complete. For tests that need jobs to reach a terminal state the way a real worker does it.
 */
export class SimWorker {
  private constructor(
    readonly client: CoordinatorClient,
    private session: string,
  ) {}

  static async start(svc: RunningCoordinator, name: string, models: string[] = ['small']): Promise<SimWorker> {
    const { secret } = await svc.workers.createWorker(name);
    const client = new CoordinatorClient(`127.0.0.1:${svc.grpcPort}`, secret);
    const hello = await client.hello({
      contract_version: WORKER_CONTRACT_VERSION,
      agent_version: 'test',
      hostname: 'test',
      capabilities: { models, engines: ['test'], diarization: true, can_fetch_urls: true, device: 'cpu' },
      local: false,
    });
    return new SimWorker(client, hello.session_id);
  }

  /**
   * Claims `jobId` (it must be the next eligible job), sends `segments` as progress, runs
   * `beforeComplete`, then completes it (success, or failure with `error`).
   */
  async run(
    jobId: number,
    opts: {
      success?: boolean;
      error?: string;
      segments?: string[];
      beforeComplete?: () => Promise<unknown>;
      /** Speaker of each segment (its index): reported as a completed diarization with one turn per segment. */
      speakers?: number[];
      /** Segments with their own times and words (instead of `segments`' 2 s each). */
      timed?: Array<{ start: number; end: number; text: string; words?: Array<{ start: number; end: number; text: string }> }>;
      /** The diarization's turns (instead of `speakers`' one per segment). */
      turns?: Array<{ start: number; end: number; speaker: number }>;
    } = {},
  ): Promise<void> {
    const res = await this.client.claim({ session_id: this.session, wait_ms: 2000 });
    const job = res.has_job ? res.job : null;
    if (!job) throw new Error(`no job to claim (expected ${jobId})`);
    if (job.lease.job_id !== jobId) throw new Error(`claimed job ${job.lease.job_id}, expected ${jobId}`);
    const segments = opts.timed ?? (opts.segments ?? []).map((text, seq) => ({ start: seq * 2, end: seq * 2 + 2, text }));
    const duration = segments.at(-1)?.end ?? 0;
    if (segments.length) {
      const stream = this.client.progress(job.lease);
      stream.send({
        stage: 'transcribing',
        stage_detail: '',
        audio_position_seconds: duration,
        segments: segments.map((s, seq) => ({ seq, ...s })),
        duration_seconds: duration,
        engine: 'test',
        engine_model: job.model,
      });
      await stream.end();
    }
    const turns = opts.turns ?? opts.speakers?.map((speaker, i) => ({ start: i * 2, end: i * 2 + 2, speaker }));
    await opts.beforeComplete?.();
    const success = opts.success ?? true;
    await this.client.complete({
      lease: job.lease,
      success,
      error: success ? '' : (opts.error ?? 'simulated failure'),
      cancelled: false,
      segment_count: segments.length,
      duration_seconds: duration,
      engine: 'test',
      engine_model: job.model,
      ...(turns
        ? {
            diarization: {
              state: 'completed',
              engine: 'test-diarizer',
              speaker_count: new Set(turns.map((t) => t.speaker)).size,
              turns,
              error: '',
            },
          }
        : {}),
    });
  }

  /** Claims the next task (a transcription or a diarization rerun), or null when none is waiting. */
  async claim(waitMs = 2000) {
    const res = await this.client.claim({ session_id: this.session, wait_ms: waitMs });
    return res.has_job ? res.job : null;
  }

  close() {
    this.client.close();
  }
}

/** Polls `probe` until it returns a truthy value or `timeoutMs` passes. */
export async function waitFor<T>(probe: () => Promise<T | null | undefined | false>, timeoutMs = 15_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Streams one segment per text (2 s each, seq from 0) on a new progress stream of `lease` and waits for its acknowledgement. */
export function streamSegments(client: CoordinatorClient, lease: LeaseRefMsg, texts: string[]) {
  const stream = client.progress(lease);
  stream.send({
    stage: 'transcribing',
    stage_detail: '',
    audio_position_seconds: texts.length * 2,
    segments: texts.map((text, seq) => ({ seq, start: seq * 2, end: seq * 2 + 2, text })),
    duration_seconds: texts.length * 2,
    engine: 'test',
    engine_model: 'small',
  });
  return stream.end();
}
