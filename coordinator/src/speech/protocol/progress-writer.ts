import type { JobStatus, LeaseRefMsg, ProgressUpdateMsg } from '@sonar/shared';
import type { JobEventSink } from '../jobs/job-events.js';
import type { JobRepository, ProgressBatch } from '../jobs/job-repository.js';
import { isProcessing } from '../jobs/job-transitions.js';
import { fitTimeline } from '../jobs/timeline.js';

/** A stream's accepted but unwritten progress is written after this long, or at this many segments. */
export const PROGRESS_FLUSH_MS = 250;
const PROGRESS_FLUSH_SEGMENTS = 200;

const leaseKey = (ref: LeaseRefMsg) => `${ref.job_id}:${ref.attempt}`;

/**
 * One worker's progress stream for one attempt. The first message is checked against the lease
 * fence in PostgreSQL; from then on each segment is fanned out to browsers as soon as it arrives
 * and written in batches (one statement per batch, at most every PROGRESS_FLUSH_MS), so the
 * database sees a few writes per second per job instead of one transaction per message. A batch
 * write re-checks the fence; a lease lost in between ends the stream with StaleLeaseError.
 *
 * Nothing accepted is lost: the stream's final acknowledgement (and Complete) come only after every
 * batch is written, and a worker whose stream broke before that resends the attempt's segments on a
 * new stream, where (job, pass, seq) deduplicates them.
 */
export class ProgressSession {
  private ref: LeaseRefMsg | null = null;
  private pending: ProgressBatch | null = null;
  private writing: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | null = null;
  private failure: Error | null = null;
  private stored = 0;
  private pass = 1;

  constructor(
    private readonly writer: ProgressWriter,
    private readonly workerId: number,
  ) {}

  /** Applies one message; rejects with StaleLeaseError (or a database error) once a write failed. */
  async accept(update: ProgressUpdateMsg): Promise<void> {
    if (this.failure) throw this.failure;
    const ref = update.lease;
    if (!this.ref) {
      this.pass = (await this.writer.repo.liveLease(this.workerId, ref)).pass;
      this.ref = ref;
      this.writer.register(ref, this);
    } else if (leaseKey(ref) !== leaseKey(this.ref) || ref.lease_token !== this.ref.lease_token) {
      throw new Error('a progress stream carries one lease');
    }
    const segments = (update.segments ?? []).filter((s) => Number.isFinite(s.start) && Number.isFinite(s.end) && s.end >= s.start);
    // Browsers see each segment as it will be stored: fitted after what this attempt showed before (timeline.ts).
    const fresh = [...segments].sort((a, b) => a.seq - b.seq).filter((s) => this.writer.firstSighting(ref, s.seq));
    for (const s of this.writer.fitShown(ref, fresh)) {
      this.writer.sink.segment(ref.job_id, this.pass, { seq: s.seq, start: s.start, end: s.end, text: s.text, speaker: null });
    }
    const stage: JobStatus = isProcessing(update.stage as JobStatus) ? (update.stage as JobStatus) : 'transcribing';
    const p = (this.pending ??= {
      ref,
      workerId: this.workerId,
      stage,
      stageDetail: '',
      position: 0,
      durationSeconds: 0,
      engine: '',
      engineModel: '',
      segments: [],
      diarizing: false,
    });
    p.stage = stage;
    p.stageDetail = update.stage_detail ?? '';
    p.position = Math.max(p.position, Number.isFinite(update.audio_position_seconds) ? update.audio_position_seconds : 0);
    if (Number.isFinite(update.duration_seconds) && update.duration_seconds > 0) p.durationSeconds = update.duration_seconds;
    if (update.engine) p.engine = update.engine;
    if (update.engine_model) p.engineModel = update.engine_model;
    if (update.diarization_state === 'running') p.diarizing = true;
    p.segments.push(...segments);
    if (p.segments.length >= PROGRESS_FLUSH_SEGMENTS) this.flushSoon(0);
    else this.flushSoon(PROGRESS_FLUSH_MS);
  }

