import type { QueueChannel } from '@sonar/shared';
import { sql } from '../../../db/sql.js';
import type { StatedSpeakers } from '../entities.js';
import type { EventLevel, JobStore } from './store.js';

/**
 * A job born queued from a URL source, with its first runtime-log entries, in one statement. (An
 * uploaded file's job is created in an ORM unit of work instead: its media is moved into place in
 * the same transaction, before any worker can claim the row.)
 */

export interface NewUrlJob {
  ownerId: number;
  ownerIsAdmin: boolean;
  workerFetchable: boolean;
  channel: QueueChannel;
  sourceUrl: string;
  label: string | null;
  note: string | null;
  model: string;
  language: string | null;
  analysisLanguage: string | null;
  translationTargetLanguages: string[];
  diarizationRequested: boolean;
  diarizationState: 'pending' | 'skipped';
  diarizationSpeakers: StatedSpeakers | null;
  maxAttempts: number;
  stageLabel: string;
  apiTokenId: number | null;
  callbackUrl: string | null;
  callbackStatus: 'pending' | null;
}

export interface NewJobEvent {
  event: string;
  level: EventLevel;
  message: string;
}

type QueueParams = Omit<NewUrlJob, 'translationTargetLanguages' | 'diarizationSpeakers'> & {
  languages: string[];
  /** NewUrlJob.diarizationSpeakers as JSON text, or null. */
  speakers: string | null;
  events: string[];
  levels: string[];
  messages: string[];
};

/**
 * QUEUE_URL_JOB — inserts a queued URL job and its runtime-log entries (parallel arrays :events,
 * :levels, :messages); :speakers is the stated speaker count as JSON text, or null. Guard: none (the service checked the rules). Returns: the job's row, every
 * column (the service maps it to its entity).
 */
const QUEUE_URL_JOB = sql<QueueParams, Record<string, unknown>>(
  `with job as (
     insert into speech_jobs (status, owner_id, owner_is_admin, worker_fetchable, queue_channel, source_type, source_url, source_label, source_note,
                              model, language, analysis_language, translation_target_languages, diarization_requested, diarization_state,
                              diarization_speakers, max_attempts, stage_label, api_token_id, callback_url, callback_status)
     values ('queued', :ownerId, :ownerIsAdmin, :workerFetchable, :channel, 'url', :sourceUrl, :label, :note,
             :model, :language, :analysisLanguage, :languages::text[], :diarizationRequested, :diarizationState,
             :speakers::jsonb, :maxAttempts, :stageLabel, :apiTokenId, :callbackUrl, :callbackStatus)
     returning *
   ), ev as (
     insert into speech_job_events (job_id, event, level, message)
     select job.id, e.event, e.level, e.message from job cross join unnest(:events::text[], :levels::text[], :messages::text[]) as e(event, level, message)
   )
   select * from job`,
  'speech_queue_url_job',
);

/** Queues a URL job (QUEUE_URL_JOB): one round trip. Returns the new row. */
export async function queueUrlJob(store: JobStore, job: NewUrlJob, events: NewJobEvent[]): Promise<Record<string, unknown>> {
  const { translationTargetLanguages, diarizationSpeakers, ...rest } = job;
  const row = await QUEUE_URL_JOB.first(store.knex, {
    ...rest,
    languages: translationTargetLanguages,
    speakers: diarizationSpeakers ? JSON.stringify(diarizationSpeakers) : null,
    events: events.map((e) => e.event),
    levels: events.map((e) => e.level),
    messages: events.map((e) => e.message),
  });
  if (!row) throw new Error('the job insert returned no row');
  return row;
}
