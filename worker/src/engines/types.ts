/** One recognised word, times in seconds from the start of the audio. */
export interface Word {
  start: number;
  end: number;
  text: string;
}

/** Word times clamped to the audio, like their segment's. */
export function clampWords(words: readonly Word[], duration: number): Word[] {
  return words.map((w) => {
    const end = Math.min(Math.max(w.end, w.start), duration);
    return { start: Math.min(w.start, end), end, text: w.text };
  });
}

/** One stretch of recognised speech, times in seconds from the start of the audio. */
export interface Segment {
  start: number;
  end: number;
  text: string;
  /** Its words with their times, when the engine gives word times (the coordinator splits segments at speaker changes with them). */
  words?: Word[];
}

export interface TranscribeInput {
  /** 16 kHz mono 16-bit PCM WAV, as `decodeToWav` writes it. */
  wavPath: string;
  /** A name from the engine's `models()` (whisper.cpp also takes a path to a ggml file). */
  model: string;
  /** ISO 639-1 code; undefined lets the engine decide (whisper.cpp detects it). */
  language?: string;
  /** Aborting kills the engine process; the promise then rejects with TranscriptionCancelled. */
  signal: AbortSignal;
  /** Called once per completed segment, in order, as soon as the engine prints it. */
  onSegment(seg: Segment): void;
  /** How far into the audio the engine has got, in seconds (non-decreasing). */
  onProgress?(audioPositionSeconds: number): void;
}

export interface TranscribeResult {
  segments: Segment[];
  text: string;
  engine: string;
  model: string;
}

export interface TranscriptionEngine {
  readonly name: string;
  /** Model names this host can really run now (binary and model files present). */
  models(): string[];
  /** ISO 639-1 languages `model` transcribes; [] (or no method) when it takes any language. */
  languages?(model: string): string[];
  transcribe(input: TranscribeInput): Promise<TranscribeResult>;
}

/** The job was cancelled through its AbortSignal; the engine process has been stopped. */
export class TranscriptionCancelled extends Error {
  constructor(message = 'transcription cancelled') {
    super(message);
    this.name = 'TranscriptionCancelled';
  }
}
