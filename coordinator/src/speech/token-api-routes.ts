import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorBodySchema } from '@sonar/shared';
import { principalOf, userOf } from '../accounts/auth-plugin.js';
import type { AuthRequirement } from '../accounts/types.js';
import type { SpeechDeps } from '../deps.js';
import { unauthenticated } from '../http/errors.js';
import { uploadLimits } from './host-limits.js';
import { presentJob, queuedMessage } from './jobs/presenter.js';
import { speechRateLimit, speechStatusConfig } from './policy.js';
import { apiCreateJobFieldsSchema, jobDetailSchema, jobIdParams, jobMessageResponseSchema, jobSchema, statusResponseSchema } from './schemas.js';
import { createSubmittedJob, emptyBodyForMultipart, readSubmission, jobSettings } from './submission.js';
import { jobDetailPresenter } from './job-detail.js';

/** The token API needs an active personal token with scope speech.api. */
const tokenAuth: AuthRequirement = {
  accept: ['personal_token'],
  tokenLegacyTransports: true,
  scope: 'speech.api',
  permissions: ['speech.api', 'speech.use'],
};
const security: Array<Record<string, string[]>> = [{ personalToken: [] }];
const tags = ['speech-api'];
const errors = { 401: errorBodySchema, 403: errorBodySchema, 422: errorBodySchema, 429: errorBodySchema };
const jobErrors = { ...errors, 404: errorBodySchema };
const authNote =
  'Send a personal access token with scope `speech.api` as `Authorization: Bearer <TOKEN>` (the legacy `X-Api-Key` ' +
  'header and `apikey` query parameter also work); its owner needs the permissions `speech.api` and `speech.use`. ' +
  'Sessions and JWTs are not accepted here (401).';
const visibilityNote =
  'Only API-queue jobs (`queue_channel: api`): the owner’s, and for users with `speech.manage` every user’s. Web-queue ' +
  'jobs and jobs the caller cannot see answer 404.';

const apiStatusResponseSchema = statusResponseSchema.pick({ ok: true, summary: true, config: true, models: true, connected_models: true });

/**
 * Token-authenticated server-to-server API (`/api/speech/transcribe*`): submission with a required
 * terminal callback, and the API channel's counters and jobs.
 */
export async function speechTokenApiRoutes(app: FastifyInstance, deps: Pick<SpeechDeps, 'config' | 'speech'>) {
  const { config } = deps;
  const { jobs, media, models: catalog } = deps.speech;
  const r = app.withTypeProvider<ZodTypeProvider>();
  const detail = jobDetailPresenter(deps);
  const routeConfig = { auth: tokenAuth, rateLimit: speechRateLimit(deps.config) };
  const publicBaseUrl = config.PUBLIC_BASE_URL;

  r.get('/api/speech/transcribe/status', {
    config: routeConfig,
    schema: {
      tags,
      security,
      summary: 'Queue counters of the API channel and the upload configuration',
      description:
        '`summary` counts the token owner’s API-queue jobs (users with `speech.manage`: every API-queue job). ' +
        '`config` is the same as in `GET /api/speech/status`; `models` (additive) lists the models a job may ask for, ' +
        '`connected_models` (additive) the ones a connected worker takes now. ' +
        authNote,
      response: { 200: apiStatusResponseSchema, ...errors },
    },
    handler: async (request) => {
      const [{ summary }, snapshot, statusConfig] = await Promise.all([jobs.summary(userOf(request), 'api'), catalog.snapshot(), speechStatusConfig(config)]);
      return { ok: true as const, summary, config: statusConfig, models: snapshot.served(), connected_models: snapshot.connected() };
    },
  });

  r.get('/api/speech/transcribe/jobs', {
    config: routeConfig,
    schema: {
      tags,
      security,
      summary: 'API-queue jobs visible to the token owner, newest first',
      description: `${visibilityNote} ${authNote}`,
      querystring: z.object({
        limit: z.coerce.number().int().min(1).max(500).default(100).describe('1 to 500, default 100'),
      }),
      response: { 200: z.object({ ok: z.literal(true), jobs: z.array(jobSchema) }), ...errors },
    },
    handler: async (request) => {
      const list = await jobs.list(userOf(request), { limit: request.query.limit, channel: 'api', all: true });
      const now = new Date();
      const availability = await catalog.snapshot();
      return { ok: true as const, jobs: list.map((job) => presentJob(job, { publicBaseUrl, now, availability })) };
    },
  });

  r.get('/api/speech/transcribe/jobs/:jobId', {
    config: routeConfig,
    schema: {
      tags,
      security,
      summary: 'One API-queue job with runtime log, liveness, share and callback delivery',
      description: `${visibilityNote} ${authNote}`,
      params: jobIdParams,
      response: { 200: z.object({ ok: z.literal(true), job: jobDetailSchema }), ...jobErrors },
    },
    handler: async (request) => {
      const job = await jobs.getVisible(userOf(request), request.params.jobId, 'api');
      return { ok: true as const, job: await detail(job) };
    },
  });

  r.post('/api/speech/transcribe', {
    config: routeConfig,
    schema: {
      tags,
      security,
      summary: 'Queue an API-channel transcription job with a terminal callback',
      description:
        '`callback_url` (http or https) is required: when the job reaches `completed` or `failed` it receives one JSON ' +
        'POST (`{ok, event, job}`, signed; see docs/speech.md). Send either `source_url` (JSON or urlencoded) or one ' +
        'file as `media_file` (`multipart/form-data`), never both. Diarization is on unless `disable_diarization` is ' +
        'truthy (absent, false, "0", "false" and "" keep it). Upload failures (too large, partial, storage) answer 422 ' +
        'under `errors.media_file[]` and queue nothing. A coordinator without a public address (`PUBLIC_BASE_URL` unset or ' +
        'local-only: localhost, a loopback address) cannot send a callback whose `job_url` anyone could open, so it refuses the job: ' +
        '422 under `errors.callback_url` naming `PUBLIC_BASE_URL`, nothing queued. The job starts with `callback.status: pending` and `share: null`; ' +
        'a public share is created when the transcript completes. ' +
        authNote,
      consumes: ['application/json', 'application/x-www-form-urlencoded', 'multipart/form-data'],
      body: apiCreateJobFieldsSchema,
      response: { 201: jobMessageResponseSchema, ...errors },
    },
    preValidation: emptyBodyForMultipart,
    // callback_url is required, which the stand-in body of a multipart request lacks: readSubmission
    // throws this validation error for JSON and urlencoded bodies and validates multipart fields itself.
    attachValidation: true,
    handler: async (request, reply) => {
      const principal = principalOf(request);
      if (principal.via !== 'personal_token') throw unauthenticated('A personal access token is required.');
      const caller = principal.user;
      const { fields, source, upload } = await readSubmission(request, reply, {
        media,
        limits: uploadLimits(config),
        schema: apiCreateJobFieldsSchema,
      });
      const created = await createSubmittedJob(jobs, media, caller, upload, {
        channel: 'api',
        source,
        ...jobSettings(fields),
        callbackUrl: fields.callback_url,
        apiTokenId: principal.tokenId,
      });
      const job = await jobs.getVisible(caller, created.id, 'api');
      request.log.info({ jobId: job.id, source: job.sourceType, tokenId: principal.tokenId }, 'speech API job queued');
      const availability = await catalog.snapshot();
      return reply.code(201).send({ ok: true as const, message: queuedMessage(job, availability), job: presentJob(job, { publicBaseUrl, availability }) });
    },
  });
}
