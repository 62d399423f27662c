import { EigenvalueDecomposition, Matrix } from 'ml-matrix';
import { SPEAKER_SPACE } from './speaker-space-data.js';

/**
 * The space in which the default diarizer compares voices: a linear projection of a window's mean
 * MFCC vector (c1..c19, after the recording's own mean and variance normalisation) in which the
 * spread of one speaker's windows is the same in every direction (within-speaker whitening) and
 * the axes are ordered by how far apart different speakers lie (linear discriminant analysis).
 *
 * In that space the distance between two windows of one voice has a known scale on any recording,
 * which is what lets the clustering stop at a fixed, calibrated threshold instead of one tuned per
 * kind of audio. The projection is fitted by `npm run bench:diarization:calibrate` on conversations
 * built from the tuning half of the LibriSpeech speakers only (bench/src/diarization-corpus.ts);
 * its numbers live in speaker-space-data.ts, written by that script.
 */
export interface SpeakerSpace {
  /** Input dimensions (MFCCs per frame). */
  inputs: number;
  /** Output dimensions kept. */
  dims: number;
  /** inputs × dims, row-major. */
  projection: number[];
  /** Between/within variance ratio of each kept axis, for the record. */
  ratios: number[];
}

export const speakerSpace: SpeakerSpace = SPEAKER_SPACE;

/** Projects window vectors (n × inputs, row-major) into the speaker space (n × dims). */
export function project(space: SpeakerSpace, x: Float64Array, n: number): Float64Array {
  const { inputs, dims, projection } = space;
  const out = new Float64Array(n * dims);
  for (let i = 0; i < n; i++) {
    for (let c = 0; c < dims; c++) {
      let s = 0;
      for (let d = 0; d < inputs; d++) s += x[i * inputs + d]! * projection[d * dims + c]!;
      out[i * dims + c] = s;
    }
  }
  return out;
}

/** One recording's windows with the speaker each belongs to (from a reference). */
export interface LabelledWindows {
  /** n × inputs, row-major. */
  x: Float64Array;
  speakers: string[];
}

/**
 * Fits the projection: W = pooled within-speaker covariance of the windows, B = covariance of each
 * speaker's mean around its recording's mean (between speakers, per recording, as the diarizer sees
 * them after its per-recording normalisation); keeps the `dims` leading eigenvectors of
 * W^-1/2 B W^-1/2, mapped back through W^-1/2.
 */
export function fitSpeakerSpace(recordings: LabelledWindows[], inputs: number, dims: number): SpeakerSpace {
  const within = new Matrix(inputs, inputs);
  const between = new Matrix(inputs, inputs);
  let withinCount = 0;
  let betweenCount = 0;
  for (const rec of recordings) {
    const n = rec.speakers.length;
    if (n < 2) continue;
    const mean = new Float64Array(inputs);
    for (let i = 0; i < n; i++) for (let d = 0; d < inputs; d++) mean[d]! += rec.x[i * inputs + d]! / n;
    for (const spk of new Set(rec.speakers)) {
      const rows = rec.speakers.flatMap((s, i) => (s === spk ? [i] : []));
      const m = new Float64Array(inputs);
      for (const i of rows) for (let d = 0; d < inputs; d++) m[d]! += rec.x[i * inputs + d]! / rows.length;
      for (const i of rows) addOuter(within, (d) => rec.x[i * inputs + d]! - m[d]!);
      withinCount += rows.length - 1;
      addOuter(between, (d) => m[d]! - mean[d]!);
      betweenCount++;
    }
  }
  within.div(Math.max(1, withinCount));
  between.div(Math.max(1, betweenCount));
  const w = new EigenvalueDecomposition(within, { assumeSymmetric: true });
  const invSqrt = new Matrix(inputs, inputs);
  w.realEigenvalues.forEach((v, k) => {
    const s = 1 / Math.sqrt(Math.max(v, 1e-9));
    for (let i = 0; i < inputs; i++)
      for (let j = 0; j < inputs; j++) invSqrt.set(i, j, invSqrt.get(i, j) + s * w.eigenvectorMatrix.get(i, k) * w.eigenvectorMatrix.get(j, k));
  });
  const m = invSqrt.mmul(between).mmul(invSqrt);
  const e = new EigenvalueDecomposition(m, { assumeSymmetric: true });
  const order = e.realEigenvalues.map((v, i) => [v, i] as const).sort((a, b) => b[0] - a[0]);
  const basis = new Matrix(inputs, dims);
  for (let c = 0; c < dims; c++) for (let d = 0; d < inputs; d++) basis.set(d, c, e.eigenvectorMatrix.get(d, order[c]![1]));
  const projection = invSqrt.mmul(basis).to1DArray();
  return { inputs, dims, projection, ratios: order.slice(0, dims).map(([v]) => v) };
}

function addOuter(target: Matrix, v: (d: number) => number) {
  const n = target.rows;
  const x = Array.from({ length: n }, (_, d) => v(d));
  for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) target.set(i, j, target.get(i, j) + x[i]! * x[j]!);
}
