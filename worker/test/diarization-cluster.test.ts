import { describe, expect, it } from 'vitest';
import { cutDendrogram, wardLinkage } from '../src/diarization/cluster.js';

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
