import { EigenvalueDecomposition, Matrix } from 'ml-matrix';
import { averageLinkage, cutDendrogram } from './cluster.js';
import { FRAME_HOP, FRAME_SECONDS, mfcc, type FrameFeatures } from './features.js';
import { frameLogLik, trainGmm, viterbi, type Gmm } from './gmm.js';
import type { DiarizationOutput, DiarizeOptions, Diarizer, SpeakerTurn } from './types.js';
import { DEFAULT_VAD, SileroVad, speechRegions, type Region, type VadParams } from './vad.js';

/** Every tunable of the default pipeline (see docs/diarization.md for what each does and why). */
export interface DefaultParams {
  vad: VadParams;
  /** Window length and minimum hop (s) of the per-window speaker features. */
  window: number;
  hop: number;
  /** Regions shorter than this (s) get no window of their own (resegmentation labels them). */
  minWindow: number;
  /** At most this many windows are clustered (the hop grows on long recordings): bounds the n × n matrix. */
  maxWindows: number;
  /** PCA dimensions kept from the standardised window statistics. */
  pcaDims: number;
  /** Average-linkage stop: cosine distance above which clusters are not merged. */
  threshold: number;
  /** A cluster with less than this share of the windows is folded into its nearest big cluster. */
  minClusterShare: number;
  /** Resegmentation: GMM components per speaker, EM/Viterbi rounds, log penalty per speaker change. */
  gmmComponents: number;
  resegRounds: number;
  switchPenalty: number;
  /** Turns of one speaker closer than this (s) are joined. */
  joinGap: number;
}

export const DEFAULT_PARAMS: DefaultParams = {
  vad: DEFAULT_VAD,
  window: 1.5,
  hop: 0.25,
  minWindow: 0.4,
  maxWindows: 1500,
  pcaDims: 6,
  threshold: 1.2,
  minClusterShare: 0.05,
  gmmComponents: 8,
  resegRounds: 2,
  switchPenalty: 60,
  joinGap: 0.3,
};

const yieldNow = () => new Promise<void>((resolve) => setImmediate(resolve));

export class DefaultDiarizer implements Diarizer {
  readonly name = 'silero-mfcc';

  constructor(
    private readonly vad: SileroVad,
    private readonly params: DefaultParams = DEFAULT_PARAMS,
  ) {}

  async diarize(samples: Float32Array, sampleRate: number, opts: DiarizeOptions = {}): Promise<DiarizationOutput> {
    if (sampleRate !== 16000) throw new Error(`diarization expects 16 kHz audio, got ${sampleRate} Hz (decode it with decodeToWav first)`);
    const { signal } = opts;
    const progress = (f: number) => opts.onProgress?.(Math.min(1, Math.max(0, f)));
    signal?.throwIfAborted();
    const p = this.params;
    const duration = samples.length / sampleRate;

    // 1. Speech regions (Silero VAD): 0–40 %.
    const probs = await this.vad.probabilities(samples, { signal, onProgress: (f) => progress(0.4 * f) });
    const regions = speechRegions(probs, duration, p.vad);
    const empty: DiarizationOutput = { engine: this.name, speakerCount: 0, turns: [] };
    if (!regions.length) {
      progress(1);
      return empty;
    }

    // 2. Frame features: 40–60 %.
    const feats = await mfcc(samples, { signal });
    progress(0.6);
    const speechFrames = framesIn(regions, feats.n);
    if (speechFrames.length < 10) return empty;
    normaliseFrames(feats, speechFrames);

    // 3. Window statistics → PCA → average-linkage clustering: 60–75 %.
    const windows = makeWindows(regions, p);
    if (!windows.length) return singleSpeaker(this.name, regions);
    const emb = windowEmbeddings(feats, windows);
    const projected = pca(emb, windows.length, 2 * feats.dim, p.pcaDims);
    await yieldNow();
    signal?.throwIfAborted();
    const n = windows.length;
    const dist = cosineDistances(projected.data, n, projected.dim);
    const merges = averageLinkage(dist, n);
    let labels = cutDendrogram(merges, n, p.threshold, opts.minSpeakers ?? 1, opts.maxSpeakers ?? Infinity);
    labels = foldSmallClusters(labels, projected.data, projected.dim, p.minClusterShare, opts.minSpeakers ?? 1);
    progress(0.75);
    await yieldNow();
    signal?.throwIfAborted();

    // 4. Frame-level resegmentation (GMM per speaker, Viterbi with a change penalty): 75–100 %.
    let frameLabels = framesFromWindows(windows, labels, speechFrames);
    const speakers = Math.max(...labels) + 1;
    if (speakers > 1) {
      for (let round = 0; round < p.resegRounds; round++) {
        const models: Gmm[] = [];
        for (let s = 0; s < speakers; s++) {
          const rows = speechFrames.filter((_, j) => frameLabels[j] === s);
          if (rows.length < 50) continue;
          models.push(trainGmm(feats.data, feats.dim, rows, p.gmmComponents, 8, 20000, s + 1));
          await yieldNow();
          signal?.throwIfAborted();
        }
        if (models.length < 2) break;
        frameLabels = await decode(models, feats, speechFrames, p.switchPenalty, signal);
        progress(0.75 + (0.25 * (round + 1)) / p.resegRounds);
      }
    }
    const turns = toTurns(frameLabels, speechFrames, p.joinGap);
    progress(1);
    return { engine: this.name, speakerCount: new Set(turns.map((t) => t.speaker)).size, turns };
  }

