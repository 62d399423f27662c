// Conversations with exact references, built from the LibriSpeech utterances in
// ../shared/data/diarization/librispeech-train-clean-100 (one utterance by each of 251 speakers).
//
// The honesty rule of that folder's README: the speakers are split before anything is tuned.
// Speakers with an even LibriSpeech id form the tuning half, odd ids the reporting half; the
// generator never mixes the halves, so a figure of the reporting half is on voices the diarizer's
// settings never saw.
//
// Everything is deterministic (a seeded PRNG, the files in name order): two runs build the same
// audio and the same RTTM. Each speaker has one utterance of 1.6–17 s, so a conversation uses
// each chosen speaker's utterance once, cut into turns at its quietest moments; conversations are
// therefore 20–90 s long, not the minutes a meeting lasts.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Segment } from './der.js';
import { rng } from './lib.js';

const run = promisify(execFile);
const RATE = 16000;

export type Half = 'tune' | 'report';

export interface Utterance {
  id: string;
  speaker: string;
  sex: 'F' | 'M';
  half: Half;
  /** As recorded (silence at both ends kept): the one-speaker case a user uploads. */
  samples: Float32Array;
  /** Speech span inside `samples` (energy trim), in samples. */
  speechStart: number;
  speechEnd: number;
}

export interface Recording {
  id: string;
  half: Half;
  samples: Float32Array;
  reference: Segment[];
  speakers: number;
  /** Conversations only: every speaker of the same sex. */
  sameSex: boolean;
}

/** The speaker's half: even LibriSpeech ids tune, odd ids report. Fixed before any tuning. */
export const halfOf = (speakerId: string): Half => (Number(speakerId) % 2 === 0 ? 'tune' : 'report');

/** 16 kHz mono Float32 samples of a FLAC file, by ffmpeg; kept in `cacheDir` (decoding all 251 files takes a minute or two). */
export async function decodeFlacCached(file: string, cacheDir: string): Promise<Float32Array> {
  const cached = path.join(cacheDir, `${path.basename(file, '.flac')}.f32`);
  if (existsSync(cached)) {
    const bytes = readFileSync(cached);
    return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4).slice();
  }
  const samples = await decodeMono(file);
  writeFileSync(cached, new Uint8Array(samples.buffer));
  return samples;
}

/** An audio file as 16 kHz mono Float32 samples, by ffmpeg (the bench's corpora and recordings). */
export async function decodeMono(file: string): Promise<Float32Array> {
  const { stdout } = await run('ffmpeg', ['-v', 'error', '-nostdin', '-i', file, '-f', 'f32le', '-ac', '1', '-ar', String(RATE), '-'], {
    encoding: 'buffer',
    maxBuffer: 64 * 1024 * 1024,
  });
  const copy = new Uint8Array(stdout.byteLength);
  copy.set(stdout);
  return new Float32Array(copy.buffer);
}

/** Frame energies in dB, 10 ms frames. */
function frameDb(samples: Float32Array, from = 0, to = samples.length): Float64Array {
  const hop = RATE / 100;
  const n = Math.max(0, Math.floor((to - from) / hop));
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    let e = 0;
    for (let j = 0; j < hop; j++) e += samples[from + i * hop + j]! ** 2;
    out[i] = 10 * Math.log10(e / hop + 1e-12);
  }
  return out;
}

/** The speech span of [from, to): first and last 10 ms frame within 35 dB of the loudest, 30 ms kept either side. */
export function speechSpan(samples: Float32Array, from: number, to: number): [number, number] {
  const db = frameDb(samples, from, to);
  if (!db.length) return [from, to];
  const floor = Math.max(...db) - 35;
  let a = 0;
  while (a < db.length - 1 && db[a]! < floor) a++;
  let b = db.length - 1;
  while (b > a && db[b]! < floor) b--;
  const hop = RATE / 100;
  return [Math.max(from, from + (a - 3) * hop), Math.min(to, from + (b + 4) * hop)];
}

export async function loadUtterances(dir: string, cacheDir: string): Promise<Utterance[]> {
  mkdirSync(cacheDir, { recursive: true });
  const sexes = new Map<string, 'F' | 'M'>();
  for (const line of readFileSync(path.join(dir, 'SPEAKERS.TXT'), 'utf8').split('\n')) {
    if (line.startsWith(';')) continue;
    const [id, sex] = line.split('|').map((f) => f.trim());
    if (id && (sex === 'F' || sex === 'M')) sexes.set(id, sex);
  }
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.flac'))
    .sort();
  const decoded: Float32Array[] = [];
  // Two ffmpeg processes at a time.
  for (let i = 0; i < files.length; i += 2) {
    decoded.push(...(await Promise.all(files.slice(i, i + 2).map((f) => decodeFlacCached(path.join(dir, f), cacheDir)))));
  }
  return files.map((f, i) => {
    const speaker = f.split('-')[0]!;
    const samples = decoded[i]!;
    const [speechStart, speechEnd] = speechSpan(samples, 0, samples.length);
    return { id: f.replace(/\.flac$/, ''), speaker, sex: sexes.get(speaker) ?? 'F', half: halfOf(speaker), samples, speechStart, speechEnd };
  });
}

