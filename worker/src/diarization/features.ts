import FFT from 'fft.js';

/** Frame layout of the short-time features: 25 ms windows every 10 ms at 16 kHz. */
export const FRAME_HOP = 160;
const FRAME_LEN = 400;
const NFFT = 512;
export const FRAME_SECONDS = FRAME_HOP / 16000;

export interface FrameFeatures {
  /** Number of frames; frame i is centred near (i * 160 + 200) samples. */
  n: number;
  dim: number;
  /** n × dim, row-major. */
  data: Float32Array;
  /** Log energy of each frame (natural log of the mean square). */
  energy: Float32Array;
}

function melScale(hz: number) {
  return 1127 * Math.log(1 + hz / 700);
}

/** Triangular mel filters over the bins of an NFFT-point spectrum. */
function melFilterbank(bands: number, sampleRate: number, low: number, high: number): { first: number; weights: Float64Array }[] {
  const lowMel = melScale(low);
  const highMel = melScale(high);
  const binHz = sampleRate / NFFT;
  const filters: { first: number; weights: Float64Array }[] = [];
  for (let b = 0; b < bands; b++) {
    const left = lowMel + ((highMel - lowMel) * b) / (bands + 1);
    const centre = lowMel + ((highMel - lowMel) * (b + 1)) / (bands + 1);
    const right = lowMel + ((highMel - lowMel) * (b + 2)) / (bands + 1);
    let first = -1;
    const w: number[] = [];
    for (let k = 1; k < NFFT / 2; k++) {
      const m = melScale(k * binHz);
      const v = m <= left || m >= right ? 0 : m <= centre ? (m - left) / (centre - left) : (right - m) / (right - centre);
      if (v > 0) {
        if (first < 0) first = k;
        w.push(v);
      } else if (first >= 0) break;
    }
    filters.push({ first: Math.max(first, 1), weights: Float64Array.from(w.length ? w : [1]) });
  }
  return filters;
}

export interface MfccOptions {
  /** Mel bands. */
  bands?: number;
  /** Cepstral coefficients kept, c0 excluded (c0 is the frame energy, which says little about who speaks). */
  ceps?: number;
  signal?: AbortSignal | undefined;
}

/**
 * MFCCs (c1..c_ceps) of 16 kHz audio: pre-emphasis 0.97, Hamming window, 512-point FFT (fft.js),
 * mel filterbank 40 bands 60–7600 Hz, log, orthonormal DCT-II. Yields to the event loop every few
 * thousand frames so that an abort signal is seen promptly.
 */
export async function mfcc(samples: Float32Array, opts: MfccOptions = {}): Promise<FrameFeatures> {
  const bands = opts.bands ?? 40;
  const ceps = opts.ceps ?? 19;
  const n = samples.length < FRAME_LEN ? 0 : 1 + Math.floor((samples.length - FRAME_LEN) / FRAME_HOP);
  const data = new Float32Array(n * ceps);
  const energy = new Float32Array(n);
  const fft = new FFT(NFFT);
  const frame = new Float64Array(NFFT);
  const spectrum = new Float64Array(2 * NFFT);
  const power = new Float64Array(NFFT / 2 + 1);
  const logMel = new Float64Array(bands);
  const hamming = Float64Array.from({ length: FRAME_LEN }, (_, i) => 0.54 - 0.46 * Math.cos((2 * Math.PI * i) / (FRAME_LEN - 1)));
  const filters = melFilterbank(bands, 16000, 60, 7600);
  const dct = new Float64Array(ceps * bands);
  for (let c = 0; c < ceps; c++) {
    for (let b = 0; b < bands; b++) dct[c * bands + b] = Math.sqrt(2 / bands) * Math.cos((Math.PI * (c + 1) * (b + 0.5)) / bands);
  }
  for (let i = 0; i < n; i++) {
    if (i % 4000 === 0) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      opts.signal?.throwIfAborted();
    }
    const off = i * FRAME_HOP;
    let mean = 0;
    for (let j = 0; j < FRAME_LEN; j++) mean += samples[off + j]!;
    mean /= FRAME_LEN;
    let e = 0;
    let prev = off > 0 ? samples[off - 1]! - mean : 0;
    for (let j = 0; j < FRAME_LEN; j++) {
      const x = samples[off + j]! - mean;
      e += x * x;
      frame[j] = (x - 0.97 * prev) * hamming[j]!;
      prev = x;
    }
    frame.fill(0, FRAME_LEN);
    energy[i] = Math.log(e / FRAME_LEN + 1e-10);
    fft.realTransform(spectrum, frame);
    for (let k = 0; k <= NFFT / 2; k++) power[k] = spectrum[2 * k]! ** 2 + spectrum[2 * k + 1]! ** 2;
    for (let b = 0; b < bands; b++) {
      const f = filters[b]!;
      let s = 0;
      for (let k = 0; k < f.weights.length; k++) s += f.weights[k]! * power[f.first + k]!;
      logMel[b] = Math.log(s + 1e-8);
    }
    for (let c = 0; c < ceps; c++) {
      let s = 0;
      for (let b = 0; b < bands; b++) s += dct[c * bands + b]! * logMel[b]!;
      data[i * ceps + c] = s;
    }
  }
  return { n, dim: ceps, data, energy };
}
