import { randomBytes } from 'node:crypto';
import type { DiarizationResultMsg, JobAssignmentMsg, JobStatus, LeaseRefMsg } from '@sonar/shared';
import type { Config } from '../../config.js';
import type { TranscriptFiles } from '../jobs/transcript-file.js';
import type { JobEventSink, WorkAvailable } from '../jobs/job-events.js';
import {
  DIARIZE_TOKEN_PREFIX,
  StaleLeaseError,
  isDiarizeToken,
  hashLeaseToken,
  type ClaimRequest,
  type ClaimedJob,
  type ClaimingWorker,
  type FinishRequest,
  type FinishResult,
  type DiarizationOutcome,
  type JobRepository,
  type LabelledPass,
  type LeaseEnd,
} from '../jobs/job-repository.js';
import type { StoredTurn } from '../jobs/speakers.js';
import { Batcher } from './batcher.js';
import { ProgressWriter, type ProgressSession } from './progress-writer.js';

export { StaleLeaseError, type ClaimingWorker };

/**
 * Leases: the fencing between workers and jobs, as the worker protocol sees it. A claim picks the
 * next eligible job under a row lock (skip locked), so two workers never get the same job; every
 * later call must present the job id, attempt and token of a live lease (checked against the
 * database clock), so a worker that lost its lease can no longer touch the job. The state moves
 * themselves are JobRepository's.
 */
export class LeaseService {
  private readonly progressWriter: ProgressWriter;
  /** Concurrent claims and completions are written together (group commit, see Batcher). */
  private readonly claims: Batcher<ClaimRequest, ClaimedJob | null>;
  private readonly finishes: Batcher<FinishRequest, FinishResult>;

  constructor(
    private readonly repo: JobRepository,
    private readonly config: Config,
    private readonly work: WorkAvailable,
    private readonly sink: JobEventSink,
    /** The TXT copy of each completed transcript (transcript-file.ts); none in tests that need none. */
    private readonly files?: Pick<TranscriptFiles, 'write'>,
  ) {
    this.progressWriter = new ProgressWriter(repo, sink);
    this.claims = new Batcher((reqs) =>
      repo.claimMany(reqs, {
        ttlSeconds: config.SPEECH_LEASE_TTL_SECONDS,
        presenceTtlSeconds: config.WORKER_PRESENCE_TTL_MS / 1000,
        localModels: config.SPEECH_LOCAL_MODELS,
      }),
    );
    this.finishes = new Batcher((reqs) => repo.finishMany(reqs));
  }

  private ttlSeconds() {
    return this.config.SPEECH_LEASE_TTL_SECONDS;
  }

  /** Leases the next job this worker may run, or returns null. Admin-owned jobs first, then oldest. */
  async claim(worker: ClaimingWorker): Promise<JobAssignmentMsg | null> {
    const tokens = { transcribe: randomBytes(24).toString('base64url'), diarize: DIARIZE_TOKEN_PREFIX + randomBytes(24).toString('base64url') };
    const job = await this.claims.submit({ worker, tokenHash: hashLeaseToken(tokens.transcribe), diarizeTokenHash: hashLeaseToken(tokens.diarize) });
    if (!job) return null;
    const token = tokens[job.task];
    const mediaOnCoordinator = job.mediaPath !== null;
    return {
      lease: { job_id: job.jobId, attempt: job.attempt, lease_token: token },
      lease_expires_unix_ms: job.expiresAt,
      pass: job.pass,
      model: job.model,
      language: job.language ?? '',
      source_type: job.sourceType,
      source_url: mediaOnCoordinator ? '' : (job.sourceUrl ?? ''),
      media_from_coordinator: mediaOnCoordinator,
      media_sha256: job.mediaSha256 ?? '',
      media_size_bytes: job.sizeBytes,
      source_filename: job.filename ?? '',
      duration_seconds: job.durationSeconds,
      diarization: job.diarization || job.task === 'diarize',
      forced: job.forced,
      task: job.task,
      regenerate_segments: job.regenerateSegments,
      // Contract 5 (only workers of 5+ claim such a job): 0 means not stated.
      num_speakers: job.speakers?.num_speakers ?? 0,
      min_speakers: job.speakers?.min_speakers ?? 0,
      max_speakers: job.speakers?.max_speakers ?? 0,
    };
  }

