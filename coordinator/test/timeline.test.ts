import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { StoredTurn } from '../src/speech/jobs/speakers.js';
import { fitTimeline, fitWords, timelineFaults } from '../src/speech/jobs/timeline.js';
import { ProgressWriter } from '../src/speech/protocol/progress-writer.js';
import { splitSegmentsBySpeaker, type SourceSegment, type Word } from '../src/speech/jobs/word-speakers.js';

const w = (text: string, start: number, end: number): Word => ({ text, start, end });

/** Times as recognisers get them wrong: on a coarse grid (so ties, duplicates and zero lengths are common), sometimes negative. */
const time = fc.oneof({ weight: 5, arbitrary: fc.integer({ min: -2, max: 60 }).map((t) => t / 2) }, fc.double({ min: -1, max: 40, noNaN: true }));
const word = fc.record({ text: fc.constantFrom('a', 'b,', 'c.', 'd?', ' e ', 'f'), start: time, end: time });
/** A segment anywhere: overlapping, before the previous one, end before start, words outside it or going backwards. */
const segment = fc.record({
  start: time,
  end: time,
  text: fc.constantFrom('x', 'y z', ''),
  words: fc.oneof(fc.constant(null), fc.array(word, { maxLength: 8 })),
});
/** Or a segment that repeats an earlier one (a worker's resend). */
const segments = fc
  .array(segment, { maxLength: 12 })
  .chain((segs) =>
    segs.length ? fc.array(fc.nat(segs.length - 1), { maxLength: 3 }).map((dups) => [...segs, ...dups.map((i) => segs[i]!)]) : fc.constant(segs),
  );
const turns = fc.array(
  fc.tuple(time, time, fc.nat(3)).map(([a, b, spk]): StoredTurn => [Math.min(a, b), Math.max(a, b), spk]),
  { maxLength: 10 },
);
const bounds = fc.record({ floor: time, ceiling: time }, { requiredKeys: [] });

const texts = (segs: readonly SourceSegment[]) => segs.map((s) => [s.text, s.words?.map((x) => x.text) ?? null]);
/** h: every time of a fitted run clamped into [floor, ceiling], as PROGRESS clamps a fitted batch to its stored neighbours. */
const clampRun = (segs: readonly SourceSegment[], floor: number, ceiling: number) => {
  const h = (x: number) => Math.max(Math.min(x, ceiling), floor);
  return segs.map((s) => ({ ...s, start: h(s.start), end: h(s.end), words: s.words && s.words.map((x) => ({ ...x, start: h(x.start), end: h(x.end) })) }));
};

