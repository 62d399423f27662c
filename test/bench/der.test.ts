import { describe, expect, it } from 'vitest';
import { assignMax, parseRttm, parseUem, scoreDiarization, type Segment } from '../../bench/src/der.js';

/** The bench's DER scorer (bench/src/der.ts) on small cases computed by hand. */

const seg = (start: number, end: number, speaker: string): Segment => ({ start, end, speaker });
const uem = [{ start: 0, end: 10 }];

describe('DER scorer', () => {
  const ref = [seg(0, 4, 'A'), seg(5, 9, 'B')];

  it('a perfect hypothesis scores 0', () => {
    const r = scoreDiarization(ref, ref, { uem, collar: 0 });
    expect(r).toMatchObject({ total: 8, missed: 0, falseAlarm: 0, confusion: 0, der: 0 });
  });

  it('an empty hypothesis misses everything (100 %)', () => {
    const r = scoreDiarization(ref, [], { uem, collar: 0 });
    expect(r).toMatchObject({ total: 8, missed: 8, falseAlarm: 0, confusion: 0, der: 1 });
  });

  it('swapped labels score 0: speakers are mapped, not compared by name', () => {
    const r = scoreDiarization(ref, [seg(0, 4, 'x'), seg(5, 9, 'y')], { uem, collar: 0 });
    expect(r.der).toBe(0);
  });

  it('one speaker for everything: the smaller reference speaker is confusion', () => {
    // A: 4 s, B: 2 s; hypothesis one speaker 0–6 (A 0–4, B 4–6) maps to A: 2 s confused.
    const r = scoreDiarization([seg(0, 4, 'A'), seg(4, 6, 'B')], [seg(0, 6, 'h')], { uem, collar: 0 });
    expect(r).toMatchObject({ total: 6, missed: 0, falseAlarm: 0 });
    expect(r.confusion).toBeCloseTo(2, 9);
    expect(r.der).toBeCloseTo(1 / 3, 9);
  });

  it('false alarm outside reference speech, missed speech inside it', () => {
    // Reference A 2–6; hypothesis 4–8: 2 s missed (2–4), 2 s false alarm (6–8).
    const r = scoreDiarization([seg(2, 6, 'A')], [seg(4, 8, 'h')], { uem, collar: 0 });
    expect(r.missed).toBeCloseTo(2, 9);
    expect(r.falseAlarm).toBeCloseTo(2, 9);
    expect(r.der).toBeCloseTo(1, 9);
  });

  it('the collar forgives 0.25 s either side of each reference boundary, not hypothesis boundaries', () => {
    // Hypothesis ends 0.2 s early and starts 0.2 s late: inside the collar, no error.
    expect(scoreDiarization([seg(2, 6, 'A')], [seg(2.2, 5.8, 'h')], { uem, collar: 0.25 }).der).toBe(0);
    // Scored reference time: 4 s minus 0.25 s at each end = 3.5 s.
    const r = scoreDiarization([seg(2, 6, 'A')], [seg(2, 6, 'h'), seg(8, 9, 'h')], { uem, collar: 0.25 });
    expect(r.total).toBeCloseTo(3.5, 9);
    // False alarm 8–9 is far from any reference boundary: counted in full.
    expect(r.falseAlarm).toBeCloseTo(1, 9);
    // 0.5 s late is half forgiven.
    expect(scoreDiarization([seg(2, 6, 'A')], [seg(2.5, 6, 'h')], { uem, collar: 0.25 }).missed).toBeCloseTo(0.25, 9);
  });

  it('overlapped speech counts each speaker', () => {
    // A 0–4 and B 2–6 overlap 2–4: 8 s of reference speech.
    const ref2 = [seg(0, 4, 'A'), seg(2, 6, 'B')];
    // One hypothesis speaker per turn without overlap: A 0–3, B 3–6 → 1 s of A missed (3–4), 1 s of B missed (2–3).
    const r = scoreDiarization(ref2, [seg(0, 3, 'a'), seg(3, 6, 'b')], { uem, collar: 0 });
    expect(r.total).toBeCloseTo(8, 9);
    expect(r.missed).toBeCloseTo(2, 9);
    expect(r.confusion).toBe(0);
    expect(r.der).toBeCloseTo(0.25, 9);
    // Reproducing the overlap scores 0; a third hypothesis speaker in it is a false alarm.
    expect(scoreDiarization(ref2, ref2, { uem, collar: 0 }).der).toBe(0);
    expect(scoreDiarization(ref2, [...ref2, seg(2, 3, 'c')], { uem, collar: 0 }).falseAlarm).toBeCloseTo(1, 9);
  });

  it('only the UEM is scored', () => {
    const r = scoreDiarization([seg(0, 4, 'A')], [seg(0, 10, 'h')], { uem: [{ start: 2, end: 6 }], collar: 0 });
    expect(r).toMatchObject({ total: 2, missed: 0, confusion: 0 });
    expect(r.falseAlarm).toBeCloseTo(2, 9);
  });

  it('parses RTTM and UEM', () => {
    const rttm = parseRttm('SPEAKER f1 1 1.440 11.872 <NA> <NA> MEE009 <NA> <NA>\nSPEAKER f2 1 0.000 1.5 <NA> <NA> MÉO069 <NA> <NA>\n');
    expect(rttm.get('f1')).toEqual([{ start: 1.44, end: 1.44 + 11.872, speaker: 'MEE009' }]);
    expect(rttm.get('f2')?.[0]?.speaker).toBe('MÉO069');
    expect(parseUem('f1 NA 0.000 30.000\n').get('f1')).toEqual([{ start: 0, end: 30 }]);
    expect(() => parseRttm('SPEAKER f1 1 x 1 <NA> <NA> A')).toThrow(/line 1/);
  });

  it('Hungarian assignment maximises the total weight', () => {
    // Greedy would take 9 (row 0 → col 0) and then 1; the optimum is 8 + 7.
    expect(
      assignMax([
        [9, 8],
        [7, 1],
      ]),
    ).toEqual([1, 0]);
    // More rows than columns: one row stays unassigned.
    expect(assignMax([[5], [6], [1]])).toEqual([-1, 0, -1]);
    expect(assignMax([])).toEqual([]);
  });
});
