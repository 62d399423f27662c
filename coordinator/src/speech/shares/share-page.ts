import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { formatStockholm } from '@sonar/shared';
import { normalizeError, validationFailed, zodFieldErrors } from '../../http/errors.js';
import { html, SafeHtml } from '../../http/html.js';
import { sendErrorPage, sendPage } from '../../http/page.js';
import { humanDuration } from '../jobs/liveness.js';
import { DOWNLOAD_FORMATS, paragraphsOf } from '../jobs/transcript-formats.js';
import { downloadQuery, sendDownload } from '../transcript-download.js';
import { SPEECH_PAGE_RATE_LIMIT } from '../policy.js';
import { playerMarkup, readingTools, readingTurns } from '../reading-view.js';
import { playableMedia } from '../jobs/playback.js';
import { peaksOrConflict, sendMedia } from '../playback-routes.js';
import { SHARE_PATH_PREFIX } from '../../http/log-redaction.js';
import type { PublicTranscript, ShareService } from './share-service.js';

/**
 * Public transcript page `GET /shared/speech/transcript/{token}` (no sign-in): a reading-first
 * layout (title, duration, paragraphs grouped from the segments) that needs no JavaScript; `?full`
 * opens the detailed layout (every segment with start–end times and speaker labels), and
 * `{token}.txt`, `.srt`, `.vtt`, `.json`, `.docx` and `.rttm` are the downloads: the same files as
 * the signed-in API's (transcript-download.ts sends both), except that the JSON's `job_id` is null.
 * `.rttm` answers 409 without a completed diarization. Unknown and disabled tokens answer 404.
 * Nothing identifies the owner or the job beyond the title they gave it.
 */

const NOINDEX = new SafeHtml('<meta name="robots" content="noindex"><meta name="referrer" content="no-referrer">');

export async function sharePage(app: FastifyInstance, shares: ShareService) {
  // Readers need not be signed in; the layout greets nobody (the page identifies no one).
  const headers = (reply: FastifyReply) => reply.header('x-robots-tag', 'noindex').header('referrer-policy', 'no-referrer').header('cache-control', 'no-store');
  const send = (reply: FastifyReply, title: string, body: SafeHtml, scripts: Array<'share.js'> = []) =>
    sendPage(headers(reply), { title, head: NOINDEX, body, user: null, scripts });

  const NOT_FOUND = html`<div class="card"><h1>Transcript not found</h1>
      <p>This link does not lead to a shared transcript. It may have been mistyped, or its owner stopped sharing it.</p></div>`;
  const notFound = (request: FastifyRequest, reply: FastifyReply) =>
    sendErrorPage(
      request,
      headers(reply),
      { status: 404, reason: 'not_found', message: 'Transcript not found' },
      { body: NOT_FOUND, user: null, head: NOINDEX },
    );

  app.setErrorHandler((error, request, reply) => {
    const e = normalizeError(error, request);
    if (e.status === 404) return notFound(request, reply);
    return sendErrorPage(request, headers(reply), e, { user: null, head: NOINDEX });
  });

  app.get<{ Params: { token: string }; Querystring: Record<string, string | undefined> }>(
    `${SHARE_PATH_PREFIX}:token`,
    { schema: { hide: true }, config: { auth: 'public', rateLimit: SPEECH_PAGE_RATE_LIMIT } },
    async (request, reply) => {
      const raw = request.params.token;
      // The player's media and waveform, when the owner allows playback on the share page.
      const mediaPart = (['media', 'peaks'] as const).find((x) => raw.endsWith(`.${x}`));
      if (mediaPart) {
        const t = await shares.findPublic(raw.slice(0, -(mediaPart.length + 1)));
        if (!t?.playback) return reply.code(404).header('x-robots-tag', 'noindex').type('text/plain; charset=utf-8').send('Not found.\n');
        const media = await playableMedia({ mediaPath: t.playback.mediaPath, sourceMime: t.playback.sourceMime });
        if (mediaPart === 'media') return sendMedia(request, reply, media, { 'x-robots-tag': 'noindex', 'cache-control': 'no-store' });
        void reply.header('x-robots-tag', 'noindex').header('cache-control', 'no-store');
        return { ok: true, ...(await peaksOrConflict(media.path, t.playback.durationSeconds)) };
      }
      const download = DOWNLOAD_FORMATS.find((f) => raw.endsWith(`.${f}`));
      const token = download ? raw.slice(0, -(download.length + 1)) : raw;
      const t = await shares.findPublic(token);
      if (!t) {
        if (download) return reply.code(404).header('x-robots-tag', 'noindex').type('text/plain; charset=utf-8').send('Transcript not found.\n');
        return notFound(request, reply);
      }
      if (download) {
        const text = (code: number, message: string) =>
          reply.code(code).header('x-robots-tag', 'noindex').header('cache-control', 'no-store').type('text/plain; charset=utf-8').send(message);
        const query = downloadQuery.safeParse(request.query);
        if (!query.success) {
          // The API's error shape, as the signed-in door answers the same nonsense.
          const errors = zodFieldErrors(query.error, 'query');
          return reply
            .code(422)
            .header('x-robots-tag', 'noindex')
            .header('cache-control', 'no-store')
            .send({ ok: false, reason: 'validation_failed', message: validationFailed(errors).message, errors });
        }
        // The speaker turns; 409 while the transcript has none (no completed diarization).
        if (download === 'rttm' && !t.download.turns) return text(409, 'This transcript has no speaker turns.\n');
        return sendDownload(reply, t.download, download, query.data, { 'x-robots-tag': 'noindex', 'cache-control': 'no-store' });
      }
      const full = request.query.full !== undefined;
      return full ? send(reply, t.title, detailed(t, token, reply.cspNonce?.style ?? ''), ['share.js']) : send(reply, t.title, reading(t, token));
    },
  );
}

