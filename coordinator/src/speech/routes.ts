import path from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorBodySchema } from '@sonar/shared';
import { userOf } from '../accounts/auth-plugin.js';
import type { AuthRequirement } from '../accounts/types.js';
import type { DomainDeps } from '../app.js';
import { AppError, validationFailed } from '../http/errors.js';
import { uploadLimits, ytdlpConfigured, type UploadLimits } from './host-limits.js';
import type { SpeechJob } from './jobs/entities.js';
import { MediaTooLargeError, type MediaStore } from './jobs/media-store.js';
import { presentJob, presentJobDetail } from './jobs/presenter.js';
import {
  createJobFieldsSchema,
  jobDetailSchema,
  jobIdParams,
  jobMessageResponseSchema,
  jobResponseSchema,
  jobSchema,
  segmentsResponseSchema,
  statusResponseSchema,
  type CreateJobFields,
} from './schemas.js';

/** Spec "Limits": request throttle of the speech API routes, per client address and route. */
export const SPEECH_RATE_LIMIT = { max: 120, timeWindow: 60_000 } as const;

const speechUser: AuthRequirement = { accept: ['session', 'jwt'], permissions: ['speech.use'] };
const speechAdmin: AuthRequirement = { accept: ['session', 'jwt'], adminOnly: true };
const security: Array<Record<string, string[]>> = [{ session: [] }, { bearerJwt: [] }];
const tags = ['speech'];
const errors = { 401: errorBodySchema, 403: errorBodySchema, 422: errorBodySchema, 429: errorBodySchema };
const jobErrors = { ...errors, 404: errorBodySchema };
const csrfNote = 'From a browser session the request needs the `X-CSRF-Token` header (urlencoded forms may send `_csrf`).';
const visibilityNote =
  'The owner sees the job; users with `speech.manage` (and administrators) see every job. Jobs the caller cannot see answer 404.';

interface Upload {
  tempPath: string;
  filename: string;
  sizeBytes: number;
  sha256: string;
}

