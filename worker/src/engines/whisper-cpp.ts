import { existsSync, readdirSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SPEECH_MODELS, WHISPER_MODEL_FILES, type SpeechModel } from '@sonar/shared';
import { assertSpeechWav } from '../media/wav.js';
import { workerPackageRoot } from '../package-root.js';
import { findExecutable, runEngineProcess } from './process.js';
import { clampWords, TranscriptionCancelled, type Segment, type TranscribeInput, type TranscribeResult, type TranscriptionEngine } from './types.js';

export { WHISPER_MODEL_FILES };

/** Where `npm run whisper:build -w worker` (worker/scripts/build-whisper.mjs) puts the CLI. */
export function defaultWhisperCliPath(): string {
  const root = process.env.WHISPER_BUILD_DIR || path.join(workerPackageRoot(), '.whisper-build');
  return path.join(root, 'build', 'bin', 'whisper-cli');
}

export interface WhisperCppOptions {
  /** whisper-cli binary. Default: env WHISPER_CLI, else the whisper:build output, else `whisper-cli` on PATH. */
  binary?: string;
  /** Folder with ggml-*.bin files. Default: env WHISPER_MODELS_DIR. */
  modelsDir?: string;
  /** CPU threads. Default: env WHISPER_THREADS, else all cores up to 8. */
  threads?: number;
  /** Extra whisper-cli arguments (decoding parameters), appended after ours. */
  extraArgs?: string[];
  /**
   * Word times (default true): whisper-cli runs with token timestamps and one printed segment per
   * word (`-ml 1 -sow`), and segments are grouped from the words (WhisperWordGrouper), each carrying
   * its words. False: whisper's own segments, without words. Env WHISPER_WORD_TIMESTAMPS=0 turns it off.
   */
  wordTimestamps?: boolean;
}

const SEGMENT_LINE = /^\[(\d+):(\d{2}):(\d{2})[.,](\d{3}) --> (\d+):(\d{2}):(\d{2})[.,](\d{3})\]\s?(.*)$/;
const PROGRESS_LINE = /progress\s*=\s*(\d+)%/;

/** What whisper.cpp prints for a window without speech instead of words. */
export const NON_SPEECH_MARKER = /^[[(]\s*(blank_audio|silence)\s*[\])]$/i;

/**
 * Parses whisper-cli's `[hh:mm:ss.mmm --> hh:mm:ss.mmm]  text` line; null for anything else. The
 * text is trimmed unless `trim` is false (word lines keep the space that starts a word).
 */
