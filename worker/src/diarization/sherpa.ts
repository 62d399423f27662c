import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { DiarizerUnavailableError, type DiarizationOutput, type DiarizeOptions, type Diarizer, type SpeakerTurn } from './types.js';

/** The part of sherpa-onnx-node used here (the package ships JSDoc types only, no declarations). */
interface SherpaDiarizationConfig {
  segmentation: { pyannote: { model: string }; numThreads: number; debug: number; provider: string };
  embedding: { model: string; numThreads: number; debug: number; provider: string };
  clustering: { numClusters: number; threshold: number };
  minDurationOn: number;
  minDurationOff: number;
}
export interface SherpaDiarization {
  readonly sampleRate: number;
  process(samples: Float32Array): { start: number; end: number; speaker: number }[];
  setConfig(config: Partial<SherpaDiarizationConfig>): void;
}
interface SherpaModule {
  OfflineSpeakerDiarization: new (config: SherpaDiarizationConfig) => SherpaDiarization;
}

export interface SherpaOptions {
  segmentationModel: string;
  embeddingModel: string;
  threads?: number | undefined;
}

/** Clustering threshold used when the caller does not fix the speaker count (sherpa-onnx's example value). */
const CLUSTER_THRESHOLD = 0.5;

/**
 * A model file must exist, be readable, and load as an ONNX graph with the inputs sherpa-onnx
 * expects: sherpa-onnx aborts the whole process (an uncaught C++ exception) on a file that is not
 * a valid model, so each file is opened with onnxruntime-node first, where a failure is a
 * catchable error.
 */
async function checkModel(kind: string, file: string, inputRank: number): Promise<void> {
  try {
    await access(file, constants.R_OK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new DiarizerUnavailableError(`sherpa-onnx diarizer: the ${kind} model ${file} ${code === 'ENOENT' ? 'does not exist' : `cannot be read (${code})`}`);
  }
  if (!(await stat(file)).isFile()) throw new DiarizerUnavailableError(`sherpa-onnx diarizer: the ${kind} model ${file} is not a file`);
  let ort: typeof import('onnxruntime-node');
  try {
    ort = await import('onnxruntime-node');
  } catch (err) {
    throw new DiarizerUnavailableError(`sherpa-onnx diarizer: onnxruntime-node, used to check the model files, cannot be loaded (${(err as Error).message})`);
  }
  let session: import('onnxruntime-node').InferenceSession;
  try {
    session = await ort.InferenceSession.create(file, { intraOpNumThreads: 1 });
  } catch (err) {
    throw new DiarizerUnavailableError(`sherpa-onnx diarizer: the ${kind} model ${file} is not a valid ONNX model: ${(err as Error).message.split('\n')[0]}`);
  }
  try {
    const meta = session.inputMetadata[0];
    const shape = meta?.isTensor ? meta.shape : [];
    if (session.inputNames.length !== 1 || shape.length !== inputRank) {
      throw new DiarizerUnavailableError(
        `sherpa-onnx diarizer: the ${kind} model ${file} has inputs ${session.inputNames.join(', ')} of rank ${shape.length}; expected one input of rank ${inputRank}`,
      );
    }
  } finally {
    await session.release();
  }
}

export async function createSherpaDiarizer(opts: SherpaOptions): Promise<Diarizer> {
  // pyannote segmentation: x [batch, 1, samples]; speaker embedding (3D-Speaker, NeMo): x [batch, frames, 80].
  await checkModel('segmentation', opts.segmentationModel, 3);
  await checkModel('embedding', opts.embeddingModel, 3);
  let sherpa: SherpaModule;
  try {
    sherpa = createRequire(import.meta.url)('sherpa-onnx-node') as SherpaModule;
  } catch (err) {
    throw new DiarizerUnavailableError(
      `sherpa-onnx diarizer: the optional package sherpa-onnx-node (and its platform package sherpa-onnx-${process.platform}-${process.arch}) cannot be loaded: ${(err as Error).message.split('\n')[0]}`,
    );
  }
  const threads = opts.threads ?? 1;
  const config: SherpaDiarizationConfig = {
    segmentation: { pyannote: { model: opts.segmentationModel }, numThreads: threads, debug: 0, provider: 'cpu' },
    embedding: { model: opts.embeddingModel, numThreads: threads, debug: 0, provider: 'cpu' },
    clustering: { numClusters: -1, threshold: CLUSTER_THRESHOLD },
    minDurationOn: 0.2,
    minDurationOff: 0.5,
  };
  let engine: SherpaDiarization;
  try {
    engine = new sherpa.OfflineSpeakerDiarization(config);
  } catch (err) {
    throw new DiarizerUnavailableError(`sherpa-onnx diarizer: sherpa-onnx rejected the models (${(err as Error).message}); see its messages on stderr`);
  }
  return new SherpaDiarizer(engine);
}

export class SherpaDiarizer implements Diarizer {
  readonly name = 'sherpa-onnx';

  constructor(private readonly engine: SherpaDiarization) {}

  /**
   * sherpa-onnx runs in one synchronous native call: the signal is checked before and after it.
   * A stated count: an exact one (min = max) is sherpa-onnx's `numClusters`. Bounds have no
   * counterpart in sherpa-onnx, whose clustering either cuts at a threshold or at a fixed number: it
   * runs with the threshold, and when the count it finds lies outside the bounds it runs again with
   * `numClusters` at the nearest bound (so a bounded result costs up to two runs). The count then
   * lies within the bounds unless the audio has fewer speech segments than the lower bound.
   */
  async diarize(samples: Float32Array, sampleRate: number, opts: DiarizeOptions = {}): Promise<DiarizationOutput> {
    if (sampleRate !== this.engine.sampleRate) throw new Error(`sherpa-onnx diarization expects ${this.engine.sampleRate} Hz audio, got ${sampleRate} Hz`);
    opts.signal?.throwIfAborted();
    const { minSpeakers: min, maxSpeakers: max } = opts;
    const fixed = min !== undefined && min === max ? min : -1;
    const run = (numClusters: number) => {
      this.engine.setConfig({ clustering: { numClusters, threshold: CLUSTER_THRESHOLD } });
      return samples.length ? this.engine.process(samples) : [];
    };
    opts.onProgress?.(0);
    let segments = run(fixed);
    if (fixed === -1 && segments.length) {
      const count = new Set(segments.map((s) => s.speaker)).size;
      const bound = min !== undefined && count < min ? min : max !== undefined && count > max ? max : null;
      if (bound !== null) {
        opts.signal?.throwIfAborted();
        opts.onProgress?.(0.5);
        segments = run(bound);
      }
    }
    opts.signal?.throwIfAborted();
    opts.onProgress?.(1);
    const ids = new Map<number, number>();
    const turns: SpeakerTurn[] = segments
      .filter((s) => s.end > s.start)
      .sort((a, b) => a.start - b.start)
      .map((s) => {
        if (!ids.has(s.speaker)) ids.set(s.speaker, ids.size);
        return { start: s.start, end: s.end, speaker: ids.get(s.speaker)! };
      });
    return { engine: this.name, speakerCount: ids.size, turns };
  }
}
