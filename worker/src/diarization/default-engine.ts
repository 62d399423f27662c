import { mergeByBic } from './bic.js';
import { cutDendrogram, wardLinkage } from './cluster.js';
import { FRAME_HOP, FRAME_SECONDS, mfcc, type FrameFeatures } from './features.js';
import { frameLogLik, trainGmm, viterbi, type Gmm } from './gmm.js';
import { project, speakerSpace, type SpeakerSpace } from './speaker-space.js';
import type { DiarizationOutput, DiarizeOptions, Diarizer, SpeakerTurn } from './types.js';
import { DEFAULT_VAD, SileroVad, speechRegions, type Region, type VadParams } from './vad.js';

/** Every tunable of the default pipeline (see docs/diarization.md for what each does and why). */
export interface DefaultParams {
  vad: VadParams;
  /** Window length (s) of the per-window speaker vectors; windows do not overlap (their hop is their length). */
  window: number;
  /**
   * Pauses at least this long (s) end the stretch of speech that windows tile, so that no window
   * spans them: most changes of speaker come with a pause, and a window holding two voices lies
   * between both and blurs the count. The output's speech regions still bridge pauses shorter than
   * `vad.minSilence`.
   */
  windowSilence: number;
  /** Regions shorter than this (s) get no window of their own (resegmentation labels them). */
  minWindow: number;
  /** At most this many windows are clustered (the hop grows on long recordings): bounds the n × n matrix. */
  maxWindows: number;
  /**
   * The speaker-count decision. Ward clustering in the speaker space merges two clusters while the
   * growth of the within-cluster sum of squares the merge causes is below
   * dims × (mergeBase + mergePerLog × ln n) for n windows. In that space one voice's windows spread
   * with unit variance per axis, so two halves of one voice cost about `dims` to merge whatever the
   * recording; different voices cost more the longer they speak. The ln n term keeps the chance of a
   * spurious split from growing with the number of windows compared.
   */
  mergeBase: number;
  mergePerLog: number;
  /**
   * Then the clusters are merged again by the Bayesian information criterion on their frames
   * (bic.ts): while a full-covariance Gaussian of two clusters' frames together beats one each
   * with the model-size penalty weighted by `bicLambda`. The Ward stop above is set low enough to
   * over-split a little; this second test decides the count. Counts above `bicMaxFrames` frames are
   * scaled down to it.
   */
  bicLambda: number;
  bicMaxFrames: number;
  /** One voice's allowance in the BIC stage (bic.ts): per-frame gain τ, and the frames each cluster needs for it to apply. */
  bicAllowance: number;
  bicAllowanceFrames: number;
  /**
   * A cluster with fewer windows than minClusterShare × n (at least minClusterWindows, at most
   * maxFoldWindows) is folded into its nearest big cluster. The cap keeps a speaker with a few
   * minutes in a long recording: 5 % of a 2-hour recording's 1,500 windows would be 75.
   */
  minClusterShare: number;
  minClusterWindows: number;
  maxFoldWindows: number;
  /** Resegmentation: GMM components per speaker, EM/Viterbi rounds, log penalty per speaker change. */
  gmmComponents: number;
  resegRounds: number;
  switchPenalty: number;
  /** Turns of one speaker closer than this (s) are joined. */
  joinGap: number;
  /**
   * A change of speaker shorter than this (s) inside continuous speech is taken back: its frames go
   * to the speaker before it (after it at the start of a stretch). The resegmentation's frame models
   * otherwise flip for a syllable or two where one voice briefly resembles the other, and a 0.1 s
   * "turn" splits a word off its segment.
   */
  minTurn: number;
}

export const DEFAULT_PARAMS: DefaultParams = {
  vad: DEFAULT_VAD,
  window: 2,
  windowSilence: 0.5,
  minWindow: 0.5,
  maxWindows: 1500,
  mergeBase: 2.5,
  mergePerLog: 0.5,
  bicLambda: 2.1,
  bicMaxFrames: 6000,
  bicAllowance: 0.7,
  bicAllowanceFrames: 1000,
  minClusterShare: 0.05,
  minClusterWindows: 2,
  maxFoldWindows: 8,
  gmmComponents: 8,
  resegRounds: 2,
  switchPenalty: 30,
  joinGap: 0.3,
  minTurn: 0.5,
};