/** Signed-in speech API (session or JWT with `speech.use`): status, queue, jobs and their actions. */
export async function speechRoutes(app: FastifyInstance, deps: DomainDeps) {
  const { config } = deps;
  const { jobs, media } = deps.speech;
  const r = app.withTypeProvider<ZodTypeProvider>();
  const user = { auth: speechUser, rateLimit: SPEECH_RATE_LIMIT };

  r.get('/api/speech/status', {
    config: user,
    schema: {
      tags,
      security,
      summary: 'Queue counters, the caller’s visibility and the upload configuration',
      description:
        '`summary` counts the jobs the caller can see (all jobs with `can_manage_all`). ' +
        '`config.upload_limit` reports this host’s limits under the specification’s names: `php_upload_max_mb` is the ' +
        'multipart per-file limit and `php_post_max_mb` the request body limit of an upload request (file plus form ' +
        'fields); `effective_max_mb` (also `upload_max_mb`) is the lowest of those and SPEECH_UPLOAD_MAX_MB, and ' +
        '`limited_by_php` says a host limit is lower than the configured one. `ytdlp_configured`: a `yt-dlp` executable ' +
        'is on the coordinator’s PATH. `models` is additive: the models a job may ask for.',
      response: { 200: statusResponseSchema, ...errors },
    },
    handler: async (request) => {
      const caller = userOf(request);
      const [{ summary, canManageAll }, models, ytdlp] = await Promise.all([
        jobs.summary(caller),
        jobs.supportedModels(),
        ytdlpConfigured(),
      ]);
      const limits = uploadLimits(config);
      return {
        ok: true as const,
        summary,
        can_manage_all: canManageAll,
        config: {
          enabled: true,
          default_model: config.SPEECH_DEFAULT_MODEL,
          upload_max_mb: limits.effective_max_mb,
          upload_limit: {
            configured_mb: limits.configured_mb,
            php_upload_max_mb: limits.php_upload_max_mb,
            php_post_max_mb: limits.php_post_max_mb,
            effective_max_mb: limits.effective_max_mb,
            effective_max_label: limits.effective_max_label,
            limited_by_php: limits.limited_by_php,
          },
          ytdlp_configured: ytdlp,
        },
        models,
      };
    },
  });

  r.get('/api/speech/jobs', {
    config: user,
    schema: {
      tags,
      security,
      summary: 'Jobs visible to the caller, newest first',
      description:
        'Ordinary users see their own jobs. Users with `speech.manage` and administrators see every user’s jobs by ' +
        'default (the specification gives them all-user visibility); `all=0` limits them to their own. `all` is ' +
        'ignored for other users.',
      querystring: z.object({
        limit: z.coerce.number().int().min(1).max(500).default(100).describe('1 to 500, default 100'),
        all: z.enum(['0', '1', 'true', 'false']).optional().describe('Managers: 1 (default) for every user’s jobs, 0 for their own'),
      }),
      response: { 200: z.object({ ok: z.literal(true), jobs: z.array(jobSchema) }), ...errors },
    },
    handler: async (request) => {
      const all = request.query.all === undefined || request.query.all === '1' || request.query.all === 'true';
      const list = await jobs.list(userOf(request), { limit: request.query.limit, all });
      const now = new Date();
      return { ok: true as const, jobs: list.map((job) => presentJob(job, now)) };
    },
  });

  r.post('/api/speech/jobs', {
    config: user,
    schema: {
      tags,
      security,
      summary: 'Queue a transcription job from a media URL or an uploaded file',
      description:
        'Send either `source_url` (JSON or `application/x-www-form-urlencoded`) or one file as `media_file` ' +
        '(`multipart/form-data`), never both. `translation_target_languages` and `translation_target_languages[]` may ' +
        'be repeated or comma-separated. Diarization is on unless `disable_diarization` is truthy. A file larger than ' +
        'the effective upload limit (`GET /api/speech/status`), a partial upload, or a temporary-storage or transport ' +
        'failure answers 422 with the message under `errors.media_file[]`, and no job is queued. ' +
        csrfNote,
      consumes: ['application/json', 'application/x-www-form-urlencoded', 'multipart/form-data'],
      body: createJobFieldsSchema,
      response: { 201: jobMessageResponseSchema, ...errors },
    },
    // Multipart bodies are not parsed before the handler (the file is streamed to disk there), so
    // Fastify has no body for them: validate an empty one here, and the handler validates the form
    // fields with the same schema. A request without any body gets the same 422 as an empty form.
    preValidation: async (request) => {
      const raw = request as { body: unknown }; // not validated yet: the type provider's type does not hold
      raw.body ??= {};
    },
    handler: async (request, reply) => {
      const caller = userOf(request);
      let fields: CreateJobFields;
      let upload: Upload | null = null;
      if (request.isMultipart()) {
        ({ fields, upload } = await readMultipart(request, reply, media, uploadLimits(config)));
      } else {
        fields = request.body;
        if (fields.media_file !== undefined) {
          throw validationFailed({ media_file: ['a file must be sent as multipart/form-data'] });
        }
      }

      const url = fields.source_url;
      if (url !== undefined && upload) {
        await media.discard(upload.tempPath);
        const message = 'send either source_url or media_file, not both';
        throw validationFailed({ source_url: [message], media_file: [message] });
      }
      if (url === undefined && !upload) {
        const message = 'send source_url or a media_file upload';
        throw validationFailed({ source_url: [message], media_file: [message] });
      }

      let created: SpeechJob;
      try {
        created = await jobs.create(caller, {
          channel: 'web',
          source: upload ? { type: 'upload', ...upload } : { type: 'url', url: url! },
          label: fields.source_label,
          note: fields.source_note,
          model: fields.model,
          language: fields.language,
          analysisLanguage: fields.analysis_language,
          translationTargetLanguages: fields.translation_target_languages,
          diarization: !fields.disable_diarization,
        });
      } catch (err) {
        // JobService discards the file on its own validation failures; anything else must not leave it either.
        if (upload) await media.discard(upload.tempPath);
        throw err;
      }
      const job = await jobs.getVisible(caller, created.id);
      request.log.info({ jobId: job.id, source: job.sourceType, sizeBytes: upload?.sizeBytes }, 'speech job queued');
      return reply.code(201).send({ ok: true as const, message: 'Job queued.', job: presentJob(job) });
    },
  });

  r.get('/api/speech/jobs/:jobId', {
    config: user,
    schema: {
      tags,
      security,
      summary: 'One visible job (current pass) with runtime log, liveness and result sections',
      description: visibilityNote,
      params: jobIdParams,
      response: { 200: z.object({ ok: z.literal(true), job: jobDetailSchema }), ...jobErrors },
    },
    handler: async (request) => {
      const job = await jobs.getVisible(userOf(request), request.params.jobId);
      const detail = await jobs.detail(job);
      return {
        ok: true as const,
        job: presentJobDetail(job, detail, { unresponsiveAfterSeconds: config.SPEECH_UNRESPONSIVE_AFTER_SECONDS }),
      };
    },
  });

  r.get('/api/speech/jobs/:jobId/segments', {
    config: user,
    schema: {
      tags,
      security,
      summary: 'Timestamped transcript segments of the job’s current pass (additive)',
      description: visibilityNote,
      params: jobIdParams,
      response: { 200: segmentsResponseSchema, ...jobErrors },
    },
    handler: async (request) => {
      const job = await jobs.getVisible(userOf(request), request.params.jobId);
      const segments = await jobs.segments(job.id, job.currentPass);
      return {
        ok: true as const,
        job_id: job.id,
        pass: job.currentPass,
        segments: segments.map((s) => ({ seq: s.seq, start: s.startSeconds, end: s.endSeconds, text: s.text, speaker: s.speaker })),
      };
    },
  });

  r.post('/api/speech/jobs/:jobId/cancel', {
    config: user,
    schema: {
      tags,
      security,
      summary: 'Request cooperative cancellation of a processing job',
      description: `Only a job that is downloading, transcribing or finalizing (422 otherwise). The owner or a queue manager may act. ${csrfNote}`,
      params: jobIdParams,
      response: { 200: jobMessageResponseSchema, ...jobErrors },
    },
    handler: async (request) => {
      const job = await jobs.cancel(userOf(request), request.params.jobId);
      return { ok: true as const, message: 'Cancellation requested.', job: presentJob(job) };
    },
  });

  r.post('/api/speech/jobs/:jobId/restart', {
    config: user,
    schema: {
      tags,
      security,
      summary: 'Queue a failed or queued job again',
      description: `Only a failed or queued job (422 otherwise); the retry budget starts over. The owner or a queue manager may act. ${csrfNote}`,
      params: jobIdParams,
      response: { 200: jobMessageResponseSchema, ...jobErrors },
    },
    handler: async (request) => {
      const job = await jobs.restart(userOf(request), request.params.jobId);
      return { ok: true as const, message: 'Job queued again.', job: presentJob(job) };
    },
  });

  r.delete('/api/speech/jobs/:jobId', {
    config: user,
    schema: {
      tags,
      security,
      summary: 'Delete a job that is not processing, with its history and retained media',
      description: `A processing job answers 422 (cancel it first). The owner or a queue manager may act. ${csrfNote}`,
      params: jobIdParams,
      response: { 200: z.object({ ok: z.literal(true), message: z.string() }), ...jobErrors },
    },
    handler: async (request) => {
      await jobs.remove(userOf(request), request.params.jobId);
      return { ok: true as const, message: 'Job deleted.' };
    },
  });

  r.put('/api/speech/jobs/:jobId/target', {
    config: { auth: speechAdmin, rateLimit: SPEECH_RATE_LIMIT },
    schema: {
      tags,
      security,
      summary: 'Administrators: set the execution target of a job',
      description:
        '`auto` is capability-gated; `local` is the coordinator’s own runner; `worker` names one remote worker ' +
        `(which may be offline now) and never falls back to another runner. ${csrfNote}`,
      params: jobIdParams,
      body: z.object({
        mode: z.enum(['auto', 'local', 'worker']),
        worker: z.string().trim().min(1).max(200).optional().describe('Worker name; required with mode "worker"'),
      }),
      response: { 200: jobResponseSchema, ...jobErrors },
    },
    handler: async (request) => {
      const { mode, worker } = request.body;
      const job = await jobs.setExecutionTarget(userOf(request), request.params.jobId, { mode, ...(worker ? { worker } : {}) });
      return { ok: true as const, job: presentJob(job) };
    },
  });
}