/** Links to the other views and the downloads. */
function views(token: string, current: 'reading' | 'full', turns: boolean): SafeHtml {
  return html`<nav class="views muted" aria-label="Views and downloads">${current === 'full' ? html`<a href="${token}">Reading view</a>` : html`<a href="?full">Show timestamps and speakers</a>`}<a href="${token}.txt?inline=1">Plain text</a><a href="${token}.srt" download>SRT subtitles</a><a href="${token}.vtt" download>WebVTT subtitles</a><a href="${token}.json" download>JSON</a><a href="${token}.docx" download>Word document (DOCX)</a>${turns ? html`<a href="${token}.rttm" download>Speaker turns (RTTM)</a>` : ''}</nav>`;
}

function facts(t: PublicTranscript): SafeHtml {
  const parts: SafeHtml[] = [];
  const duration = humanDuration(t.durationSeconds);
  if (duration) parts.push(html`<span data-testid="duration">Duration ${duration}</span>`);
  if (t.language) parts.push(html`<span>Language ${t.language}</span>`);
  if (t.finishedAt) {
    parts.push(html`<span>Transcribed <time datetime="${t.finishedAt.toISOString()}">${formatStockholm(t.finishedAt)}</time></span>`);
  }
  return html`<p class="muted">${parts.map((p, i) => html`${i > 0 ? ' · ' : ''}${p}`)}</p>`;
}

function notice(t: PublicTranscript): SafeHtml | '' {
  return t.status === 'completed' ? '' : html`<p class="muted" role="status">This transcript is being updated; the text below may be incomplete.</p>`;
}

function reading(t: PublicTranscript, token: string): SafeHtml {
  const paragraphs = paragraphsOf(t.download);
  return html`<article class="card transcript reading" data-layout="reading">
    <h1>${t.title}</h1>
    ${facts(t)}${notice(t)}
    ${views(token, 'reading', t.download.turns !== null)}
    <hr>
    <div class="text" data-testid="transcript">${
      paragraphs.length
        ? paragraphs.map((p) => html`<p>${p.speaker ? html`<span class="speaker">${p.speaker}</span>` : ''}${p.text}</p>`)
        : html`<p class="muted">The transcript is empty.</p>`
    }</div>
  </article>`;
}

/**
 * `?full`: the job page's reading view, read-only (reading-view.ts): speaker turns in the
 * speakers' colours with their start times, every segment; search with the share page's script.
 */
function detailed(t: PublicTranscript, token: string, styleNonce: string): SafeHtml {
  const d = t.download;
  const segments = d.segments.map((s, i) => ({ seq: i, start: s.start, end: s.end, text: s.text, speaker: s.speaker, words: s.words ?? null }));
  return html`<article class="card transcript detailed" data-layout="full">
    <h1>${t.title}</h1>
    ${facts(t)}${notice(t)}
    ${views(token, 'full', t.download.turns !== null)}
    <div class="reading-head" nonce="${styleNonce}">${
      t.playback ? playerMarkup({ src: `${token}.media`, peaks: `${token}.peaks`, mime: t.playback.sourceMime, mediaPath: t.playback.mediaPath }) : ''
    }${readingTools()}</div>
    <div id="segments" class="reading-text" data-testid="transcript" data-names="${JSON.stringify(d.speakerLabels)}">${
      segments.some((s) => s.text.trim()) ? readingTurns(segments, d.speakerLabels) : html`<p class="muted">The transcript is empty.</p>`
    }</div>
  </article>`;
}
