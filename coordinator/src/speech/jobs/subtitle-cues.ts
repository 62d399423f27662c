/**
 * Subtitle cues from a transcript's segments, within the limits of common subtitle style guides:
 * at most `maxLines` lines of at most `maxChars` characters (wrapped at word boundaries, balanced),
 * at most `maxSeconds` on screen, at least `minSeconds` and a reading speed of at most `maxCps`
 * characters per second where the audio allows (a cue is extended into the silence after it before
 * it is split), and at least `minGapSeconds` between cues. A cue never crosses a change of speaker;
 * a long turn is broken at a sentence end, else at clause punctuation, else at the longest pause.
 *
 * Cues are laid out from word times; a segment without words (older passes, whisper without word
 * times) has its text split at spaces with times proportional to characters. Pure functions: SRT,
 * WebVTT and their tests read the same cues (docs/speech.md, "Subtitles").
 */

export interface CueLimits {
  /** Characters per line (the speaker's `Name: ` prefix counts on the first line of a turn). */
  maxChars: number;
  maxLines: number;
  maxSeconds: number;
  /** Characters per second (the text of the lines with their spaces, the speaker prefix not counted). */
  maxCps: number;
  minSeconds: number;
  minGapSeconds: number;
}

export const DEFAULT_CUE_LIMITS: Readonly<CueLimits> = { maxChars: 42, maxLines: 2, maxSeconds: 7, maxCps: 20, minSeconds: 1, minGapSeconds: 0.08 };

/** A pause of this length always ends a cue (text is not kept on screen over a long silence). */
const PAUSE_ENDS_CUE_SECONDS = 1.5;

/** One segment as the cue builder reads it. */
export interface CueSegment {
  start: number;
  end: number;
  text: string;
  /** The speaker's stable key (`S1`), or null: a cue never spans two keys. */
  speakerKey: string | null;
  /** The name shown for the speaker. */
  speakerName: string | null;
  words?: ReadonlyArray<{ start: number; end: number; text: string }> | null;
}

export interface Cue {
  start: number;
  end: number;
  /** The lines as shown, without the speaker prefix. */
  lines: string[];
  speakerKey: string | null;
  speakerName: string | null;
  /** The first cue of a speaker's turn: SRT marks it with `prefix`. */
  turnStart: boolean;
  /**
   * What SRT writes before the first line: `Name: ` on the first cue of a named speaker's turn, or
   * `- ` where the name and the first word do not fit on one line; '' otherwise. The first line's
   * room is measured with it in every format, so SRT and WebVTT share one layout.
   */
  prefix: string;
}

interface Token {
  text: string;
  start: number;
  end: number;
  key: string | null;
  name: string | null;
}

