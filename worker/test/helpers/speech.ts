import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { canonicalWavHeader, readWavInfo } from '../../src/media/wav.js';

const run = promisify(execFile);

export interface SpokenSentence {
  text: string;
  /** Where the sentence's audio (espeak-ng's own leading/trailing silence included) lies in the file. */
  start: number;
  end: number;
}

/**
 * Speech made here with espeak-ng: each sentence synthesised on its own, joined with `gapSeconds`
 * of digital silence, so the test knows where each sentence is. Returns the WAV (espeak-ng's
 * 22.05 kHz mono) and the sentence times. Deterministic for a given espeak-ng build.
 */
export async function synthesiseSpeech(
  dir: string,
  name: string,
  sentences: string[],
  opts: { speed?: number; gapSeconds?: number; voice?: string; repeat?: number } = {},
): Promise<{ wavPath: string; sentences: SpokenSentence[]; durationSeconds: number }> {
  const speed = opts.speed ?? 155;
  const gap = opts.gapSeconds ?? 1.0;
  const pcm: Buffer[] = [];
  const timeline: SpokenSentence[] = [];
  let rate = 0;
  let at = 0;
  const parts: { text: string; data: Buffer }[] = [];
  for (const [i, text] of sentences.entries()) {
    const file = path.join(dir, `${name}-part${i}.wav`);
    await run('espeak-ng', ['-v', opts.voice ?? 'en-us', '-s', String(speed), '-w', file, text]);
    const info = await readWavInfo(file);
    if (info.channels !== 1 || info.bitsPerSample !== 16) throw new Error(`unexpected espeak-ng output format in ${file}`);
    if (rate && info.sampleRate !== rate) throw new Error('espeak-ng changed sample rate');
    rate = info.sampleRate;
    const raw = await readFile(file);
    parts.push({ text, data: raw.subarray(info.dataOffset, info.dataOffset + info.dataBytes) });
  }
  // Pauses carry a dither-level noise floor (±1 LSB, seeded), as real recordings and sox's silence
  // do: pocketsphinx's noise and energy tracking misbehaves on exact digital zeros.
  const silence = Buffer.alloc(Math.round(gap * rate) * 2);
  let seed = 0x2545f491;
  const next = () => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) / 4294967296;
  };
  for (let i = 0; i < silence.length; i += 2) silence.writeInt16LE(Math.round(next() - next()), i);
  for (let r = 0; r < (opts.repeat ?? 1); r++) {
    for (const part of parts) {
      if (pcm.length) {
        pcm.push(silence);
        at += silence.length / 2 / rate;
      }
      pcm.push(part.data);
      const len = part.data.length / 2 / rate;
      timeline.push({ text: part.text, start: at, end: at + len });
      at += len;
    }
  }
  const data = Buffer.concat(pcm);
  const wavPath = path.join(dir, `${name}.wav`);
  await writeFile(wavPath, Buffer.concat([canonicalWavHeader(data.length, rate, 1, 16), data]));
  return { wavPath, sentences: timeline, durationSeconds: at };
}

/** Runs the ffmpeg CLI directly (independent of the code under test) to make test media. */
export async function runFfmpeg(args: string[]): Promise<void> {
  await run('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-y', ...args]);
}