  /** Renews the presented leases; reports which jobs to cancel and which leases are gone. */
  heartbeat(workerId: number, refs: LeaseRefMsg[]): Promise<{ cancel: number[]; lost: number[]; expiresAt: number }> {
    return this.repo.renew(workerId, refs, this.ttlSeconds());
  }

  /** A progress stream of one attempt (see ProgressSession). */
  openProgress(workerId: number): ProgressSession {
    return this.progressWriter.open(workerId);
  }

  /**
   * Ends an attempt. Pending progress of the attempt on this coordinator is written first, so the
   * transcript is built from every accepted segment. Repeating the same completion is a duplicate.
   */
  async complete(
    workerId: number,
    req: Omit<FinishRequest, 'workerId' | 'ref' | 'shareToken' | 'diarization'> & { lease: LeaseRefMsg; diarization: DiarizationResultMsg | null },
  ): Promise<{ duplicate: boolean; status: JobStatus }> {
    await this.progressWriter.flushAttempt(req.lease);
    const { lease, diarization: reported, ...outcome } = req;
    const diarization = diarizationOutcome(reported);
    if (isDiarizeToken(lease.lease_token)) return this.completeDiarization(workerId, req, diarization);
    // Segments are labelled before the attempt ends, so whoever is notified sees the speakers.
    const labels = req.success && diarization?.state === 'completed' ? await this.repo.labelSegments(workerId, lease, diarization.turns) : null;
    const result = await this.finishes.submit({
      workerId,
      ref: lease,
      ...outcome,
      diarization: ownedSpeakers(diarization, labels),
      shareToken: randomBytes(24).toString('base64url'),
    });
    this.progressWriter.forget(req.lease);
    if (result.status === 'completed' && !result.duplicate) await this.writeTranscriptFile(lease.job_id);
    if (result.diarization && result.status === 'completed' && result.diarization.state !== 'skipped') {
      this.sink.diarization(lease.job_id, {
        state: result.diarization.state,
        speaker_count: result.diarization.speakerCount,
        ...(labels && result.diarization.state === 'completed' ? relabelled(labels) : {}),
      });
    }
    return { duplicate: result.duplicate, status: result.status };
  }

  /** Ends a diarization rerun: the job stays completed; its diarization takes the worker's result. */
  private async completeDiarization(
    workerId: number,
    req: { lease: LeaseRefMsg; success: boolean; error: string },
    diarization: DiarizationOutcome | null,
  ): Promise<{ duplicate: boolean; status: JobStatus }> {
    const labels = req.success && diarization?.state === 'completed' ? await this.repo.labelSegments(workerId, req.lease, diarization.turns) : null;
    const result = await this.repo.finishDiarization(workerId, req.lease, {
      success: req.success,
      error: req.error,
      outcome: ownedSpeakers(diarization, labels),
    });
    this.progressWriter.forget(req.lease);
    // The new labels split the segments anew: the count the header shows follows them.
    if (labels && !result.duplicate) await this.repo.recountSegments(req.lease.job_id);
    if (!result.duplicate && result.state === 'completed') await this.writeTranscriptFile(req.lease.job_id);
    if (!result.duplicate) {
      this.sink.diarization(req.lease.job_id, {
        state: result.state,
        speaker_count: result.speakerCount,
        ...(labels && result.state === 'completed' ? relabelled(labels) : {}),
      });
    }
    return { duplicate: result.duplicate, status: 'completed' };
  }