describe('one timeline (fitTimeline)', () => {
  it('makes any run of segments one timeline, keeping every segment, word and text in order', () => {
    fc.assert(
      fc.property(segments, bounds, (segs, b) => {
        const out = fitTimeline(segs, b);
        expect(timelineFaults(out)).toEqual([]);
        expect(texts(out)).toEqual(texts(segs));
        const floor = Math.max(0, b.floor ?? 0);
        const ceiling = Math.max(floor, b.ceiling ?? Infinity);
        for (const s of out) expect(s.start >= floor && s.end <= ceiling).toBe(true);
        // a clean run stays as it is
        expect(fitTimeline(out, b)).toEqual(out);
      }),
      { numRuns: 2000 },
    );
  });

  it('fits a run between stored neighbours as clamping its fitted times does (what PROGRESS does in SQL)', () => {
    fc.assert(
      fc.property(segments, fc.nat(40), fc.nat(40), (segs, a, c) => {
        const [floor, ceiling] = [Math.min(a, c) / 2, Math.max(a, c) / 2];
        expect(clampRun(fitTimeline(segs), floor, ceiling)).toEqual(fitTimeline(segs, { floor, ceiling }));
      }),
      { numRuns: 2000 },
    );
  });

  it('keeps a pass one timeline when it is split at speaker changes, each piece inside its segment', () => {
    const said = (ws: readonly Word[] | null | undefined) => (ws ?? []).map((x) => x.text).filter((x) => x.trim());
    fc.assert(
      fc.property(segments, turns, (segs, t) => {
        const fitted = fitTimeline(segs);
        const out = splitSegmentsBySpeaker(fitted, t);
        expect(timelineFaults(out)).toEqual([]);
        // every word with text is kept, in order
        expect(out.flatMap((p) => said(p.words))).toEqual(fitted.flatMap((s) => said(s.words)));
        // segments in order whose words are not (as whisper.cpp's can be): the split alone keeps them in order
        const raw = fitted.map((s, i) => ({ ...s, words: segs[i]!.words }));
        expect(timelineFaults(splitSegmentsBySpeaker(raw, t))).toEqual([]);
      }),
      { numRuns: 2000 },
    );
  });

  it('never lets a piece of a split segment leave its segment, whatever its word times', () => {
    fc.assert(
      fc.property(segments, turns, (segs, t) => {
        for (const p of splitSegmentsBySpeaker(segs, t)) {
          const seg = segs[p.source]!;
          const [lo, hi] = [seg.start, Math.max(seg.start, seg.end)];
          expect(p.start >= lo && p.start <= p.end && p.end <= hi).toBe(true);
          expect(timelineFaults([p], p.start)).toEqual([]);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('trims the case seen on a 10-speaker recording: a piece starting before the segment it follows', () => {
    // whisper.cpp's word times went backwards: "tragic" at 386.23, inside a segment grouped from 387.42
    const source: SourceSegment[] = [
      { start: 387.33, end: 390.91, text: 'it was', words: [w('it', 387.33, 389), w('was', 389.1, 390.91)] },
      {
        start: 391.0,
        end: 400.78,
        text: 'tragic and then more',
        words: [w('tragic', 386.23, 391.5), w('and', 391.6, 392), w('then', 387.42, 388), w('more', 392.5, 400.78)],
      },
    ];
    const turns: StoredTurn[] = [
      [380, 391.55, 0],
      [391.55, 395, 1],
      [386.5, 388.5, 2],
      [395, 401, 1],
    ];
    expect(timelineFaults(source.map((s) => ({ ...s, words: null })))).toEqual([]); // the segments are in order; their words are not
    const out = splitSegmentsBySpeaker(source, turns);
    expect(timelineFaults(out)).toEqual([]);
    expect(out.map((p) => [p.text, p.start, p.end])).toEqual([
      ['it was', 387.33, 390.91],
      ['tragic', 391, 391.5],
      ['and then more', 391.6, 400.78],
    ]);
  });

  it('fits words inside their segment without reordering them', () => {
    // b goes backwards (it starts with a, which ends there), c has no start (it starts with b) and
    // runs into d (it ends where d starts), d ends before it starts (it ends at its start), e lies after the segment
    expect(fitWords([w('a', 2, 3), w('b', 1, 4), w('c', NaN, 9), w('d', 3.5, 3), w('e', 6, 7)], 1.5, 5)).toEqual([
      w('a', 2, 2),
      w('b', 2, 2),
      w('c', 2, 3.5),
      w('d', 3.5, 3.5),
      w('e', 5, 5),
    ]);
    expect(
      fitTimeline(
        [
          { start: 5, end: 1 },
          { start: 3, end: 6 },
          { start: NaN, end: 2 },
        ],
        { floor: 1, ceiling: 5.5 },
      ),
    ).toEqual([
      { start: 5, end: 5 },
      { start: 5, end: 5.5 },
      { start: 5.5, end: 5.5 },
    ]);
  });
});

describe('live segments (ProgressWriter.fitShown)', () => {
  it('shows browsers each batch fitted after the segments shown before it, as the stored pass is fitted', () => {
    const ref = { job_id: 1, attempt: 1, lease_token: 't' };
    fc.assert(
      fc.property(fc.array(fc.array(fc.record({ start: time, end: time }), { maxLength: 5 }), { maxLength: 6 }), (batches) => {
        const writer = new ProgressWriter(null as never, null as never);
        const shown = batches.flatMap((b) => writer.fitShown(ref, b));
        expect(shown.map((s) => [s.start, s.end])).toEqual(fitTimeline(batches.flat()).map((s) => [s.start, s.end]));
        expect(timelineFaults(shown)).toEqual([]);
      }),
      { numRuns: 500 },
    );
  });
});
