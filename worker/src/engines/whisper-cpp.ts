import { existsSync, readdirSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SPEECH_MODELS, WHISPER_MODEL_FILES, type SpeechModel } from '@sonar/shared';
import { assertSpeechWav } from '../media/wav.js';
import { findExecutable, runEngineProcess } from './process.js';
import { TranscriptionCancelled, type Segment, type TranscribeInput, type TranscribeResult, type TranscriptionEngine } from './types.js';

export { WHISPER_MODEL_FILES };

/** Where `npm run whisper:build -w worker` (worker/scripts/build-whisper.mjs) puts the CLI. */
export function defaultWhisperCliPath(): string {
  const root = process.env.WHISPER_BUILD_DIR || path.resolve(import.meta.dirname, '..', '..', '.whisper-build');
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
}

const SEGMENT_LINE = /^\[(\d+):(\d{2}):(\d{2})[.,](\d{3}) --> (\d+):(\d{2}):(\d{2})[.,](\d{3})\]\s?(.*)$/;
const PROGRESS_LINE = /progress\s*=\s*(\d+)%/;

/** What whisper.cpp prints for a window without speech instead of words. */
export const NON_SPEECH_MARKER = /^[[(]\s*(blank_audio|silence)\s*[\])]$/i;

/** Parses whisper-cli's `[hh:mm:ss.mmm --> hh:mm:ss.mmm]  text` line; null for anything else. */
export function parseWhisperSegmentLine(line: string): Segment | null {
  // eslint-disable-next-line no-control-regex -- strips ANSI colour sequences, which begin with ESC (0x1b)
  const m = SEGMENT_LINE.exec(line.replace(/\x1b\[[0-9;]*m/g, '').trim());
  if (!m) return null;
  const t = (h: string, mi: string, s: string, ms: string) => Number(h) * 3600 + Number(mi) * 60 + Number(s) + Number(ms) / 1000;
  return { start: t(m[1]!, m[2]!, m[3]!, m[4]!), end: t(m[5]!, m[6]!, m[7]!, m[8]!), text: m[9]!.trim() };
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

    const args = ['-m', modelPath, '-f', input.wavPath, '-l', language, '-t', String(threads), '--print-progress', ...(this.opts.extraArgs ?? [])];

    const segments: Segment[] = [];
    let progress = 0;
    const report = (pos: number) => {
      const p = Math.min(pos, duration);
      if (p > progress) {
        progress = p;
        input.onProgress?.(p);
      }
    };

    await runEngineProcess({
      name: this.name,
      command: binary,
      args,
      signal: input.signal,
      onStdoutLine: (line) => {
        const seg = parseWhisperSegmentLine(line);
        // Silence comes out as a "[BLANK_AUDIO]" marker: no speech, not a segment.
        if (!seg || !seg.text || NON_SPEECH_MARKER.test(seg.text)) return;
        // whisper.cpp rounds the last window up to 10 ms steps that can pass the end of the audio.
        const end = Math.min(Math.max(seg.end, seg.start), duration);
        const s: Segment = { start: Math.min(seg.start, end), end, text: seg.text };
        segments.push(s);
        input.onSegment(s);
        report(s.end);
      },
      onStderrLine: (line) => {
        const m = PROGRESS_LINE.exec(line);
        if (m) report((Number(m[1]) / 100) * duration);
      },
    });

    return { segments, text: segments.map((s) => s.text).join(' '), engine: this.name, model: input.model };
  }
}

/** True when the default whisper:build output exists (for tests and diagnostics). */
export function whisperCliBuilt(): boolean {
  return existsSync(defaultWhisperCliPath());
}