  /**
   * The TXT copy after a completion: its own failures are recorded on the job (degraded storage);
   * nothing about it, not even PostgreSQL failing to record that, fails the completion.
   */
  private async writeTranscriptFile(jobId: number): Promise<void> {
    await this.files?.write(jobId).catch(() => undefined);
  }

  /** A worker hands its job back unfinished (shutdown). The hand-back does not use up a retry. */
  async release(workerId: number, ref: LeaseRefMsg, reason: string): Promise<void> {
    await this.progressWriter.flushAttempt(ref);
    await this.repo.handBack(workerId, ref, reason);
    this.progressWriter.forget(ref);
    this.work.notify();
  }

  /** The media file of a live lease, for FetchMedia. */
  async mediaFor(workerId: number, ref: LeaseRefMsg): Promise<{ path: string; sha256: string | null }> {
    const lease = await this.repo.liveLease(workerId, ref);
    if (!lease.mediaPath) throw new StaleLeaseError(`job ${ref.job_id} has no media on the coordinator`);
    return { path: lease.mediaPath, sha256: lease.mediaSha256 };
  }

  /**
   * A worker said Hello with a new session: leases of its earlier sessions that it does not hold any
   * more end at once (requeued while attempts remain), instead of waiting for their expiry.
   */
  async helloFrom(workerId: number, sessionId: string, held: LeaseRefMsg[]) {
    const touched = await this.repo.abandonUnheld(workerId, sessionId, held);
    if (touched.some((t) => t.status === 'queued' || t.diarizationRequeued)) this.work.notify();
    return touched;
  }

  /** Automatic stale recovery: expired leases end; their jobs are queued again while attempts remain, else failed. */
  async sweepExpired(): Promise<LeaseEnd[]> {
    const touched = await this.repo.expireLeases();
    if (touched.some((t) => t.status === 'queued' || t.diarizationRequeued)) this.work.notify();
    return touched;
  }
}

/** Speaker indices a worker may report (a diarizer finding more than this many speakers is wrong). */
const MAX_SPEAKERS = 64;

/**
 * CompleteRequest.diarization as the repository stores it: an unknown state is "unavailable";
 * turns that are not finite, reversed or outside the speaker range are dropped.
 */
function diarizationOutcome(d: DiarizationResultMsg | null): DiarizationOutcome | null {
  if (!d?.state) return null;
  const state = d.state === 'completed' || d.state === 'failed' ? d.state : 'unavailable';
  const turns: StoredTurn[] = (d.turns ?? [])
    .filter((t) => Number.isFinite(t.start) && Number.isFinite(t.end) && t.end > t.start && t.start >= 0 && t.speaker < MAX_SPEAKERS)
    .map((t) => [Math.round(t.start * 1000) / 1000, Math.round(t.end * 1000) / 1000, t.speaker]);
  const speakers = new Set(turns.map((t) => t[2])).size;
  return {
    state,
    engine: (d.engine ?? '').slice(0, 60),
    speakerCount: state === 'completed' ? speakers : 0,
    turns: state === 'completed' ? turns : [],
    error: state === 'completed' ? '' : (d.error ?? '').slice(0, 2000),
  };
}

/**
 * The live `diarization` event's labels: each segment's speaker, and the whole labelled pass
 * (segments split at speaker changes are renumbered, so browsers replace what they show).
 */
const relabelled = (pass: LabelledPass) => ({
  speakers: pass.segments.flatMap((l) => (l.speaker ? [{ seq: l.seq, speaker: l.speaker }] : [])),
  segments: pass.segments,
});

/** A completed diarization counts the speakers who own speech in the labelled pass, not every speaker of its turns. */
const ownedSpeakers = (d: DiarizationOutcome | null, pass: LabelledPass | null): DiarizationOutcome | null =>
  d && pass && d.state === 'completed' ? { ...d, speakerCount: pass.speakerCount } : d;
