/**
 * Diagonal-covariance Gaussian mixtures trained by EM, and a Viterbi decoder over their frame
 * log-likelihoods. Hand-written: the models are tiny (a few components over ~20 dimensions), the
 * npm GMM packages found are one-dimensional or full-covariance toy implementations on arrays of
 * arrays, and the decoder needs the per-frame scores of every speaker model at once.
 */
export interface Gmm {
  k: number;
  dim: number;
  logWeights: Float64Array;
  means: Float64Array;
  /** Inverse variances. */
  precisions: Float64Array;
  /** Per component: log weight - ½ Σ log(2π σ²). */
  constants: Float64Array;
}

const VAR_FLOOR = 1e-3;

/** A deterministic PRNG (xorshift32) for the initialisation. */
function rng(seed: number) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 4294967296;
  };
}

function finish(g: Omit<Gmm, 'constants'>): Gmm {
  const constants = new Float64Array(g.k);
  for (let c = 0; c < g.k; c++) {
    let s = g.logWeights[c]!;
    for (let d = 0; d < g.dim; d++) s += 0.5 * Math.log(g.precisions[c * g.dim + d]! / (2 * Math.PI));
    constants[c] = s;
  }
  return { ...g, constants };
}

/** Log-likelihood of one frame (row `i` of `data`) under the mixture; `tmp` holds k values. */
export function frameLogLik(g: Gmm, data: Float32Array, i: number, tmp: Float64Array): number {
  const off = i * g.dim;
  let max = -Infinity;
  for (let c = 0; c < g.k; c++) {
    let s = g.constants[c]!;
    const base = c * g.dim;
    for (let d = 0; d < g.dim; d++) {
      const x = data[off + d]! - g.means[base + d]!;
      s -= 0.5 * x * x * g.precisions[base + d]!;
    }
    tmp[c] = s;
    if (s > max) max = s;
  }
  let sum = 0;
  for (let c = 0; c < g.k; c++) sum += Math.exp(tmp[c]! - max);
  return max + Math.log(sum);
}

/** EM training on the frames listed in `rows` (at most `maxFrames` of them, evenly spread). */
export function trainGmm(data: Float32Array, dim: number, rows: ArrayLike<number>, k: number, iterations = 8, maxFrames = 20000, seed = 1): Gmm {
  const step = Math.max(1, rows.length / maxFrames);
  const idx: number[] = [];
  for (let p = 0; p < rows.length; p += step) idx.push(rows[Math.floor(p)]!);
  const n = idx.length;
  // Global statistics, used for the variance floor and for empty components.
  const gMean = new Float64Array(dim);
  const gVar = new Float64Array(dim);
  for (const i of idx) for (let d = 0; d < dim; d++) gMean[d]! += data[i * dim + d]! / n;
  for (const i of idx) for (let d = 0; d < dim; d++) gVar[d]! += (data[i * dim + d]! - gMean[d]!) ** 2 / n;
  for (let d = 0; d < dim; d++) gVar[d] = Math.max(gVar[d]!, VAR_FLOOR);
  k = Math.max(1, Math.min(k, Math.floor(n / (4 * dim)) || 1));
  const random = rng(seed);
  const means = new Float64Array(k * dim);
  const precisions = new Float64Array(k * dim);
  const logWeights = new Float64Array(k).fill(-Math.log(k));
  for (let c = 0; c < k; c++) {
    const i = idx[Math.floor(random() * n)]!;
    for (let d = 0; d < dim; d++) {
      means[c * dim + d] = k === 1 ? gMean[d]! : data[i * dim + d]!;
      precisions[c * dim + d] = 1 / gVar[d]!;
    }
  }
  let g = finish({ k, dim, logWeights, means, precisions });
  const post = new Float64Array(k);
  for (let it = 0; it < (k === 1 ? 1 : iterations); it++) {
    const w = new Float64Array(k);
    const s1 = new Float64Array(k * dim);
    const s2 = new Float64Array(k * dim);
    for (const i of idx) {
      const ll = frameLogLik(g, data, i, post);
      for (let c = 0; c < k; c++) {
        const r = Math.exp(post[c]! - ll);
        if (r < 1e-6) continue;
        w[c]! += r;
        for (let d = 0; d < dim; d++) {
          const x = data[i * dim + d]!;
          s1[c * dim + d]! += r * x;
          s2[c * dim + d]! += r * x * x;
        }
      }
    }
    const nm = new Float64Array(k * dim);
    const np = new Float64Array(k * dim);
    const nw = new Float64Array(k);
    for (let c = 0; c < k; c++) {
      const wc = w[c]!;
      nw[c] = Math.log(Math.max(wc, 1e-3) / n);
      for (let d = 0; d < dim; d++) {
        const j = c * dim + d;
        if (wc < 2) {
          nm[j] = gMean[d]!;
          np[j] = 1 / gVar[d]!;
          continue;
        }
        const m = s1[j]! / wc;
        nm[j] = m;
        np[j] = 1 / Math.max(s2[j]! / wc - m * m, VAR_FLOOR * gVar[d]!, VAR_FLOOR);
      }
    }
    g = finish({ k, dim, logWeights: nw, means: nm, precisions: np });
  }
  return g;
}

/**
 * Viterbi decoding of `frames` (row indices into data) over the speaker models, with a log
 * penalty for each change of speaker. `scores` may be passed to reuse frame scores (frames × models).
 */
export function viterbi(scores: Float64Array, frames: number, models: number, switchPenalty: number): Int32Array {
  const path = new Int32Array(frames);
  if (!frames) return path;
  const back = new Int32Array(frames * models);
  let prev = new Float64Array(models);
  let cur = new Float64Array(models);
  for (let m = 0; m < models; m++) prev[m] = scores[m]!;
  for (let t = 1; t < frames; t++) {
    let bestPrev = 0;
    for (let m = 1; m < models; m++) if (prev[m]! > prev[bestPrev]!) bestPrev = m;
    for (let m = 0; m < models; m++) {
      const stay = prev[m]!;
      const move = prev[bestPrev]! - switchPenalty;
      const from = stay >= move ? m : bestPrev;
      cur[m] = Math.max(stay, move) + scores[t * models + m]!;
      back[t * models + m] = from;
    }
    [prev, cur] = [cur, prev];
  }
  let last = 0;
  for (let m = 1; m < models; m++) if (prev[m]! > prev[last]!) last = m;
  for (let t = frames - 1; t >= 0; t--) {
    path[t] = last;
    last = back[t * models + last]!;
  }
  return path;
}
