import { TURNS_PER_CHUNK, defaultSpeakerName, endsSentence, speakerColourClass, startsNewTurn, turnClock, type TurnSoFar } from '@sonar/shared/display';
import { el } from './dom.js';

/**
 * The reading view of a transcript in the browser (job page and share page): the server renders
 * the speaker turns (coordinator/src/speech/reading-view.ts); this module appends live segments by
 * the same rules, searches the text (match count, next/previous, marked with the CSS Custom
 * Highlight API, so the text nodes are never rewritten) and finds the segment and word at a time.
 */

export interface ViewSegment {
  seq: number;
  start: number;
  end: number;
  text: string;
  speaker: string | null;
}

const squash = (s: string) => s.replace(/\s+/g, ' ').trim();
const num = (n: number) => String(Math.round(n * 100) / 100);

export class ReadingView {
  private readonly segments = new Map<number, ViewSegment>();
  private last: { seq: number; turn: TurnSoFar; p: HTMLElement } | null = null;
  private labels: Record<string, string>;
  /** Segment spans in time order, and their starts (for the player's lookups); rebuilt lazily. */
  private index: { spans: HTMLElement[]; starts: number[] } | null = null;

  constructor(readonly root: HTMLElement) {
    this.labels = parseLabels(root.dataset.names);
    this.read();
  }

  /** The view's segments as the page's markup has them (after a load, or the server's markup after a correction). */
  private read() {
    const root = this.root;
    this.segments.clear();
    this.last = null;
    this.index = null;
    for (const span of root.querySelectorAll<HTMLElement>('.seg')) {
      const s = segmentOf(span);
      this.segments.set(s.seq, s);
    }
    const spans = root.querySelectorAll<HTMLElement>('.seg');
    const lastSpan = spans[spans.length - 1];
    const lastTurn = lastSpan?.closest<HTMLElement>('.turn');
    if (lastSpan && lastTurn) this.last = { seq: Number(lastSpan.dataset.seq), turn: this.turnOf(lastTurn), p: lastTurn };
  }

  /** Replaces the text with the server's reading markup (after a correction); `names` the speakers' names. */
  replace(markup: string, names?: string) {
    const template = document.createElement('template');
    template.innerHTML = markup;
    this.root.replaceChildren(template.content);
    if (names !== undefined) {
      this.root.dataset.names = names;
      this.labels = parseLabels(names);
    }
    this.read();
  }

  /** The speakers the text names (key → name), in the order they first speak. */
  speakers(): Array<{ key: string; name: string }> {
    const out = new Map<string, string>();
    for (const s of this.segments.values())
      if (s.speaker && !out.has(s.speaker)) out.set(s.speaker, this.labels[s.speaker]?.trim() || defaultSpeakerName(s.speaker));
    for (const [key, name] of Object.entries(this.labels)) if (!out.has(key) && name.trim()) out.set(key, name);
    return [...out].map(([key, name]) => ({ key, name }));
  }

  get size() {
    return this.segments.size;
  }

  has(seq: number) {
    return this.segments.has(seq);
  }

  seqs() {
    return [...this.segments.keys()];
  }

  /** A segment as it arrives live: appended to the last turn or a new one; out of order, the view is rebuilt. */
  add(s: ViewSegment) {
    if (this.segments.has(s.seq)) return;
    this.segments.set(s.seq, s);
    if (!squash(s.text)) return;
    if (this.last && s.seq < this.last.seq) {
      this.rebuild();
      return;
    }
    this.append(s);
    this.index = null;
  }

  /** Empties the view (a new attempt or pass). */
  clear() {
    this.segments.clear();
    this.root.replaceChildren();
    this.last = null;
    this.index = null;
  }

  /** New speaker keys for some segments (a diarization that labelled the pass without splitting it). */
  relabel(speakers: ReadonlyArray<{ seq: number; speaker: string }>) {
    for (const { seq, speaker } of speakers) {
      const s = this.segments.get(seq);
      if (s) s.speaker = speaker;
    }
    this.rebuild();
  }

  private turnOf(p: HTMLElement): TurnSoFar {
    const spans = [...p.querySelectorAll<HTMLElement>('.seg')];
    const text = spans.map((x) => squash(x.textContent ?? '')).join(' ');
    return {
      speaker: p.dataset.speaker || null,
      end: Number(spans.at(-1)?.dataset.end ?? 0),
      length: spans.reduce((n, x) => n + squash(x.textContent ?? '').length + 1, 0),
      sentenceEnded: endsSentence(text),
    };
  }

