import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const RATE = 16_000;

/**
 * DIARIZATION_DATA, else `shared/data/diarization` beside the clone (`<repository root>/../shared`),
 * else the machines' copy in /work/shared (a clone made elsewhere, /tmp/fresh say); the same rule
 * as worker/test/diarization.test.ts. A clear error when none exists (README, "Tests").
 */
export function diarizationDataDir(): string {
  if (process.env.DIARIZATION_DATA) return process.env.DIARIZATION_DATA;
  const candidates = [path.resolve(fileURLToPath(new URL('../../..', import.meta.url)), 'shared/data/diarization'), '/work/shared/data/diarization'];
  const found = candidates.find((d) => existsSync(d));
  if (!found) throw new Error(`no diarization test data in ${candidates.join(' or ')}: set DIARIZATION_DATA to the folder (README, "Tests")`);
  return found;
}

export interface ConversationTurn {
  start: number;
  end: number;
  /** Index into the `speakers` asked for. */
  speaker: number;
}

/** 16 kHz mono Float32 samples of an audio file, by ffmpeg. */
async function decode(file: string): Promise<Float32Array> {
  const { stdout } = await run('ffmpeg', ['-v', 'error', '-nostdin', '-i', file, '-f', 'f32le', '-ac', '1', '-ar', String(RATE), '-'], {
    encoding: 'buffer',
    maxBuffer: 64 * 1024 * 1024,
  });
  const copy = new Uint8Array(stdout.byteLength);
  copy.set(stdout);
  return new Float32Array(copy.buffer);
}

/**
 * A conversation of real voices with a known reference: `rounds` rounds in which each of
 * `speakers` (LibriSpeech test-other speaker ids, `librispeech-test-other-5/<id>/`) reads
 * `turnSeconds` of one of their own utterances (round k: their k-th utterance, from 0.3 s in),
 * 0.4 s of silence between turns, each turn at the next of `levelsDb` (dB, in turn; as read when
 * absent), written as 16 kHz mono 16-bit `<dir>/<name>.wav`. One speaker and several rounds make a
 * monologue of several utterances.
 */
export async function makeLibriSpeechConversation(
  dir: string,
  opts: { speakers: string[]; rounds: number; turnSeconds: number; name?: string; levelsDb?: number[] },
): Promise<{ wavPath: string; turns: ConversationTurn[] }> {
  const data = path.join(diarizationDataDir(), 'librispeech-test-other-5');
  const utterances = await Promise.all(
    opts.speakers.map(async (id) =>
      (await readdir(path.join(data, id)))
        .filter((f) => f.endsWith('.flac'))
        .sort()
        .slice(0, opts.rounds)
        .map((f) => path.join(data, id, f)),
    ),
  );
  const gap = Math.round(0.4 * RATE);
  const pieces: Float32Array[] = [];
  const turns: ConversationTurn[] = [];
  let at = gap;
  for (let round = 0; round < opts.rounds; round++) {
    for (const [speaker, files] of utterances.entries()) {
      const samples = await decode(files[round]!);
      const from = Math.round(0.3 * RATE);
      let piece = samples.subarray(from, Math.min(samples.length, from + Math.round(opts.turnSeconds * RATE)));
      const level = opts.levelsDb?.[pieces.length % opts.levelsDb.length];
      if (level !== undefined) piece = piece.map((x) => x * 10 ** (level / 20));
      pieces.push(piece);
      turns.push({ start: at / RATE, end: (at + piece.length) / RATE, speaker });
      at += piece.length + gap;
    }
  }
  const pcm = Buffer.alloc(at * 2);
  let pos = gap;
  for (const piece of pieces) {
    for (let i = 0; i < piece.length; i++) pcm.writeInt16LE(Math.round(Math.max(-1, Math.min(1, piece[i]!)) * 32767), (pos + i) * 2);
    pos += piece.length + gap;
  }
  const header = Buffer.alloc(44);
  header.write('RIFF', 0);
  header.writeUInt32LE(36 + pcm.length, 4);
  header.write('WAVEfmt ', 8);
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20);
  header.writeUInt16LE(1, 22);
  header.writeUInt32LE(RATE, 24);
  header.writeUInt32LE(RATE * 2, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36);
  header.writeUInt32LE(pcm.length, 40);
  const wavPath = path.join(dir, `${opts.name ?? 'conversation'}.wav`);
  await writeFile(wavPath, Buffer.concat([header, pcm]));
  return { wavPath, turns };
}
