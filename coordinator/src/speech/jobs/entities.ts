import { EntitySchema, OptionalProps } from '@mikro-orm/core';
import type { DiarizationState, JobStatus, QueueChannel } from '@sonar/shared';
import { PersonalAccessToken, User } from '../../accounts/entities.js';
import { SpeechWorker } from '../workers/entities.js';
import type { SpeakerLabels, StoredTurn } from './speakers.js';

/**
 * The speaker count a submitter stated for a job's diarization: exactly `num_speakers`, or within
 * `min_speakers` / `max_speakers` (either may be absent), each 1..32 (column diarization_speakers).
 */
export interface StatedSpeakers {
  num_speakers?: number;
  min_speakers?: number;
  max_speakers?: number;
}

export type ExecutionTarget = 'auto' | 'local' | 'worker';

type AiRecordState = 'pending' | 'running' | 'completed' | 'failed' | 'unavailable';

/** speech_jobs.analysis as JobRepository writes it. */
export interface AnalysisRecord {
  state: AiRecordState;
  language: string | null;
  generation: number;
  provider: string | null;
  model: string | null;
  result: { summary: string; key_points: string[]; action_items: string[]; topics: string[] } | null;
  error: string | null;
  updated_at: string;
  requested_by?: string | null;
}

/** speech_jobs.auto_title as JobRepository writes it. */
export interface AutoTitleRecord {
  state: AiRecordState;
  title: string | null;
  applied: boolean;
  error: string | null;
  updated_at: string;
}

/** A row of speech_translations (current pass). */
export interface TranslationRow {
  language: string;
  state: AiRecordState;
  generation: number;
  text: string | null;
  segments: Array<{ seq: number; text: string }> | null;
  analysis: AnalysisRecord['result'];
  provider: string | null;
  model: string | null;
  error: string | null;
  updated_at: Date | string;
}

