import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorBodySchema, safeString } from '@sonar/shared';
import { userOf } from '../../accounts/auth-plugin.js';
import type { AuthRequirement } from '../../accounts/types.js';
import type { SpeechDeps } from '../../deps.js';
import { speechRateLimit } from '../policy.js';
import { jobDetailSchema, jobIdParams } from '../schemas.js';
import type { AiService } from './ai-service.js';
import { jobDetailPresenter } from '../job-detail.js';

const speechUser: AuthRequirement = { accept: ['session', 'jwt'], permissions: ['speech.use'] };
const security: Array<Record<string, string[]>> = [{ session: [] }, { bearerJwt: [] }];
const tags = ['speech'];
const errors = { 401: errorBodySchema, 403: errorBodySchema, 404: errorBodySchema, 422: errorBodySchema, 429: errorBodySchema };
const csrfNote = 'From a browser session the request needs the `X-CSRF-Token` header (urlencoded forms may send `_csrf`).';
const response = z.object({ ok: z.literal(true), message: z.string(), job: jobDetailSchema });
const notConfigured = 'When no AI provider is configured (OPENAI_BASE_URL/OPENAI_MODEL unset) the answer is 503 `service_unavailable`.';

/** Optional text of the metadata form: a string (trimmed; empty clears it) or null. */
const metadataText = (max: number, multiline: boolean) =>
  z
    .union([safeString({ multiline }).max(max), z.null()])
    .optional()
    .transform((v) => (v === undefined ? undefined : v === null || !v.trim() ? null : v.trim()));

/** Transcript analysis on demand, title suggestions and the metadata form (title, note). */
export async function aiRoutes(app: FastifyInstance, deps: Pick<SpeechDeps, 'config' | 'speech'>, ai: AiService) {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const user = { auth: speechUser, rateLimit: speechRateLimit(deps.config) };

  const detail = jobDetailPresenter(deps);

  r.post('/api/speech/jobs/:jobId/analyze', {
    config: user,
    schema: {
      tags,
      security,
      summary: 'Run transcript analysis (summary, key points, action items, topics)',
      description:
        'The owner or a queue manager; non-admin callers need AI-provider access (`provider_openai`, else 403). The transcript ' +
        'must exist (422 while the job is not completed or when it holds no speech). The analysis is queued as a new generation ' +
        '(`analysis.state` `pending`, then `running`, `completed` or `failed` with the upstream’s reason) in `analysis_language`, ' +
        'else the job’s language hint, else the transcript’s own language, from the speaker-aware transcript when diarization ' +
        'labelled it; long transcripts are analysed in parts and merged. When it completes, the translations of the pass are ' +
        `made again so they carry it. 422 (under \`analysis\`) while an analysis is pending or running. ${notConfigured} ${csrfNote}`,
      params: jobIdParams,
      response: { 202: response, ...errors, 503: errorBodySchema },
    },
    handler: async (request, reply) => {
      const job = await ai.analyze(userOf(request), request.params.jobId);
      return reply.code(202).send({ ok: true as const, message: 'Transcript analysis queued.', job: await detail(job) });
    },
  });

  r.post('/api/speech/jobs/:jobId/title-suggestion', {
    config: user,
    schema: {
      tags,
      security,
      summary: 'Suggest a title from the transcript (not saved)',
      description:
        'Owner only, with AI-provider access (`provider_openai`; administrators always). Answers a short transcript-based ' +
        '`title` and saves nothing: the job page puts it into the editable title field, and it becomes the title only when ' +
        'the owner saves the metadata form (`PATCH /api/speech/jobs/{jobId}`). 422 without a completed transcript; 503 when ' +
        `no provider is configured or the provider failed (the message says why). ${csrfNote}`,
      params: jobIdParams,
      response: { 200: z.object({ ok: z.literal(true), title: z.string() }), ...errors, 503: errorBodySchema },
    },
    handler: async (request) => ({ ok: true as const, title: await ai.suggestTitle(userOf(request), request.params.jobId) }),
  });

  r.patch('/api/speech/jobs/:jobId', {
    config: user,
    schema: {
      tags,
      security,
      summary: 'Save the metadata form: title and note',
      description:
        'Owner only. `source_label` is the title (an empty string or null clears it: the file name or URL is shown), ' +
        '`source_note` the free-text note; a field not sent keeps its value. Saving a title that differs from the current one ' +
        `marks it as the owner’s (\`title_edited\`): automatic titles never replace it. ${csrfNote}`,
      params: jobIdParams,
      body: z.object({ source_label: metadataText(300, false), source_note: metadataText(5000, true) }),
      response: { 200: response, ...errors },
    },
    handler: async (request) => {
      const { source_label, source_note } = request.body;
      const job = await ai.updateMetadata(userOf(request), request.params.jobId, {
        ...(source_label !== undefined ? { label: source_label } : {}),
        ...(source_note !== undefined ? { note: source_note } : {}),
      });
      return { ok: true as const, message: 'Saved.', job: await detail(job) };
    },
  });
}
