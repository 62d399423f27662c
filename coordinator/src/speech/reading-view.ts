import { TURNS_PER_CHUNK, endsSentence, speakerColourClass, startsNewTurn, turnClock, type TurnSoFar } from '@sonar/shared';
import { escapeHtml, html, SafeHtml } from '../http/html.js';
import { speakerName, type SpeakerLabels } from './jobs/speakers.js';

/**
 * The reading view of a transcript, shared by the job page and the share page (`?full`): one
 * paragraph per speaker turn (in chunks of TURNS_PER_CHUNK, which the browser renders only near
 * the screen) (a new one after a pause or a long stretch, see startsNewTurn), the
 * speaker's name in the speaker's colour, a timestamp link at the start of each turn, and each
 * segment in a `.seg` span; a segment whose engine gave word times carries their start times
 * (`data-w`, the player highlights and seeks by them). The live page appends segments
 * with the same rules (coordinator/web/lib/reading.ts), so a page that grew live reads as a fresh load.
 *
 * Built as one string with escapeHtml rather than nested `html` templates: a three-hour pass has
 * tens of thousands of words, and this is the page's hot path.
 */

export interface ReadingSegment {
  seq: number;
  start: number;
  end: number;
  text: string;
  speaker: string | null;
  words?: Array<{ start: number; end: number; text: string }> | null;
  /** The words' start times already as `data-w` has them (the job page's query computes them), instead of `words`. */
  w?: string | null;
}

const num = (n: number) => String(Math.round(n * 100) / 100);
const squash = (s: string) => s.replace(/\s+/g, ' ').trim();

/**
 * The start times of a segment's words when they spell its text (else none: the text alone is
 * shown, as the live page does), as centiseconds after the segment's start, space-separated.
 * Word i is the text's i-th space-separated token; the page's script highlights and seeks by them
 * without an element per word (a three-hour pass has tens of thousands of words).
 */
function wordTimes(s: ReadingSegment, text: string): string | null {
  if (s.w !== undefined) return s.w;
  if (!s.words?.length) return null;
  const words = s.words.map((w) => ({ start: w.start, text: squash(w.text) })).filter((w) => w.text);
  if (words.map((w) => w.text).join(' ') !== text) return null;
  return words.map((w) => Math.max(0, Math.round((w.start - s.start) * 100))).join(' ');
}

/** One segment's span: its text, and its words' start times (`data-w`) when it has them. */
function segmentHtml(s: ReadingSegment, text: string): string {
  const words = wordTimes(s, text);
  return `<span class="seg" id="seg-${s.seq}" data-seq="${s.seq}" data-speaker="${escapeHtml(s.speaker ?? '')}" data-start="${num(s.start)}" data-end="${num(s.end)}"${
    words ? ` data-w="${words}"` : ''
  }>${escapeHtml(text)}</span>`;
}

/** The head of a turn: the speaker's name in their colour (when known) and the clickable start time. */
export function turnHead(speaker: string | null, start: number, labels: SpeakerLabels): string {
  const who = speaker
    ? `<span class="who ${speakerColourClass(speaker)}" data-speaker="${escapeHtml(speaker)}">${escapeHtml(speakerName(speaker, labels))}</span> `
    : '';
  return `<span class="turn-head">${who}<a class="ts" href="#t=${num(start)}" data-t="${num(start)}">${turnClock(start)}</a></span>`;
}