/** A transcription job and its current (primary) pass. */
export class SpeechJob {
  [OptionalProps]?:
    | 'status'
    | 'queueChannel'
    | 'sourceUrl'
    | 'sourceLabel'
    | 'sourceNote'
    | 'sourceFilename'
    | 'sourceMime'
    | 'sourceSizeBytes'
    | 'sourceDurationSeconds'
    | 'mediaPath'
    | 'mediaSha256'
    | 'mediaRetainedUntil'
    | 'language'
    | 'analysisLanguage'
    | 'translationTargetLanguages'
    | 'diarizationRequested'
    | 'diarizationState'
    | 'diarizationEngine'
    | 'diarizationSpeakerCount'
    | 'diarizationTurns'
    | 'diarizationError'
    | 'diarizationUpdatedAt'
    | 'diarizationRerunRequestedAt'
    | 'diarizationAttempts'
    | 'diarizationSpeakers'
    | 'transcriptFileAt'
    | 'transcriptFileError'
    | 'speakerLabels'
    | 'analysis'
    | 'autoTitle'
    | 'sourceLabelEdited'
    | 'executionTarget'
    | 'targetWorker'
    | 'currentPass'
    | 'attempt'
    | 'maxAttempts'
    | 'stageLabel'
    | 'stageDetail'
    | 'audioPositionSeconds'
    | 'transcriptText'
    | 'engine'
    | 'engineModel'
    | 'worker'
    | 'cancelRequestedAt'
    | 'failureError'
    | 'createdAt'
    | 'updatedAt'
    | 'startedAt'
    | 'finishedAt'
    | 'apiToken'
    | 'callbackUrl'
    | 'callbackStatus'
    | 'callbackHttpStatus'
    | 'callbackLastAttemptAt'
    | 'callbackDeliveredAt'
    | 'callbackError'
    | 'callbackAttempts'
    | 'callbackCycle'
    | 'shareToken'
    | 'shareCreatedAt'
    | 'shareDisabledAt'
    | 'sharePlayback'
    | 'transcriptRevisedAt'
    | 'transcriptRevisedPass'
    | 'reportSentAt'
    | 'ownerIsAdmin'
    | 'workerFetchable'
    | 'outcome';
  id!: number;
  owner!: User;
  status: JobStatus = 'queued';
  queueChannel: QueueChannel = 'web';
  sourceType!: 'url' | 'upload';
  sourceUrl: string | null = null;
  sourceLabel: string | null = null;
  sourceNote: string | null = null;
  sourceFilename: string | null = null;
  sourceMime: string | null = null;
  sourceSizeBytes: number | null = null;
  sourceDurationSeconds: number | null = null;
  mediaPath: string | null = null;
  mediaSha256: string | null = null;
  mediaRetainedUntil: Date | null = null;
  model!: string;
  language: string | null = null;
  analysisLanguage: string | null = null;
  translationTargetLanguages: string[] = [];
  diarizationRequested = true;
  diarizationState: DiarizationState = 'pending';
  /** The current pass's diarization (see speakers.ts): engine, speaker count, turns, why it failed. */
  diarizationEngine: string | null = null;
  diarizationSpeakerCount: number | null = null;
  diarizationTurns: StoredTurn[] | null = null;
  diarizationError: string | null = null;
  diarizationUpdatedAt: Date | null = null;
  /** Set by a rerun request, cleared by any terminal diarization result. */
  diarizationRerunRequestedAt: Date | null = null;
  diarizationAttempts = 0;
  /** The speaker count the submitter stated (or a rerun's request replaced it with); null: the diarizer counts. */
  diarizationSpeakers: StatedSpeakers | null = null;
  /** The TXT copy of the transcript on disk (transcript-file.ts): when last written, and why the last write failed. */
  transcriptFileAt: Date | null = null;
  transcriptFileError: string | null = null;
  /** Speaker editor state of the current pass: speaker key → name. */
  speakerLabels: SpeakerLabels = {};
  /** The current pass's analysis record (AI_TRANSITIONS); null when none was asked for. */
  analysis: AnalysisRecord | null = null;
  /** The automatic title of an uploaded file (AI_TRANSITIONS); null when none applies. */
  autoTitle: AutoTitleRecord | null = null;
  /** The owner saved a title of their own: automatic titles never replace it. */
  sourceLabelEdited = false;
  executionTarget: ExecutionTarget = 'auto';
  targetWorker: SpeechWorker | null = null;
  currentPass = 1;
  attempt = 0;
  maxAttempts = 3;
  stageLabel: string | null = null;
  stageDetail: string | null = null;
  audioPositionSeconds = 0;
  transcriptText: string | null = null;
  engine: string | null = null;
  engineModel: string | null = null;
  worker: SpeechWorker | null = null;
  cancelRequestedAt: Date | null = null;
  failureError: string | null = null;
  createdAt: Date = new Date();
  updatedAt: Date = new Date();
  startedAt: Date | null = null;
  finishedAt: Date | null = null;
  /** The personal token that submitted an API-queue job; its callback secret signs the callback. */
  apiToken: PersonalAccessToken | null = null;
  callbackUrl: string | null = null;
  callbackStatus: 'pending' | 'retrying' | 'delivered' | 'failed' | null = null;
  callbackHttpStatus: number | null = null;
  callbackLastAttemptAt: Date | null = null;
  callbackDeliveredAt: Date | null = null;
  callbackError: string | null = null;
  callbackAttempts = 0;
  /** Notification cycle (starts at 1; restart of a failed job and re-transcription start the next): one callback and one report each. */
  callbackCycle = 1;
  shareToken: string | null = null;
  shareCreatedAt: Date | null = null;
  shareDisabledAt: Date | null = null;
  /** Whether the share page may play the retained media (the owner's setting; off by default). */
  sharePlayback = false;
  /** When the owner last corrected the current pass (transcriptRevisedPass), else null. */
  transcriptRevisedAt: Date | null = null;
  transcriptRevisedPass: number | null = null;
  reportSentAt: Date | null = null;
  /** Claim eligibility kept on the row (see migration 0008): admin-owned jobs are claimed first. */
  ownerIsAdmin = false;
  /** A URL job a worker with can_fetch_urls may download itself (else the coordinator stages it). */
  workerFetchable = false;
  /** How a finished job ended: completed, failed or cancelled (null while it is not finished). */
  outcome: 'completed' | 'failed' | 'cancelled' | null = null;
}

export class SpeechLease {
  [OptionalProps]?: 'createdAt' | 'lastHeartbeatAt' | 'lastProgressAt' | 'endedAt' | 'outcome' | 'sessionId' | 'kind';
  id!: number;
  job!: SpeechJob;
  attempt!: number;
  worker!: SpeechWorker;
  tokenHash!: string;
  createdAt: Date = new Date();
  expiresAt!: Date;
  lastHeartbeatAt: Date = new Date();
  lastProgressAt: Date | null = null;
  endedAt: Date | null = null;
  outcome: 'completed' | 'failed' | 'expired' | 'released' | 'cancelled' | 'abandoned' | null = null;
  sessionId: string | null = null;
  /** A transcription attempt, or a diarization rerun of a completed job. */
  kind: 'transcribe' | 'diarize' = 'transcribe';
}

