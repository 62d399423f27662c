import { parse as parseSubtitles } from '@plussub/srt-vtt-parser';

/**
 * Subtitle checks computed from the files as written, read back by a third-party parser
 * (@plussub/srt-vtt-parser), never from the product's cue module: the limits of docs/speech.md
 * ("Subtitles"), and a generator of word-timed speech for the tests that hold files to them.
 */

export interface ReadCue {
  start: number;
  end: number;
  /** The lines as written (WebVTT markup such as `<v Name>` kept). */
  lines: string[];
  text: string;
}

export interface SubtitleLimits {
  maxChars: number;
  maxLines: number;
  maxSeconds: number;
  maxCps: number;
  minSeconds: number;
  minGapSeconds: number;
}

export const STYLE_GUIDE_LIMITS: SubtitleLimits = { maxChars: 42, maxLines: 2, maxSeconds: 7, maxCps: 20, minSeconds: 1, minGapSeconds: 0.08 };

/** SRT or WebVTT text → cues (times in seconds). */
export function readCues(text: string): ReadCue[] {
  return parseSubtitles(text).entries.map((e: { from: number; to: number; text: string }) => ({
    start: e.from / 1000,
    end: e.to / 1000,
    lines: e.text.split('\n'),
    text: e.text,
  }));
}

const segmenter = new Intl.Segmenter();
/** Characters as a reader counts them (grapheme clusters). */
const chars = (s: string) => Array.from(segmenter.segment(s)).length;

/** A line as shown: WebVTT tags removed. */
export const shownLine = (line: string) => line.replace(/<[^>]+>/g, '');

/** The speaker marker SRT writes at a change of speaker (`Name: ` or `- `), not counted as reading. */
const SPEAKER_MARK = /^([^:]{1,40}: |- )/;

/** The words a cue shows, without markup or the speaker marker. */
export const cueWords = (c: ReadCue) =>
  c.lines
    .map((l, i) => (i === 0 ? shownLine(l).replace(SPEAKER_MARK, '') : shownLine(l)))
    .join(' ')
    .split(' ')
    .filter(Boolean);

/**
 * Every way the cues break the limits, as readable lines ([] when none). The reading speed and
 * the shortest time on screen count where the audio allows: a cue that already runs up to the next
 * cue (less the gap) or to the longest time is excused.
 */
export function cueViolations(cues: readonly ReadCue[], limits: SubtitleLimits = STYLE_GUIDE_LIMITS): string[] {
  const out: string[] = [];
  cues.forEach((c, i) => {
    const shown = c.lines.map(shownLine);
    const n = i + 1;
    if (shown.length > limits.maxLines) out.push(`cue ${n}: ${shown.length} lines`);
    for (const l of shown) if (chars(l) > limits.maxChars) out.push(`cue ${n}: a line of ${chars(l)} characters`);
    if (c.end - c.start > limits.maxSeconds + 1e-9) out.push(`cue ${n}: ${(c.end - c.start).toFixed(3)} s`);
    if (c.end <= c.start) out.push(`cue ${n}: ends before it starts`);
    const next = cues[i + 1];
    if (next && next.start - c.end < limits.minGapSeconds - 1e-9) out.push(`cue ${n}: a gap of ${(next.start - c.end).toFixed(3)} s`);
    if (next && next.start < c.start) out.push(`cue ${n + 1} starts before cue ${n}`);
    const count = shown.reduce((k, l, j) => k + chars(j === 0 ? l.replace(SPEAKER_MARK, '') : l), 0);
    const room = Math.min(next ? next.start - limits.minGapSeconds : Infinity, c.start + limits.maxSeconds);
    const limited = c.end >= room - 0.002;
    if (!limited && count / (c.end - c.start) > limits.maxCps + 1e-6) out.push(`cue ${n}: ${(count / (c.end - c.start)).toFixed(1)} characters/s`);
    if (!limited && c.end - c.start < limits.minSeconds - 1e-9) out.push(`cue ${n}: on screen ${(c.end - c.start).toFixed(3)} s`);
  });
  return out;
}

/**
 * Read speech as word times: words of 2–9 letters (each starting with `letter`, so a test can tell
 * whose words a cue shows), about three a second, sentences of 6–14 words with a pause after each
 * and an occasional comma. Deterministic for a seed.
 */
export function spokenWords(seed: number, seconds: number, from = 0, letter = 'a'): Array<{ start: number; end: number; text: string }> {
  let x = seed;
  const rand = () => (x = (x * 1103515245 + 12345) % 2147483648) / 2147483648;
  const words: Array<{ start: number; end: number; text: string }> = [];
  let t = from;
  let inSentence = 0;
  let sentence = 6 + Math.floor(rand() * 9);
  while (t < from + seconds) {
    const len = 2 + Math.floor(rand() * 8);
    let text = letter + 'bcdefghijklmnopqrstuvwxyz'.slice(0, len - 1);
    inSentence++;
    if (inSentence === sentence) {
      text += '.';
      inSentence = 0;
      sentence = 6 + Math.floor(rand() * 9);
    } else if (rand() < 0.1) text += ',';
    const dur = 0.12 + len * 0.035;
    words.push({ start: round(t), end: round(t + dur), text });
    t += dur + (inSentence === 0 ? 0.4 + rand() * 0.6 : 0.02 + rand() * 0.08);
  }
  return words;
}

const round = (s: number) => Math.round(s * 1000) / 1000;
