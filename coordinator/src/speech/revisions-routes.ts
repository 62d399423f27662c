import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { errorBodySchema } from '@sonar/shared';
import { userOf } from '../accounts/auth-plugin.js';
import type { AuthRequirement } from '../accounts/types.js';
import type { SpeechDeps } from '../deps.js';
import { speechRateLimit } from './policy.js';
import { presentJob } from './jobs/presenter.js';
import { presentRetranscription } from './jobs/revision-presenter.js';
import { retranscribeBodySchema, revisionsQuerySchema, revisionsResponseSchema } from './revision-schemas.js';
import { jobIdParams, jobMessageResponseSchema } from './schemas.js';

const speechUser: AuthRequirement = { accept: ['session', 'jwt'], permissions: ['speech.use'] };
/** The machine re-transcription mutation: the JWT bearer only, never a browser session or a personal token. */
const speechJwt: AuthRequirement = { accept: ['jwt'], permissions: ['speech.use'] };
const tags = ['speech'];
const jobErrors = { 401: errorBodySchema, 403: errorBodySchema, 404: errorBodySchema, 422: errorBodySchema, 429: errorBodySchema };
const startErrors = jobErrors;

/** Re-transcription message of the API and the browser action. */
export const RETRANSCRIPTION_STARTED = 'Re-transcription queued; the earlier pass is kept as a read-only revision.';

/** Re-transcription: the revisions of a job, and the owner's new pass with another model. */
export async function speechRevisionRoutes(app: FastifyInstance, deps: Pick<SpeechDeps, 'config' | 'speech'>) {
  const { retranscription } = deps.speech;
  const r = app.withTypeProvider<ZodTypeProvider>();
  const publicBaseUrl = deps.config.PUBLIC_BASE_URL;

  r.get('/api/speech/jobs/:jobId/revisions', {
    config: { auth: speechUser, rateLimit: speechRateLimit(deps.config) },
    schema: {
      tags,
      security: [{ session: [] }, { bearerJwt: [] }],
      summary: 'Re-transcription state: the current pass, model choices for a new one, and earlier passes (read-only)',
      description:
        'Readable by anyone who may see the job (the owner; users with `speech.manage` and administrators see every job; others get 404). ' +
        '`current` is the current (primary) pass. `models` are the choices for a new pass: models a registered worker serves, minus the ' +
        'current one; a URL source is re-transcribed from its retained copy on the local runner only, so only models on the local ' +
        'allowlist (SPEECH_LOCAL_MODELS) that the local runner serves. `can_start` says whether the caller may start one now, else ' +
        '`unavailable_reason` says why: only the owner may start one (administrators read but do not start); the current pass must be ' +
        'completed; no diarization may be pending or running; the retained source media must still exist; another model must be available. ' +
        '`revisions[]` are the earlier completed passes, newest first: transcript, speaker-aware transcript, diarization and speaker labels ' +
        'as they were when archived, and the `analysis` and `translations` of that pass as archived with it. `?include=segments` adds each revision’s ' +
        'timestamped segments with speaker names.',
      params: jobIdParams,
      querystring: revisionsQuerySchema,
      response: { 200: revisionsResponseSchema, ...jobErrors },
    },
    handler: async (request) => {
      const state = await retranscription.state(userOf(request), request.params.jobId);
      return presentRetranscription(state, { includeSegments: request.query.include === 'segments' });
    },
  });

  r.post('/api/speech/jobs/:jobId/retranscribe', {
    config: { auth: speechJwt, rateLimit: speechRateLimit(deps.config) },
    schema: {
      tags,
      security: [{ bearerJwt: [] }],
      summary: 'Owner: re-transcribe a completed job with another model (JWT bearer only)',
      description:
        'Accepts only a JWT bearer from `POST /api/account/login`: a browser session cookie or a personal access token is refused with ' +
        '401 (there is no session fallback and no CSRF token; browsers use `POST /speech/jobs/{jobId}/retranscription`). ' +
        'Only the owner may start it: anyone else who can see the job, administrators included, gets 403; a job the caller cannot see is 404. ' +
        'Every rule answers 422 `validation_failed`: speaker diarization of the job is pending or running (`errors.diarization`: ' +
        'wait for it to finish); the current pass is not ' +
        'completed (`errors.status`); the retained source media was released (`errors.media`); the job is a token-API job with a ' +
        "`callback_url` and the coordinator has no public address for the new pass's callback (`PUBLIC_BASE_URL` unset or " +
        'local-only: `errors.callback_url`); the model is the current one, ' +
        'not served, or not allowed for this job (`errors.model`; see `models` of `GET /api/speech/jobs/{jobId}/revisions`). ' +
        'In one transaction the current pass becomes a read-only revision and the job is queued again as pass + 1 with the new ' +
        'model: no transcript, analysis, translations, diarization (pending again when requested) or speaker labels; a fresh retry ' +
        'budget; the next notification cycle (a terminal callback and completion report of the new pass). A URL source runs on the ' +
        'local runner only (`execution_target.mode` `local`). The runtime log gets `retranscription.started`.',
      params: jobIdParams,
      body: retranscribeBodySchema,
      response: { 200: jobMessageResponseSchema, ...startErrors },
    },
    handler: async (request) => {
      const job = await retranscription.start(userOf(request), request.params.jobId, request.body.model);
      return { ok: true as const, message: RETRANSCRIPTION_STARTED, job: presentJob(job, { publicBaseUrl }) };
    },
  });
}