  private flushSoon(ms: number) {
    if (this.timer && ms > 0) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.flush().catch(() => undefined);
    }, ms);
  }

  /** Writes what is pending (after any write in flight); rejects with the first write failure. */
  flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    const batch = this.pending;
    this.pending = null;
    if (batch) {
      this.writing = this.writing.then(async () => {
        if (this.failure) return;
        try {
          this.stored += (await this.writer.repo.writeProgress(batch)).length;
        } catch (err) {
          this.failure = err instanceof Error ? err : new Error(String(err), { cause: err });
        }
      });
    }
    return this.writing.then(() => {
      if (this.failure) throw this.failure;
    });
  }

  /** The stream ended: everything accepted is written; returns the number of new segments stored. */
  async close(): Promise<number> {
    try {
      await this.flush();
      return this.stored;
    } finally {
      this.detach();
    }
  }

  /** The stream broke: write what was accepted (it was fanned out already), then forget the stream. */
  async abort(): Promise<void> {
    await this.flush().catch(() => undefined);
    this.detach();
  }

  private detach() {
    if (this.ref) this.writer.unregister(this.ref, this);
  }
}

/** The progress sessions of this coordinator, so Complete can write an attempt's pending progress first. */
export class ProgressWriter {
  private readonly sessions = new Map<string, Set<ProgressSession>>();
  /** Seqs fanned out per attempt on this coordinator: a resent segment is not shown twice. */
  private readonly fannedOut = new Map<string, Set<number>>();
  /** The end of the last segment fanned out per attempt: where the next one may start. */
  private readonly shownEnd = new Map<string, number>();

  constructor(
    readonly repo: JobRepository,
    readonly sink: JobEventSink,
  ) {}

  open(workerId: number): ProgressSession {
    return new ProgressSession(this, workerId);
  }

  register(ref: LeaseRefMsg, session: ProgressSession) {
    const key = leaseKey(ref);
    let set = this.sessions.get(key);
    if (!set) this.sessions.set(key, (set = new Set()));
    set.add(session);
  }

  unregister(ref: LeaseRefMsg, session: ProgressSession) {
    const key = leaseKey(ref);
    const set = this.sessions.get(key);
    set?.delete(session);
    if (set && set.size === 0) this.sessions.delete(key);
  }

  firstSighting(ref: LeaseRefMsg, seq: number): boolean {
    const key = leaseKey(ref);
    let seen = this.fannedOut.get(key);
    if (!seen) {
      // Attempts that ended on another coordinator are never forgotten here: keep the map bounded.
      if (this.fannedOut.size >= 10_000) {
        const oldest = this.fannedOut.keys().next().value!;
        this.fannedOut.delete(oldest);
        this.shownEnd.delete(oldest);
      }
      this.fannedOut.set(key, (seen = new Set()));
    }
    if (seen.has(seq)) return false;
    seen.add(seq);
    return true;
  }

  /** New segments (in seq order) fitted after the ones this attempt showed, as PROGRESS stores them. */
  fitShown<S extends { start: number; end: number }>(ref: LeaseRefMsg, segments: readonly S[]): S[] {
    if (!segments.length) return [];
    const key = leaseKey(ref);
    const fitted = fitTimeline(segments, { floor: this.shownEnd.get(key) ?? 0 });
    this.shownEnd.set(key, fitted.at(-1)!.end);
    return fitted;
  }

  /** Writes the pending progress of an attempt's open streams on this coordinator (before its completion). */
  async flushAttempt(ref: LeaseRefMsg): Promise<void> {
    const set = this.sessions.get(leaseKey(ref));
    if (set) await Promise.all([...set].map((s) => s.flush().catch(() => undefined)));
  }

  /** The attempt ended: forget what was fanned out for it. */
  forget(ref: LeaseRefMsg) {
    this.fannedOut.delete(leaseKey(ref));
  }
}
