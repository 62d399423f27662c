import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorBodySchema } from '@sonar/shared';
import { userOf } from '../../accounts/auth-plugin.js';
import type { AuthRequirement } from '../../accounts/types.js';
import type { SpeechDeps } from '../../deps.js';
import { presentShare } from '../jobs/presenter.js';
import { speechRateLimit } from '../policy.js';
import { jobIdParams, shareSchema } from '../schemas.js';
import type { ShareService } from './share-service.js';

const speechUser: AuthRequirement = { accept: ['session', 'jwt'], permissions: ['speech.use'] };
const security: Array<Record<string, string[]>> = [{ session: [] }, { bearerJwt: [] }];
const tags = ['speech'];
const errors = { 401: errorBodySchema, 403: errorBodySchema, 404: errorBodySchema, 422: errorBodySchema, 429: errorBodySchema };
const csrfNote = 'From a browser session the request needs the `X-CSRF-Token` header.';

/** Signed-in API: create or disable the public share of a transcript (owner or queue manager). */
export async function shareRoutes(app: FastifyInstance, deps: Pick<SpeechDeps, 'config'>, shares: ShareService) {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const config = { auth: speechUser, rateLimit: speechRateLimit(deps.config) };
  const publicBaseUrl = deps.config.PUBLIC_BASE_URL;

  r.post('/api/speech/jobs/:jobId/share', {
    config,
    schema: {
      tags,
      security,
      summary: 'Create (or re-enable) the public share of a completed transcript',
      description:
        'The owner or a queue manager may act; other callers get 404. The job must be completed (422 under ' +
        '`errors.status` otherwise). An active share is returned unchanged; after a DELETE a new share gets a NEW ' +
        'token, so the disabled link stays dead. The page at `share.url` needs no sign-in, is not indexed, and shows ' +
        'the title, duration and transcript; `?full` adds timestamps and speaker labels, and `.txt`, `.srt`, `.vtt`, ' +
        '`.json`, `.docx` and `.rttm` are the downloads: the same files as `/api/speech/jobs/{jobId}/transcript.{format}`, ' +
        'except that the share page hides the job’s id (its JSON has `job_id: null`). ' +
        csrfNote,
      params: jobIdParams,
      response: { 200: z.object({ ok: z.literal(true), message: z.string(), share: shareSchema }), ...errors },
    },
    handler: async (request) => {
      const job = await shares.enable(userOf(request), request.params.jobId);
      const share = presentShare(job, publicBaseUrl);
      if (!share) throw new Error(`share of job ${job.id} was not stored`);
      return { ok: true as const, message: 'Transcript shared.', share };
    },
  });

  r.patch('/api/speech/jobs/:jobId/share', {
    config,
    schema: {
      tags,
      security,
      summary: 'Change the settings of the public share',
      description:
        '`playback`: whether the share page plays the retained media with the transcript (off by default; a new share ' +
        'starts with it off). The page at `share.url?full` then shows the player, and the media is served at ' +
        '`{share.url}.media` (byte ranges) while it is retained. The owner or a queue manager may act; other callers get ' +
        '404; 422 under `errors.share` when the job has no active share. ' +
        csrfNote,
      params: jobIdParams,
      body: z.object({ playback: z.boolean() }).strict(),
      response: { 200: z.object({ ok: z.literal(true), message: z.string(), share: shareSchema }), ...errors },
    },
    handler: async (request) => {
      const job = await shares.setPlayback(userOf(request), request.params.jobId, request.body.playback);
      const share = presentShare(job, publicBaseUrl);
      if (!share) throw new Error(`share of job ${job.id} was not stored`);
      return { ok: true as const, message: share.playback ? 'Playback allowed on the share page.' : 'Playback turned off on the share page.', share };
    },
  });

  r.delete('/api/speech/jobs/:jobId/share', {
    config,
    schema: {
      tags,
      security,
      summary: 'Disable the public share of a transcript',
      description:
        'The owner or a queue manager may act; other callers get 404. The share link answers 404 from now on. ' +
        `Idempotent: a job without an active share answers 200 as well. ${csrfNote}`,
      params: jobIdParams,
      response: { 200: z.object({ ok: z.literal(true), message: z.string(), share: z.null() }), ...errors },
    },
    handler: async (request) => {
      await shares.disable(userOf(request), request.params.jobId);
      return { ok: true as const, message: 'Share disabled.', share: null };
    },
  });
}