  async close(): Promise<void> {
    await this.vad.close();
  }
}

/** Frame indices whose centre lies inside a speech region, in increasing order. */
function framesIn(regions: Region[], frames: number): Int32Array {
  const out: number[] = [];
  for (const r of regions) {
    const first = Math.max(0, Math.ceil((r.start * 16000 - 200) / FRAME_HOP));
    const last = Math.min(frames - 1, Math.floor((r.end * 16000 - 200) / FRAME_HOP));
    for (let i = first; i <= last; i++) out.push(i);
  }
  return Int32Array.from(out);
}

/** Mean and variance normalisation of every frame by the statistics of the speech frames. */
function normaliseFrames(f: FrameFeatures, speech: Int32Array) {
  const mean = new Float64Array(f.dim);
  const sq = new Float64Array(f.dim);
  for (const i of speech) {
    for (let d = 0; d < f.dim; d++) {
      const x = f.data[i * f.dim + d]!;
      mean[d]! += x;
      sq[d]! += x * x;
    }
  }
  const inv = new Float64Array(f.dim);
  for (let d = 0; d < f.dim; d++) {
    mean[d]! /= speech.length;
    inv[d] = 1 / Math.sqrt(Math.max(sq[d]! / speech.length - mean[d]! ** 2, 1e-6));
  }
  for (let i = 0; i < f.n; i++) for (let d = 0; d < f.dim; d++) f.data[i * f.dim + d] = (f.data[i * f.dim + d]! - mean[d]!) * inv[d]!;
}

interface Window {
  start: number;
  end: number;
}

function makeWindows(regions: Region[], p: DefaultParams): Window[] {
  const speech = regions.reduce((s, r) => s + r.end - r.start, 0);
  const hop = Math.max(p.hop, speech / p.maxWindows);
  const out: Window[] = [];
  for (const r of regions) {
    const len = r.end - r.start;
    if (len < p.minWindow) continue;
    if (len <= p.window) {
      out.push({ start: r.start, end: r.end });
      continue;
    }
    const count = Math.ceil((len - p.window) / hop) + 1;
    const step = (len - p.window) / (count - 1);
    for (let i = 0; i < count; i++) out.push({ start: r.start + i * step, end: r.start + i * step + p.window });
  }
  return out;
}