const yieldNow = () => new Promise<void>((resolve) => setImmediate(resolve));

export class DefaultDiarizer implements Diarizer {
  readonly name = 'silero-mfcc';

  constructor(
    private readonly vad: SileroVad,
    private readonly params: DefaultParams = DEFAULT_PARAMS,
    private readonly space: SpeakerSpace = speakerSpace,
  ) {}

  /**
   * The mean MFCC vector (normalised as the diarizer normalises them: by the recording's speech
   * frames) of each window: what the speaker space is fitted on (bench/src/diarization-calibrate.ts).
   */
  async windowVectors(samples: Float32Array, windows: { start: number; end: number }[]): Promise<{ x: Float64Array; inputs: number }> {
    const probs = await this.vad.probabilities(samples);
    const regions = speechRegions(probs, samples.length / 16000, this.params.vad);
    const feats = await mfcc(samples);
    normaliseFrames(feats, framesIn(regions, feats.n));
    return { x: windowMeans(feats, windows), inputs: feats.dim };
  }

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

    // 3. Window vectors in the speaker space → Ward clustering with a calibrated stop, then merges by BIC on the frames: 60–75 %.
    const windows = makeWindows(speechRegions(probs, duration, { ...p.vad, minSilence: p.windowSilence }), p);
    if (!windows.length) return singleSpeaker(this.name, regions);
    const n = windows.length;
    const vectors = project(this.space, windowMeans(feats, windows), n);
    await yieldNow();
    signal?.throwIfAborted();
    const dims = this.space.dims;
    const merges = wardLinkage(squaredDistances(vectors, n, dims), n);
    // Merge heights are twice the growth of the within-cluster sum of squares (cluster.ts).
    const stop = 2 * dims * (p.mergeBase + p.mergePerLog * Math.log(n));
    let labels = cutDendrogram(merges, n, stop, opts.minSpeakers ?? 1, opts.maxSpeakers ?? Infinity);
    labels = mergeByBic(
      feats,
      windows.map((w) => frameRange(w, feats.n)),
      labels,
      { lambda: p.bicLambda, maxFrames: p.bicMaxFrames, allowance: p.bicAllowance, allowanceFrames: p.bicAllowanceFrames },
      opts.minSpeakers ?? 1,
      opts.maxSpeakers ?? Infinity,
    );
    labels = foldSmallClusters(labels, vectors, dims, Math.max(p.minClusterWindows, Math.min(p.maxFoldWindows, p.minClusterShare * n)), opts.minSpeakers ?? 1);
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
    const minRun = Math.round(p.minTurn / FRAME_SECONDS);
    let turns = toTurns(absorbShortRuns(frameLabels, speechFrames, minRun), speechFrames, p.joinGap);
    // A stated minimum (num_speakers, min_speakers) binds the result, not only the clustering: when
    // the resegmentation let a cluster's voice be absorbed by the others, the clustering's own
    // labels stand (they honour the bound whenever there were enough windows to).
    if (opts.minSpeakers !== undefined && speakers > 1 && countSpeakers(turns) < Math.min(opts.minSpeakers, speakers)) {
      const clustered = toTurns(absorbShortRuns(framesFromWindows(windows, labels, speechFrames), speechFrames, minRun), speechFrames, p.joinGap);
      if (countSpeakers(clustered) > countSpeakers(turns)) turns = clustered;
    }
    progress(1);
    return { engine: this.name, speakerCount: countSpeakers(turns), turns };
  }

  async close(): Promise<void> {
    await this.vad.close();
  }
}

const countSpeakers = (turns: SpeakerTurn[]) => new Set(turns.map((t) => t.speaker)).size;

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

