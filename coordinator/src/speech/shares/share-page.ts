import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { formatStockholm } from '@sonar/shared';
import { normalizeError, validationFailed, zodFieldErrors } from '../../http/errors.js';
import { html, SafeHtml } from '../../http/html.js';
import { sendErrorPage, sendPage } from '../../http/page.js';
import { humanDuration } from '../jobs/liveness.js';
import {
  RTTM_MEDIA_TYPE,
  TRANSCRIPT_FORMATS,
  TRANSCRIPT_MEDIA_TYPES,
  attachmentDisposition,
  renderTranscript,
  transcriptRttm,
  type DownloadTranscript,
} from '../jobs/transcript-formats.js';
import { SPEECH_RATE_LIMIT } from '../policy.js';
import { cueLimitsOf, cueLimitsQuery } from '../schemas.js';
import { SHARE_PATH_PREFIX } from '../../http/log-redaction.js';
import type { PublicTranscript, ShareService } from './share-service.js';

/**
 * Public transcript page `GET /shared/speech/transcript/{token}` (no sign-in): a reading-first
 * layout (title, duration, paragraphs grouped from the segments) that needs no JavaScript; `?full`
 * opens the detailed layout (every segment with start–end times and speaker labels),
 * `{token}.txt` is the same transcript as plain text, and `{token}.srt`, `.vtt` and `.json` are
 * subtitle and JSON downloads, `{token}.rttm` the speaker turns (409 without a completed
 * diarization). Unknown and disabled tokens answer 404.
 * Nothing identifies the owner or the job beyond the title they gave it.
 */

const NOINDEX = new SafeHtml('<meta name="robots" content="noindex"><meta name="referrer" content="no-referrer">');