function frameRange(w: { start: number; end: number }, frames: number): [number, number] {
  return [Math.max(0, Math.round((w.start * 16000 - 200) / FRAME_HOP)), Math.min(frames, Math.round((w.end * 16000 - 200) / FRAME_HOP))];
}

/** Mean and standard deviation of each feature over the window: 2 × dim values per window. */
function windowEmbeddings(f: FrameFeatures, windows: Window[]): Float64Array {
  const dim = f.dim;
  const out = new Float64Array(windows.length * 2 * dim);
  windows.forEach((w, k) => {
    const [a, b] = frameRange(w, f.n);
    const count = Math.max(1, b - a);
    const base = k * 2 * dim;
    for (let i = a; i < b; i++) {
      for (let d = 0; d < dim; d++) {
        const x = f.data[i * dim + d]!;
        out[base + d]! += x;
        out[base + dim + d]! += x * x;
      }
    }
    for (let d = 0; d < dim; d++) {
      const m = out[base + d]! / count;
      out[base + d] = m;
      out[base + dim + d] = Math.sqrt(Math.max(out[base + dim + d]! / count - m * m, 0));
    }
  });
  return out;
}

/** Standardises each column, then projects onto the `dims` leading principal axes (ml-matrix EVD of the covariance). */
function pca(x: Float64Array, n: number, dim: number, dims: number): { data: Float64Array; dim: number } {
  const m = new Matrix(n, dim);
  for (let i = 0; i < n; i++) for (let d = 0; d < dim; d++) m.set(i, d, x[i * dim + d]!);
  m.center('column');
  const sd = m.standardDeviation('column');
  for (let d = 0; d < dim; d++) if (sd[d]! > 1e-9) m.mulColumn(d, 1 / sd[d]!);
  const keep = Math.max(1, Math.min(dims, dim, n - 1));
  if (n < 3) return { data: Float64Array.from(m.to1DArray()), dim };
  const cov = m
    .transpose()
    .mmul(m)
    .div(n - 1);
  const evd = new EigenvalueDecomposition(cov, { assumeSymmetric: true });
  const order = evd.realEigenvalues.map((v, i) => [v, i] as const).sort((a, b) => b[0] - a[0]);
  const basis = new Matrix(dim, keep);
  for (let c = 0; c < keep; c++) {
    const col = order[c]![1];
    for (let d = 0; d < dim; d++) basis.set(d, c, evd.eigenvectorMatrix.get(d, col));
  }
  return { data: Float64Array.from(m.mmul(basis).to1DArray()), dim: keep };
}

function cosineDistances(x: Float64Array, n: number, dim: number): Float64Array {
  const norm = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    let s = 0;
    for (let d = 0; d < dim; d++) s += x[i * dim + d]! ** 2;
    norm[i] = Math.sqrt(s) || 1;
  }
  const dist = new Float64Array(n * n);
  for (let i = 0; i < n; i++) {
    for (let j = i + 1; j < n; j++) {
      let s = 0;
      for (let d = 0; d < dim; d++) s += x[i * dim + d]! * x[j * dim + d]!;
      const v = 1 - s / (norm[i]! * norm[j]!);
      dist[i * n + j] = v;
      dist[j * n + i] = v;
    }
  }
  return dist;
}

