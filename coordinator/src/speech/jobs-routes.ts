import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorBodySchema, safeString } from '@sonar/shared';
import { userOf } from '../accounts/auth-plugin.js';
import type { AuthRequirement } from '../accounts/types.js';
import type { SpeechDeps } from '../deps.js';
import { uploadLimits } from './host-limits.js';
import { speechRateLimit, speechStatusConfig } from './policy.js';
import { presentJob, presentSegment, queuedMessage } from './jobs/presenter.js';
import {
  createJobFieldsSchema,
  jobDetailSchema,
  jobIdParams,
  jobMessageResponseSchema,
  jobResponseSchema,
  jobSchema,
  segmentsResponseSchema,
  statusResponseSchema,
} from './schemas.js';
import { createSubmittedJob, emptyBodyForMultipart, readSubmission, jobSettings } from './submission.js';
import { localWorkerProblem } from './local-worker-status.js';
import { jobDetailPresenter } from './job-detail.js';

const speechUser: AuthRequirement = { accept: ['session', 'jwt'], permissions: ['speech.use'] };
const speechAdmin: AuthRequirement = { accept: ['session', 'jwt'], adminOnly: true };
const security: Array<Record<string, string[]>> = [{ session: [] }, { bearerJwt: [] }];
const tags = ['speech'];
const errors = { 401: errorBodySchema, 403: errorBodySchema, 422: errorBodySchema, 429: errorBodySchema };
const jobErrors = { ...errors, 404: errorBodySchema };
const csrfNote = 'From a browser session the request needs the `X-CSRF-Token` header (urlencoded forms may send `_csrf`).';
const visibilityNote = 'The owner sees the job; users with `speech.manage` (and administrators) see every job. Jobs the caller cannot see answer 404.';

/** Signed-in speech API (session or JWT with `speech.use`): status, queue, jobs and their actions. */
export async function speechJobRoutes(app: FastifyInstance, deps: Pick<SpeechDeps, 'config' | 'speech'>) {
  const { config } = deps;
  const { jobs, media, models: catalog } = deps.speech;
  const r = app.withTypeProvider<ZodTypeProvider>();
  const detail = jobDetailPresenter(deps);
  const user = { auth: speechUser, rateLimit: speechRateLimit(deps.config) };
  const publicBaseUrl = config.PUBLIC_BASE_URL;

  r.get('/api/speech/status', {
    config: user,
    schema: {
      tags,
      security,
      summary: 'Queue counters, the caller’s visibility and the upload configuration',
      description:
        '`summary` counts the jobs the caller can see (all jobs with `can_manage_all`). ' +
        '`config.upload_limit` reports this host’s limits under their historical names: `php_upload_max_mb` is the ' +
        'multipart per-file limit and `php_post_max_mb` the request body limit of an upload request (file plus form ' +
        'fields); `effective_max_mb` (also `upload_max_mb`) is the lowest of those and SPEECH_UPLOAD_MAX_MB, and ' +
        '`limited_by_php` says a host limit is lower than the configured one. `ytdlp_configured`: the coordinator has a yt-dlp ' +
        'executable for page URLs (SPEECH_YTDLP_PATH, by default `yt-dlp` on PATH). `models` is additive: the models a job may ask for ' +
        '(those a registered worker serves); `connected_models` (additive) the ones a connected worker takes now.',
      response: { 200: statusResponseSchema, ...errors },
    },
    handler: async (request) => {
      const caller = userOf(request);
      const [{ summary, canManageAll }, snapshot, statusConfig] = await Promise.all([jobs.summary(caller), catalog.snapshot(), speechStatusConfig(config)]);
      return {
        ok: true as const,
        summary,
        can_manage_all: canManageAll,
        local_worker_problem: localWorkerProblem(),
        config: statusConfig,
        models: snapshot.served(),
        connected_models: snapshot.connected(),
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
        'default; `all=0` limits them to their own. `all` is ' +
        'ignored for other users.',
      querystring: z.object({
        limit: z.coerce.number().int().min(1).max(500).default(100).describe('1 to 500, default 100'),
        all: z.enum(['0', '1', 'true', 'false']).optional().describe('Managers: 1 (default) for every user’s jobs, 0 for their own'),
      }),
      response: { 200: z.object({ ok: z.literal(true), jobs: z.array(jobSchema) }), ...errors },
    },
    handler: async (request) => {
      const all = request.query.all === undefined || request.query.all === '1' || request.query.all === 'true';
      const [list, availability] = await Promise.all([jobs.list(userOf(request), { limit: request.query.limit, all }), catalog.concurrent()]);
      const now = new Date();
      return { ok: true as const, jobs: list.map((job) => presentJob(job, { publicBaseUrl, now, availability })) };
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
    preValidation: emptyBodyForMultipart,
    handler: async (request, reply) => {
      const caller = userOf(request);
      const { fields, source, upload } = await readSubmission(request, reply, {
        media,
        limits: uploadLimits(config),
        schema: createJobFieldsSchema,
      });
      const created = await createSubmittedJob(jobs, media, caller, upload, {
        channel: 'web',
        source,
        ...jobSettings(fields),
      });
      const job = await jobs.getVisible(caller, created.id);
      request.log.info({ jobId: job.id, source: job.sourceType, sizeBytes: upload?.sizeBytes }, 'speech job queued');
      const availability = await catalog.snapshot();
      return reply.code(201).send({ ok: true as const, message: queuedMessage(job, availability), job: presentJob(job, { publicBaseUrl, availability }) });
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
      return { ok: true as const, job: await detail(job) };
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
        segments: segments.map(presentSegment),
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
      return { ok: true as const, message: 'Cancellation requested.', job: presentJob(job, { publicBaseUrl }) };
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
      return { ok: true as const, message: 'Job queued again.', job: presentJob(job, { publicBaseUrl }) };
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
    config: { auth: speechAdmin, rateLimit: speechRateLimit(deps.config) },
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
        worker: safeString().trim().min(1).max(200).optional().describe('Worker name; required with mode "worker"'),
      }),
      response: { 200: jobResponseSchema, ...jobErrors },
    },
    handler: async (request) => {
      const { mode, worker } = request.body;
      const job = await jobs.setExecutionTarget(userOf(request), request.params.jobId, { mode, ...(worker ? { worker } : {}) });
      return { ok: true as const, job: presentJob(job, { publicBaseUrl }) };
    },
  });
}
