/** One speaker's stretch of speech, in seconds; speakers are numbered 0..k-1 by first appearance. */
export interface SpeakerTurn {
  start: number;
  end: number;
  speaker: number;
}

/** Turns are sorted by start; they overlap only where the engine detects overlapped speech. */
export interface DiarizationOutput {
  engine: string;
  speakerCount: number;
  turns: SpeakerTurn[];
}

export interface DiarizeOptions {
  signal?: AbortSignal;
  /** Called with a fraction in [0, 1] as the stages advance. */
  onProgress?: (fraction: number) => void;
  minSpeakers?: number;
  maxSpeakers?: number;
}

export interface Diarizer {
  readonly name: string;
  /** Samples of mono audio (16 kHz for the engines here). Rejects with the signal's reason when aborted. */
  diarize(samples: Float32Array, sampleRate: number, opts?: DiarizeOptions): Promise<DiarizationOutput>;
  close?(): Promise<void>;
}

/** The engine could not be loaded: `message` says why in words a host operator can act on. */
export class DiarizerUnavailableError extends Error {
  override readonly name = 'DiarizerUnavailableError';
}