export class SpeechSegment {
  [OptionalProps]?: 'speaker' | 'words';
  id!: number;
  job!: SpeechJob;
  pass!: number;
  seq!: number;
  startSeconds!: number;
  endSeconds!: number;
  text!: string;
  speaker: string | null = null;
  /** The segment's words with their times, when the engine gave them (each has the segment's speaker). */
  words: Array<{ start: number; end: number; text: string }> | null = null;
}

export class SpeechJobEvent {
  [OptionalProps]?: 'at' | 'level' | 'data';
  id!: number;
  job!: SpeechJob;
  at: Date = new Date();
  level: 'info' | 'warn' | 'error' = 'info';
  event!: string;
  message!: string;
  data: Record<string, unknown> | null = null;
}

const ts = (fieldName: string, nullable = false) => ({ type: 'datetime', columnType: 'timestamptz', fieldName, nullable }) as const;
const str = (fieldName: string, nullable = true) => ({ type: 'string', fieldName, nullable }) as const;
const dbl = (fieldName: string, nullable = true) => ({ type: 'double', columnType: 'double precision', fieldName, nullable }) as const;

export const SpeechJobSchema = new EntitySchema<SpeechJob>({
  class: SpeechJob,
  tableName: 'speech_jobs',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    owner: { kind: 'm:1', entity: () => User, fieldName: 'owner_id' },
    status: { type: 'string' },
    queueChannel: str('queue_channel', false),
    sourceType: str('source_type', false),
    sourceUrl: { type: 'text', fieldName: 'source_url', nullable: true },
    sourceLabel: str('source_label'),
    sourceNote: { type: 'text', fieldName: 'source_note', nullable: true },
    sourceFilename: str('source_filename'),
    sourceMime: str('source_mime'),
    sourceSizeBytes: { type: 'bigint', fieldName: 'source_size_bytes', nullable: true, runtimeType: 'number' } as never,
    sourceDurationSeconds: dbl('source_duration_seconds'),
    mediaPath: { type: 'text', fieldName: 'media_path', nullable: true },
    mediaSha256: str('media_sha256'),
    mediaRetainedUntil: ts('media_retained_until', true),
    model: { type: 'string' },
    language: { type: 'string', nullable: true },
    analysisLanguage: str('analysis_language'),
    translationTargetLanguages: { type: 'string[]', columnType: 'text[]', fieldName: 'translation_target_languages' },
    diarizationRequested: { type: 'boolean', fieldName: 'diarization_requested' },
    diarizationState: str('diarization_state', false),
    diarizationEngine: str('diarization_engine'),
    diarizationSpeakerCount: { type: 'integer', fieldName: 'diarization_speaker_count', nullable: true },
    diarizationTurns: { type: 'json', fieldName: 'diarization_turns', nullable: true },
    diarizationError: { type: 'text', fieldName: 'diarization_error', nullable: true },
    diarizationUpdatedAt: ts('diarization_updated_at', true),
    diarizationRerunRequestedAt: ts('diarization_rerun_requested_at', true),
    diarizationAttempts: { type: 'integer', fieldName: 'diarization_attempts' },
    diarizationSpeakers: { type: 'json', columnType: 'jsonb', fieldName: 'diarization_speakers', nullable: true },
    transcriptFileAt: ts('transcript_file_at', true),
    transcriptFileError: { type: 'text', fieldName: 'transcript_file_error', nullable: true },
    speakerLabels: { type: 'json', fieldName: 'speaker_labels' },
    analysis: { type: 'json', columnType: 'jsonb', fieldName: 'analysis', nullable: true },
    autoTitle: { type: 'json', columnType: 'jsonb', fieldName: 'auto_title', nullable: true },
    sourceLabelEdited: { type: 'boolean', fieldName: 'source_label_edited' },
    executionTarget: str('execution_target', false),
    targetWorker: { kind: 'm:1', entity: () => SpeechWorker, fieldName: 'target_worker_id', nullable: true },
    currentPass: { type: 'integer', fieldName: 'current_pass' },
    attempt: { type: 'integer' },
    maxAttempts: { type: 'integer', fieldName: 'max_attempts' },
    stageLabel: str('stage_label'),
    stageDetail: { type: 'text', fieldName: 'stage_detail', nullable: true },
    audioPositionSeconds: dbl('audio_position_seconds', false),
    transcriptText: { type: 'text', fieldName: 'transcript_text', nullable: true },
    engine: { type: 'string', nullable: true },
    engineModel: str('engine_model'),
    worker: { kind: 'm:1', entity: () => SpeechWorker, fieldName: 'worker_id', nullable: true },
    cancelRequestedAt: ts('cancel_requested_at', true),
    failureError: { type: 'text', fieldName: 'failure_error', nullable: true },
    createdAt: ts('created_at'),
    updatedAt: { ...ts('updated_at'), onUpdate: () => new Date() },
    startedAt: ts('started_at', true),
    finishedAt: ts('finished_at', true),
    apiToken: { kind: 'm:1', entity: () => PersonalAccessToken, fieldName: 'api_token_id', nullable: true },
    callbackUrl: { type: 'text', fieldName: 'callback_url', nullable: true },
    callbackStatus: str('callback_status'),
    callbackHttpStatus: { type: 'integer', fieldName: 'callback_http_status', nullable: true },
    callbackLastAttemptAt: ts('callback_last_attempt_at', true),
    callbackDeliveredAt: ts('callback_delivered_at', true),
    callbackError: { type: 'text', fieldName: 'callback_error', nullable: true },
    callbackAttempts: { type: 'integer', fieldName: 'callback_attempts' },
    callbackCycle: { type: 'integer', fieldName: 'callback_cycle' },
    shareToken: str('share_token'),
    shareCreatedAt: ts('share_created_at', true),
    shareDisabledAt: ts('share_disabled_at', true),
    sharePlayback: { type: 'boolean', fieldName: 'share_playback', default: false },
    transcriptRevisedAt: ts('transcript_revised_at', true),
    transcriptRevisedPass: { type: 'integer', fieldName: 'transcript_revised_pass', nullable: true },
    reportSentAt: ts('report_sent_at', true),
    ownerIsAdmin: { type: 'boolean', fieldName: 'owner_is_admin' },
    workerFetchable: { type: 'boolean', fieldName: 'worker_fetchable' },
    outcome: str('outcome'),
  },
});