const SENTENCE_END = /[.!?…。！？]["'”’)\]]*$/;
const CLAUSE_END = /[,;:，、—–-]["'”’)\]]*$/;
const PUNCTUATION_ONLY = /^[\p{P}\p{S}]+$/u;

/** The marker of a turn's first cue: `Name: `, else `- ` when the name leaves no room for the first word, else none. */
function turnPrefix(t: Token, first: boolean, maxChars: number): string {
  if (!first || !t.name) return '';
  for (const p of [`${t.name}: `, '- ']) if (textLength(p) + textLength(t.text) <= maxChars) return p;
  return '';
}

const finite = (n: number) => Number.isFinite(n);

const graphemes = new Intl.Segmenter();

/** Characters as a reader counts them: grapheme clusters (an accented letter or an emoji is one). */
export function textLength(text: string): number {
  // printable ASCII has one grapheme per character: no segmenter pass (most of the cue builder's time otherwise)
  if (/^[\x20-\x7e]*$/.test(text)) return text.length;
  let n = 0;
  for (const g of graphemes.segment(text)) if (g.segment) n++;
  return n;
}

/** Splits a word longer than a line into line-sized pieces, with times in proportion. */
function splitLongWord(t: Token, maxChars: number): Token[] {
  const chars = Array.from(graphemes.segment(t.text), (g) => g.segment);
  if (chars.length <= maxChars) return [t];
  const pieces: Token[] = [];
  const span = t.end - t.start;
  for (let i = 0; i < chars.length; i += maxChars) {
    const a = i / chars.length;
    const b = Math.min(1, (i + maxChars) / chars.length);
    pieces.push({ ...t, text: chars.slice(i, i + maxChars).join(''), start: t.start + span * a, end: t.start + span * b });
  }
  return pieces;
}

/** A segment's words: the engine's word times, else its text's words at times proportional to characters. */
function segmentTokens(seg: CueSegment): Token[] {
  const key = seg.speakerKey;
  const name = seg.speakerName;
  const words = (seg.words ?? []).filter((w) => finite(w.start) && finite(w.end) && w.text.trim());
  if (words.length) {
    const out: Token[] = [];
    for (const w of words) {
      const text = w.text.trim().replace(/\s+/g, ' ');
      const prev = out.at(-1);
      // a word of punctuation alone belongs to the word before it ("word ," reads "word,")
      if (prev && PUNCTUATION_ONLY.test(text)) {
        prev.text += text;
        prev.end = Math.max(prev.end, w.end);
        continue;
      }
      out.push({ text, start: w.start, end: Math.max(w.start, w.end), key, name });
    }
    return out;
  }
  const parts = seg.text.trim().split(/\s+/).filter(Boolean);
  if (!parts.length || !finite(seg.start) || !finite(seg.end)) return [];
  // the words and the spaces between them share the segment's time: the last word ends with it
  const total = parts.reduce((n, p) => n + p.length + 1, -1);
  const span = Math.max(0, seg.end - seg.start);
  let at = 0;
  return parts.map((text) => {
    const start = seg.start + (span * at) / total;
    at += text.length;
    const end = seg.start + (span * at) / total;
    at += 1;
    return { text, start, end, key, name };
  });
}

/**
 * The tokens of a transcript in time order: each start at or after the previous token's start, each
 * end at or after its start (stored passes are one timeline already; this guards older rows).
 */
function tokensOf(segments: readonly CueSegment[], maxChars: number): Token[] {
  const out: Token[] = [];
  for (const seg of segments) {
    for (const raw of segmentTokens(seg)) {
      const prev = out.at(-1);
      const start = Math.max(raw.start, prev ? prev.start : 0, 0);
      const t = { ...raw, start, end: Math.max(raw.end, start) };
      out.push(...splitLongWord(t, maxChars));
    }
  }
  return out;
}

/**
 * Wraps words into at most `maxLines` lines of at most `maxChars` characters, as balanced as the
 * words allow (the longest line as short as possible; a line that fits all stays one line). The
 * first line holds `firstIndent` characters more (the speaker prefix). Null when the words do not fit.
 */
export function wrapLines(words: readonly string[], limits: Pick<CueLimits, 'maxChars' | 'maxLines'>, firstIndent = 0): string[] | null {
  const n = words.length;
  if (!n) return [];
  const lengths = words.map(textLength);
  const lineLength = (a: number, b: number) => lengths.slice(a, b).reduce((len, w, i) => len + w + (i ? 1 : 0), 0);
  if (firstIndent + lineLength(0, n) <= limits.maxChars) return [words.join(' ')];
  // best[i][k]: the smallest possible longest line when words i.. are laid on k lines (i > 0: not the first line)
  const memo = new Map<string, { worst: number; cut: number } | null>();
  const solve = (i: number, k: number): { worst: number; cut: number } | null => {
    const id = `${i}:${k}`;
    if (memo.has(id)) return memo.get(id)!;
    const indent = i === 0 ? firstIndent : 0;
    let best: { worst: number; cut: number } | null = null;
    if (indent + lineLength(i, n) <= limits.maxChars) best = { worst: indent + lineLength(i, n), cut: n };
    if (k > 1) {
      for (let j = i + 1; j < n; j++) {
        const len = indent + lineLength(i, j);
        if (len > limits.maxChars) break;
        const rest = solve(j, k - 1);
        if (!rest) continue;
        const worst = Math.max(len, rest.worst);
        // ties: a break after punctuation, else the later break (a shorter bottom line reads as the tail)
        const better = !best || worst < best.worst || (worst === best.worst && CLAUSE_OR_SENTENCE.test(words[j - 1]!));
        if (better) best = { worst, cut: j };
      }
    }
    memo.set(id, best);
    return best;
  };
  if (!solve(0, limits.maxLines)) return null;
  const lines: string[] = [];
  let i = 0;
  let k = limits.maxLines;
  while (i < n) {
    const step = solve(i, k)!;
    lines.push(words.slice(i, step.cut).join(' '));
    i = step.cut;
    k -= 1;
  }
  return lines;
}

const CLAUSE_OR_SENTENCE = new RegExp(`${SENTENCE_END.source}|${CLAUSE_END.source}`);

/** The characters a cue's lines show (their spaces counted, line breaks not). */
export const cueCharacters = (lines: readonly string[]) => lines.reduce((n, l) => n + textLength(l), 0);

/** Builds the cues of a transcript (segments in time order) within the limits. */
export function buildCues(segments: readonly CueSegment[], limits: CueLimits = DEFAULT_CUE_LIMITS): Cue[] {
  const tokens = tokensOf(segments, limits.maxChars);
  const pieces: Array<{ from: number; to: number; turnStart: boolean }> = [];
  // a turn: consecutive tokens of one speaker key; within it, a long pause ends a cue as well
  let turnStart = 0;
  for (let i = 1; i <= tokens.length; i++) {
    const changes = i === tokens.length || tokens[i]!.key !== tokens[i - 1]!.key;
    if (!changes) continue;
    let runStart = turnStart;
    for (let j = turnStart + 1; j <= i; j++) {
      if (j === i || tokens[j]!.start - tokens[j - 1]!.end >= PAUSE_ENDS_CUE_SECONDS) {
        for (const p of layoutRun(tokens, runStart, j, runStart === turnStart, limits)) pieces.push({ ...p, turnStart: p.from === turnStart });
        runStart = j;
      }
    }
    turnStart = i;
  }
  const cues = pieces.map(({ from, to, turnStart: first }) => {
    const t = tokens[from]!;
    const prefix = turnPrefix(t, first, limits.maxChars);
    return {
      start: t.start,
      end: tokens[to - 1]!.end,
      lines: wrapLines(
        tokens.slice(from, to).map((x) => x.text),
        limits,
        textLength(prefix),
      ) ?? [
        tokens
          .slice(from, to)
          .map((x) => x.text)
          .join(' '),
      ],
      speakerKey: t.key,
      speakerName: t.name,
      turnStart: first,
      prefix,
    };
  });
  return timeCues(cues, limits);
}

/**
 * Cuts the tokens [from, to) of one speaker into cues: as many words as the lines and the longest
 * time allow, then back to the best break among them that can be read at `maxCps` in the time up
 * to the next word (a sentence end, else clause punctuation, else the longest pause), never
 * leaving a first piece shorter than half a line or 35 % of what fits when a later break exists.
 */
function layoutRun(tokens: readonly Token[], from: number, to: number, turnFirst: boolean, limits: CueLimits): Array<{ from: number; to: number }> {
  const out: Array<{ from: number; to: number }> = [];
  // characters before token i (each token counted with the space after it)
  const offset = [0];
  for (let i = from; i < to; i++) offset.push(offset.at(-1)! + textLength(tokens[i]!.text) + 1);
  const chars = (a: number, b: number) => offset[b - from]! - offset[a - from]! - 1;
  // lines and the longest time: once a cue is too long for them, every longer one is too
  const shaped = (a: number, b: number, first: boolean) =>
    tokens[b - 1]!.end - tokens[a]!.start <= limits.maxSeconds &&
    wrapLines(
      tokens.slice(a, b).map((t) => t.text),
      limits,
      textLength(turnPrefix(tokens[a]!, first, limits.maxChars)),
    ) !== null;
  // reading speed over the time the cue may stay: up to the next word (less the gap), at most maxSeconds
  const readable = (a: number, b: number) => {
    const next = b < tokens.length ? tokens[b]!.start - limits.minGapSeconds : Infinity;
    return chars(a, b) <= limits.maxCps * Math.min(limits.maxSeconds, next - tokens[a]!.start);
  };
  let a = from;
  while (a < to) {
    const first = turnFirst && a === from;
    let b = a + 1;
    while (b < to && shaped(a, b + 1, first)) b++;
    if (b === to && readable(a, to)) {
      out.push({ from: a, to });
      break;
    }
    const ends: number[] = [];
    for (let k = a + 1; k <= b; k++) if (readable(a, k)) ends.push(k);
    const k = bestBreak(tokens, a, ends.length ? ends : [b], to, (x) => shaped(x, to, false) && readable(x, to), chars, limits.maxChars);
    out.push({ from: a, to: k });
    a = k;
  }
  return out;
}

/** Where to end the cue that starts at `a`: one of `ends` (ascending; each an exclusive end). */
function bestBreak(
  tokens: readonly Token[],
  a: number,
  ends: readonly number[],
  to: number,
  restFits: (k: number) => boolean,
  chars: (x: number, y: number) => number,
  maxChars: number,
): number {
  const least = Math.min(0.35 * chars(a, ends.at(-1)!), 0.5 * maxChars);
  const long = ends.filter((k) => chars(a, k) >= least);
  const candidates = long.length ? long : [...ends];
  const rank = (k: number) => {
    const word = tokens[k - 1]!.text;
    return SENTENCE_END.test(word) ? 2 : CLAUSE_END.test(word) ? 1 : 0;
  };
  const pause = (k: number) => (k < tokens.length ? tokens[k]!.start - tokens[k - 1]!.end : Infinity);
  // when the rest of the turn fits one more cue, the break that balances the two
  const closing = candidates.filter((k) => k === to || restFits(k));
  const pool = closing.length ? closing : candidates;
  const imbalance = (k: number) => Math.abs(chars(a, k) - (k < to ? chars(k, to) : 0));
  let best = pool[0]!;
  for (const k of pool) {
    const better =
      rank(k) > rank(best) ||
      (rank(k) === rank(best) &&
        (closing.length ? imbalance(k) < imbalance(best) : pause(k) > pause(best) + 1e-9 || (Math.abs(pause(k) - pause(best)) <= 1e-9 && k > best)));
    if (better) best = k;
  }
  return best;
}

/**
 * Times the cues: each starts with its first word; its end is extended into the silence after it
 * until it has been shown `minSeconds` and long enough to read at `maxCps` (at most `maxSeconds`,
 * never closer than `minGapSeconds` to the next cue), and a cue still short of `minSeconds` starts
 * earlier into the silence before it. Where words follow each other too closely for a gap, the
 * earlier cue ends sooner; a cue that would be left without time pushes the next one's start.
 */
function timeCues(cues: Cue[], limits: CueLimits): Cue[] {
  // whole milliseconds, as SRT and WebVTT write them, so a gap is never lost to rounding
  const ms = (s: number) => Math.round(s * 1000);
  const gap = Math.ceil(limits.minGapSeconds * 1000);
  const min = ms(limits.minSeconds);
  const max = ms(limits.maxSeconds);
  const shortest = Math.min(100, min);
  const times = cues.map((c) => ({ start: ms(c.start), end: ms(c.end) }));
  for (let i = 0; i < times.length; i++) {
    const c = times[i]!;
    const prev = i > 0 ? times[i - 1]! : null;
    const next = i + 1 < times.length ? times[i + 1]! : null;
    if (prev) c.start = Math.max(c.start, prev.end + gap);
    c.end = Math.max(c.end, c.start);
    const needed = Math.max(min, Math.ceil((cueCharacters(cues[i]!.lines) / limits.maxCps) * 1000));
    const latest = Math.min(c.start + max, next ? next.start - gap : Infinity);
    c.end = Math.min(Math.max(c.end, c.start + needed), latest);
    if (c.end - c.start < min) {
      const earliest = prev ? prev.end + gap : 0;
      c.start = Math.max(earliest, Math.min(c.start, c.end - min));
    }
    if (c.end - c.start < shortest) c.end = c.start + shortest;
  }
  return cues.map((c, i) => ({ ...c, start: times[i]!.start / 1000, end: times[i]!.end / 1000 }));
}
