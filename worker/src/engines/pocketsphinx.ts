import { createReadStream, createWriteStream, existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { POCKETSPHINX_MODEL, POCKETSPHINX_MODEL_DIRS } from '@sonar/shared';
import { assertSpeechWav, canonicalWavHeader, type WavInfo } from '../media/wav.js';
import { findExecutable, runEngineProcess } from './process.js';
import { clampWords, TranscriptionCancelled, type Segment, type TranscribeInput, type TranscribeResult, type TranscriptionEngine, type Word } from './types.js';

export { POCKETSPHINX_MODEL };

/** Where Debian's pocketsphinx-en-us (and a source build of PocketSphinx 5) put the US English model (shared with the quick start's check). */
const DEFAULT_MODEL_DIRS = POCKETSPHINX_MODEL_DIRS;

export interface PocketsphinxModelFiles {
  hmm: string;
  lm: string;
  dict: string;
}

export interface PocketsphinxOptions {
  /** Folder holding en-us/ (acoustic model), en-us.lm.bin and cmudict-en-us.dict. Env POCKETSPHINX_MODEL_DIR. */
  modelDir?: string;
  /**
   * The CLI to use. Default: `pocketsphinx` (PocketSphinx 5, JSON per utterance) when on PATH, else
   * `pocketsphinx_continuous` (5prealpha, what Debian bookworm ships).
   */
  binary?: string;
}

type Cli = { kind: 'ps5' | 'continuous'; path: string };

function isFiller(word: string): boolean {
  return /^(<.*>|\[.*\]|\+\+.*\+\+)$/.test(word);
}

function cleanWord(word: string): string {
  return word.replace(/\(\d+\)$/, '');
}

/**
 * Incremental parser for `pocketsphinx_continuous -time yes` (5prealpha): per utterance, one line
 * with the hypothesis, then one `word start end confidence` line per word, from `<s>` to `</s>`.
 * A segment is complete at its `</s>` line (or at the next hypothesis, or at the end of output).
 */
export class ContinuousOutputParser {
  private hyp: string | null = null;
  private words: { word: string; start: number; end: number }[] = [];

  /** Feeds one stdout line; returns the segment it completes, if any. */
  push(line: string): Segment | null {
    if (!line.trim()) return null;
    const m = /^(\S+) (-?\d+(?:\.\d+)?) (-?\d+(?:\.\d+)?) (\S+)$/.exec(line.trim());
    if (m && Number.isFinite(Number(m[4]))) {
      const word = m[1]!;
      this.words.push({ word, start: Number(m[2]), end: Number(m[3]) });
      return word === '</s>' ? this.take() : null;
    }
    const done = this.hyp !== null || this.words.length ? this.take() : null;
    this.hyp = line.trim();
    return done;
  }

  /** End of output: the last utterance, if it was not closed. */
  end(): Segment | null {
    return this.hyp !== null || this.words.length ? this.take() : null;
  }

  private take(): Segment | null {
    const spoken = this.words.filter((w) => !isFiller(w.word));
    const all = this.words;
    const hyp = this.hyp;
    this.hyp = null;
    this.words = [];
    const text = (hyp ?? spoken.map((w) => cleanWord(w.word)).join(' ')).trim();
    if (!text) return null;
    const span = spoken.length ? spoken : all;
    if (!span.length) return null; // -time no: no timing to report
    const words = spoken.map((w) => ({ start: w.start, end: Math.max(w.start, w.end), text: cleanWord(w.word) }));
    return { start: span[0]!.start, end: span[span.length - 1]!.end, text, ...(words.length ? { words } : {}) };
  }
}

/** Parses one line of PocketSphinx 5's output: {"b":start,"d":duration,"p":prob,"t":"text","w":[...]}. */
export function parsePs5Line(line: string): Segment | null {
  const trimmed = line.trim();
  if (!trimmed.startsWith('{')) return null;
  let obj: { b?: unknown; d?: unknown; t?: unknown; w?: unknown };
  try {
    obj = JSON.parse(trimmed) as typeof obj;
  } catch {
    return null;
  }
  const start = Number(obj.b);
  const dur = Number(obj.d);
  const text = typeof obj.t === 'string' ? obj.t.trim() : '';
  if (!text || !Number.isFinite(start) || !Number.isFinite(dur)) return null;
  const words: Word[] = [];
  for (const w of Array.isArray(obj.w) ? (obj.w as Array<{ b?: unknown; d?: unknown; t?: unknown }>) : []) {
    const b = Number(w?.b);
    const d = Number(w?.d);
    if (typeof w?.t !== 'string' || isFiller(w.t) || !Number.isFinite(b) || !Number.isFinite(d)) continue;
    words.push({ start: b, end: b + Math.max(0, d), text: cleanWord(w.t) });
  }
  return { start, end: start + Math.max(0, dur), text, ...(words.length ? { words } : {}) };
}

async function writeCanonicalWav(src: string, info: WavInfo, dest: string): Promise<void> {
  const out = createWriteStream(dest);
  out.write(canonicalWavHeader(info.dataBytes, info.sampleRate, info.channels, info.bitsPerSample));
  await pipeline(createReadStream(src, { start: info.dataOffset, end: info.dataOffset + info.dataBytes - 1 }), out);
}

export class PocketsphinxEngine implements TranscriptionEngine {
  readonly name = 'pocketsphinx';
  private readonly opts: PocketsphinxOptions;

  constructor(opts: PocketsphinxOptions = {}) {
    this.opts = opts;
  }

  /** The CLI that will run, or null when none is installed. */
  cli(): Cli | null {
    if (this.opts.binary) {
      const p = findExecutable(this.opts.binary);
      if (!p) return null;
      return { kind: path.basename(p) === 'pocketsphinx' ? 'ps5' : 'continuous', path: p };
    }
    const ps5 = findExecutable('pocketsphinx');
    if (ps5) return { kind: 'ps5', path: ps5 };
    const cont = findExecutable('pocketsphinx_continuous');
    if (cont) return { kind: 'continuous', path: cont };
    return null;
  }

  /** The en-us model files, or null when they are not all there. */
  modelFiles(): PocketsphinxModelFiles | null {
    const dirs = [this.opts.modelDir, process.env.POCKETSPHINX_MODEL_DIR, ...DEFAULT_MODEL_DIRS].filter((d): d is string => !!d);
    for (const dir of dirs) {
      const files = { hmm: path.join(dir, 'en-us'), lm: path.join(dir, 'en-us.lm.bin'), dict: path.join(dir, 'cmudict-en-us.dict') };
      if (existsSync(path.join(files.hmm, 'mdef')) && existsSync(files.lm) && existsSync(files.dict)) return files;
    }
    return null;
  }

  models(): string[] {
    return this.cli() && this.modelFiles() ? [POCKETSPHINX_MODEL] : [];
  }

  /** Debian's en-us acoustic model and dictionary hear US English only. */
  languages(model: string): string[] {
    return model === POCKETSPHINX_MODEL ? ['en'] : [];
  }

  async transcribe(input: TranscribeInput): Promise<TranscribeResult> {
    if (input.signal.aborted) throw new TranscriptionCancelled('pocketsphinx: cancelled before start');
    if (input.model !== POCKETSPHINX_MODEL) {
      throw new Error(`pocketsphinx: unknown model "${input.model}" (only ${POCKETSPHINX_MODEL})`);
    }
    const lang = input.language?.trim().toLowerCase().replace('_', '-');
    if (lang && lang !== 'en' && lang !== 'en-us') {
      throw new Error(`pocketsphinx: only a US English model is installed; cannot transcribe language "${input.language}"`);
    }
    const cli = this.cli();
    if (!cli) throw new Error('pocketsphinx: neither pocketsphinx nor pocketsphinx_continuous is installed');
    const model = this.modelFiles();
    if (!model) throw new Error('pocketsphinx: the en-us model (pocketsphinx-en-us) is not installed');
    const wav = await assertSpeechWav(input.wavPath);
    if (wav.dataBytes < 2) return { segments: [], text: '', engine: this.name, model: POCKETSPHINX_MODEL };

    const modelArgs = ['-hmm', model.hmm, '-lm', model.lm, '-dict', model.dict, '-samprate', '16000'];
    let command = cli.path;
    let wavPath = input.wavPath;
    let tmpDir: string | null = null;
    let args: string[];
    if (cli.kind === 'ps5') {
      // `live` splits the audio into utterances and prints one JSON line for each; puts() does not
      // flush on a pipe, so ask for line buffering where stdbuf exists.
      args = [...modelArgs, 'live', input.wavPath];
      const stdbuf = findExecutable('stdbuf');
      if (stdbuf) {
        args = ['-oL', command, ...args];
        command = stdbuf;
      }
    } else {
      // pocketsphinx_continuous skips exactly 44 bytes of a *.wav -infile (and checks rate, width
      // and channels there): hand it a canonical file, as decodeToWav writes them.
      if (wav.dataOffset !== 44 || !input.wavPath.endsWith('.wav')) {
        tmpDir = await mkdtemp(path.join(os.tmpdir(), 'sonar-sphinx-'));
        wavPath = path.join(tmpDir, 'audio.wav');
        await writeCanonicalWav(input.wavPath, wav, wavPath);
      }
      args = [...modelArgs, '-infile', wavPath, '-time', 'yes'];
    }

    const segments: Segment[] = [];
    const parser = new ContinuousOutputParser();
    let lastEnd = 0;
    const emit = (seg: Segment | null) => {
      if (!seg) return;
      // Clamp to the audio: the decoder's frame count can round past the last sample.
      const end = Math.min(Math.max(seg.end, seg.start), wav.durationSeconds);
      const s: Segment = { start: Math.min(seg.start, end), end, text: seg.text, ...(seg.words ? { words: clampWords(seg.words, wav.durationSeconds) } : {}) };
      segments.push(s);
      input.onSegment(s);
      if (s.end > lastEnd) {
        lastEnd = s.end;
        input.onProgress?.(s.end);
      }
    };

    try {
      await runEngineProcess({
        name: this.name,
        command,
        args,
        signal: input.signal,
        onStdoutLine: (line) => emit(cli.kind === 'ps5' ? parsePs5Line(line) : parser.push(line)),
      });
      if (cli.kind === 'continuous') emit(parser.end());
    } finally {
      if (tmpDir) await rm(tmpDir, { recursive: true, force: true });
    }

    return { segments, text: segments.map((s) => s.text).join(' '), engine: this.name, model: POCKETSPHINX_MODEL };
  }
}