/**
 * Reads a multipart submission: streams the single `media_file` to a temporary file (never into
 * memory) within the effective limit, and validates the other fields with the JSON schema. On any
 * failure nothing is left on disk and the error is a 422 under `errors.media_file` (or the field's
 * own name for an invalid field).
 */
async function readMultipart(
  request: FastifyRequest,
  reply: FastifyReply,
  media: MediaStore,
  limits: UploadLimits,
): Promise<{ fields: CreateJobFields; upload: Upload | null }> {
  const tooLarge = `the file is larger than the upload limit of ${limits.effective_max_label}`;
  const declared = Number(request.headers['content-length']);
  if (Number.isFinite(declared) && declared > limits.requestBytes) {
    // Refuse before reading: the body cannot fit, and draining it would only waste the upload.
    void reply.header('connection', 'close');
    throw validationFailed({ media_file: [tooLarge] });
  }

  const raw: Record<string, unknown> = {};
  let upload: Upload | null = null;
  try {
    for await (const part of request.parts()) {
      if (part.type === 'file') {
        if (part.fieldname !== 'media_file') {
          part.file.destroy();
          throw validationFailed({ media_file: [`unexpected file field "${part.fieldname}"; send the file as media_file`] });
        }
        if (upload) {
          part.file.destroy();
          throw validationFailed({ media_file: ['only one file may be uploaded per request'] });
        }
        if (typeof raw.source_url === 'string' && raw.source_url.trim() !== '') {
          part.file.destroy();
          const message = 'send either source_url or media_file, not both';
          throw validationFailed({ source_url: [message], media_file: [message] });
        }
        const written = await media.writeTemp(part.file, limits.effectiveBytes);
        const filename = cleanFilename(part.filename);
        if (part.file.truncated) {
          // The multipart per-file limit cut the stream short (it is the effective limit here).
          await media.discard(written.path);
          throw new MediaTooLargeError(tooLarge);
        }
        if (written.sizeBytes === 0 && !filename) {
          // An empty file input of a browser form: no file was chosen.
          await media.discard(written.path);
          continue;
        }
        if (written.sizeBytes === 0) {
          await media.discard(written.path);
          throw validationFailed({ media_file: ['the file is empty'] });
        }
        upload = { tempPath: written.path, filename: filename || 'upload', sizeBytes: written.sizeBytes, sha256: written.sha256 };
      } else {
        if (part.fieldname === 'media_file') throw validationFailed({ media_file: ['media_file must be a file'] });
        if (part.valueTruncated) throw validationFailed({ [part.fieldname]: ['is too long'] });
        const existing = raw[part.fieldname];
        raw[part.fieldname] = existing === undefined ? part.value : Array.isArray(existing) ? [...existing, part.value] : [existing, part.value];
      }
    }
  } catch (err) {
    if (upload) await media.discard(upload.tempPath);
    // Whatever is left of the body is not read: end the connection after the answer.
    if (!request.raw.readableEnded) void reply.header('connection', 'close');
    throw uploadError(err, request, tooLarge);
  }

  const parsed = createJobFieldsSchema.safeParse(raw);
  if (!parsed.success) {
    if (upload) await media.discard(upload.tempPath);
    const fieldErrors: Record<string, string[]> = {};
    for (const issue of parsed.error.issues) (fieldErrors[issue.path.join('.') || 'request'] ??= []).push(issue.message);
    throw validationFailed(fieldErrors);
  }
  return { fields: parsed.data, upload };
}