/** Clusters holding less than `share` of the windows join the big cluster with the closest centroid. */
function foldSmallClusters(labels: Int32Array, x: Float64Array, dim: number, share: number, minSpeakers: number): Int32Array {
  const k = Math.max(...labels) + 1;
  const counts = new Int32Array(k);
  for (const l of labels) counts[l]!++;
  const order = [...counts.keys()].sort((a, b) => counts[b]! - counts[a]!);
  const big = new Set(order.filter((c, rank) => rank < Math.max(1, minSpeakers) || counts[c]! >= share * labels.length));
  if (big.size === k) return labels;
  const centroid = (c: number) => {
    const v = new Float64Array(dim);
    labels.forEach((l, i) => {
      if (l === c) for (let d = 0; d < dim; d++) v[d]! += x[i * dim + d]!;
    });
    const nrm = Math.sqrt(v.reduce((s, a) => s + a * a, 0)) || 1;
    return v.map((a) => a / nrm);
  };
  const centroids = new Map([...big].map((c) => [c, centroid(c)]));
  const remap = new Int32Array(k);
  const ids = new Map<number, number>();
  for (let c = 0; c < k; c++) {
    let target = c;
    if (!big.has(c)) {
      const own = centroid(c);
      let best = -Infinity;
      for (const [b, v] of centroids) {
        const s = v.reduce((acc, a, d) => acc + a * own[d]!, 0);
        if (s > best) {
          best = s;
          target = b;
        }
      }
    }
    if (!ids.has(target)) ids.set(target, ids.size);
    remap[c] = ids.get(target)!;
  }
  return labels.map((l) => remap[l]!);
}

/** Initial frame labels: each speech frame takes the label of the window whose centre is nearest. */
function framesFromWindows(windows: Window[], labels: Int32Array, speechFrames: Int32Array): Int32Array {
  const centres = windows.map((w) => (w.start + w.end) / 2);
  const out = new Int32Array(speechFrames.length);
  let k = 0;
  speechFrames.forEach((f, j) => {
    const t = (f * FRAME_HOP + 200) / 16000;
    while (k + 1 < centres.length && Math.abs(centres[k + 1]! - t) <= Math.abs(centres[k]! - t)) k++;
    out[j] = labels[k]!;
  });
  return out;
}

/** Viterbi over each run of consecutive speech frames. */
async function decode(models: Gmm[], f: FrameFeatures, speechFrames: Int32Array, penalty: number, signal: AbortSignal | undefined): Promise<Int32Array> {
  const m = models.length;
  const scores = new Float64Array(speechFrames.length * m);
  const tmp = new Float64Array(Math.max(...models.map((g) => g.k)));
  for (let j = 0; j < speechFrames.length; j++) {
    if (j % 20000 === 0) {
      await yieldNow();
      signal?.throwIfAborted();
    }
    for (let s = 0; s < m; s++) scores[j * m + s] = frameLogLik(models[s]!, f.data, speechFrames[j]!, tmp);
  }
  const out = new Int32Array(speechFrames.length);
  let runStart = 0;
  for (let j = 1; j <= speechFrames.length; j++) {
    if (j === speechFrames.length || speechFrames[j]! !== speechFrames[j - 1]! + 1) {
      out.set(viterbi(scores.subarray(runStart * m, j * m), j - runStart, m, penalty), runStart);
      runStart = j;
    }
  }
  return out;
}

/** Runs of one label become turns; same-speaker turns closer than `joinGap` are joined; speakers renumbered by first appearance. */
function toTurns(frameLabels: Int32Array, speechFrames: Int32Array, joinGap: number): SpeakerTurn[] {
  const turns: SpeakerTurn[] = [];
  const half = FRAME_SECONDS / 2;
  for (let j = 0; j < speechFrames.length; j++) {
    const t = (speechFrames[j]! * FRAME_HOP + 200) / 16000;
    const last = turns[turns.length - 1];
    if (last && last.speaker === frameLabels[j] && t - half - last.end < joinGap) last.end = t + half;
    else turns.push({ start: Math.max(0, t - half), end: t + half, speaker: frameLabels[j]! });
  }
  const ids = new Map<number, number>();
  for (const t of turns) {
    if (!ids.has(t.speaker)) ids.set(t.speaker, ids.size);
    t.speaker = ids.get(t.speaker)!;
  }
  return turns.map((t) => ({ start: round3(t.start), end: round3(t.end), speaker: t.speaker }));
}

function round3(x: number) {
  return Math.round(x * 1000) / 1000;
}

function singleSpeaker(engine: string, regions: Region[]): DiarizationOutput {
  return { engine, speakerCount: 1, turns: regions.map((r) => ({ start: round3(r.start), end: round3(r.end), speaker: 0 })) };
}