/** Windows of `p.window` seconds that tile each speech region (a region shorter than that is one window). */
function makeWindows(regions: Region[], p: Pick<DefaultParams, 'window' | 'minWindow' | 'maxWindows'>): Window[] {
  const speech = regions.reduce((s, r) => s + r.end - r.start, 0);
  const hop = Math.max(p.window, speech / p.maxWindows);
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

/** The mean of each feature over each window: n × dim values. */
function windowMeans(f: FrameFeatures, windows: Window[]): Float64Array {
  const dim = f.dim;
  const out = new Float64Array(windows.length * dim);
  windows.forEach((w, k) => {
    const [a, b] = frameRange(w, f.n);
    const count = Math.max(1, b - a);
    for (let i = a; i < b; i++) for (let d = 0; d < dim; d++) out[k * dim + d]! += f.data[i * dim + d]!;
    for (let d = 0; d < dim; d++) out[k * dim + d]! /= count;
  });
  return out;
}

function squaredDistances(x: Float64Array, n: number, dim: number): Float64Array {
  const dist = new Float64Array(n * n);
  for (let i = 0; i < n; i++) {
    for (let j = i + 1; j < n; j++) {
      let s = 0;
      for (let d = 0; d < dim; d++) s += (x[i * dim + d]! - x[j * dim + d]!) ** 2;
      dist[i * n + j] = s;
      dist[j * n + i] = s;
    }
  }
  return dist;
}

/**
 * Clusters of fewer than `minWindows` windows (a cough, a laugh, a burst of noise: too little to
 * tell a voice by) join the big cluster whose mean is nearest in the speaker space.
 */
function foldSmallClusters(labels: Int32Array, x: Float64Array, dim: number, minWindows: number, minSpeakers: number): Int32Array {
  const k = Math.max(...labels) + 1;
  const counts = new Int32Array(k);
  for (const l of labels) counts[l]!++;
  const order = [...counts.keys()].sort((a, b) => counts[b]! - counts[a]!);
  const big = new Set(order.filter((c, rank) => rank < Math.max(1, minSpeakers) || counts[c]! >= minWindows));
  if (big.size === k) return labels;
  const means = Array.from({ length: k }, () => new Float64Array(dim));
  labels.forEach((l, i) => {
    for (let d = 0; d < dim; d++) means[l]![d]! += x[i * dim + d]! / counts[l]!;
  });
  const remap = new Int32Array(k);
  const ids = new Map<number, number>();
  for (let c = 0; c < k; c++) {
    let target = c;
    if (!big.has(c)) {
      let best = Infinity;
      for (const b of big) {
        const d2 = means[b]!.reduce((acc, v, d) => acc + (v - means[c]![d]!) ** 2, 0);
        if (d2 < best) [best, target] = [d2, b];
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

/**
 * Runs of one label shorter than `minFrames` inside a stretch of consecutive speech frames take the
 * label of the run before them (of the run after them when they start the stretch); a stretch that
 * is all short runs keeps its labels.
 */
function absorbShortRuns(labels: Int32Array, speechFrames: Int32Array, minFrames: number): Int32Array {
  const out = labels.slice();
  let stretch = 0;
  for (let j = 1; j <= out.length; j++) {
    if (j < out.length && speechFrames[j]! === speechFrames[j - 1]! + 1) continue;
    // [stretch, j) is consecutive speech: its runs of one label, as decoded.
    const runs: Array<{ start: number; end: number; long: boolean }> = [];
    for (let a = stretch; a < j;) {
      let b = a + 1;
      while (b < j && labels[b] === labels[a]) b++;
      runs.push({ start: a, end: b, long: b - a >= minFrames });
      a = b;
    }
    const firstLong = runs.find((r) => r.long);
    let previous = firstLong ? labels[firstLong.start]! : -1;
    for (const r of runs) {
      if (r.long) previous = labels[r.start]!;
      else if (previous >= 0) out.fill(previous, r.start, r.end);
    }
    stretch = j;
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
