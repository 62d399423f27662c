import { JOB_STATUS_LABELS, QUEUE_CHANNEL_LABELS } from '@sonar/shared';
import type { AnalysisRecord, AutoTitleRecord, SpeechJob, SpeechJobEvent, SpeechLease, SpeechSegment, TranslationRow } from './entities.js';
import { shareUrl } from '../shares/share-links.js';
import { computeLiveness, humanDuration } from './liveness.js';
import { presentDiarization, type DiarizationRecord, type SpeakerStat } from './speakers.js';
import type { JobAvailability } from './model-catalog.js';

export interface JobDetail {
  lease: (SpeechLease & { workerName: string; workerRevoked: boolean }) | null;
  events: SpeechJobEvent[];
  /** The current pass's translations. */
  translations: TranslationRow[];
  segmentCount: number;
  /** Labelled segments and seconds per speaker of the current pass. */
  speakerStats: SpeakerStat[];
  /** The current pass as speaker turns; null when no segment has a speaker. */
  speakerAwareTranscript: string | null;
}

/** The current pass's diarization as stored on the job. */
export function diarizationRecord(job: SpeechJob): DiarizationRecord {
  return {
    requested: job.diarizationRequested,
    requested_speakers: job.diarizationSpeakers,
    state: job.diarizationState,
    engine: job.diarizationEngine,
    speaker_count: job.diarizationSpeakerCount,
    error: job.diarizationError,
    updated_at: iso(job.diarizationUpdatedAt),
    rerun_requested_at: iso(job.diarizationRerunRequestedAt),
    turns: job.diarizationTurns,
  };
}

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

/** The TXT copy on disk (transcript-file.ts): degraded after a failed write, written after a good one, none before completion. */
function transcriptFileState(job: SpeechJob): 'degraded' | 'written' | 'none' {
  if (job.transcriptFileError) return 'degraded';
  return job.transcriptFileAt ? 'written' : 'none';
}

/** Timestamps inside jsonb records are PostgreSQL's text form; the API shows ISO 8601 UTC. */
const isoText = (v: Date | string | null | undefined) => (v ? new Date(v).toISOString() : null);

/** `analysis` of the job detail (README "AI analysis, translations and titles"). */
export function presentAnalysis(a: AnalysisRecord | null) {
  if (!a) return null;
  return {
    state: a.state,
    language: a.language,
    generation: Number(a.generation),
    provider: a.provider,
    model: a.model,
    result: a.state === 'completed' ? a.result : null,
    error: a.error,
    requested_by: a.requested_by ?? null,
    updated_at: isoText(a.updated_at),
  };
}

/** One entry of `translations[]`. */
export function presentTranslation(t: TranslationRow) {
  return {
    language: t.language,
    state: t.state,
    status: t.state,
    text: t.state === 'completed' ? t.text : null,
    segments: t.state === 'completed' ? (t.segments ?? []) : [],
    analysis: t.state === 'completed' ? t.analysis : null,
    provider: t.provider,
    model: t.model,
    error: t.error,
    updated_at: isoText(t.updated_at),
  };
}

/** `auto_title` (additive): the automatic title of an uploaded file. */
export function presentAutoTitle(t: AutoTitleRecord | null) {
  if (!t) return null;
  return { state: t.state, title: t.title, applied: Boolean(t.applied), error: t.error, updated_at: isoText(t.updated_at) };
}

/**
 * What a job list entry is presented from: the job's columns that the list shows (read as plain
 * rows, `JobService.list`), not the whole entity; a loaded `SpeechJob` is one too. `hasTranscript`
 * (whether the current transcript has any text) stands in for the transcript itself.
 */
export type ListedJob = Pick<
  SpeechJob,
  | 'id'
  | 'status'
  | 'queueChannel'
  | 'sourceType'
  | 'sourceLabel'
  | 'sourceFilename'
  | 'sourceUrl'
  | 'sourceNote'
  | 'sourceMime'
  | 'sourceSizeBytes'
  | 'sourceDurationSeconds'
  | 'audioPositionSeconds'
  | 'model'
  | 'language'
  | 'analysisLanguage'
  | 'translationTargetLanguages'
  | 'diarizationRequested'
  | 'stageLabel'
  | 'stageDetail'
  | 'executionTarget'
  | 'engine'
  | 'engineModel'
  | 'attempt'
  | 'maxAttempts'
  | 'failureError'
  | 'cancelRequestedAt'
  | 'createdAt'
  | 'updatedAt'
  | 'startedAt'
  | 'finishedAt'
  | 'shareToken'
  | 'shareCreatedAt'
  | 'sharePlayback'
  | 'shareDisabledAt'
  | 'callbackUrl'
  | 'callbackStatus'
  | 'callbackHttpStatus'
  | 'callbackLastAttemptAt'
  | 'callbackDeliveredAt'
  | 'callbackError'
  | 'callbackAttempts'
