import type { FrameFeatures } from './features.js';

/**
 * The second half of the default diarizer's count decision: clusters found in the speaker space
 * are merged again while a full-covariance Gaussian of both clusters' frames explains them better
 * than one Gaussian each, by the Bayesian information criterion:
 *
 *   ΔBIC = ½ (N log|Σ| − N₁ log|Σ₁| − N₂ log|Σ₂|) − λ · ½ (d + d(d+1)/2) · log N
 *
 * (N frames, Σ the maximum-likelihood covariance of the normalised MFCC frames, d their
 * dimensions). A negative ΔBIC merges. The speaker space compares window means only; the
 * covariance of several seconds of frames also carries the shape of a voice's spectrum, which is
 * what separates two similar voices that each speak for a while.
 *
 * Hand-written: a 19 × 19 Cholesky log-determinant and a pairwise merge loop over a few dozen
 * clusters; no npm package computes BIC between frame sets.
 */
export interface BicParams {
  /** λ, the weight of the model-size penalty. */
  lambda: number;
  /**
   * Counts above this many frames are scaled down to it (keeping their proportions): on hours of
   * audio, two long clusters of one voice differ by the room and the microphone over the
   * recording, and with every frame counted any such difference outweighs the penalty.
   */
  maxFrames: number;
  /**
   * One voice's allowance (τ, per frame): two clusters that each hold at least `allowanceFrames`
   * frames are merged when their log-likelihood gain per frame, ½ (N log|Σ| − N₁ log|Σ₁| − N₂ log|Σ₂|) / N,
   * is below τ, whatever ΔBIC says. BIC's penalty grows with log N while the gain between two
   * stretches of ONE voice read minutes apart (another sentence, another loudness, a breath) grows
   * with N: without the allowance a long monologue always ends up split. Two different voices
   * differ by more per frame than one voice does across its utterances (docs/diarization.md).
   */
  allowance: number;
  allowanceFrames: number;
}

/** Sufficient statistics of a set of frames: count, sum, and the lower triangle of Σ x xᵀ. */
interface FrameStats {
  n: number;
  sum: Float64Array;
  outer: Float64Array;
}

function frameStats(f: FrameFeatures, ranges: Array<readonly [number, number]>): FrameStats {
  const d = f.dim;
  const sum = new Float64Array(d);
  const outer = new Float64Array(d * d);
  let n = 0;
  for (const [a, b] of ranges) {
    for (let t = a; t < b; t++) {
      n++;
      const row = t * d;
      for (let i = 0; i < d; i++) {
        const xi = f.data[row + i]!;
        sum[i]! += xi;
        for (let j = 0; j <= i; j++) outer[i * d + j]! += xi * f.data[row + j]!;
      }
    }
  }
  return { n, sum, outer };
}

function combine(a: FrameStats, b: FrameStats): FrameStats {
  return { n: a.n + b.n, sum: a.sum.map((v, i) => v + b.sum[i]!), outer: a.outer.map((v, i) => v + b.outer[i]!) };
}

/** log |Σ| of the frames' maximum-likelihood covariance (a small ridge keeps it finite). */
function logDet(s: FrameStats, d: number): number {
  const l = new Float64Array(d * d);
  let out = 0;
  for (let i = 0; i < d; i++) {
    for (let j = 0; j <= i; j++) {
      let v = s.outer[i * d + j]! / s.n - (s.sum[i]! / s.n) * (s.sum[j]! / s.n) + (i === j ? 1e-4 : 0);
      for (let k = 0; k < j; k++) v -= l[i * d + k]! * l[j * d + k]!;
      if (i === j) {
        const p = Math.max(v, 1e-9);
        l[i * d + i] = Math.sqrt(p);
        out += Math.log(p);
      } else l[i * d + j] = v / l[j * d + j]!;
    }
  }
  return out;
}

interface Cluster {
  stats: FrameStats;
  logDet: number;
}

