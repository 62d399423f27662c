import { z } from 'zod';
import { DIARIZATION_STATES, JOB_STATUSES, LIVENESS_STATES, QUEUE_CHANNELS, idParam, safeString } from '@sonar/shared';
import type { StatedSpeakers } from './jobs/entities.js';
import { DEFAULT_CUE_LIMITS, type CueLimits } from './jobs/subtitle-cues.js';

/** Zod schemas of the signed-in speech API (section C): request validation and OpenAPI output. */

const timestamp = z.string().describe('ISO 8601 timestamp');

export const jobIdParams = z.object({
  jobId: idParam().describe('Job id (integer)'),
});

/** The job's `callback` object (delivery state of its terminal callback; mainly API-queue jobs). */
export const callbackSchema = z
  .object({
    url: z.string(),
    status: z.string().describe('Delivery status; `pending` until the terminal callback was attempted'),
    http_status: z.number().int().nullable(),
    last_attempt_at: timestamp.nullable(),
    delivered_at: timestamp.nullable(),
    error: z.string().nullable(),
    attempts: z.number().int().describe('Delivery attempts made so far in this notification cycle (0 before the first)'),
  })
  .describe('Terminal callback delivery of a token-API job; null for jobs submitted without callback_url');

/** `share` object: the public transcript page, while a share exists and is not disabled. */
export const shareSchema = z
  .object({
    url: z.string().describe('Public transcript page (no sign-in); `?full` opens the detailed layout'),
    created_at: timestamp,
    playback: z
      .boolean()
      .describe(
        'Whether the share page plays the retained media with the transcript (the owner’s setting, off by default; see PATCH /api/speech/jobs/{jobId}/share)',
      ),
  })
  .describe('Public share of the transcript; null when there is none or it was disabled');

/** The base job (list entries, mutation responses); field names are the public API's (stable). */
export const jobSchema = z.object({
  id: z.number().int(),
  status: z.enum(JOB_STATUSES),
  status_label: z.string(),
  queue_channel: z.enum(QUEUE_CHANNELS),
  queue_channel_label: z.string(),
  source_type: z.enum(['url', 'upload']),
  source_label: z.string(),
  source_note: z.string().nullable(),
  source_url: z.string().nullable(),
  source_filename: z.string().nullable(),
  source_mime: z.string().nullable(),
  source_size_bytes: z.number().int().nullable(),
  source_duration_seconds: z.number().nullable(),
  source_duration_human: z.string().nullable(),
  model: z.string(),
  language: z.string().nullable(),
  analysis_language: z.string().nullable(),
  translation_target_languages: z.array(z.string()),
  stage_label: z.string().nullable(),
  stage_detail: z
    .string()
    .nullable()
    .describe('The stage in words; for a completed job the segment count ("6 segments", as `segment_count`) or "No speech detected"'),
  progress: z.object({
    audio_position_seconds: z.number(),
    percent: z.number().nullable(),
    throughput: z.number().nullable().describe('Audio seconds per wall-clock second'),
  }),
  execution_target: z.object({ mode: z.enum(['auto', 'local', 'worker']), worker: z.string().nullable() }),
  engine: z.string().nullable(),
  engine_model: z.string().nullable(),
  attempt: z.number().int(),
  max_attempts: z.number().int(),
  failure_error: z.string().nullable(),
  cancel_requested: z.boolean(),
  owner: z.object({ id: z.number().int(), username: z.string() }),
  created_at: timestamp,
  updated_at: timestamp,
  started_at: timestamp.nullable(),
  finished_at: timestamp.nullable(),
  share: shareSchema.nullable(),
  callback: callbackSchema.nullable(),
});

/** The `diarization` object of a pass (job detail and revisions). */
export const diarizationSchema = z
  .object({
    requested: z.boolean().describe('Speaker labels were asked for (the default; `disable_diarization` turns them off)'),
    requested_speakers: z
      .object({
        num_speakers: z.number().int().optional().describe('Exactly this many speakers'),
        min_speakers: z.number().int().optional().describe('At least this many'),
        max_speakers: z.number().int().optional().describe('At most this many'),
      })
      .nullable()
      .describe(
        'Additive: the speaker count stated at submission (or by the latest diarization rerun, which replaces it): `num_speakers`, ' +
          'or `min_speakers` and/or `max_speakers`; null when none was stated and the diarizer counts by itself',
      ),
    state: z.enum(DIARIZATION_STATES),
    engine: z.string().nullable().describe('The worker diarizer that produced the speakers'),
    speaker_count: z.number().int().nullable().describe('Speakers found (completed only)'),
    speakers: z.array(
      z.object({
        key: z.string().describe('Stable key of the speaker in this pass: S1, S2, …'),
        name: z.string().describe('The owner’s name for the speaker, else "Speaker N"'),
        renamed: z.boolean(),
        segment_count: z.number().int(),
        seconds: z.number().describe('Seconds of the labelled segments'),
      }),
    ),
    labelled_segment_count: z.number().int(),
    error: z.string().nullable().describe('Why the diarization failed or is unavailable'),
    updated_at: timestamp.nullable(),
    rerun_pending: z.boolean().describe('A rerun was requested and has not finished'),
  })
  .describe('Speaker diarization of the current pass');

