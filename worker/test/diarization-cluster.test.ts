import { describe, expect, it } from 'vitest';
import { mergeByBic } from '../src/diarization/bic.js';
import { cutDendrogram, wardLinkage } from '../src/diarization/cluster.js';
import type { FrameFeatures } from '../src/diarization/features.js';

/** Squared Euclidean distances of points (rows). */
function squared(points: number[][]): Float64Array {
  const n = points.length;
  const d = new Float64Array(n * n);
  for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) d[i * n + j] = points[i]!.reduce((s, v, k) => s + (v - points[j]![k]!) ** 2, 0);
  return d;
}

/** Within-cluster sum of squares. */
function sse(points: number[][]): number {
  const mean = points[0]!.map((_, k) => points.reduce((s, p) => s + p[k]!, 0) / points.length);
  return points.reduce((s, p) => s + p.reduce((a, v, k) => a + (v - mean[k]!) ** 2, 0), 0);
}

/** The classic O(n³) Ward loop: merge the pair whose union grows the sum of squares least. */
function bruteForce(points: number[][]): number[] {
  let clusters = points.map((p) => [p]);
  const heights: number[] = [];
  while (clusters.length > 1) {
    let best = { i: 0, j: 1, growth: Infinity };
    for (let i = 0; i < clusters.length; i++) {
      for (let j = i + 1; j < clusters.length; j++) {
        const growth = sse([...clusters[i]!, ...clusters[j]!]) - sse(clusters[i]!) - sse(clusters[j]!);
        if (growth < best.growth) best = { i, j, growth };
      }
    }
    heights.push(2 * best.growth);
    const merged = [...clusters[best.i]!, ...clusters[best.j]!];
    clusters = clusters.filter((_, k) => k !== best.i && k !== best.j).concat([merged]);
  }
  return heights.sort((a, b) => a - b);
}

describe('Ward clustering (nearest-neighbour chain)', () => {
  it('finds the merges of the classic loop; heights are twice the growth of the sum of squares', () => {
    let seed = 42;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648) * 2 - 1;
    const points = Array.from({ length: 24 }, (_, i) => [random() + (i % 3) * 4, random() - (i % 2) * 3, random()]);
    const merges = wardLinkage(squared(points), points.length);
    expect(merges).toHaveLength(points.length - 1);
    const expected = bruteForce(points);
    merges.forEach((m, k) => expect(m.height).toBeCloseTo(expected[k]!, 9));
  });

  it('a cut between the within- and between-group heights separates well apart groups', () => {
    const points = [
      [0, 0],
      [0.1, 0],
      [0, 0.1],
      [5, 5],
      [5.1, 5],
      [5, 5.1],
      [-5, 5],
      [-5.1, 5],
    ];
    const merges = wardLinkage(squared(points), points.length);
    const labels = cutDendrogram(merges, points.length, 1);
    expect(new Set(labels).size).toBe(3);
    expect(labels[0]).toBe(labels[2]);
    expect(labels[3]).toBe(labels[5]);
    expect(labels[6]).toBe(labels[7]);
    expect(new Set([labels[0], labels[3], labels[6]]).size).toBe(3);
    // The count bounds win over the threshold.
    expect(new Set(cutDendrogram(merges, points.length, 1, 1, 2)).size).toBe(2);
    expect(new Set(cutDendrogram(merges, points.length, 1, 4)).size).toBe(4);
  });
});