> & {
  owner: { id: number; username: string };
  targetWorker: { id: number; name: string } | null;
  hasTranscript: boolean;
};

/** Whether the job's current transcript holds any text (a loaded entity has the text; a listed job says so). */
const hasTranscript = (job: SpeechJob | ListedJob) => ('hasTranscript' in job ? job.hasTranscript : Boolean(job.transcriptText?.trim()));

export interface PresentOptions {
  /** PUBLIC_BASE_URL: share links are absolute. */
  publicBaseUrl: string;
  now?: Date;
  /**
   * Which models connected workers take now (ModelCatalog.snapshot(), read once per response): a
   * queued job nobody connected can take says why in `stage_detail` (and liveness `suspect`).
   */
  availability?: JobAvailability | undefined;
}

/** Shown for a completed job whose engine found no speech (silence or an empty recording). */
export const NO_SPEECH_DETAIL = 'No speech detected';

/**
 * `stage_detail` as people should read it, computed at read time (the stored value is the job
 * state's): why a queued job waits with nobody to take it, or that a completed job held no speech.
 */
function stageDetail(job: SpeechJob | ListedJob, waitingReason: string | null): string | null {
  if (waitingReason) return waitingReason;
  if (job.status === 'completed' && !hasTranscript(job)) return NO_SPEECH_DETAIL;
  return job.stageDetail;
}

/** One transcript segment as the segments API, the live snapshot and the share page see it. */
export function presentSegment(s: Pick<SpeechSegment, 'seq' | 'startSeconds' | 'endSeconds' | 'text' | 'speaker'>) {
  return { seq: s.seq, start: s.startSeconds, end: s.endSeconds, text: s.text, speaker: s.speaker };
}

/** `share`: the public transcript page while a share exists and is not disabled. */
export function presentShare(job: Pick<SpeechJob, 'shareToken' | 'shareDisabledAt' | 'shareCreatedAt' | 'sharePlayback' | 'createdAt'>, publicBaseUrl: string) {
  if (!job.shareToken || job.shareDisabledAt) return null;
  return { url: shareUrl(publicBaseUrl, job.shareToken), created_at: (job.shareCreatedAt ?? job.createdAt).toISOString(), playback: job.sharePlayback };
}

/** `callback`: delivery of the terminal callback; null for jobs submitted without a callback_url. */
export function presentCallback(
  job: Pick<
    SpeechJob,
    'callbackUrl' | 'callbackStatus' | 'callbackHttpStatus' | 'callbackLastAttemptAt' | 'callbackDeliveredAt' | 'callbackError' | 'callbackAttempts'
  >,
) {
  if (!job.callbackUrl) return null;
  return {
    url: job.callbackUrl,
    status: job.callbackStatus ?? 'pending',
    http_status: job.callbackHttpStatus,
    last_attempt_at: iso(job.callbackLastAttemptAt),
    delivered_at: iso(job.callbackDeliveredAt),
    error: job.callbackError,
    attempts: job.callbackAttempts,
  };
}

/** `message` of a 201 submission: says so when no connected worker can take the job yet. */
export function queuedMessage(job: SpeechJob, availability: JobAvailability): string {
  const reason = availability.explain(job);
  return reason ? `Job queued. ${reason}; it waits until one connects.` : 'Job queued.';
}

