import type { FastifyReply } from 'fastify';
import { z } from 'zod';
import { transcriptDocx } from './jobs/transcript-docx.js';
import {
  DOWNLOAD_MEDIA_TYPES,
  attachmentDisposition,
  renderTranscript,
  rttmFileId,
  transcriptRttm,
  type DownloadFormat,
  type DownloadTranscript,
} from './jobs/transcript-formats.js';
import { cueLimitsOf, cueLimitsQuery } from './schemas.js';

/**
 * Sending a transcript download, the same way at both doors: the signed-in API
 * (`/api/speech/jobs/{id}/transcript.{format}`, which the job page links to) and the public share
 * page (`/shared/speech/transcript/{token}.{format}`). Both build the transcript with
 * downloadOfJob and send it here, so the bytes, the file name and the media type are the same; a
 * door adds only its own caching and robots headers. A download option is a field of
 * `downloadQuery`, read here, and so reaches both doors at once.
 */

/**
 * The query of every download, at both doors (the API's routes use it as their querystring schema,
 * the share page parses it, 422 on nonsense). A new download option is a field here, handed on to
 * the renderer in sendDownload → downloadBody, and so reaches both doors at once.
 */
export const downloadQuery = cueLimitsQuery.extend({
  inline: z.enum(['0', '1']).optional().describe('1: no attachment header (view in the browser)'),
});
export type DownloadQuery = z.infer<typeof downloadQuery>;

/** The body of a download: text, or the DOCX's bytes. RTTM needs the pass's speaker turns (the doors answer 409 without). */
export async function downloadBody(t: DownloadTranscript, format: DownloadFormat, query: DownloadQuery = {}): Promise<string | Buffer> {
  if (format === 'docx') return transcriptDocx(t);
  if (format === 'rttm') return transcriptRttm(rttmFileId(t.title), t.turns ?? []);
  return renderTranscript(t, format, cueLimitsOf(query));
}

/**
 * Sends a download: the media type, `Content-Disposition: attachment` named after the title
 * (`jfk.wav` → `jfk.srt`) unless `inline=1`, and the door's own headers (`cache-control` …).
 */
export async function sendDownload(
  reply: FastifyReply,
  t: DownloadTranscript,
  format: DownloadFormat,
  query: DownloadQuery,
  doorHeaders: Record<string, string>,
): Promise<FastifyReply> {
  const body = await downloadBody(t, format, query);
  void reply.headers(doorHeaders);
  if (query.inline !== '1') void reply.header('content-disposition', attachmentDisposition(t.title, format));
  return reply.type(DOWNLOAD_MEDIA_TYPES[format]).send(body);
}