  private append(s: ViewSegment) {
    const text = squash(s.text);
    const span = el('span', { className: 'seg', text, data: { seq: String(s.seq), speaker: s.speaker ?? '', start: num(s.start), end: num(s.end) } });
    span.id = `seg-${s.seq}`;
    if (!this.last || startsNewTurn(this.last.turn, s)) {
      const p = el('p', { className: `turn ${speakerColourClass(s.speaker)}`, data: { speaker: s.speaker ?? '' } });
      p.append(this.head(s.speaker, s.start), ' ', span);
      // Turns come in chunks of TURNS_PER_CHUNK, as the server renders them.
      let chunk = this.root.lastElementChild;
      if (!(chunk instanceof HTMLDivElement) || !chunk.classList.contains('chunk') || chunk.childElementCount >= TURNS_PER_CHUNK) {
        chunk = el('div', { className: 'chunk' });
        this.root.append(chunk);
      }
      chunk.append(p);
      this.last = { seq: s.seq, p, turn: { speaker: s.speaker, end: s.end, length: text.length + 1, sentenceEnded: endsSentence(text) } };
      return;
    }
    this.last.p.append(' ', span);
    this.last.seq = s.seq;
    this.last.turn.end = s.end;
    this.last.turn.length += text.length + 1;
    this.last.turn.sentenceEnded = endsSentence(text);
  }

  private head(speaker: string | null, start: number) {
    const head = el('span', { className: 'turn-head' });
    if (speaker)
      head.append(
        el('span', { className: `who ${speakerColourClass(speaker)}`, data: { speaker }, text: this.labels[speaker]?.trim() || defaultSpeakerName(speaker) }),
        ' ',
      );
    const a = el('a', { className: 'ts', text: turnClock(start), data: { t: num(start) } });
    a.href = `#t=${num(start)}`;
    head.append(a);
    return head;
  }

  /** Renders every segment again (rare: out-of-order arrivals, new speakers). */
  rebuild() {
    const all = [...this.segments.values()].sort((a, b) => a.seq - b.seq);
    this.root.replaceChildren();
    this.last = null;
    this.index = null;
    for (const s of all) if (squash(s.text)) this.append(s);
  }

  // ---- time lookups (the player) -------------------------------------------------------------

  private built() {
    if (!this.index) {
      const spans = [...this.root.querySelectorAll<HTMLElement>('.seg')];
      this.index = { spans, starts: spans.map((s) => Number(s.dataset.start)) };
    }
    return this.index;
  }

  /** The segment spoken at `t` (the last one that started at or before it, while it lasts), else null. */
  segmentAt(t: number): HTMLElement | null {
    const { spans, starts } = this.built();
    const found = lastAtOrBefore(starts, t);
    const span = found >= 0 ? spans[found]! : null;
    return span && t <= Number(span.dataset.end) + 0.05 ? span : null;
  }

  /** When the highlight next changes after `t`: the next word's start in the segment spoken, its end, or the next segment's start. */
  nextBoundary(t: number): number | null {
    const { spans, starts } = this.built();
    const found = lastAtOrBefore(starts, t);
    const seg = found >= 0 ? spans[found]! : null;
    const nextWord = seg ? wordStarts(seg)?.find((w) => w > t + 1e-6) : undefined;
    if (nextWord !== undefined) return nextWord;
    const end = seg ? Number(seg.dataset.end) : NaN;
    if (end > t) return end;
    return starts[found + 1] ?? null;
  }

  /**
   * The word of a segment spoken at `t` (the last word that started at or before it): its index
   * and start, from the segment's `data-w` (null without word times).
   */
  static wordAt(segment: HTMLElement, t: number): { index: number; start: number } | null {
    const starts = wordStarts(segment);
    if (!starts) return null;
    let hit: { index: number; start: number } | null = null;
    for (let i = 0; i < starts.length; i++) {
      if (starts[i]! <= t + 1e-6) hit = { index: i, start: starts[i]! };
      else break;
    }
    return hit;
  }

  /** The start time of word `index` of a segment, or null. */
  static wordStart(segment: HTMLElement, index: number): number | null {
    return wordStarts(segment)?.[index] ?? null;
  }

  /** A range over word `index` of a segment's text (its index-th space-separated token). */
  static wordRange(segment: HTMLElement, index: number): Range | null {
    const node = segment.firstChild;
    if (!(node instanceof Text)) return null;
    const bounds = tokenBounds(node.data)[index];
    if (!bounds) return null;
    const range = document.createRange();
    range.setStart(node, bounds[0]);
    range.setEnd(node, bounds[1]);
    return range;
  }

  /** The index of the word of a segment's text at character `offset`, or null. */
  static wordIndexAt(segment: HTMLElement, offset: number): number | null {
    const node = segment.firstChild;
    if (!(node instanceof Text)) return null;
    const bounds = tokenBounds(node.data);
    const i = bounds.findIndex(([, end]) => offset <= end);
    return i >= 0 ? i : bounds.length ? bounds.length - 1 : null;
  }
}

const starts = new WeakMap<HTMLElement, number[] | null>();