/** Media position as m:ss or h:mm:ss. */
export function clock(seconds: number): string {
  const total = Math.max(0, Math.floor(seconds));
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = String(total % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${s}` : `${m}:${s}`;
}

export interface Paragraph {
  speaker: string | null;
  text: string;
}

const SENTENCE_END = /[.!?…]["'”’)\]]?$/;

/**
 * Reading paragraphs from timestamped segments: a new paragraph when the speaker changes, after a
 * pause of 2.5 seconds or more, or once a paragraph is long and a sentence ends. Without segments
 * the stored transcript text is split the same way by length.
 */
export function paragraphsOf(t: Pick<PublicTranscript, 'segments' | 'transcriptText'>): Paragraph[] {
  const out: Paragraph[] = [];
  if (t.segments.length > 0) {
    let current: Paragraph | null = null;
    let previousEnd: number | null = null;
    for (const s of t.segments) {
      const text = s.text.trim().replace(/\s+/g, ' ');
      if (!text) continue;
      const pause = previousEnd !== null && s.start - previousEnd >= 2.5;
      const long = current !== null && current.text.length >= 600 && SENTENCE_END.test(current.text);
      if (!current || current.speaker !== s.speaker || pause || long) {
        current = { speaker: s.speaker, text };
        out.push(current);
      } else {
        current.text += ` ${text}`;
      }
      previousEnd = s.end;
    }
    return out;
  }
  for (const block of (t.transcriptText ?? '').split(/\n\s*\n/)) {
    const sentences = block
      .trim()
      .replace(/\s+/g, ' ')
      .split(/(?<=[.!?…])\s+/)
      .filter(Boolean);
    let text = '';
    for (const sentence of sentences) {
      text = text ? `${text} ${sentence}` : sentence;
      if (text.length >= 600) {
        out.push({ speaker: null, text });
        text = '';
      }
    }
    if (text) out.push({ speaker: null, text });
  }
  return out;
}

/** The transcript as plain text: title, then paragraphs (with speaker labels) separated by blank lines. */
export function plainText(t: PublicTranscript): string {
  const lines = [t.title, ''];
  for (const p of paragraphsOf(t)) lines.push(p.speaker ? `${p.speaker}: ${p.text}` : p.text, '');
  return `${lines.join('\n').trimEnd()}\n`;
}

export async function sharePage(app: FastifyInstance, shares: ShareService) {
  // Readers need not be signed in; the layout greets nobody (the page identifies no one).
  const headers = (reply: FastifyReply) => reply.header('x-robots-tag', 'noindex').header('referrer-policy', 'no-referrer').header('cache-control', 'no-store');
  const send = (reply: FastifyReply, title: string, body: SafeHtml) => sendPage(headers(reply), { title, head: NOINDEX, body, user: null });

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
    { schema: { hide: true }, config: { auth: 'public', rateLimit: SPEECH_RATE_LIMIT } },
    async (request, reply) => {
      const raw = request.params.token;
      const download = [...TRANSCRIPT_FORMATS, 'rttm' as const].find((f) => raw.endsWith(`.${f}`));
      const token = download ? raw.slice(0, -(download.length + 1)) : raw;
      const t = await shares.findPublic(token);
      if (!t) {
        if (download) return reply.code(404).header('x-robots-tag', 'noindex').type('text/plain; charset=utf-8').send('Transcript not found.\n');
        return notFound(request, reply);
      }
      if (download === 'rttm') {
        // The speaker turns; 409 while the transcript has none (no completed diarization).
        if (!t.turns) {
          return reply
            .code(409)
            .header('x-robots-tag', 'noindex')
            .header('cache-control', 'no-store')
            .type('text/plain; charset=utf-8')
            .send('This transcript has no speaker turns.\n');
        }
        return reply
          .header('x-robots-tag', 'noindex')
          .header('cache-control', 'no-store')
          .header('content-disposition', attachmentDisposition(t.title, 'rttm'))
          .type(RTTM_MEDIA_TYPE)
          .send(transcriptRttm('shared-transcript', t.turns));
      }
      if (download === 'txt') {
        return reply.header('x-robots-tag', 'noindex').header('cache-control', 'no-store').type('text/plain; charset=utf-8').send(plainText(t));
      }
      if (download) {
        const query = cueLimitsQuery.safeParse(request.query);
        if (!query.success) {
          const errors = zodFieldErrors(query.error, 'query');
          return reply
            .code(422)
            .header('x-robots-tag', 'noindex')
            .send({ ok: false, reason: 'validation_failed', message: validationFailed(errors).message, errors });
        }
        return reply
          .header('x-robots-tag', 'noindex')
          .header('cache-control', 'no-store')
          .header('content-disposition', attachmentDisposition(t.title, download))
          .type(TRANSCRIPT_MEDIA_TYPES[download])
          .send(renderTranscript(shareDownload(t), download, cueLimitsOf(query.data)));
      }
      const full = request.query.full !== undefined;
      return send(reply, t.title, full ? detailed(t, token) : reading(t, token));
    },
  );
}

/** The shared transcript for the subtitle and JSON downloads: speakers are already named, no job id. */
function shareDownload(t: PublicTranscript): DownloadTranscript {
  return {
    jobId: null,
    title: t.title,
    language: t.language,
    model: null,
    pass: 1,
    status: t.status,
    durationSeconds: t.durationSeconds,
    transcriptText: t.transcriptText,
    segments: t.segments,
    speakerLabels: {},
  };
}

/** Links to the other views and the downloads. */
function views(token: string, current: 'reading' | 'full', turns: boolean): SafeHtml {
  return html`<nav class="views muted" aria-label="Views and downloads">${current === 'full' ? html`<a href="${token}">Reading view</a>` : html`<a href="?full">Show timestamps and speakers</a>`}<a href="${token}.txt">Plain text</a><a href="${token}.srt" download>SRT subtitles</a><a href="${token}.vtt" download>WebVTT subtitles</a><a href="${token}.json" download>JSON</a>${turns ? html`<a href="${token}.rttm" download>Speaker turns (RTTM)</a>` : ''}</nav>`;
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
  const paragraphs = paragraphsOf(t);
  return html`<article class="card transcript reading" data-layout="reading">
    <h1>${t.title}</h1>
    ${facts(t)}${notice(t)}
    ${views(token, 'reading', t.turns !== null)}
    <hr>
    <div class="text" data-testid="transcript">${
      paragraphs.length
        ? paragraphs.map((p) => html`<p>${p.speaker ? html`<span class="speaker">${p.speaker}</span>` : ''}${p.text}</p>`)
        : html`<p class="muted">The transcript is empty.</p>`
    }</div>
  </article>`;
}

function detailed(t: PublicTranscript, token: string): SafeHtml {
  const speakers = t.segments.some((s) => s.speaker);
  const rows = t.segments.map(
    (s) =>
      html`<tr><td class="time"><time>${clock(s.start)}</time>–<time>${clock(s.end)}</time></td>${speakers ? html`<td class="who">${s.speaker ?? ''}</td>` : ''}<td>${s.text.trim()}</td></tr>`,
  );
  return html`<article class="card transcript detailed" data-layout="full">
    <h1>${t.title}</h1>
    ${facts(t)}${notice(t)}
    ${views(token, 'full', t.turns !== null)}
    ${
      rows.length
        ? html`<table class="segments"><thead><tr><th>Time</th>${speakers ? html`<th>Speaker</th>` : ''}<th>Text</th></tr></thead><tbody>${rows}</tbody></table>`
        : html`<hr><div class="text" data-testid="transcript">${paragraphsOf(t).map((p) => html`<p>${p.text}</p>`)}</div>`
    }
  </article>`;
}
