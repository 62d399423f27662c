import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorBodySchema } from '@sonar/shared';
import { userOf } from '../accounts/auth-plugin.js';
import type { AuthRequirement } from '../accounts/types.js';
import type { SpeechDeps } from '../deps.js';
import { mediaPeaks, mediaStream, parseRange, playableMedia, type PlayableMedia } from './jobs/playback.js';
import { MEDIA_RATE_LIMIT, speechRateLimit } from './policy.js';
import { jobIdParams } from './schemas.js';
import { AppError } from '../http/errors.js';

const speechUser: AuthRequirement = { accept: ['session', 'jwt'], permissions: ['speech.use'] };
const security: Array<Record<string, string[]>> = [{ session: [] }, { bearerJwt: [] }];
const tags = ['speech'];
const errors = { 401: errorBodySchema, 403: errorBodySchema, 404: errorBodySchema, 422: errorBodySchema, 429: errorBodySchema };

export const peaksSchema = z.object({
  ok: z.literal(true),
  seconds_per_peak: z.number().describe('Seconds of audio each value covers'),
  duration: z.number().describe('The recording’s length as decoded, seconds'),
  peaks: z.array(z.number()).describe('The loudest absolute sample of each window, 0..1 (at most about 6,000 values)'),
});

/**
 * Sends a job's media, whole (200) or the byte range a `Range` header asks for (206 with
 * `Content-Range`), streamed from disk; 416 with `Content-Range: bytes *\/size` for a range past
 * the end. The same at both doors (the signed-in API and a share page that allows playback).
 */
export function sendMedia(request: FastifyRequest, reply: FastifyReply, media: PlayableMedia, doorHeaders: Record<string, string>) {
  const range = parseRange(request.headers.range, media.size);
  void reply.headers(doorHeaders).header('accept-ranges', 'bytes');
  if (range === 'unsatisfiable') {
    return reply
      .code(416)
      .header('content-range', `bytes */${media.size}`)
      .send({ ok: false, reason: 'validation_failed', message: `the range lies outside the media (${media.size} bytes)` });
  }
  void reply.type(media.mime);
  if (!range) return reply.header('content-length', String(media.size)).send(mediaStream(media, null));
  return reply
    .code(206)
    .header('content-range', `bytes ${range.start}-${range.end}/${media.size}`)
    .header('content-length', String(range.end - range.start + 1))
    .send(mediaStream(media, range));
}

/** The peaks, or 409 when ffmpeg cannot decode the media (the player still plays what the browser can). */
export async function peaksOrConflict(mediaPath: string, duration: number | null) {
  try {
    return await mediaPeaks(mediaPath, duration);
  } catch (err) {
    throw new AppError('conflict', `the waveform could not be computed: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** Signed-in API: the job's retained media for the page's player, and the waveform's peaks. */
export async function playbackRoutes(app: FastifyInstance, deps: Pick<SpeechDeps, 'config' | 'speech'>) {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { jobs } = deps.speech;
  const headers = { 'cache-control': 'private, no-store' };

  r.get('/api/speech/jobs/:jobId/media', {
    config: { auth: speechUser, rateLimit: MEDIA_RATE_LIMIT },
    schema: {
      tags,
      security,
      summary: 'Play the job’s retained media (byte ranges)',
      description:
        'The recording the job was transcribed from, as it was uploaded or downloaded, for the job page’s player: the whole ' +
        'file (200) or the byte range a `Range: bytes=a-b`, `bytes=a-` or `bytes=-n` header asks for (206 with ' +
        '`Content-Range`; `Accept-Ranges: bytes`); a range past the end answers 416 with `Content-Range: bytes */size`. ' +
        'Streamed from disk. The same visibility as the job (404 for a job the caller cannot see); 404 as well once the media ' +
        'was released (its retention ended). The share page serves it at `/shared/speech/transcript/{token}.media` when the ' +
        'owner allows playback there.',
      params: jobIdParams,
      produces: ['audio/*', 'video/*', 'application/octet-stream'],
      response: { 200: z.string().describe('The media bytes'), 206: z.string().describe('The requested byte range'), 416: errorBodySchema, ...errors },
    },
    handler: async (request, reply) => {
      const job = await jobs.getVisible(userOf(request), request.params.jobId);
      return sendMedia(request, reply, await playableMedia(job), headers);
    },
  });

  r.get('/api/speech/jobs/:jobId/peaks', {
    config: { auth: speechUser, rateLimit: speechRateLimit(deps.config) },
    schema: {
      tags,
      security,
      summary: 'The waveform of the job’s retained media',
      description:
        'Peaks for the job page’s waveform: the loudest sample of each window of the recording (0..1), computed once with ' +
        'ffmpeg on the coordinator and cached next to the media (the browser never decodes the file). At most about 6,000 ' +
        'values whatever the length. 404 for a job the caller cannot see and once the media was released.',
      params: jobIdParams,
      response: { 200: peaksSchema, 409: errorBodySchema, ...errors },
    },
    handler: async (request, reply) => {
      const job = await jobs.getVisible(userOf(request), request.params.jobId);
      const media = await playableMedia(job);
      void reply.header('cache-control', 'private, max-age=3600');
      return { ok: true as const, ...(await peaksOrConflict(media.path, job.sourceDurationSeconds)) };
    },
  });
}
