import type { Word } from './word-speakers.js';

/**
 * One timeline: what a pass stores is in time order. Segments follow one another in their order
 * (seq), each starting at or after the previous one's end and ending at or after its own start;
 * a segment's words follow one another the same way, all inside their segment. Recognisers do
 * not guarantee it: whisper.cpp's token times can go backwards between words and fall outside the
 * segment they were grouped into, and a worker's resent or rerun segments may start before what is
 * stored. Pure functions; the statements that store segments (PROGRESS, labelSegments) use them.
 *
 * Times are only ever clamped, never reordered: order is the text's order (seq, then the words'
 * order in the text), and no segment or word is dropped. A segment that starts before the one
 * before it ends is trimmed at its start (the earlier one keeps its time, as it may be stored
 * already); one wholly before it becomes an empty span at its end. A word whose start goes
 * backwards starts where the one before it starts; a word that runs into the next one ends where
 * the next one starts. Clamping commutes with the bounds: fitting a run and then clamping every
 * time into [floor, ceiling] gives the same as fitting it between them, which is what lets the
 * SQL fit a batch, fitted here, to the stored neighbours it reads itself.
 */

/** The stored neighbours a run is fitted between: the one before ends at `floor`, the one after starts at `ceiling`. */
export interface TimelineBounds {
  /** Default 0, and never below it (no time before the audio starts). */
  floor?: number;
  /** Default none. Below the floor it is the floor. */
  ceiling?: number;
}

/** A segment as far as its times go; `words` absent or null when the engine gave none. */
interface TimedSegment {
  start: number;
  end: number;
  words?: readonly Word[] | null;
}

const clamp = (x: number, lo: number, hi: number) => Math.min(Math.max(x, lo), hi);

/**
 * Words fitted inside [start, end] in their text order: starts never go backwards, each word ends
 * at or after its start and at or before the next word's start (the last one at `end`). A time that
 * is not a number takes the previous word's (or the segment's start).
 */
export function fitWords(words: readonly Word[], start: number, end: number): Word[] {
  const hi = Math.max(start, end);
  let at = start;
  const starts = words.map((w) => (at = clamp(Number.isFinite(w.start) ? w.start : at, at, hi)));
  return words.map((w, i) => {
    const s = starts[i]!;
    const next = i + 1 < starts.length ? starts[i + 1]! : hi;
    return { ...w, start: s, end: clamp(Number.isFinite(w.end) ? w.end : s, s, next) };
  });
}

/**
 * A run of segments, in its order, made one timeline between `bounds`: each segment starts at or
 * after the previous one's end (the first at or after the floor), ends at or after its start and
 * at or before the ceiling, and its words are fitted inside it (fitWords). Other fields are kept.
 */
export function fitTimeline<S extends TimedSegment>(segments: readonly S[], bounds: TimelineBounds = {}): S[] {
  const floor = Math.max(0, Number.isFinite(bounds.floor) ? bounds.floor! : 0);
  const ceiling = Math.max(floor, bounds.ceiling ?? Infinity);
  let prev = floor;
  return segments.map((seg) => {
    const start = clamp(Number.isFinite(seg.start) ? seg.start : prev, prev, ceiling);
    const end = clamp(Number.isFinite(seg.end) ? seg.end : start, start, ceiling);
    prev = end;
    return { ...seg, start, end, ...(seg.words ? { words: fitWords(seg.words, start, end) } : {}) };
  });
}

/**
 * Where a run of segments breaks the timeline after `floor` (empty when it is one): each fault names
 * the segment (its index) or word and the times that cross. For tests and diagnostics.
 */
export function timelineFaults(segments: readonly TimedSegment[], floor = 0): string[] {
  const faults: string[] = [];
  let prev = floor;
  segments.forEach((seg, i) => {
    if (!(seg.start >= prev)) faults.push(`segment ${i} starts at ${seg.start}, before ${prev}`);
    if (!(seg.end >= seg.start)) faults.push(`segment ${i} ends at ${seg.end}, before its start ${seg.start}`);
    let at = seg.start;
    (seg.words ?? []).forEach((w, j) => {
      if (!(w.start >= at)) faults.push(`segment ${i} word ${j} "${w.text}" starts at ${w.start}, before ${at}`);
      if (!(w.end >= w.start)) faults.push(`segment ${i} word ${j} "${w.text}" ends at ${w.end}, before its start ${w.start}`);
      if (!(w.end <= seg.end)) faults.push(`segment ${i} word ${j} "${w.text}" ends at ${w.end}, after its segment's end ${seg.end}`);
      at = Math.max(at, w.end);
    });
    prev = Math.max(prev, seg.end);
  });
  return faults;
}