/** Every failure of an upload is a 422 under errors.media_file (spec Submission rules, 3). */
function uploadError(err: unknown, request: FastifyRequest, tooLarge: string): AppError {
  if (err instanceof AppError) return err;
  const e = err as { code?: string; message?: string };
  const message = e.message ?? '';
  let text: string;
  if (err instanceof MediaTooLargeError || e.code === 'FST_REQ_FILE_TOO_LARGE') {
    text = tooLarge;
  } else if (e.code === 'FST_FILES_LIMIT') {
    text = 'only one file may be uploaded per request';
  } else if (e.code === 'FST_PARTS_LIMIT' || e.code === 'FST_FIELDS_LIMIT') {
    text = 'the form has too many fields';
  } else if (
    request.raw.aborted ||
    e.code === 'FST_MP_PREMATURE_CLOSE' ||
    e.code === 'ECONNRESET' ||
    e.code === 'ERR_STREAM_PREMATURE_CLOSE' ||
    /unexpected end|terminated early/i.test(message)
  ) {
    text = 'the upload ended before the whole file arrived; nothing was stored';
  } else if (e.code === 'FST_PROTO_VIOLATION' || e.code === 'FST_INVALID_JSON_FIELD_ERROR' || /^Multipart:|malformed/i.test(message)) {
    text = `the multipart form is malformed (${message})`;
  } else {
    request.log.error({ err }, 'speech upload could not be stored');
    text = 'the upload could not be stored in temporary storage';
  }
  return validationFailed({ media_file: [text] });
}

/** The client's file name without directories or control characters, as a label and extension source. */
function cleanFilename(name: string | undefined): string {
  const base = path.posix.basename((name ?? '').replace(/\\/g, '/'));
  // eslint-disable-next-line no-control-regex
  return base.replace(/[\u0000-\u001f\u007f]/g, '').trim().slice(0, 300);
}