describe('mergeByBic', () => {
  /** Gaussian frames (Box–Muller from a fixed LCG): `n` frames of `dim` values, each dimension scaled by `scale[d]`. */
  function frames(n: number, scale: number[], seed: number): number[][] {
    let s = seed;
    const uniform = () => ((s = (s * 1103515245 + 12345) % 2147483648) + 1) / 2147483649;
    const normal = () => Math.sqrt(-2 * Math.log(uniform())) * Math.cos(2 * Math.PI * uniform());
    return Array.from({ length: n }, () => scale.map((k) => k * normal()));
  }
  /** Frame features of consecutive blocks of frames, and the frame range of each block (a "window"). */
  function features(blocks: number[][][]): { f: FrameFeatures; ranges: Array<[number, number]> } {
    const dim = blocks[0]![0]!.length;
    const all = blocks.flat();
    const data = Float32Array.from(all.flat());
    let at = 0;
    const ranges = blocks.map((b): [number, number] => [at, (at += b.length)]);
    return { f: { n: all.length, dim, data, energy: new Float32Array(all.length) }, ranges };
  }
  /** The BIC alone (no allowance for one voice's variation), as the first three cases test it. */
  const params = { lambda: 2.1, maxFrames: 6000, allowance: 0, allowanceFrames: 500 };
  const voiceA = [1, 1, 1, 1, 1, 1];
  // Same means, another spread: what window means cannot tell apart and covariances can.
  const voiceB = [1.6, 0.6, 1.4, 0.7, 1.5, 0.6];

  it('joins clusters of one source and keeps two sources with different covariances apart', () => {
    const blocks = [0, 1, 2, 3].map((i) => frames(300, voiceA, 11 + i)).concat([0, 1, 2, 3].map((i) => frames(300, voiceB, 31 + i)));
    const { f, ranges } = features(blocks);
    // An over-split start: four clusters, two of each source.
    const start = Int32Array.from([0, 0, 1, 1, 2, 2, 3, 3]);
    const labels = mergeByBic(f, ranges, start, params);
    expect([...labels]).toEqual([0, 0, 0, 0, 1, 1, 1, 1]);
  });

  it('one source stays one cluster however it was split', () => {
    const { f, ranges } = features([0, 1, 2, 3, 4, 5].map((i) => frames(250, voiceA, 51 + i)));
    expect(new Set(mergeByBic(f, ranges, Int32Array.from([0, 1, 2, 3, 4, 5]), params)).size).toBe(1);
  });

  it('the allowance keeps one source whose level shifts between long stretches whole, and two distinct sources apart', () => {
    // One source read in two long stretches whose means differ by half a standard deviation on
    // every axis (another sentence, another loudness): BIC alone splits 30 s + 30 s of it, as its
    // penalty grows with log N and the gain with N; the allowance (0.7 per frame) joins them.
    const shifted = (rows: number[][]) => rows.map((r) => r.map((x) => x + 0.5));
    const one = features([frames(3000, voiceA, 101), shifted(frames(3000, voiceA, 102))]);
    expect(new Set(mergeByBic(one.f, one.ranges, Int32Array.from([0, 1]), params)).size).toBe(2);
    const allowance = { ...params, allowance: 0.7 };
    expect(new Set(mergeByBic(one.f, one.ranges, Int32Array.from([0, 1]), allowance)).size).toBe(1);
    // Two voices that differ by more than one voice varies (means 2 apart): kept apart.
    const far = (rows: number[][]) => rows.map((r) => r.map((x) => x + 2));
    const two = features([frames(3000, voiceA, 103), far(frames(3000, voiceA, 104))]);
    expect(new Set(mergeByBic(two.f, two.ranges, Int32Array.from([0, 1]), allowance)).size).toBe(2);
    // Clusters under allowanceFrames are judged by BIC alone.
    const small = features([frames(400, voiceA, 105), shifted(frames(400, voiceA, 106))]);
    const strict = { ...params, allowance: 100, allowanceFrames: 500 };
    expect([...mergeByBic(small.f, small.ranges, Int32Array.from([0, 1]), strict)]).toEqual([
      ...mergeByBic(small.f, small.ranges, Int32Array.from([0, 1]), params),
    ]);
  });

  it('respects minClusters and maxClusters', () => {
    const { f, ranges } = features([0, 1, 2, 3].map((i) => frames(250, voiceA, 71 + i)));
    expect(new Set(mergeByBic(f, ranges, Int32Array.from([0, 1, 2, 3]), params, 3)).size).toBe(3);
    const two = features([frames(300, voiceA, 91), frames(300, voiceB, 92), frames(300, voiceA, 93), frames(300, voiceB, 94)]);
    expect(new Set(mergeByBic(two.f, two.ranges, Int32Array.from([0, 1, 2, 3]), params, 1, 1)).size).toBe(1);
    expect(new Set(mergeByBic(two.f, two.ranges, Int32Array.from([0, 1, 2, 3]), params)).size).toBe(2);
  });
});