function deltaBic(a: Cluster, b: Cluster, d: number, p: BicParams): number {
  const m = combine(a.stats, b.stats);
  const scale = Math.min(1, p.maxFrames / m.n);
  const gain = m.n * logDet(m, d) - a.stats.n * a.logDet - b.stats.n * b.logDet;
  const bic = 0.5 * scale * gain - p.lambda * 0.5 * (d + (d * (d + 1)) / 2) * Math.log(scale * m.n);
  if (Math.min(a.stats.n, b.stats.n) < p.allowanceFrames) return bic;
  return Math.min(bic, 0.5 * scale * (gain - 2 * p.allowance * m.n));
}

/**
 * ΔBIC of two sets of frames (as in the merge loop below; negative: one Gaussian explains both
 * better). The bench's cross-validation scores reference speakers with it: a pair of true voices
 * with a negative ΔBIC cannot be kept apart by this stage even from a perfect clustering.
 */
export function framesDeltaBic(f: FrameFeatures, a: Array<readonly [number, number]>, b: Array<readonly [number, number]>, p: BicParams): number {
  const cluster = (ranges: Array<readonly [number, number]>): Cluster => {
    const stats = frameStats(f, ranges);
    return { stats, logDet: logDet(stats, f.dim) };
  };
  return deltaBic(cluster(a), cluster(b), f.dim, p);
}

/**
 * Merges clusters (labels 0..k-1 of the windows, whose frame ranges are given) while the best pair's
 * ΔBIC is negative, and always while there are more than `maxClusters`, never below
 * `minClusters`. Returns new labels 0..k'-1.
 */
export function mergeByBic(
  f: FrameFeatures,
  windowFrames: Array<readonly [number, number]>,
  labels: Int32Array,
  p: BicParams,
  minClusters = 1,
  maxClusters = Infinity,
): Int32Array {
  const k = Math.max(...labels) + 1;
  if (k < 2) return labels;
  const d = f.dim;
  const members: number[][] = Array.from({ length: k }, () => []);
  labels.forEach((l, w) => members[l]!.push(w));
  const clusters: Array<Cluster | undefined> = members.map((ws) => {
    const stats = frameStats(
      f,
      ws.map((w) => windowFrames[w]!),
    );
    return { stats, logDet: logDet(stats, d) };
  });
  // owner[c]: the cluster that slot c was merged into (union-find over the original labels).
  const owner = Int32Array.from({ length: k }, (_, i) => i);
  const root = (c: number): number => (owner[c] === c ? c : (owner[c] = root(owner[c]!)));
  // ΔBIC of each pair (a < b: a * k + b), NaN until computed or after either side changed.
  const score = new Float64Array(k * k).fill(NaN);
  let alive = k;
  while (alive > Math.max(1, minClusters)) {
    let best = Infinity;
    let pair: [number, number] = [-1, -1];
    for (let a = 0; a < k; a++) {
      const ca = clusters[a];
      if (!ca) continue;
      for (let b = a + 1; b < k; b++) {
        const cb = clusters[b];
        if (!cb) continue;
        let s = score[a * k + b]!;
        if (Number.isNaN(s)) {
          s = deltaBic(ca, cb, d, p);
          score[a * k + b] = s;
        }
        if (s < best || pair[0] < 0) [best, pair] = [s, [a, b]];
      }
    }
    if (best >= 0 && alive <= maxClusters) break;
    const [a, b] = pair;
    const stats = combine(clusters[a]!.stats, clusters[b]!.stats);
    clusters[a] = { stats, logDet: logDet(stats, d) };
    clusters[b] = undefined;
    owner[b] = a;
    for (let c = 0; c < k; c++) {
      score[Math.min(a, c) * k + Math.max(a, c)] = NaN;
      score[Math.min(b, c) * k + Math.max(b, c)] = NaN;
    }
    alive--;
  }
  const ids = new Map<number, number>();
  return labels.map((l) => {
    const r = root(l);
    if (!ids.has(r)) ids.set(r, ids.size);
    return ids.get(r)!;
  });
}