interface Piece {
  speaker: number;
  samples: Float32Array;
}

/**
 * Cuts one utterance's speech into turns of 1–20 s (log-uniform lengths), each cut at the quietest
 * 10 ms within 0.4 s of its target, each piece trimmed to its own speech.
 */
function cutTurns(u: Utterance, speaker: number, random: () => number): Piece[] {
  const pieces: Piece[] = [];
  const db = frameDb(u.samples);
  const hop = RATE / 100;
  let at = u.speechStart;
  while (u.speechEnd - at > 0) {
    const left = (u.speechEnd - at) / RATE;
    const want = Math.exp(Math.log(1) + random() * (Math.log(20) - Math.log(1)));
    let end = u.speechEnd;
    if (left - want >= 1.5) {
      const target = Math.round((at + want * RATE) / hop);
      let best = target;
      for (let f = target - 40; f <= target + 40; f++) if (f > 0 && f < db.length && db[f]! < db[best]!) best = f;
      end = Math.min(u.speechEnd, best * hop);
    }
    const [a, b] = speechSpan(u.samples, at, end);
    if (b - a >= 0.5 * RATE) pieces.push({ speaker, samples: u.samples.subarray(a, b) });
    at = end;
  }
  return pieces;
}

/**
 * `count` conversations of the given half: speaker counts 2, 3, 4, 5 in turn; every second one
 * all of one sex; pauses of 0.2–1.5 s between turns and, at one change in ten, an overlap of
 * 0.2–0.5 s instead.
 */
export function conversations(utterances: Utterance[], half: Half, count: number, seed = 2026): Recording[] {
  const random = rng(seed + (half === 'tune' ? 0 : 1));
  const pool = utterances.filter((u) => u.half === half);
  const out: Recording[] = [];
  for (let c = 0; c < count; c++) {
    const k = 2 + (c % 4);
    const sameSex = Math.floor(c / 4) % 2 === 0;
    const sex = c % 8 < 4 ? 'F' : 'M';
    const candidates = sameSex ? pool.filter((u) => u.sex === sex) : pool;
    const chosen: Utterance[] = [];
    while (chosen.length < k) {
      const u = candidates[Math.floor(random() * candidates.length)]!;
      if (!chosen.includes(u)) chosen.push(u);
    }
    const queues = chosen.map((u, s) => cutTurns(u, s, random));
    // Turn order: a random speaker with turns left, not the one who just spoke while another can.
    const order: Piece[] = [];
    let last = -1;
    while (queues.some((q) => q.length)) {
      const ready = queues.map((q, s) => (q.length && s !== last ? s : -1)).filter((s) => s >= 0);
      const s = ready.length ? ready[Math.floor(random() * ready.length)]! : last;
      order.push(queues[s]!.shift()!);
      last = s;
    }
    const placed: { at: number; piece: Piece }[] = [];
    let cursor = Math.round((0.3 + random() * 0.7) * RATE);
    for (const [i, piece] of order.entries()) {
      if (i > 0) {
        const prev = placed[i - 1]!;
        const change = prev.piece.speaker !== piece.speaker;
        const overlap = change && random() < 0.1 && prev.piece.samples.length > 1.5 * RATE && piece.samples.length > 1.5 * RATE;
        cursor += Math.round((overlap ? -(0.2 + random() * 0.3) : 0.2 + random() * 1.3) * RATE);
      }
      placed.push({ at: cursor, piece });
      cursor += piece.samples.length;
    }
    const samples = new Float32Array(cursor + Math.round(0.5 * RATE));
    for (const { at, piece } of placed) for (let j = 0; j < piece.samples.length; j++) samples[at + j]! += piece.samples[j]!;
    const reference = placed.map(({ at, piece }) => ({ start: at / RATE, end: (at + piece.samples.length) / RATE, speaker: chosen[piece.speaker]!.speaker }));
    out.push({ id: `${half}-conv${String(c).padStart(2, '0')}-${k}spk${sameSex ? `-${sex}` : ''}`, half, samples, reference, speakers: k, sameSex });
  }
  return out;
}

/** Each utterance as recorded: the one-speaker cases. */
export function singles(utterances: Utterance[], half: Half): Recording[] {
  return utterances
    .filter((u) => u.half === half)
    .map((u) => ({
      id: u.id,
      half,
      samples: u.samples,
      reference: [{ start: u.speechStart / RATE, end: u.speechEnd / RATE, speaker: u.speaker }],
      speakers: 1,
      sameSex: true,
    }));
}