export const SpeechLeaseSchema = new EntitySchema<SpeechLease>({
  class: SpeechLease,
  tableName: 'speech_leases',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    job: { kind: 'm:1', entity: () => SpeechJob, fieldName: 'job_id' },
    attempt: { type: 'integer' },
    worker: { kind: 'm:1', entity: () => SpeechWorker, fieldName: 'worker_id' },
    tokenHash: str('token_hash', false),
    createdAt: ts('created_at'),
    expiresAt: ts('expires_at'),
    lastHeartbeatAt: ts('last_heartbeat_at'),
    lastProgressAt: ts('last_progress_at', true),
    endedAt: ts('ended_at', true),
    outcome: { type: 'string', nullable: true },
    sessionId: str('session_id'),
    kind: str('kind', false),
  },
});

export const SpeechSegmentSchema = new EntitySchema<SpeechSegment>({
  class: SpeechSegment,
  tableName: 'speech_segments',
  properties: {
    id: { type: 'bigint', primary: true, autoincrement: true, runtimeType: 'number' } as never,
    job: { kind: 'm:1', entity: () => SpeechJob, fieldName: 'job_id' },
    pass: { type: 'integer' },
    seq: { type: 'integer' },
    startSeconds: dbl('start_seconds', false),
    endSeconds: dbl('end_seconds', false),
    text: { type: 'text' },
    speaker: { type: 'string', nullable: true },
    words: { type: 'json', columnType: 'jsonb', nullable: true },
  },
});

export const SpeechJobEventSchema = new EntitySchema<SpeechJobEvent>({
  class: SpeechJobEvent,
  tableName: 'speech_job_events',
  properties: {
    id: { type: 'bigint', primary: true, autoincrement: true, runtimeType: 'number' } as never,
    job: { kind: 'm:1', entity: () => SpeechJob, fieldName: 'job_id' },
    at: ts('at'),
    level: { type: 'string' },
    event: { type: 'string' },
    message: { type: 'text' },
    data: { type: 'json', columnType: 'jsonb', nullable: true },
  },
});

export const speechJobSchemas = [SpeechJobSchema, SpeechLeaseSchema, SpeechSegmentSchema, SpeechJobEventSchema];
