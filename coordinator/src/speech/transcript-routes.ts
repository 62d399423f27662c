import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorBodySchema } from '@sonar/shared';
import { userOf } from '../accounts/auth-plugin.js';
import type { AuthRequirement } from '../accounts/types.js';
import type { SpeechDeps } from '../deps.js';
import { speechRateLimit } from './policy.js';
import { jobIdParams } from './schemas.js';
import { DOCX_MEDIA_TYPE, RTTM_MEDIA_TYPE, TRANSCRIPT_FORMATS, TRANSCRIPT_MEDIA_TYPES, type DownloadFormat } from './jobs/transcript-formats.js';
import { downloadQuery, sendDownload, type DownloadQuery } from './transcript-download.js';

const speechUser: AuthRequirement = { accept: ['session', 'jwt'], permissions: ['speech.use'] };
const security: Array<Record<string, string[]>> = [{ session: [] }, { bearerJwt: [] }];
const errors = { 401: errorBodySchema, 403: errorBodySchema, 404: errorBodySchema, 422: errorBodySchema, 429: errorBodySchema };
const rttmErrors = { ...errors, 409: errorBodySchema };
const TEXT_AND_DOCX = [...TRANSCRIPT_FORMATS, 'docx'] as const;
const format = z.enum(TEXT_AND_DOCX);
const produces = [...Object.values(TRANSCRIPT_MEDIA_TYPES), DOCX_MEDIA_TYPE];
const sameAtShare =
  'The public share page serves the same files at `/shared/speech/transcript/{token}.{format}` (byte for byte), except ' +
  'that its JSON has `job_id: null`: the share page identifies no job (the RTTM file id and the file names come from the ' +
  'title at both doors; the title is the owner’s, else the uploaded file’s name, else `Transcript`, never the source URL).';
const description =
  'The current pass of a visible job as a download (`Content-Disposition: attachment`, named after the title without a ' +
  'media extension: `jfk.wav` downloads as `jfk.srt`): `txt` plain text (a `Name:` line at each change of speaker when ' +
  'speakers are known, then one line per segment), `srt` SubRip and `vtt` WebVTT subtitles (cues laid out from word ' +
  'times within common limits — 2 lines of 42 characters, 7 s, 20 characters/s, 80 ms gaps, never across a change of ' +
  'speaker; `max_chars`, `max_lines` and `max_seconds` change the limits — with the speaker marked at each change: `Name: ` ' +
  'in SRT, a `<v Name>` voice span on every WebVTT cue), `json` the job (`job_id`, `title`, `language`, `model`, `pass`, `status`, `duration_seconds`, ' +
  '`transcribed_at`), `speakers` (`key` such as `S1`, the RTTM’s, and `name`), `text`, and the segments with start/end ' +
  'seconds, `speaker` (the key) and `speaker_name` (and, where the engine gave word times, their `words` with times, ' +
  '`speaker` and `speaker_name`; segments are split where the speaker changes), `docx` a Word document (title, date ' +
  'transcribed, speakers, and paragraphs each with its start time and speaker; its internal dates are the transcription’s, ' +
  'so the same transcript gives the same bytes). Available while the job runs too (the segments so far). Add `inline=1` ' +
  `to view it in the browser instead. ${sameAtShare}`;

/** Signed-in API: transcript downloads (TXT, SRT, WebVTT, JSON, DOCX) and speaker turns (RTTM) of a job's current pass (sent by transcript-download.ts, as at the share page). */
export async function transcriptRoutes(app: FastifyInstance, deps: Pick<SpeechDeps, 'config' | 'speech'>) {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { jobs } = deps.speech;
  // Never cached by shared caches: the transcript is private and changes while the job runs.
  const headers = { 'cache-control': 'private, no-store' };

  async function send(reply: FastifyReply, request: Parameters<typeof userOf>[0], jobId: number, fmt: DownloadFormat, query: DownloadQuery) {
    const t = await jobs.download(userOf(request), jobId, { turns: fmt === 'rttm' });
    return sendDownload(reply, t, fmt, query, headers);
  }

  // Registered before `transcript.:format`; a static path wins over the parametric one either way.
  r.get('/api/speech/jobs/:jobId/transcript.rttm', {
    config: { auth: speechUser, rateLimit: speechRateLimit(deps.config) },
    schema: {
      tags: ['speech'],
      security,
      summary: 'Download the speaker turns as RTTM',
      description:
        'The speaker diarization of the current pass as RTTM (one `SPEAKER <file-id> 1 <start> <duration> <NA> <NA> <speaker> <NA> <NA>` ' +
        'line per turn, seconds, sorted by start; `<file-id>` is the download’s name without whitespace (`jfk` for the upload ' +
        '`jfk.wav`; the same at the share page), `<speaker>` the key `S1`… the segments and the JSON carry). ' +
        'These are the diarizer’s turns; every word of the transcript carries the speaker whose turn overlaps it most. ' +
        '409 (`conflict`) while the job has no completed diarization (not requested, pending, running, failed or unavailable). ' +
        '`Content-Disposition: attachment` unless `inline=1`. The share page serves the same file at `/shared/speech/transcript/{token}.rttm`.',
      params: jobIdParams,
      querystring: downloadQuery,
      produces: [RTTM_MEDIA_TYPE],
      response: { 200: z.string().describe('RTTM lines'), ...rttmErrors },
    },
    handler: (request, reply) => send(reply, request, request.params.jobId, 'rttm', request.query),
  });

  r.get('/api/speech/jobs/:jobId/transcript.:format', {
    config: { auth: speechUser, rateLimit: speechRateLimit(deps.config) },
    schema: {
      tags: ['speech'],
      security,
      summary: 'Download the transcript as TXT, SRT, WebVTT, JSON or DOCX',
      description,
      params: jobIdParams.extend({ format }),
      querystring: downloadQuery,
      produces,
      response: { 200: z.string().describe('The transcript in the requested format'), ...errors },
    },
    handler: (request, reply) => send(reply, request, request.params.jobId, request.params.format, request.query),
  });

  r.get('/api/speech/jobs/:jobId/transcript', {
    config: { auth: speechUser, rateLimit: speechRateLimit(deps.config) },
    schema: {
      tags: ['speech'],
      security,
      summary: 'Download the transcript (format as a query parameter)',
      description: `Same as \`/transcript.{format}\`, with \`format\` (default \`txt\`) in the query. ${description}`,
      params: jobIdParams,
      querystring: downloadQuery.extend({ format: format.default('txt') }),
      produces,
      response: { 200: z.string().describe('The transcript in the requested format'), ...errors },
    },
    handler: (request, reply) => send(reply, request, request.params.jobId, request.query.format, request.query),
  });
}