const aiState = z.enum(['pending', 'running', 'completed', 'failed', 'unavailable']);

/** The documented JSON shape of an analysis result (also inside each translation). */
export const analysisResultSchema = z
  .object({
    summary: z.string(),
    key_points: z.array(z.string()),
    action_items: z.array(z.string()),
    topics: z.array(z.string()),
  })
  .describe('summary: a few sentences; key_points, action_items (tasks or follow-ups, who when known), topics (short labels)');

export const analysisSchema = z
  .object({
    state: aiState,
    language: z.string().nullable().describe('Language of the analysis; null: the transcript’s own'),
    generation: z.number().int().describe('Grows with each run (a request, or a diarization rerun that found more speakers)'),
    provider: z.string().nullable().describe('"model at host" of the OpenAI-compatible provider that ran it'),
    model: z.string().nullable(),
    result: analysisResultSchema.nullable().describe('Set when completed'),
    error: z.string().nullable().describe('Why it failed or is unavailable (the upstream’s status and reason for provider failures)'),
    requested_by: z.string().nullable().describe('Who asked for it with POST …/analyze; null for the automatic run'),
    updated_at: timestamp.nullable(),
  })
  .describe('Transcript analysis of the current pass; null when none was asked for');

export const translationSchema = z.object({
  language: z.string(),
  state: aiState,
  status: aiState.describe('The same as state'),
  text: z.string().nullable().describe('The translated transcript, when completed'),
  segments: z.array(z.object({ seq: z.number().int(), text: z.string() })).describe('Translated segments by seq, when completed'),
  analysis: analysisResultSchema.nullable().describe('The analysis translated, when one was completed'),
  provider: z.string().nullable(),
  model: z.string().nullable(),
  error: z.string().nullable(),
  updated_at: timestamp.nullable(),
});

const autoTitleSchema = z
  .object({
    state: aiState,
    title: z.string().nullable(),
    applied: z.boolean().describe('The title became source_label (false when the owner changed the title meanwhile)'),
    error: z.string().nullable(),
    updated_at: timestamp.nullable(),
  })
  .nullable()
  .describe('Additive: the automatic title of an uploaded file still named after the file; null when none applies');

/** GET /api/speech/jobs/{jobId}: the base job plus runtime log, liveness and result sections. */
export const jobDetailSchema = jobSchema.extend({
  transcript_text: z.string().nullable(),
  transcript_file: z
    .object({
      state: z
        .enum(['none', 'written', 'degraded'])
        .describe(
          '`written`: the TXT copy on the coordinator’s disk (`<SPEECH_MEDIA_DIR>/transcripts/<id>.txt`) matches the transcript; `degraded`: its last write failed (degraded storage; the database transcript is complete and stays authoritative); `none`: not completed yet',
        ),
      written_at: timestamp.nullable().describe('When the copy was last written'),
      error: z.string().nullable().describe('Why the last write failed (degraded only)'),
    })
    .describe('Additive: the auxiliary TXT copy of the completed transcript'),
  segment_count: z
    .number()
    .int()
    .describe(
      'The segments the transcript shows: the stored segments of the current pass that hold text (a segment split where the speaker changes counts as its pieces). The same count as a completed job’s `stage_detail`, the callback’s `segment_count` and the completion report, also after a diarization rerun',
    ),
  runtime_log: z.array(z.object({ at: timestamp, level: z.enum(['info', 'warn', 'error']), event: z.string(), message: z.string() })),
  liveness: z.object({
    state: z.enum(LIVENESS_STATES),
    reason: z.string().nullable().describe('Why the state is `suspect` (e.g. a queued job no connected worker can take); null otherwise'),
    worker: z.string().nullable(),
    attempt: z.number().int().nullable(),
    last_heartbeat_at: timestamp.nullable(),
    seconds_since_heartbeat: z.number().nullable(),
    lease_expires_at: timestamp.nullable(),
  }),
  analysis: analysisSchema.nullable(),
  translations: z.array(translationSchema).describe('One entry per translation target language of the current pass'),
  auto_title: autoTitleSchema,
  title_edited: z.boolean().describe('Additive: the owner saved a title of their own; automatic titles never replace it'),
  diarization: diarizationSchema,
  speaker_aware_transcript: z
    .string()
    .nullable()
    .describe('Additive: the current pass as speaker turns ("[hh:mm:ss] Name: text" paragraphs); null until a diarization labelled it'),
});

