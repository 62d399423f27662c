import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorBodySchema, safeString } from '@sonar/shared';
import { userOf } from '../../accounts/auth-plugin.js';
import type { AuthRequirement } from '../../accounts/types.js';
import type { SpeechDeps } from '../../deps.js';
import { speechRateLimit } from '../policy.js';
import { diarizationRerunSchema, jobDetailSchema, jobIdParams } from '../schemas.js';
import { jobDetailPresenter } from '../job-detail.js';

const speechUser: AuthRequirement = { accept: ['session', 'jwt'], permissions: ['speech.use'] };
const security: Array<Record<string, string[]>> = [{ session: [] }, { bearerJwt: [] }];
const tags = ['speech'];
const errors = { 401: errorBodySchema, 403: errorBodySchema, 404: errorBodySchema, 422: errorBodySchema, 429: errorBodySchema };
const csrfNote = 'From a browser session the request needs the `X-CSRF-Token` header (urlencoded forms may send `_csrf`).';
const response = z.object({ ok: z.literal(true), message: z.string(), job: jobDetailSchema });

/** Speaker diarization of a job: run or re-run it, and name its speakers (owner only). */
export async function diarizationRoutes(app: FastifyInstance, deps: Pick<SpeechDeps, 'config' | 'speech'>) {
  const { diarization } = deps.speech;
  const r = app.withTypeProvider<ZodTypeProvider>();
  const user = { auth: speechUser, rateLimit: speechRateLimit(deps.config) };

  const detail = jobDetailPresenter(deps);

  r.post('/api/speech/jobs/:jobId/diarization', {
    config: user,
    schema: {
      tags,
      security,
      summary: 'Run or re-run speaker diarization on a completed transcript',
      description:
        'Owner only (others who may see the job get 403). Allowed when the transcript is completed, the source media is ' +
        'still retained and diarization is completed, failed, unavailable or skipped: it becomes `pending` and a worker with a ' +
        'diarizer runs it; the transcript, analysis and translations stay as they are and transcription is not run again ' +
        '(unless the pass lost its timestamped segments: they are regenerated from the retained media first). The ' +
        'preference to diarize is saved on the job. The optional body states the speaker count for this run: `num_speakers` ' +
        '(exactly that many) or `min_speakers` / `max_speakers` (bounds), integers from 1 to 32; it replaces the count stated ' +
        'before (`diarization.requested_speakers`), and without one the diarizer counts by itself. 422 under the field for ' +
        'a non-integer or out-of-range count, `min_speakers` above `max_speakers`, or `num_speakers` with a bound; 422 while diarization is pending or running (`errors.diarization`), when the transcript ' +
        'is not completed (`errors.status`) or the media was released (`errors.media`). A rerun replaces the speakers, so their ' +
        `names start afresh. ${csrfNote}`,
      params: jobIdParams,
      body: diarizationRerunSchema,
      response: { 200: response, ...errors },
    },
    handler: async (request) => {
      const job = await diarization.rerun(userOf(request), request.params.jobId, request.body.speakers);
      return { ok: true as const, message: 'Speaker diarization requested.', job: await detail(job) };
    },
  });

  r.put('/api/speech/jobs/:jobId/speakers', {
    config: user,
    schema: {
      tags,
      security,
      summary: 'Name the speakers of the current pass (speaker editor)',
      description:
        'Owner only. `speakers` maps speaker keys of the current pass (`S1`, `S2`, … as in `diarization.speakers[].key`) to ' +
        'names; an empty name goes back to "Speaker N"; keys not sent keep their names. The names appear in the transcript, ' +
        'the share page (`?full`) and the callback’s `speaker_aware_transcript`. 422 for keys the pass does not have, and ' +
        `while a diarization is pending or running (its result replaces the speakers). ${csrfNote}`,
      params: jobIdParams,
      body: z.object({
        speakers: z
          .record(z.string().regex(/^S[1-9][0-9]{0,3}$/, 'a speaker key such as S1'), safeString().trim().max(60))
          .refine((o) => Object.keys(o).length > 0 && Object.keys(o).length <= 64, 'name 1 to 64 speakers'),
      }),
      response: { 200: response, ...errors },
    },
    handler: async (request) => {
      const job = await diarization.rename(userOf(request), request.params.jobId, request.body.speakers);
      return { ok: true as const, message: 'Speaker names saved.', job: await detail(job) };
    },
  });
}
