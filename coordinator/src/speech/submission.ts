import path from 'node:path';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import type { AuthUser } from '../accounts/types.js';
import { AppError, validationFailed, zodFieldErrors } from '../http/errors.js';
import type { UploadLimits } from './host-limits.js';
import type { SpeechJob } from './jobs/entities.js';
import type { CreateJobInput, JobService } from './jobs/job-service.js';
import { MediaTooLargeError, type MediaStore } from './jobs/media-store.js';
import type { CreateJobFields } from './schemas.js';

/**
 * Job submission shared by the signed-in API (POST /api/speech/jobs) and the token API
 * (POST /api/speech/transcribe): either `source_url` (JSON or urlencoded, validated by Fastify) or
 * one multipart `media_file` streamed to a temporary file, never both.
 */

export interface Upload {
  tempPath: string;
  filename: string;
  sizeBytes: number;
  sha256: string;
}

export interface Submission<F extends CreateJobFields> {
  fields: F;
  source: CreateJobInput['source'];
  /** The uploaded file, if any (already part of `source`); the caller must discard it if it does not queue a job. */
  upload: Upload | null;
}

/**
 * Multipart bodies are not parsed before the handler (the file is streamed to disk there), so
 * Fastify has no body for them: a submission route validates an empty one (this preValidation
 * hook), and readSubmission validates the form fields with the same schema. A request without any
 * body gets the same 422 as an empty form. A route whose schema has required fields sets
 * `attachValidation: true`: readSubmission then throws Fastify's validation error for JSON and
 * urlencoded bodies only, since the empty stand-in body of a multipart request proves nothing.
 */
/** The job settings every submission path (multipart/JSON, token API, tus) takes from the same form fields. */
export function jobSettings(fields: CreateJobFields) {
  return {
    label: fields.source_label,
    note: fields.source_note,
    model: fields.model,
    language: fields.language,
    analysisLanguage: fields.analysis_language,
    translationTargetLanguages: fields.translation_target_languages,
    diarization: !fields.disable_diarization,
    speakers: fields.speakers,
  };
}

export async function emptyBodyForMultipart(request: FastifyRequest) {
  const raw = request as { body: unknown }; // not validated yet: the type provider's type does not hold
  raw.body ??= {};
}

/**
 * The validated fields and the job source of a submission. `schema` is the route's body schema;
 * JSON and urlencoded bodies were already validated with it by Fastify.
 */
export async function readSubmission<F extends CreateJobFields>(
  request: FastifyRequest,
  reply: FastifyReply,
  opts: { media: MediaStore; limits: UploadLimits; schema: z.ZodType<F> },
): Promise<Submission<F>> {
  const { media } = opts;
  let fields: F;
  let upload: Upload | null = null;
  if (request.isMultipart()) {
    ({ fields, upload } = await readMultipart(request, reply, opts));
  } else {
    if (request.validationError) throw request.validationError;
    fields = request.body as F;
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
  return { fields, upload, source: upload ? { type: 'upload', ...upload } : { type: 'url', url: url! } };
}

/** JobService.create for a submission: whatever goes wrong, no uploaded file is left behind. */
export async function createSubmittedJob(
  jobs: JobService,
  media: MediaStore,
  caller: AuthUser,
  upload: Upload | null,
  input: CreateJobInput,
): Promise<SpeechJob> {
  try {
    return await jobs.create(caller, input);
  } catch (err) {
    // JobService discards the file on its own validation failures; anything else must not leave it either.
    if (upload) await media.discard(upload.tempPath);
    throw err;
  }
}

/**
 * Reads a multipart submission: streams the single `media_file` to a temporary file (never into
 * memory) within the effective limit, and validates the other fields with the route's schema. On
 * any failure nothing is left on disk and the error is a 422 under `errors.media_file` (or the
 * field's own name for an invalid field).
 */
async function readMultipart<F extends CreateJobFields>(
  request: FastifyRequest,
  reply: FastifyReply,
  opts: { media: MediaStore; limits: UploadLimits; schema: z.ZodType<F> },
): Promise<{ fields: F; upload: Upload | null }> {
  const { media, limits, schema } = opts;
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
        // (An unchosen file input of a browser form sends an empty part without a name: not a file.)
        if (part.filename && typeof raw.source_url === 'string' && raw.source_url.trim() !== '') {
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
        raw[part.fieldname] = existing === undefined ? part.value : Array.isArray(existing) ? [...(existing as unknown[]), part.value] : [existing, part.value];
      }
    }
  } catch (err) {
    if (upload) await media.discard(upload.tempPath);
    // Whatever is left of the body is not read: end the connection after the answer.
    if (!request.raw.readableEnded) void reply.header('connection', 'close');
    throw uploadError(err, request, tooLarge);
  }

  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    if (upload) await media.discard(upload.tempPath);
    throw validationFailed(zodFieldErrors(parsed.error, 'request'));
  }
  return { fields: parsed.data, upload };
}

/** Every failure of an upload is a 422 under errors.media_file (too large, partial or unstorable), and nothing is queued. */
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
    // eslint-disable-next-line @typescript-eslint/no-deprecated -- `destroyed` is no substitute: it is also set when our own stream error tore the request down; only `aborted` says the client went away
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
export function cleanFilename(name: string | null | undefined): string {
  const base = path.posix.basename((name ?? '').replace(/\\/g, '/'));
  return (
    base
      // eslint-disable-next-line no-control-regex
      .replace(/[\u0000-\u001f\u007f]/g, '')
      .trim()
      .slice(0, 300)
  );
}