/** The transcript's paragraphs (speaker turns); empty segments are left out. */
export function readingTurns(segments: readonly ReadingSegment[], labels: SpeakerLabels): SafeHtml {
  const out: string[] = [];
  let turn: TurnSoFar | null = null;
  let turns = 0;
  for (const s of segments) {
    const text = squash(s.text);
    if (!text) continue;
    if (startsNewTurn(turn, s)) {
      if (turn) out.push('</p>');
      if (turns % TURNS_PER_CHUNK === 0) out.push(turns ? '</div><div class="chunk">' : '<div class="chunk">');
      turns++;
      out.push(`<p class="turn ${speakerColourClass(s.speaker)}" data-speaker="${escapeHtml(s.speaker ?? '')}">${turnHead(s.speaker, s.start, labels)} `);
      turn = { speaker: s.speaker, end: s.end, length: 0, sentenceEnded: false };
    } else {
      out.push(' ');
    }
    out.push(segmentHtml(s, text));
    turn!.end = s.end;
    turn!.length += text.length + 1;
    turn!.sentenceEnded = endsSentence(text);
  }
  if (turn) out.push('</p></div>');
  return new SafeHtml(out.join(''));
}

/**
 * The search bar above the text, and for the owner the "Correct" switch (the editor of
 * coordinator/web/lib/corrections.ts). Hidden until the page's script shows them: without it the
 * text reads as it is.
 */
export function readingTools(opts: { editable?: boolean } = {}): SafeHtml {
  const edit = opts.editable
    ? '<button type="button" class="secondary" id="edit-toggle" aria-pressed="false" title="Fix a segment’s text or move it to another speaker">Correct</button>'
    : '';
  return new SafeHtml(`<div class="reading-tools" id="reading-tools" hidden>
    <form class="search" id="transcript-search" role="search"><label for="search-input" class="visually-hidden">Search the transcript</label>
      <input type="search" id="search-input" name="q" placeholder="Search the transcript" autocomplete="off">
      <span id="search-count" class="muted" role="status" aria-live="polite"></span>
      <button type="button" class="secondary" id="search-prev" aria-label="Previous match">↑</button>
      <button type="button" class="secondary" id="search-next" aria-label="Next match">↓</button>${edit}</form>
  </div>`);
}

/** The speeds the player offers (the keyboard's `<` and `>` step through them). */
export const PLAYBACK_SPEEDS = [0.75, 1, 1.25, 1.5, 1.75, 2] as const;

/**
 * The player above the transcript: the browser's own audio (or video, when the media has a video
 * stream) element with controls, so it plays without the page's script (nothing is fetched
 * before it plays: `preload="none"`, the waveform knows the length); the script adds the
 * waveform (peaks from `peaks`), the speed, following the words and the keyboard. `data-swap-key`
 * names what it plays, so a live refresh that plays the same media keeps the element (and its
 * position). Without retained media: a note that it was released, and no player.
 */
export function playerMarkup(opts: { src: string; peaks: string; mime: string | null; mediaPath: string | null; released?: boolean }): SafeHtml | '' {
  if (!opts.mediaPath) {
    return opts.released === false
      ? ''
      : html`<div class="player-released" id="media-released" data-swap-key="released"><p class="muted">The recording has been released (it is no longer kept): the transcript stays, but it cannot be played.</p></div>`;
  }
  const video = (opts.mime ?? '').startsWith('video/');
  const element = video
    ? html`<video id="media" controls preload="none" playsinline src="${opts.src}"></video>`
    : html`<audio id="media" controls preload="none" src="${opts.src}"></audio>`;
  return html`<div class="player" id="player" data-swap-key="${opts.src}" data-peaks="${opts.peaks}" data-kind="${video ? 'video' : 'audio'}">
    ${element}
    <div id="waveform" class="waveform" aria-hidden="true"></div>
    <div class="player-controls" id="player-controls" hidden>
      <label for="speed">Speed</label>
      <select id="speed">${PLAYBACK_SPEEDS.map((s) => html`<option value="${s}" ${s === 1 ? new SafeHtml('selected') : ''}>${s}×</option>`)}</select>
      <label class="check"><input type="checkbox" id="follow" checked> Follow the words</label>
      <span class="hint" id="player-keys">Space plays or pauses, ← → move 5 s, &lt; &gt; change the speed; click a word to go there.</span>
    </div>
  </div>`;
}
