import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorBodySchema } from '@sonar/shared';
import { userOf } from '../accounts/auth-plugin.js';
import type { AuthRequirement } from '../accounts/types.js';
import type { SpeechDeps } from '../deps.js';
import { presentJob } from './jobs/presenter.js';
import { SPEECH_RATE_LIMIT } from './policy.js';
import { cueLimitsOf, cueLimitsQuery, jobIdParams } from './schemas.js';
import {
  RTTM_MEDIA_TYPE,
  TRANSCRIPT_FORMATS,
  TRANSCRIPT_MEDIA_TYPES,
  attachmentDisposition,
  downloadOfJob,
  renderTranscript,
  transcriptRttm,
  type TranscriptFormat,
} from './jobs/transcript-formats.js';
import type { CueLimits } from './jobs/subtitle-cues.js';

const speechUser: AuthRequirement = { accept: ['session', 'jwt'], permissions: ['speech.use'] };
const security: Array<Record<string, string[]>> = [{ session: [] }, { bearerJwt: [] }];
const errors = { 401: errorBodySchema, 403: errorBodySchema, 404: errorBodySchema, 422: errorBodySchema, 429: errorBodySchema };
const rttmErrors = { ...errors, 409: errorBodySchema };
const format = z.enum(TRANSCRIPT_FORMATS);
const description =
  'The current pass of a visible job as a download (`Content-Disposition: attachment`, named after the title): `txt` plain ' +
  'text (speaker turns when speakers are known), `srt` SubRip and `vtt` WebVTT subtitles (cues laid out from word times within ' +
  'common limits — 2 lines of 42 characters, 7 s, 20 characters/s, 80 ms gaps, never across a change of speaker; `max_chars`, `max_lines` ' +
  'and `max_seconds` change the limits — with the speaker marked at each change: `Name: ` in SRT, a `<v Name>` voice span on every WebVTT cue), `json` the segments with start/end seconds and speakers (and, where the engine gave word times, their `words` with ' +
  'times and speaker; segments are split where the speaker changes). Available while the ' +
  'job runs too (the segments so far). Add `inline=1` to view it in the browser instead.';

/** Signed-in API: transcript downloads (TXT, SRT, WebVTT, JSON) and speaker turns (RTTM) of a job's current pass. */
export async function transcriptRoutes(app: FastifyInstance, deps: Pick<SpeechDeps, 'config' | 'speech'>) {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { jobs } = deps.speech;
  const inline = z.enum(['0', '1']).optional().describe('1: no attachment header (view in the browser)');

  async function send(
    reply: FastifyReply,
    userJob: { jobId: number },
    request: Parameters<typeof userOf>[0],
    fmt: TranscriptFormat,
    asInline: boolean,
    limits: CueLimits,
  ) {
    const job = await jobs.getVisible(userOf(request), userJob.jobId);
    const segments = await jobs.segments(job.id, job.currentPass);
    const title = presentJob(job, { publicBaseUrl: deps.config.PUBLIC_BASE_URL }).source_label;
    const body = renderTranscript(downloadOfJob(job, segments, title), fmt, limits);
    if (!asInline) void reply.header('content-disposition', attachmentDisposition(title, fmt));
    // Never cached by shared caches: the transcript is private and changes while the job runs.
    return reply.header('cache-control', 'private, no-store').type(TRANSCRIPT_MEDIA_TYPES[fmt]).send(body);
  }

  // Registered before `transcript.:format`; a static path wins over the parametric one either way.
  r.get('/api/speech/jobs/:jobId/transcript.rttm', {
    config: { auth: speechUser, rateLimit: SPEECH_RATE_LIMIT },
    schema: {
      tags: ['speech'],
      security,
      summary: 'Download the speaker turns as RTTM',
      description:
        'The speaker diarization of the current pass as RTTM (one `SPEAKER <file-id> 1 <start> <duration> <NA> <NA> <speaker> <NA> <NA>` ' +
        'line per turn, seconds, sorted by start; `<file-id>` is `job-{id}`, `<speaker>` the key `S1`… the segments carry). ' +
        'These are the diarizer’s turns; every word of the transcript carries the speaker whose turn overlaps it most. ' +
        '409 (`conflict`) while the job has no completed diarization (not requested, pending, running, failed or unavailable). ' +
        '`Content-Disposition: attachment` unless `inline=1`.',
      params: jobIdParams,
      querystring: z.object({ inline }),
      produces: [RTTM_MEDIA_TYPE],
      response: { 200: z.string().describe('RTTM lines'), ...rttmErrors },
    },
    handler: async (request, reply) => {
      const { job, turns } = await jobs.speakerTurns(userOf(request), request.params.jobId);
      const title = presentJob(job, { publicBaseUrl: deps.config.PUBLIC_BASE_URL }).source_label;
      if (request.query.inline !== '1') void reply.header('content-disposition', attachmentDisposition(title, 'rttm'));
      return reply
        .header('cache-control', 'private, no-store')
        .type(RTTM_MEDIA_TYPE)
        .send(transcriptRttm(`job-${job.id}`, turns));
    },
  });

  r.get('/api/speech/jobs/:jobId/transcript.:format', {
    config: { auth: speechUser, rateLimit: SPEECH_RATE_LIMIT },
    schema: {
      tags: ['speech'],
      security,
      summary: 'Download the transcript as TXT, SRT, WebVTT or JSON',
      description,
      params: jobIdParams.extend({ format }),
      querystring: cueLimitsQuery.extend({ inline }),
      produces: Object.values(TRANSCRIPT_MEDIA_TYPES),
      response: { 200: z.string().describe('The transcript in the requested format'), ...errors },
    },
    handler: (request, reply) => send(reply, request.params, request, request.params.format, request.query.inline === '1', cueLimitsOf(request.query)),
  });

  r.get('/api/speech/jobs/:jobId/transcript', {
    config: { auth: speechUser, rateLimit: SPEECH_RATE_LIMIT },
    schema: {
      tags: ['speech'],
      security,
      summary: 'Download the transcript (format as a query parameter)',
      description: `Same as \`/transcript.{format}\`, with \`format\` (default \`txt\`) in the query. ${description}`,
      params: jobIdParams,
      querystring: cueLimitsQuery.extend({ format: format.default('txt'), inline }),
      produces: Object.values(TRANSCRIPT_MEDIA_TYPES),
      response: { 200: z.string().describe('The transcript in the requested format'), ...errors },
    },
    handler: (request, reply) => send(reply, request.params, request, request.query.format, request.query.inline === '1', cueLimitsOf(request.query)),
  });
}