export const segmentsResponseSchema = z.object({
  ok: z.literal(true),
  job_id: z.number().int(),
  pass: z.number().int().describe('The current (primary) pass'),
  segments: z.array(
    z.object({
      seq: z.number().int(),
      start: z.number().describe('Seconds from the start of the media'),
      end: z.number(),
      text: z.string(),
      speaker: z.string().nullable(),
    }),
  ),
});

export const statusResponseSchema = z.object({
  ok: z.literal(true),
  summary: z.object({
    queued: z.number().int(),
    processing: z.number().int().describe('downloading, transcribing or finalizing'),
    completed: z.number().int(),
    failed: z.number().int(),
  }),
  can_manage_all: z.boolean(),
  local_worker_problem: z
    .string()
    .nullable()
    .describe('Additive: what the quick start’s local worker lacks to transcribe (ffmpeg, pocketsphinx, its model) with the install command; null otherwise'),
  config: z.object({
    enabled: z.boolean(),
    default_model: z.string(),
    upload_max_mb: z.number().int().describe('The effective per-file upload limit on this host'),
    upload_limit: z.object({
      configured_mb: z.number().int().describe('SPEECH_UPLOAD_MAX_MB'),
      php_upload_max_mb: z.number().int().describe('The multipart per-file limit of this host'),
      php_post_max_mb: z.number().int().describe('The request body limit of an upload request on this host'),
      effective_max_mb: z.number().int(),
      effective_max_label: z.string(),
      limited_by_php: z.boolean().describe('A host limit is lower than configured_mb'),
    }),
    ytdlp_configured: z.boolean(),
  }),
  models: z.array(z.string()).describe('Additive: the models a job may ask for (a registered worker serves them)'),
  connected_models: z.array(z.string()).describe('Additive: the models a connected worker takes now'),
});

export const jobResponseSchema = z.object({ ok: z.literal(true), job: jobSchema });
export const jobMessageResponseSchema = z.object({ ok: z.literal(true), message: z.string(), job: jobSchema });

// --- POST /api/speech/jobs --------------------------------------------------------------------

const LANGUAGE_CODE = /^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*$/;
const languageMessage = 'must be a language code such as "en", "sv" or "pt-BR"';

const blank = (v: string | undefined) => {
  const t = v?.trim();
  return t ? t : undefined;
};
/** Optional text, trimmed, blank as absent; control characters refused (tab and line breaks too unless `multiline`). */
const text = (max: number, multiline = false) => safeString({ multiline }).max(max).optional().transform(blank);
const language = () => text(16).refine((v) => v === undefined || LANGUAGE_CODE.test(v), { message: languageMessage });

function isHttpUrl(value: string) {
  try {
    const u = new URL(value);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.hostname !== '';
  } catch {
    return false;
  }
}

const languageList = z
  .union([z.string().max(400), z.array(z.string().max(400)).max(50)])
  .optional()
  .describe('Repeated, or comma-separated');

/** absent, false, 0, "0", "false", "no", "off" and "" keep diarization; any other value skips it. */
function truthy(value: string | number | boolean | undefined): boolean {
  if (value === undefined) return false;
  if (typeof value === 'boolean') return value;
  if (typeof value === 'number') return value !== 0;
  return !['', '0', 'false', 'no', 'off'].includes(value.trim().toLowerCase());
}

/** The most speakers a submitter may state (num_speakers, min_speakers, max_speakers: 1 to this). */
export const MAX_STATED_SPEAKERS = 32;
const SPEAKER_FIELDS = ['num_speakers', 'min_speakers', 'max_speakers'] as const;

/** A stated speaker count as sent: a JSON number, or the text of a form field (blank or null: not stated). */
const speakerCount = (description: string) =>
  z
    .union([z.number(), z.string().max(10)])
    .nullish()
    .describe(`${description}; an integer from 1 to ${MAX_STATED_SPEAKERS}, only with speaker diarization`);

