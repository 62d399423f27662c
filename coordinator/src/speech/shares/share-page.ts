import type { FastifyInstance, FastifyReply } from 'fastify';
import { normalizeError } from '../../http/errors.js';
import { html, layout, SafeHtml } from '../../http/html.js';
import { humanDuration } from '../jobs/liveness.js';
import { SPEECH_RATE_LIMIT } from '../policy.js';
import { SHARE_PATH_PREFIX } from './share-links.js';
import type { PublicTranscript, ShareService } from './share-service.js';

/**
 * Public transcript page `GET /shared/speech/transcript/{token}` (no sign-in): a reading-first
 * layout (title, duration, paragraphs grouped from the segments) that needs no JavaScript; `?full`
 * opens the detailed layout (every segment with start–end times and speaker labels), and
 * `{token}.txt` is the same transcript as plain text. Unknown and disabled tokens answer 404.
 * Nothing identifies the owner or the job beyond the title they gave it.
 */

const NOINDEX = new SafeHtml('<meta name="robots" content="noindex"><meta name="referrer" content="no-referrer">');

const PAGE_STYLE = new SafeHtml(`<style>
.transcript h1{margin-top:0}.reading p{margin:0 0 1rem;line-height:1.7;font-size:1.05rem}.speaker{display:block;font-size:.85rem;font-weight:600;color:var(--muted);letter-spacing:.02em}
.segments td.time{white-space:nowrap;font-variant-numeric:tabular-nums;color:var(--muted)}.segments td.who{white-space:nowrap;font-weight:600}
.views{display:flex;gap:1rem;flex-wrap:wrap}
</style>`);

// Dates on the page are Stockholm time, as the specification asks for speech pages.
const stockholm = new Intl.DateTimeFormat('en-GB', {
  timeZone: 'Europe/Stockholm',
  year: 'numeric',
  month: 'short',
  day: 'numeric',
  hour: '2-digit',
  minute: '2-digit',
  timeZoneName: 'short',
});

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
  const send = (reply: FastifyReply, status: number, title: string, body: SafeHtml) =>
    reply
      .code(status)
      .header('x-robots-tag', 'noindex')
      .header('referrer-policy', 'no-referrer')
      .header('cache-control', 'no-store')
      .type('text/html; charset=utf-8')
      .send(layout({ title, head: html`${NOINDEX}${PAGE_STYLE}`, body }));

  const notFound = (reply: FastifyReply) =>
    send(
      reply,
      404,
      'Transcript not found',
      html`<div class="card"><h1>Transcript not found</h1>
      <p>This link does not lead to a shared transcript. It may have been mistyped, or its owner stopped sharing it.</p></div>`,
    );

  app.setErrorHandler((error, request, reply) => {
    const e = normalizeError(error, request);
    if (e.headers) void reply.headers(e.headers); // Retry-After of a 503
    if (e.status === 404) return notFound(reply);
    return send(reply, e.status, 'Error', html`<div class="card"><h1>Something went wrong</h1><p class="error">${e.message}</p></div>`);
  });

  app.get<{ Params: { token: string }; Querystring: Record<string, string | undefined> }>(
    `${SHARE_PATH_PREFIX}:token`,
    { schema: { hide: true }, config: { auth: 'public', rateLimit: SPEECH_RATE_LIMIT } },
    async (request, reply) => {
      const raw = request.params.token;
      const asText = raw.endsWith('.txt');
      const token = asText ? raw.slice(0, -'.txt'.length) : raw;
      const t = await shares.findPublic(token);
      if (!t) {
        if (asText) return reply.code(404).header('x-robots-tag', 'noindex').type('text/plain; charset=utf-8').send('Transcript not found.\n');
        return notFound(reply);
      }
      if (asText) {
        return reply.header('x-robots-tag', 'noindex').header('cache-control', 'no-store').type('text/plain; charset=utf-8').send(plainText(t));
      }
      const full = request.query.full !== undefined;
      return send(reply, 200, t.title, full ? detailed(t, token) : reading(t, token));
    },
  );
}

function facts(t: PublicTranscript): SafeHtml {
  const parts: SafeHtml[] = [];
  const duration = humanDuration(t.durationSeconds);
  if (duration) parts.push(html`<span data-testid="duration">Duration ${duration}</span>`);
  if (t.language) parts.push(html`<span>Language ${t.language}</span>`);
  if (t.finishedAt) {
    parts.push(html`<span>Transcribed <time datetime="${t.finishedAt.toISOString()}">${stockholm.format(t.finishedAt)}</time></span>`);
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
    <nav class="views muted"><a href="?full">Show timestamps and speakers</a><a href="${token}.txt">Plain text</a></nav>
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
    <nav class="views muted"><a href="${token}">Reading view</a><a href="${token}.txt">Plain text</a></nav>
    ${
      rows.length
        ? html`<table class="segments"><thead><tr><th>Time</th>${speakers ? html`<th>Speaker</th>` : ''}<th>Text</th></tr></thead><tbody>${rows}</tbody></table>`
        : html`<hr><div class="text" data-testid="transcript">${paragraphsOf(t).map((p) => html`<p>${p.text}</p>`)}</div>`
    }
  </article>`;
}