/** A segment's word start times (seconds), parsed once from `data-w`. */
function wordStarts(segment: HTMLElement): number[] | null {
  let cached = starts.get(segment);
  if (cached === undefined) {
    const base = Number(segment.dataset.start);
    cached = segment.dataset.w ? segment.dataset.w.split(' ').map((cs) => base + Number(cs) / 100) : null;
    starts.set(segment, cached);
  }
  return cached;
}

/** Where each space-separated token of a text starts and ends. */
function tokenBounds(text: string): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  const re = /\S+/g;
  for (let m = re.exec(text); m; m = re.exec(text)) out.push([m.index, m.index + m[0].length]);
  return out;
}

function parseLabels(raw: string | undefined): Record<string, string> {
  try {
    const parsed: unknown = JSON.parse(raw ?? '{}');
    return parsed && typeof parsed === 'object' ? (parsed as Record<string, string>) : {};
  } catch {
    return {};
  }
}

function segmentOf(span: HTMLElement): ViewSegment {
  return {
    seq: Number(span.dataset.seq),
    start: Number(span.dataset.start),
    end: Number(span.dataset.end),
    text: span.textContent ?? '',
    speaker: span.dataset.speaker || null,
  };
}

/**
 * Search inside the transcript: every match of the query (case-insensitive) is marked with the
 * `transcript-match` highlight and the current one with `transcript-current`; Enter or ↓ goes to
 * the next, Shift+Enter or ↑ to the previous, and the count says "3 of 12".
 */
export function bindSearch(view: ReadingView) {
  const tools = document.getElementById('reading-tools');
  const input = document.getElementById('search-input') as HTMLInputElement | null;
  const count = document.getElementById('search-count');
  if (!tools || !input || !count) return;
  tools.hidden = false;
  let matches: Range[] = [];
  let current = -1;
  const supported = typeof CSS !== 'undefined' && 'highlights' in CSS;

  const paint = () => {
    if (!supported) return;
    CSS.highlights.set('transcript-match', new Highlight(...matches));
    const now = matches[current];
    if (now) CSS.highlights.set('transcript-current', new Highlight(now));
    else CSS.highlights.delete('transcript-current');
  };
  const show = () => {
    count.textContent = !input.value.trim() ? '' : matches.length ? `${current + 1} of ${matches.length}` : 'no matches';
    count.dataset.count = String(matches.length);
    paint();
    const now = matches[current];
    if (now) {
      const box = now.getBoundingClientRect();
      const node = now.startContainer.parentElement;
      if (box.top < 80 || box.bottom > window.innerHeight - 40) node?.scrollIntoView({ block: 'center' });
    }
  };
  const run = () => {
    const q = input.value.trim().toLowerCase();
    matches = [];
    current = -1;
    if (q) {
      // Per segment, so a query may span words (each word is its own element).
      for (const seg of view.root.querySelectorAll<HTMLElement>('.seg')) {
        const full = (seg.textContent ?? '').toLowerCase();
        let at = full.indexOf(q);
        if (at < 0) continue;
        const nodes: Array<{ node: Text; from: number }> = [];
        const walker = document.createTreeWalker(seg, NodeFilter.SHOW_TEXT);
        let offset = 0;
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
          nodes.push({ node: node as Text, from: offset });
          offset += node.textContent?.length ?? 0;
        }
        const locate = (pos: number, end: boolean) => {
          const hit = nodes.findLast((n) => (end ? n.from < pos : n.from <= pos)) ?? nodes[0]!;
          return { node: hit.node, offset: pos - hit.from };
        };
        for (; at >= 0; at = full.indexOf(q, at + q.length)) {
          const range = document.createRange();
          const a = locate(at, false);
          const b = locate(at + q.length, true);
          range.setStart(a.node, a.offset);
          range.setEnd(b.node, b.offset);
          matches.push(range);
        }
      }
      current = matches.length ? 0 : -1;
    }
    show();
  };
  const step = (by: number) => {
    if (!matches.length) return;
    current = (current + by + matches.length) % matches.length;
    show();
  };
  let timer: ReturnType<typeof setTimeout> | undefined;
  input.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(run, 120);
  });
  input.addEventListener('keydown', (ev) => {
    if (ev.key !== 'Enter') return;
    ev.preventDefault();
    clearTimeout(timer);
    if (!matches.length) run();
    else step(ev.shiftKey ? -1 : 1);
  });
  document.getElementById('search-next')?.addEventListener('click', () => step(1));
  document.getElementById('search-prev')?.addEventListener('click', () => step(-1));
  document.getElementById('transcript-search')?.addEventListener('submit', (ev) => ev.preventDefault());
  return { refresh: () => input.value.trim() && run() };
}

/** The index of the last of the ascending `starts` at or before `t` (binary search), -1 when none. */
function lastAtOrBefore(starts: number[], t: number): number {
  let lo = 0;
  let hi = starts.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (starts[mid]! <= t) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}
