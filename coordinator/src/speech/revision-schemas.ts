import { z } from 'zod';
import { DIARIZATION_STATES, JOB_STATUSES, safeString } from '@sonar/shared';
import { analysisSchema, translationSchema } from './schemas.js';

/** Zod schemas of re-transcription and its read-only revision records: validation and OpenAPI output. */

const timestamp = z.string().describe('ISO 8601 timestamp');

export const revisionsQuerySchema = z.object({
  include: z
    .enum(['segments'])
    .optional()
    .describe('`segments` adds each revision’s timestamped `segments[]`; without it the lists stay light (`segment_count` only)'),
});

const revisionDiarizationSchema = z
  .object({
    requested: z.boolean(),
    state: z.enum(DIARIZATION_STATES),
    engine: z.string().nullable(),
    speaker_count: z.number().int().nullable().describe('Detected speakers (completed diarization only)'),
    speakers: z.array(
      z.object({
        key: z.string().describe('Speaker key S1..Sk'),
        name: z.string().describe('The owner’s name for the speaker, else "Speaker N"'),
        renamed: z.boolean(),
        segment_count: z.number().int(),
        seconds: z.number(),
      }),
    ),
    labelled_segment_count: z.number().int(),
    error: z.string().nullable(),
    updated_at: timestamp.nullable(),
    rerun_pending: z.boolean(),
  })
  .describe('The diarization of that pass as it was archived');

export const revisionSchema = z.object({
  pass: z.number().int().describe('Pass number (1 is the first transcription)'),
  model: z.string(),
  language: z.string().nullable(),
  engine: z.string().nullable(),
  engine_model: z.string().nullable(),
  transcript_text: z.string().nullable(),
  duration_seconds: z.number().nullable(),
  completed_at: timestamp.nullable().describe('When that pass completed'),
  archived_at: timestamp.describe('When a re-transcription archived it'),
  segment_count: z.number().int().describe('The segments that pass shows (those that hold text), counted as the job’s `segment_count`'),
  segments: z
    .array(
      z.object({
        seq: z.number().int(),
        start: z.number().describe('Seconds from the start of the media'),
        end: z.number(),
        text: z.string(),
        speaker: z.string().nullable().describe('Speaker key, or null'),
        speaker_name: z.string().nullable(),
      }),
    )
    .optional()
    .describe('Only with `?include=segments`'),
  speaker_aware_transcript: z.string().nullable().describe('"[hh:mm:ss] Name: text" paragraphs; null when no segment has a speaker'),
  diarization: revisionDiarizationSchema,
  speaker_labels: z.record(z.string(), z.string()).describe('Speaker-editor state: speaker key → name'),
  analysis: analysisSchema.nullable().describe('The analysis of that pass as it was archived'),
  translations: z.array(translationSchema).describe('The translations of that pass as they were archived'),
});

export const revisionsResponseSchema = z.object({
  ok: z.literal(true),
  job_id: z.number().int(),
  current: z
    .object({
      pass: z.number().int(),
      model: z.string(),
      language: z.string().nullable(),
      status: z.enum(JOB_STATUSES),
      engine: z.string().nullable(),
      completed_at: timestamp.nullable().describe('Null unless the current pass is completed'),
    })
    .describe('The current (primary) pass'),
  models: z
    .array(z.string())
    .describe(
      'Model choices for a new pass: models a registered worker serves, minus the current one (and those that cannot take the job’s language). ' +
        'For a URL source only the models the local runner serves (SPEECH_LOCAL_MODELS).',
    ),
  can_start: z.boolean().describe('Whether the caller may start a re-transcription now'),
  unavailable_reason: z.string().nullable().describe('Why not, in words (null when `can_start`)'),
  revisions: z.array(revisionSchema).describe('Earlier completed passes, newest first, read-only'),
});

export const retranscribeBodySchema = z.object({
  model: safeString().trim().min(1).max(60).describe('The model of the new pass (one of `models` of the revisions endpoint)'),
});