export function parseWhisperSegmentLine(line: string, trim = true): Segment | null {
  // eslint-disable-next-line no-control-regex -- strips ANSI colour sequences, which begin with ESC (0x1b)
  const plain = line.replace(/\x1b\[[0-9;]*m/g, '');
  const m = SEGMENT_LINE.exec(plain.replace(/^\s+/, '').replace(/[\r\n]+$/, ''));
  if (!m) return null;
  const t = (h: string, mi: string, s: string, ms: string) => Number(h) * 3600 + Number(mi) * 60 + Number(s) + Number(ms) / 1000;
  return { start: t(m[1]!, m[2]!, m[3]!, m[4]!), end: t(m[5]!, m[6]!, m[7]!, m[8]!), text: trim ? m[9]!.trim() : m[9]! };
}

/** A pause between words longer than this starts a new segment (word mode). */
const WORD_GAP_SECONDS = 1.0;
/** A segment is closed once it is this long, at the next word (word mode). */
const MAX_WORD_SEGMENT_SECONDS = 30;
const SENTENCE_END = /[.!?…。！？]["')\]]*$/;

/**
 * Groups whisper-cli's word lines (`-ml 1 -sow`: token timestamps, one printed segment per word,
 * its text starting with the space before it) into segments that carry their words: a segment
 * ends after a word that ends a sentence, before a pause over WORD_GAP_SECONDS, or once it reaches
 * MAX_WORD_SEGMENT_SECONDS. Its text is the words as whisper printed them, so spacing and
 * punctuation are whisper's own.
 */
export class WhisperWordGrouper {
  private words: Array<{ start: number; end: number; raw: string }> = [];

  /** Feeds one word line's parse; returns the segments it completes (zero, one or two). */
  push(word: Segment): Segment[] {
    const raw = word.text;
    if (!raw.trim() || NON_SPEECH_MARKER.test(raw.trim())) return [];
    const out: Segment[] = [];
    const last = this.words.at(-1);
    if (last && (word.start - last.end > WORD_GAP_SECONDS || word.start - this.words[0]!.start >= MAX_WORD_SEGMENT_SECONDS)) out.push(this.take()!);
    this.words.push({ start: word.start, end: Math.max(word.start, word.end), raw });
    if (SENTENCE_END.test(raw.trim())) out.push(this.take()!);
    return out;
  }

  /** End of output: the segment still open, if any. */
  end(): Segment | null {
    return this.take();
  }

  private take(): Segment | null {
    const words = this.words;
    this.words = [];
    if (!words.length) return null;
    return {
      start: words[0]!.start,
      end: Math.max(...words.map((w) => w.end)),
      text: words
        .map((w) => w.raw)
        .join('')
        .replace(/\s+/g, ' ')
        .trim(),
      words: words.map((w) => ({ start: w.start, end: w.end, text: w.raw.trim() })),
    };
  }
}

export class WhisperCppEngine implements TranscriptionEngine {
  readonly name = 'whisper.cpp';
  private readonly opts: WhisperCppOptions;

  constructor(opts: WhisperCppOptions = {}) {
    this.opts = opts;
  }

  /** The whisper-cli that will run, or null when it has not been built or installed. */
  binary(): string | null {
    const explicit = this.opts.binary ?? process.env.WHISPER_CLI;
    if (explicit) return findExecutable(explicit);
    return findExecutable(defaultWhisperCliPath()) ?? findExecutable('whisper-cli');
  }

  modelsDir(): string | null {
    const dir = this.opts.modelsDir ?? process.env.WHISPER_MODELS_DIR;
    return dir ? path.resolve(dir) : null;
  }

  /** The ggml file for a model name, or for an explicit path to a ggml file; null when absent. */
  modelFile(model: string): string | null {
    if ((SPEECH_MODELS as readonly string[]).includes(model)) {
      const dir = this.modelsDir();
      if (!dir) return null;
      let files: Set<string>;
      try {
        files = new Set(readdirSync(dir));
      } catch {
        return null;
      }
      const name = WHISPER_MODEL_FILES[model as SpeechModel].find((f) => files.has(f));
      return name ? path.join(dir, name) : null;
    }
    if (model.includes('/') || model.endsWith('.bin')) {
      const p = path.resolve(model);
      try {
        return statSync(p).isFile() ? p : null;
      } catch {
        return null;
      }
    }
    return null;
  }

  models(): string[] {
    if (!this.binary()) return [];
    return SPEECH_MODELS.filter((m) => this.modelFile(m) !== null);
  }

  async transcribe(input: TranscribeInput): Promise<TranscribeResult> {
    if (input.signal.aborted) throw new TranscriptionCancelled('whisper.cpp: cancelled before start');
    const binary = this.binary();
    if (!binary) throw new Error('whisper.cpp: whisper-cli is not built (run `npm run whisper:build -w worker`) and not on PATH');
    const modelPath = this.modelFile(input.model);
    if (!modelPath) {
      const where = this.modelsDir() ?? '(no models folder configured)';
      throw new Error(
        `whisper.cpp: model "${input.model}" is not available (looked for ${WHISPER_MODEL_FILES[input.model as SpeechModel]?.join(', ') ?? 'that file'} in ${where})`,
      );
    }
    let language = 'auto';
    if (input.language && input.language.trim().toLowerCase() !== 'auto') {
      const primary = input.language.trim().toLowerCase().split(/[-_]/)[0]!;
      if (!/^[a-z]{2,3}$/.test(primary)) throw new Error(`whisper.cpp: invalid language "${input.language}"`);
      language = primary;
    }
    const wav = await assertSpeechWav(input.wavPath);
    const duration = wav.durationSeconds;
    const threads = this.opts.threads ?? (Number(process.env.WHISPER_THREADS) || Math.min(8, os.availableParallelism()));

    const words = this.opts.wordTimestamps ?? process.env.WHISPER_WORD_TIMESTAMPS !== '0';
    const args = [
      '-m',
      modelPath,
      '-f',
      input.wavPath,
      '-l',
      language,
      '-t',
      String(threads),
      '--print-progress',
      ...(words ? ['-ml', '1', '-sow'] : []),
      ...(this.opts.extraArgs ?? []),
    ];

    const segments: Segment[] = [];
    let progress = 0;
    const report = (pos: number) => {
      const p = Math.min(pos, duration);
      if (p > progress) {
        progress = p;
        input.onProgress?.(p);
      }
    };

    const emit = (seg: Segment | null) => {
      // Silence comes out as a "[BLANK_AUDIO]" marker: no speech, not a segment.
      if (!seg || !seg.text || NON_SPEECH_MARKER.test(seg.text)) return;
      // whisper.cpp rounds the last window up to 10 ms steps that can pass the end of the audio.
      const end = Math.min(Math.max(seg.end, seg.start), duration);
      const s: Segment = { start: Math.min(seg.start, end), end, text: seg.text, ...(seg.words ? { words: clampWords(seg.words, duration) } : {}) };
      segments.push(s);
      input.onSegment(s);
      report(s.end);
    };
    const grouper = new WhisperWordGrouper();

    await runEngineProcess({
      name: this.name,
      command: binary,
      args,
      signal: input.signal,
      onStdoutLine: (line) => {
        const seg = parseWhisperSegmentLine(line, !words);
        if (!seg) return;
        if (words) grouper.push(seg).forEach(emit);
        else emit(seg);
      },
      onStderrLine: (line) => {
        const m = PROGRESS_LINE.exec(line);
        if (m) report((Number(m[1]) / 100) * duration);
      },
    });

    if (words) emit(grouper.end());

    return { segments, text: segments.map((s) => s.text).join(' '), engine: this.name, model: input.model };
  }
}

/** True when the default whisper:build output exists (for tests and diagnostics). */
export function whisperCliBuilt(): boolean {
  return existsSync(defaultWhisperCliPath());
}
