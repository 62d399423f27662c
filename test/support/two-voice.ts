import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface VoiceTurn {
  /** Seconds in the generated file: the whole espeak-ng piece, its own short lead-in and tail included. */
  start: number;
  end: number;
  /** 0 or 1: which of the two voices speaks. */
  voice: number;
}

/** Two clearly different espeak-ng voices: a low male American one (F0 ~100 Hz) and a female one (F0 ~180 Hz; en-gb+f4, for one, is as low as m3). */
const VOICES = ['en-us+m3', 'en+f2'];
const TURNS = [
  'Good morning everyone, let us start with the budget for the next quarter.',
  'Thank you. I have looked at the numbers and the travel costs are too high.',
  'We could move two of the meetings online and save most of that money.',
  'That works for me, but the training sessions should stay in person.',
  'Fine, then I will update the plan and send it around this afternoon.',
  'Please add the new hiring dates as well, before the end of the week.',
];
const GAP_SECONDS = 0.5;

/** Samples in a WAV file's data chunk (any chunk layout), from its header. */
async function wavSamples(file: string): Promise<{ samples: number; rate: number }> {
  const buf = await readFile(file);
  let pos = 12;
  let rate = 0;
  let blockAlign = 0;
  while (pos + 8 <= buf.length) {
    const id = buf.toString('ascii', pos, pos + 4);
    const len = buf.readUInt32LE(pos + 4);
    if (id === 'fmt ') {
      rate = buf.readUInt32LE(pos + 12);
      blockAlign = buf.readUInt16LE(pos + 20);
    } else if (id === 'data') return { samples: Math.floor(Math.min(len, buf.length - pos - 8) / blockAlign), rate };
    pos += 8 + len + (len % 2);
  }
  throw new Error(`${file}: no data chunk`);
}

/**
 * A two-voice conversation made with espeak-ng: six alternating turns of ~3–4 s (voice 0, 1, 0, …),
 * joined by sox with 0.5 s of silence, written by ffmpeg as 16 kHz mono pcm_s16le to
 * `<dir>/two-voice.wav`. The turn times are computed from the pieces' lengths.
 */
export async function makeTwoVoiceRecording(dir: string): Promise<{ wavPath: string; turns: VoiceTurn[] }> {
  const pieces: string[] = [];
  const turns: VoiceTurn[] = [];
  let rate = 0;
  let at = 0;
  const silence = path.join(dir, 'two-voice-gap.wav');
  for (const [i, text] of TURNS.entries()) {
    const voice = i % 2;
    const file = path.join(dir, `two-voice-${i}.wav`);
    await run('espeak-ng', ['-v', VOICES[voice]!, '-s', '165', '-w', file, text]);
    const info = await wavSamples(file);
    if (rate && info.rate !== rate) throw new Error('espeak-ng changed its sample rate between voices');
    rate = info.rate;
    if (i === 0) await run('sox', ['-n', '-r', String(rate), '-c', '1', '-b', '16', silence, 'trim', '0', String(GAP_SECONDS)]);
    if (i > 0) {
      pieces.push(silence);
      at += (await wavSamples(silence)).samples / rate;
    }
    pieces.push(file);
    const len = info.samples / rate;
    turns.push({ start: at, end: at + len, voice });
    at += len;
  }
  const joined = path.join(dir, 'two-voice-joined.wav');
  await run('sox', [...pieces, joined]);
  const wavPath = path.join(dir, 'two-voice.wav');
  await run('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-y', '-i', joined, '-ar', '16000', '-ac', '1', '-c:a', 'pcm_s16le', wavPath]);
  return { wavPath, turns };
}