/**
 * Reads num_speakers / min_speakers / max_speakers (JSON numbers or form text), adding an issue
 * under the field for a non-integer or out-of-range value, min_speakers above max_speakers, a bound
 * together with num_speakers, or any of them when diarization is off. Null: none stated.
 */
export function readStatedSpeakers(
  body: Partial<Record<(typeof SPEAKER_FIELDS)[number], string | number | null | undefined>>,
  diarization: boolean,
  ctx: z.RefinementCtx,
): StatedSpeakers | null {
  const out: StatedSpeakers = {};
  for (const field of SPEAKER_FIELDS) {
    const raw = body[field];
    const text = typeof raw === 'string' ? raw.trim() : raw;
    if (text === undefined || text === null || text === '') continue;
    const value = typeof text === 'number' ? text : /^[+-]?\d+$/.test(text) ? Number(text) : Number.NaN;
    if (!Number.isInteger(value)) {
      ctx.addIssue({ code: 'custom', path: [field], message: 'must be a whole number of speakers' });
    } else if (value < 1 || value > MAX_STATED_SPEAKERS) {
      ctx.addIssue({ code: 'custom', path: [field], message: `must be from 1 to ${MAX_STATED_SPEAKERS}` });
    } else {
      out[field] = value;
    }
  }
  const stated = (Object.keys(out) as Array<keyof StatedSpeakers>).filter((k) => out[k] !== undefined);
  if (!stated.length) return null;
  if (!diarization) {
    for (const field of stated)
      ctx.addIssue({ code: 'custom', path: [field], message: 'a speaker count needs speaker diarization, which disable_diarization turns off' });
    return null;
  }
  if (out.num_speakers !== undefined) {
    for (const field of stated.filter((f) => f !== 'num_speakers')) {
      ctx.addIssue({ code: 'custom', path: [field], message: 'send either num_speakers (an exact count) or min_speakers / max_speakers (bounds), not both' });
    }
  }
  if (out.min_speakers !== undefined && out.max_speakers !== undefined && out.min_speakers > out.max_speakers) {
    ctx.addIssue({ code: 'custom', path: ['min_speakers'], message: `must not be greater than max_speakers (${out.max_speakers})` });
  }
  return out;
}

const speakerCountFields = {
  num_speakers: speakerCount('The exact number of speakers, when known (speaker diarization then finds exactly this many)'),
  min_speakers: speakerCount('The fewest speakers diarization may find (not with num_speakers)'),
  max_speakers: speakerCount('The most speakers diarization may find (not with num_speakers)'),
};

/** The submission fields as sent (before normalization). */
const createJobFieldsObject = z.object({
  source_url: text(2048)
    .refine((v) => v === undefined || isHttpUrl(v), { message: 'must be an http:// or https:// URL' })
    .describe('Media URL (http or https). Send either source_url or media_file.'),
  media_file: z.string().optional().meta({ format: 'binary', description: 'The media file (multipart/form-data only; one file per request)' }),
  source_label: text(300).describe('Title; defaults to the file name for uploads'),
  source_note: text(5000, true).describe('Free-text note'),
  model: text(60).describe('Model name, for example small, large or turbo (see GET /api/speech/status)'),
  language: language().describe('Spoken-language hint (language code); empty means automatic'),
  analysis_language: language().describe('Language of the transcript analysis'),
  translation_target_languages: languageList,
  'translation_target_languages[]': languageList,
  disable_diarization: z
    .union([z.boolean(), z.number(), z.string().max(10)])
    .optional()
    .describe('Absent or false keeps speaker diarization (the default); a truthy value skips it'),
  ...speakerCountFields,
});

/** Trims, merges the language lists and reads disable_diarization (shared by the web and token APIs). */
function normalizeFields(body: z.output<typeof createJobFieldsObject>, ctx: z.RefinementCtx) {
  const raw = [body.translation_target_languages, body['translation_target_languages[]']].flatMap((v) => (v === undefined ? [] : Array.isArray(v) ? v : [v]));
  const languages = [
    ...new Set(
      raw
        .flatMap((v) => v.split(','))
        .map((v) => v.trim())
        .filter(Boolean),
    ),
  ];
  const bad = languages.filter((l) => !LANGUAGE_CODE.test(l) || l.length > 16);
  if (bad.length > 0) {
    ctx.addIssue({ code: 'custom', path: ['translation_target_languages'], message: `${languageMessage}; got "${bad[0]}"` });
  } else if (languages.length > 20) {
    ctx.addIssue({ code: 'custom', path: ['translation_target_languages'], message: 'at most 20 languages' });
  }
  const disableDiarization = truthy(body.disable_diarization);
  const speakers = readStatedSpeakers(body, !disableDiarization, ctx);
  return {
    source_url: body.source_url,
    media_file: body.media_file,
    source_label: body.source_label,
    source_note: body.source_note,
    model: body.model,
    language: body.language,
    analysis_language: body.analysis_language,
    translation_target_languages: languages,
    disable_diarization: disableDiarization,
    speakers,
  };
}