/** The base job JSON (list entries); field names are the public API's (stable; see docs/api.md). */
export function presentJob(job: SpeechJob | ListedJob, opts: PresentOptions) {
  const now = opts.now ?? new Date();
  const duration = job.sourceDurationSeconds;
  const position = job.audioPositionSeconds;
  const waitingReason = opts.availability?.explain(job) ?? null;
  const elapsed = job.startedAt ? ((job.finishedAt ?? now).getTime() - job.startedAt.getTime()) / 1000 : null;
  return {
    id: job.id,
    status: job.status,
    status_label: JOB_STATUS_LABELS[job.status],
    queue_channel: job.queueChannel,
    queue_channel_label: QUEUE_CHANNEL_LABELS[job.queueChannel],
    source_type: job.sourceType,
    source_label: job.sourceLabel ?? job.sourceFilename ?? job.sourceUrl ?? `Job ${job.id}`,
    source_note: job.sourceNote,
    source_url: job.sourceUrl,
    source_filename: job.sourceFilename,
    source_mime: job.sourceMime,
    source_size_bytes: job.sourceSizeBytes === null ? null : Number(job.sourceSizeBytes),
    source_duration_seconds: duration,
    source_duration_human: humanDuration(duration),
    model: job.model,
    language: job.language,
    analysis_language: job.analysisLanguage,
    translation_target_languages: job.translationTargetLanguages,
    stage_label: job.stageLabel,
    stage_detail: stageDetail(job, waitingReason),
    progress: {
      audio_position_seconds: position,
      // A completed pass has heard the whole recording, whatever its last segment's end was.
      percent: duration && duration > 0 ? (job.status === 'completed' ? 100 : Math.min(100, Math.round((position / duration) * 1000) / 10)) : null,
      // Audio seconds transcribed per wall-clock second: >1 is faster than real time.
      throughput: elapsed && elapsed > 0 && position > 0 ? Math.round((position / elapsed) * 100) / 100 : null,
    },
    execution_target: { mode: job.executionTarget, worker: job.targetWorker?.name ?? null },
    engine: job.engine,
    engine_model: job.engineModel,
    attempt: job.attempt,
    max_attempts: job.maxAttempts,
    failure_error: job.failureError,
    cancel_requested: job.cancelRequestedAt !== null,
    owner: { id: job.owner.id, username: job.owner.username },
    // Both columns are NOT NULL.
    created_at: job.createdAt.toISOString(),
    updated_at: job.updatedAt.toISOString(),
    started_at: iso(job.startedAt),
    finished_at: iso(job.finishedAt),
    share: presentShare(job, opts.publicBaseUrl),
    callback: presentCallback(job),
  };
}

/** GET /api/speech/jobs/{jobId}: the base job plus runtime log, liveness and result sections. */
export function presentJobDetail(job: SpeechJob, detail: JobDetail, opts: PresentOptions & { unresponsiveAfterSeconds: number }) {
  const now = opts.now ?? new Date();
  const lease = detail.lease && !detail.lease.endedAt ? detail.lease : null;
  const liveness = computeLiveness({
    status: job.status,
    waitingReason: opts.availability?.explain(job) ?? null,
    lease: lease && {
      createdAt: lease.createdAt,
      expiresAt: lease.expiresAt,
      lastHeartbeatAt: lease.lastHeartbeatAt,
      // Progress writes touch the job row only (see JobRepository.writeProgress): its updated_at is the last progress.
      lastProgressAt: job.updatedAt > lease.createdAt ? job.updatedAt : null,
      workerRevoked: lease.workerRevoked,
    },
    now,
    unresponsiveAfterSeconds: opts.unresponsiveAfterSeconds,
  });
  return {
    ...presentJob(job, { publicBaseUrl: opts.publicBaseUrl, now, availability: opts.availability }),
    transcript_text: job.transcriptText,
    transcript_file: {
      state: transcriptFileState(job),
      written_at: iso(job.transcriptFileAt),
      error: job.transcriptFileError,
    },
    segment_count: detail.segmentCount,
    runtime_log: detail.events.map((e) => ({ at: e.at.toISOString(), level: e.level, event: e.event, message: e.message })),
    liveness: {
      state: liveness.state,
      reason: liveness.reason,
      worker: lease?.workerName ?? null,
      attempt: lease?.attempt ?? null,
      last_heartbeat_at: iso(lease?.lastHeartbeatAt),
      seconds_since_heartbeat: liveness.secondsSinceHeartbeat === null ? null : Math.round(liveness.secondsSinceHeartbeat),
      lease_expires_at: iso(lease?.expiresAt),
    },
    analysis: presentAnalysis(job.analysis),
    translations: detail.translations.map(presentTranslation),
    auto_title: presentAutoTitle(job.autoTitle),
    title_edited: job.sourceLabelEdited,
    diarization: presentDiarization(diarizationRecord(job), job.speakerLabels, detail.speakerStats),
    speaker_aware_transcript: detail.speakerAwareTranscript,
  };
}