/**
 * Submission fields; JSON and urlencoded bodies are validated by Fastify with this schema, and the
 * fields of a multipart form by the route with the same schema. `media_file` is the uploaded file
 * (multipart only).
 */
export const createJobFieldsSchema = createJobFieldsObject.transform(normalizeFields);

export type CreateJobFields = z.output<typeof createJobFieldsSchema>;

/** POST /api/speech/transcribe: the same fields plus the required terminal `callback_url`. */
export const apiCreateJobFieldsSchema = createJobFieldsObject
  .extend({
    callback_url: safeString({ error: (issue) => (issue.input === undefined ? 'callback_url is required' : 'must be a string') })
      .trim()
      .max(2048)
      .refine((v) => isHttpUrl(v), { message: 'must be an http:// or https:// URL' })
      .describe('Required: the terminal-state callback receives one JSON POST when the job completes or fails'),
  })
  .transform((body, ctx) => ({ ...normalizeFields(body, ctx), callback_url: body.callback_url }));

/**
 * The subtitle limits a download may set (SRT and WebVTT; other formats ignore them): docs/speech.md,
 * "Subtitles". Out of range or not a number: 422 under the parameter.
 */
export const cueLimitsQuery = z.object({
  max_chars: z.coerce.number().int().min(16).max(100).optional().describe(`Subtitles: characters per line, 16–100 (default ${DEFAULT_CUE_LIMITS.maxChars})`),
  max_lines: z.coerce.number().int().min(1).max(4).optional().describe(`Subtitles: lines per cue, 1–4 (default ${DEFAULT_CUE_LIMITS.maxLines})`),
  max_seconds: z.coerce
    .number()
    .min(1)
    .max(60)
    .optional()
    .describe(`Subtitles: seconds a cue stays on screen at most, 1–60 (default ${DEFAULT_CUE_LIMITS.maxSeconds})`),
});

/** The cue limits of a download's query: its parameters over the defaults. */
export function cueLimitsOf(q: z.infer<typeof cueLimitsQuery>): CueLimits {
  return {
    ...DEFAULT_CUE_LIMITS,
    maxChars: q.max_chars ?? DEFAULT_CUE_LIMITS.maxChars,
    maxLines: q.max_lines ?? DEFAULT_CUE_LIMITS.maxLines,
    maxSeconds: q.max_seconds ?? DEFAULT_CUE_LIMITS.maxSeconds,
  };
}

// --- POST /api/speech/jobs/{jobId}/diarization -------------------------------------------------

/**
 * The body of a diarization rerun (optional: none at all is null to Fastify): the speaker count to state for it (replacing the
 * job's), validated like a submission's; none stated: the diarizer counts by itself.
 */
export const diarizationRerunSchema = z.preprocess(
  (body) => body ?? {},
  z.object(speakerCountFields).transform((body, ctx) => ({ speakers: readStatedSpeakers(body, true, ctx) })),
);

// --- The web pages' speaker control ("Speakers: detect / exactly N / between A and B") -----------

/**
 * The pages' forms send `speakers` (detect, exact or between) next to all three count inputs:
 * only the inputs of the chosen mode count (a form without `speakers`, like the API, sends what it means).
 */
function chosenSpeakerInputs(raw: unknown): unknown {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return raw;
  const { speakers: mode, ...rest } = raw as Record<string, unknown>;
  if (mode === undefined) return raw;
  const drop: readonly string[] = mode === 'exact' ? ['min_speakers', 'max_speakers'] : mode === 'between' ? ['num_speakers'] : SPEAKER_FIELDS;
  return Object.fromEntries(Object.entries(rest).filter(([k]) => !drop.includes(k)));
}

/** The /speech form's submission: createJobFieldsSchema after the speaker mode is applied. */
export const pageJobFieldsSchema = z.preprocess(chosenSpeakerInputs, createJobFieldsSchema);

/** The job page's rerun form: its CSRF field and the speaker control. */
export const pageRerunSchema = z.preprocess(
  chosenSpeakerInputs,
  z
    .object({ _csrf: z.string().max(200).optional(), ...speakerCountFields })
    .transform((body, ctx) => ({ speakers: readStatedSpeakers(body, true, ctx) }))
    .nullish(),
);
