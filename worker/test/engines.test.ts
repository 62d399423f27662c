import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { writeTinyWhisperModel } from '../../test/fixtures/tiny-whisper-model.js';
import { detectCapabilities } from '../src/capabilities.js';
import { createEngines } from '../src/engines/index.js';
import { ContinuousOutputParser, POCKETSPHINX_MODEL, PocketsphinxEngine, parsePs5Line } from '../src/engines/pocketsphinx.js';
import { findExecutable } from '../src/engines/process.js';
import { TranscriptionCancelled, type Segment, type TranscribeResult, type TranscriptionEngine } from '../src/engines/types.js';
import { WhisperCppEngine, WhisperWordGrouper, parseWhisperSegmentLine } from '../src/engines/whisper-cpp.js';
import { decodeToWav, probeMedia } from '../src/media/decode.js';
import { canonicalWavHeader, readWavInfo } from '../src/media/wav.js';
import { processesWithArg } from './helpers/procs.js';
import { runFfmpeg, synthesiseSpeech, type SpokenSentence } from './helpers/speech.js';

/**
 * The transcription side of the worker against the real tools: ffmpeg and ffprobe (@sonar/shared's runner),
 * pocketsphinx with Debian's en-us model, and whisper.cpp's CLI built from the sources nodejs-whisper
 * ships, running a tiny random-weight model generated here (no download anywhere). The speech is
 * made by espeak-ng in the test, sentence by sentence, so the test knows where each one is.
 */

const run = promisify(execFile);

// Chosen for being recognised by pocketsphinx from espeak-ng's voice (checked across speeds and gaps).
const SENTENCES = ['hello world.', 'i would like a cup of coffee.', 'please call me tomorrow morning.', 'good morning everyone.'];

let dir: string;
let speech: { wavPath: string; sentences: SpokenSentence[]; durationSeconds: number };
let wav16: string;
/** Duration of wav16 as decoded (a hair longer than the source after resampling). */
let wav16Duration: number;
let mp4: string;
let ogg: string;
/** The same speech six times over (~1 min): long enough to cancel mid-run. */
let longWav16: string;
let longDuration: number;

function missingTools(): string[] {
  const missing = ['espeak-ng', 'ffmpeg', 'ffprobe'].filter((t) => !findExecutable(t));
  if (!findExecutable('pocketsphinx') && !findExecutable('pocketsphinx_continuous')) missing.push('pocketsphinx');
  return missing;
}

function hasWord(text: string, word: string): boolean {
  return new RegExp(`\\b${word}\\b`).test(text);
}

function expectValidTimeline(segments: Segment[], duration: number) {
  let prev: Segment | null = null;
  for (const s of segments) {
    expect(Number.isFinite(s.start) && Number.isFinite(s.end)).toBe(true);
    expect(s.start).toBeGreaterThanOrEqual(0);
    expect(s.end).toBeGreaterThanOrEqual(s.start);
    expect(s.end).toBeLessThanOrEqual(duration + 1e-6);
    expect(s.text.trim()).not.toBe('');
    if (prev) expect(s.start).toBeGreaterThanOrEqual(prev.start);
    prev = s;
  }
}

/** Runs a transcription and aborts it at its first segment; measures how fast it stops. */
async function cancelAtFirstSegment(engine: TranscriptionEngine, wavPath: string, model: string, marker: string) {
  const controller = new AbortController();
  const segments: Segment[] = [];
  let aliveAtFirstSegment = false;
  let abortedAt = 0;
  const started = Date.now();
  const promise = engine.transcribe({
    wavPath,
    model,
    signal: controller.signal,
    onSegment: (seg) => {
      segments.push(seg);
      if (segments.length === 1) {
        aliveAtFirstSegment = processesWithArg(marker).length > 0;
        abortedAt = Date.now();
        controller.abort();
      }
    },
  });
  const error = await promise.then(
    () => null,
    (err: unknown) => err,
  );
  return { error, segments, aliveAtFirstSegment, stopMs: Date.now() - (abortedAt || started), left: processesWithArg(marker) };
}

beforeAll(async () => {
  const missing = missingTools();
  if (missing.length) throw new Error(`missing ${missing.join(', ')}: apt-get install ffmpeg espeak-ng pocketsphinx pocketsphinx-en-us (see .ci/run)`);
  dir = await mkdtemp(path.join(tmpdir(), 'sonar-engines-'));
  speech = await synthesiseSpeech(dir, 'speech', SENTENCES, { speed: 155, gapSeconds: 1.0 });
  wav16 = path.join(dir, 'speech16.wav');
  wav16Duration = (await decodeToWav(speech.wavPath, wav16)).durationSeconds;

  // Other containers, made with the ffmpeg CLI: an MP4 with a video track and AAC audio, and Ogg Vorbis.
  mp4 = path.join(dir, 'speech.mp4');
  await runFfmpeg([
    '-i',
    speech.wavPath,
    '-f',
    'lavfi',
    '-i',
    'color=c=black:s=64x64:r=5',
    '-map',
    '1:v',
    '-map',
    '0:a',
    '-shortest',
    '-c:v',
    'mpeg4',
    '-c:a',
    'aac',
    '-b:a',
    '128k',
    mp4,
  ]);
  ogg = path.join(dir, 'speech.ogg');
  await runFfmpeg(['-i', speech.wavPath, '-c:a', 'libvorbis', '-q:a', '5', ogg]);

  const long = await synthesiseSpeech(dir, 'long', SENTENCES, { speed: 155, gapSeconds: 1.0, repeat: 6 });
  longWav16 = path.join(dir, 'long16.wav');
  longDuration = (await decodeToWav(long.wavPath, longWav16)).durationSeconds;
}, 60_000);

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('media decoding (ffmpeg)', () => {
  it('turns a WAV into 16 kHz mono 16-bit PCM with a plain header and the right duration', async () => {
    const out = path.join(dir, 'decode-wav.wav');
    const { durationSeconds } = await decodeToWav(speech.wavPath, out);
    const info = await readWavInfo(out);
    expect(info).toMatchObject({ audioFormat: 1, sampleRate: 16000, channels: 1, bitsPerSample: 16, dataOffset: 44 });
    // espeak-ng wrote 22.05 kHz; the duration survives resampling.
    expect(speech.durationSeconds).toBeGreaterThan(7);
    expect(durationSeconds).toBeCloseTo(speech.durationSeconds, 1);
    expect(Math.abs(durationSeconds - info.durationSeconds)).toBeLessThan(0.01);
  });

  it('decodes audio out of a video container (MP4: mpeg4 video + AAC) and out of Ogg Vorbis', async () => {
    const probe = await probeMedia(mp4);
    expect(probe.formatName).toContain('mp4');
    expect(probe).toMatchObject({ mime: 'video/mp4', audioStreams: 1, videoStreams: 1, sizeBytes: (await stat(mp4)).size });
    expect(Math.abs(probe.durationSeconds - speech.durationSeconds)).toBeLessThan(0.5);

    const fromMp4 = path.join(dir, 'from-mp4.wav');
    const a = await decodeToWav(mp4, fromMp4);
    expect(await readWavInfo(fromMp4)).toMatchObject({ sampleRate: 16000, channels: 1, bitsPerSample: 16 });
    expect(Math.abs(a.durationSeconds - speech.durationSeconds)).toBeLessThan(0.2);

    const oggProbe = await probeMedia(ogg);
    expect(oggProbe).toMatchObject({ formatName: 'ogg', mime: 'audio/ogg', audioStreams: 1, videoStreams: 0 });
    const fromOgg = path.join(dir, 'from-ogg.wav');
    const b = await decodeToWav(ogg, fromOgg);
    expect(await readWavInfo(fromOgg)).toMatchObject({ sampleRate: 16000, channels: 1, bitsPerSample: 16 });
    expect(Math.abs(b.durationSeconds - speech.durationSeconds)).toBeLessThan(0.2);
  });

  it('names the file and ffmpeg’s complaint when it cannot decode', async () => {
    const junk = path.join(dir, 'junk.bin');
    await writeFile(junk, Buffer.from(Array.from({ length: 8192 }, (_, i) => (i * 7919 + (i >> 3) * 104729) & 0xff)));
    await expect(decodeToWav(junk, path.join(dir, 'junk.wav'))).rejects.toThrow(/junk\.bin.*Invalid data found/);
    await expect(probeMedia(path.join(dir, 'missing.mp3'))).rejects.toThrow(/missing\.mp3.*No such file/);
    // ffmpeg itself failing (here: cannot write the output) goes through the same reporting.
    await expect(decodeToWav(speech.wavPath, path.join(dir, 'no-such-dir', 'out.wav'))).rejects.toThrow(
      /Cannot decode .*speech\.wav: .*No such file or directory/,
    );
    const videoOnly = path.join(dir, 'video-only.mp4');
    await runFfmpeg(['-f', 'lavfi', '-i', 'color=c=black:s=64x64:r=5', '-t', '1', '-c:v', 'mpeg4', videoOnly]);
    await expect(decodeToWav(videoOnly, path.join(dir, 'v.wav'))).rejects.toThrow(/video-only\.mp4.*no audio stream/);
  });

  it('kills ffmpeg and removes the partial file when cancelled mid-decode', async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(decodeToWav(speech.wavPath, path.join(dir, 'never.wav'), { signal: controller.signal })).rejects.toBeInstanceOf(TranscriptionCancelled);

    // An hour of 8 kHz audio: ffmpeg needs a good fraction of a second for it.
    const hour = path.join(dir, 'hour.wav');
    const bytes = 8000 * 2 * 3600;
    await writeFile(hour, Buffer.concat([canonicalWavHeader(bytes, 8000), Buffer.alloc(bytes)]));
    const out = path.join(dir, 'hour16.wav');
    const abort = new AbortController();
    const decoding = decodeToWav(hour, out, { signal: abort.signal });
    // Cancel once ffmpeg is demonstrably running: its output file has appeared.
    const watcher = setInterval(() => {
      if (existsSync(out)) {
        clearInterval(watcher);
        abort.abort();
      }
    }, 2);
    const error = await decoding.then(
      () => null,
      (err: unknown) => err,
    );
    clearInterval(watcher);
    await rm(hour);
    expect(abort.signal.aborted).toBe(true);
    expect(error).toBeInstanceOf(TranscriptionCancelled);
    expect(existsSync(out)).toBe(false);
    expect(processesWithArg(out)).toEqual([]);
  });
});

describe('pocketsphinx engine', () => {
  const engine = new PocketsphinxEngine();

  it('advertises pocketsphinx-en-us when the CLI and the en-us model are installed', () => {
    expect(engine.models()).toEqual([POCKETSPHINX_MODEL]);
    expect(new PocketsphinxEngine({ modelDir: '/nonexistent', binary: '/nonexistent/pocketsphinx' }).models()).toEqual([]);
  });

  it('recognises the spoken words and streams timed segments in order while it runs', async () => {
    const streamed: { seg: Segment; engineRunning: boolean; afterResolve: boolean }[] = [];
    const progress: number[] = [];
    let resolved = false;
    const result = await engine.transcribe({
      wavPath: wav16,
      model: POCKETSPHINX_MODEL,
      language: 'en',
      signal: new AbortController().signal,
      onSegment: (seg) => streamed.push({ seg, engineRunning: processesWithArg(wav16).length > 0, afterResolve: resolved }),
      onProgress: (p) => progress.push(p),
    });
    resolved = true;

    // One segment per spoken sentence (they are separated by a second of silence).
    expect(result.segments.length).toBeGreaterThanOrEqual(3);
    expect(result.segments.length).toBeLessThanOrEqual(6);
    expect(streamed.map((s) => s.seg)).toEqual(result.segments);
    expect(streamed.some((s) => s.afterResolve)).toBe(false);
    // Streamed for real: the first segment arrived while pocketsphinx was still decoding.
    expect(streamed[0]!.engineRunning).toBe(true);
    expectValidTimeline(result.segments, wav16Duration);
    // pocketsphinx utterances do not overlap.
    for (let i = 1; i < result.segments.length; i++) expect(result.segments[i]!.start).toBeGreaterThanOrEqual(result.segments[i - 1]!.end);

    expect(result).toMatchObject({ engine: 'pocketsphinx', model: POCKETSPHINX_MODEL });
    expect(result.text).toBe(result.segments.map((s) => s.text).join(' '));
    for (const word of ['coffee', 'tomorrow', 'morning']) expect(hasWord(result.text, word), `"${word}" in "${result.text}"`).toBe(true);

    // The words are placed where they were spoken.
    const within = (seg: Segment | undefined, s: SpokenSentence) => !!seg && (seg.start + seg.end) / 2 > s.start && (seg.start + seg.end) / 2 < s.end;
    expect(
      within(
        result.segments.find((s) => hasWord(s.text, 'coffee')),
        speech.sentences[1]!,
      ),
    ).toBe(true);
    expect(
      within(
        result.segments.find((s) => hasWord(s.text, 'tomorrow')),
        speech.sentences[2]!,
      ),
    ).toBe(true);

    // Every segment carries its words (-time yes): in order, inside the segment, reading its text.
    for (const seg of result.segments) {
      expect(seg.words?.length, seg.text).toBeGreaterThan(0);
      expect(seg.words!.map((w) => w.text).join(' ')).toBe(seg.text);
      for (const [i, w] of seg.words!.entries()) {
        expect(w.start).toBeGreaterThanOrEqual(seg.start);
        expect(w.end).toBeLessThanOrEqual(seg.end + 1e-9);
        expect(w.end).toBeGreaterThanOrEqual(w.start);
        if (i > 0) expect(w.start).toBeGreaterThanOrEqual(seg.words![i - 1]!.end);
      }
    }

    expect(progress.length).toBe(result.segments.length);
    for (let i = 1; i < progress.length; i++) expect(progress[i]!).toBeGreaterThan(progress[i - 1]!);
    expect(progress.at(-1)).toBe(result.segments.at(-1)!.end);
  }, 60_000);

  it('transcribes audio that came out of an MP4 with video', async () => {
    const fromMp4 = path.join(dir, 'sphinx-from-mp4.wav');
    await decodeToWav(mp4, fromMp4);
    const result = await engine.transcribe({ wavPath: fromMp4, model: POCKETSPHINX_MODEL, signal: new AbortController().signal, onSegment: () => {} });
    expect(hasWord(result.text, 'morning'), result.text).toBe(true);
    expect(hasWord(result.text, 'tomorrow'), result.text).toBe(true);
  }, 60_000);

  it('reads 16 kHz WAVs with other chunks before the samples (not just decodeToWav output)', async () => {
    // Same samples as wav16, behind a 64000-byte chunk of noise: read as audio, it would add two
    // seconds of hiss and shift every timestamp by 2 s.
    const canonical = await readFile(wav16);
    const info = await readWavInfo(wav16);
    const junk = Buffer.alloc(8 + 64000);
    junk.write('JUNK', 0, 'ascii');
    junk.writeUInt32LE(64000, 4);
    for (let i = 8; i < junk.length; i++) junk[i] = (i * 2654435761) >>> 24;
    const riff = Buffer.concat([canonical.subarray(0, 36), junk, canonical.subarray(36)]);
    riff.writeUInt32LE(riff.length - 8, 4);
    const padded = path.join(dir, 'padded.wav');
    await writeFile(padded, riff);
    expect(await readWavInfo(padded)).toMatchObject({ dataOffset: 44 + junk.length, dataBytes: info.dataBytes, sampleRate: 16000 });

    const result = await engine.transcribe({ wavPath: padded, model: POCKETSPHINX_MODEL, signal: new AbortController().signal, onSegment: () => {} });
    for (const word of ['coffee', 'tomorrow', 'morning']) expect(hasWord(result.text, word), result.text).toBe(true);
    const coffee = result.segments.find((s) => hasWord(s.text, 'coffee'))!;
    expect((coffee.start + coffee.end) / 2).toBeGreaterThan(speech.sentences[1]!.start);
    expect((coffee.start + coffee.end) / 2).toBeLessThan(speech.sentences[1]!.end);
    expect(coffee.start).toBeLessThan(speech.sentences[1]!.start + 1);
  }, 60_000);

  it('refuses languages it has no model for, unknown models and audio it cannot read', async () => {
    const base = { wavPath: wav16, signal: new AbortController().signal, onSegment: () => {} };
    await expect(engine.transcribe({ ...base, model: POCKETSPHINX_MODEL, language: 'de' })).rejects.toThrow(/only a US English model.*"de"/);
    await expect(engine.transcribe({ ...base, model: 'small' })).rejects.toThrow(/unknown model "small"/);
    await expect(engine.transcribe({ ...base, model: POCKETSPHINX_MODEL, wavPath: speech.wavPath })).rejects.toThrow(/expected 16 kHz mono.*22050 Hz/);
  });

  it('stops pocketsphinx and rejects with TranscriptionCancelled when aborted mid-run', async () => {
    const r = await cancelAtFirstSegment(engine, longWav16, POCKETSPHINX_MODEL, longWav16);
    expect(r.error).toBeInstanceOf(TranscriptionCancelled);
    expect(r.aliveAtFirstSegment).toBe(true);
    expect(r.stopMs).toBeLessThan(3000);
    expect(r.left).toEqual([]);
    // 24 sentences were spoken; it was cut short after the first.
    expect(r.segments.length).toBe(1);
    expect(longDuration).toBeGreaterThan(50);
  }, 60_000);

  it('does not start a process when the signal is already aborted', async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(engine.transcribe({ wavPath: wav16, model: POCKETSPHINX_MODEL, signal: controller.signal, onSegment: () => {} })).rejects.toBeInstanceOf(
      TranscriptionCancelled,
    );
  });
});

describe('whisper.cpp engine (whisper-cli built from nodejs-whisper’s sources, tiny generated model)', () => {
  let cli: string;
  let modelPath: string;
  let engine: WhisperCppEngine;

  beforeAll(async () => {
    // Built (or found up to date) once per run by the e2e project's global setup (test/support/whisper-setup.ts).
    cli = inject('whisperCli');
    modelPath = path.join(dir, 'ggml-tiny-random.bin');
    const info = await writeTinyWhisperModel(modelPath, { seed: 1234 });
    expect(info.bytes).toBeGreaterThan(1_000_000);
    // One thread: ggml's spinning thread pool slows to a crawl when the machine is busy with other tests.
    engine = new WhisperCppEngine({ binary: cli, threads: 1 });
  });

  it('loads the generated model, exits 0 and streams timed segments in order', async () => {
    const streamed: Segment[] = [];
    const progress: number[] = [];
    let result: TranscribeResult | null = null;
    result = await engine.transcribe({
      wavPath: wav16,
      model: modelPath,
      language: 'en',
      signal: new AbortController().signal,
      onSegment: (seg) => {
        expect(result).toBeNull();
        streamed.push(seg);
      },
      onProgress: (p) => progress.push(p),
    });
    // Random weights give random words, but whisper.cpp still emits timestamped segments for this seed.
    expect(result.segments.length).toBeGreaterThanOrEqual(1);
    expect(streamed).toEqual(result.segments);
    expectValidTimeline(result.segments, wav16Duration);
    // Only the model's pseudo-words: the timestamps were parsed off, nothing else leaked into the text.
    for (const s of result.segments) expect(s.text).toMatch(/^[a-z]+( [a-z]+)*$/);
    // Word mode (-ml 1 -sow, the default): each segment carries its words, inside it, reading its text.
    for (const s of result.segments) {
      expect(s.words?.length).toBeGreaterThan(0);
      expect(s.words!.map((w) => w.text).join(' ')).toBe(s.text);
      for (const w of s.words!) {
        expect(w.start).toBeGreaterThanOrEqual(s.start);
        expect(w.end).toBeLessThanOrEqual(s.end);
      }
    }
    expect(result).toMatchObject({ engine: 'whisper.cpp', model: modelPath });
    expect(progress.length).toBeGreaterThan(0);
    for (let i = 1; i < progress.length; i++) expect(progress[i]!).toBeGreaterThan(progress[i - 1]!);
    expect(progress.at(-1)!).toBeLessThanOrEqual(wav16Duration);
  }, 120_000);

  it('maps model names to ggml files in the models folder', async () => {
    const modelsDir = path.join(dir, 'models');
    await run('mkdir', ['-p', modelsDir]);
    await symlink(modelPath, path.join(modelsDir, 'ggml-small.en.bin'));
    const named = new WhisperCppEngine({ binary: cli, modelsDir, threads: 1 });
    expect(named.models()).toEqual(['small']);
    expect(named.modelFile('small')).toBe(path.join(modelsDir, 'ggml-small.en.bin'));
    const result = await named.transcribe({ wavPath: wav16, model: 'small', signal: new AbortController().signal, onSegment: () => {} });
    expect(result.model).toBe('small');
    expect(result.segments.length).toBeGreaterThanOrEqual(1);
    // wordTimestamps: false keeps whisper's own segments, without words.
    const plain = new WhisperCppEngine({ binary: cli, modelsDir, threads: 1, wordTimestamps: false });
    const segmentsOnly = await plain.transcribe({ wavPath: wav16, model: 'small', signal: new AbortController().signal, onSegment: () => {} });
    expect(segmentsOnly.segments.length).toBeGreaterThanOrEqual(1);
    expect(segmentsOnly.segments.every((s) => s.words === undefined)).toBe(true);
    await expect(named.transcribe({ wavPath: wav16, model: 'large', signal: new AbortController().signal, onSegment: () => {} })).rejects.toThrow(
      /model "large" is not available.*ggml-large-v3\.bin/,
    );
    // Without a built CLI nothing is advertised, whatever the models folder holds.
    expect(new WhisperCppEngine({ binary: '/nonexistent/whisper-cli', modelsDir }).models()).toEqual([]);

    const caps = await detectCapabilities({ modelsDir, canFetchUrls: false, device: 'cpu', engines: createEngines({ modelsDir, whisper: { binary: cli } }) });
    expect(caps.models).toEqual(['small', POCKETSPHINX_MODEL]);
    expect(caps.engines).toEqual(['whisper.cpp', 'pocketsphinx']);
  }, 120_000);

  it('reports whisper-cli’s failure when the file is not a whisper model', async () => {
    const junk = path.join(dir, 'junk-model.bin');
    await writeFile(junk, Buffer.alloc(4096, 7));
    await expect(engine.transcribe({ wavPath: wav16, model: junk, signal: new AbortController().signal, onSegment: () => {} })).rejects.toThrow(
      /whisper\.cpp: whisper-cli exited with code \d+:[\s\S]*(bad magic|failed to (load|initialize))/,
    );
  }, 60_000);

  it('kills whisper-cli and rejects with TranscriptionCancelled when aborted mid-run', async () => {
    // Without temperature fallback the random model reaches its first segment sooner; the run goes on
    // through the other 30 s windows, which is where it gets cancelled.
    const fast = new WhisperCppEngine({ binary: cli, threads: 1, extraArgs: ['--no-fallback'] });
    const r = await cancelAtFirstSegment(fast, longWav16, modelPath, modelPath);
    expect(r.error).toBeInstanceOf(TranscriptionCancelled);
    expect(r.aliveAtFirstSegment).toBe(true);
    expect(r.stopMs).toBeLessThan(3000);
    expect(r.left).toEqual([]);
    expect(r.segments.length).toBe(1);
  }, 120_000);
});

describe('engine output parsers', () => {
  it('parses whisper-cli segment lines and ignores everything else', () => {
    expect(parseWhisperSegmentLine('[00:00:01.500 --> 00:01:02.250]   hello there')).toEqual({ start: 1.5, end: 62.25, text: 'hello there' });
    expect(parseWhisperSegmentLine('[01:00:00.000 --> 01:00:00.010]  x')).toEqual({ start: 3600, end: 3600.01, text: 'x' });
    expect(parseWhisperSegmentLine('whisper_print_timings:    total time =   750.10 ms')).toBeNull();
    expect(parseWhisperSegmentLine('')).toBeNull();
  });

  it('groups whisper-cli word lines (-ml 1 -sow) into segments that carry their words', () => {
    // As whisper-cli prints them: "[t0 --> t1]  " and the word's text with the space before it.
    const lines = [
      '',
      '[00:00:00.000 --> 00:00:00.420]   Good',
      '[00:00:00.420 --> 00:00:00.900]   morning,',
      '[00:00:00.900 --> 00:00:01.500]   everyone.',
      "[00:00:01.600 --> 00:00:01.900]   Let's",
      '[00:00:01.900 --> 00:00:02.300]   start',
      '[00:00:04.000 --> 00:00:04.300]   [BLANK_AUDIO]',
      '[00:00:04.500 --> 00:00:04.900]   Thanks',
      'whisper_print_timings:    total time =   750.10 ms',
    ];
    const g = new WhisperWordGrouper();
    const out = lines.flatMap((l) => {
      const w = parseWhisperSegmentLine(l, false);
      return w ? g.push(w) : [];
    });
    expect(out).toEqual([
      {
        start: 0,
        end: 1.5,
        text: 'Good morning, everyone.',
        words: [
          { start: 0, end: 0.42, text: 'Good' },
          { start: 0.42, end: 0.9, text: 'morning,' },
          { start: 0.9, end: 1.5, text: 'everyone.' },
        ],
      },
      // a pause over a second closes "Let's start" when the next word comes
      {
        start: 1.6,
        end: 2.3,
        text: "Let's start",
        words: [
          { start: 1.6, end: 1.9, text: "Let's" },
          { start: 1.9, end: 2.3, text: 'start' },
        ],
      },
    ]);
    expect(g.end()).toEqual({ start: 4.5, end: 4.9, text: 'Thanks', words: [{ start: 4.5, end: 4.9, text: 'Thanks' }] });
    expect(g.end()).toBeNull();
  });

  it('groups pocketsphinx_continuous -time output into utterances', () => {
    const p = new ContinuousOutputParser();
    const lines = [
      'i would like coffee',
      '<s> 4.850 4.950 1.000000',
      'i 4.960 5.140 0.998701',
      '<sil> 5.150 5.200 0.98',
      'would 5.210 5.390 0.28',
      'like 5.400 5.690 0.62',
      'coffee(2) 6.170 6.670 0.03',
      '</s> 6.680 7.140 1.000000',
    ];
    const out = lines.map((l) => p.push(l));
    expect(out.slice(0, -1).every((s) => s === null)).toBe(true);
    expect(out.at(-1)).toEqual({
      start: 4.96,
      end: 6.67,
      text: 'i would like coffee',
      words: [
        { start: 4.96, end: 5.14, text: 'i' },
        { start: 5.21, end: 5.39, text: 'would' },
        { start: 5.4, end: 5.69, text: 'like' },
        { start: 6.17, end: 6.67, text: 'coffee' },
      ],
    });
    // An utterance with no words gives no segment; one cut off by the end of output still does.
    expect(['', '<s> 7.0 7.5 1.0', '<sil> 7.5 8.0 1.0', '</s> 8.0 8.2 1.0'].map((l) => p.push(l)).every((s) => s === null)).toBe(true);
    p.push('good morning');
    p.push('good 9.0 9.3 0.5');
    p.push('morning 9.3 9.8 0.5');
    expect(p.end()).toEqual({
      start: 9,
      end: 9.8,
      text: 'good morning',
      words: [
        { start: 9, end: 9.3, text: 'good' },
        { start: 9.3, end: 9.8, text: 'morning' },
      ],
    });
    expect(p.end()).toBeNull();
  });

  it('parses PocketSphinx 5 JSON utterances', () => {
    expect(
      parsePs5Line(
        '{"b":1.230,"d":0.870,"p":0.912,"t":"hello world","w":[{"b":1.230,"d":0.400,"p":0.9,"t":"hello"},{"b":1.630,"d":0.100,"p":1,"t":"<sil>"},{"b":1.730,"d":0.370,"p":0.8,"t":"world(2)"}]}',
      ),
    ).toEqual({
      start: 1.23,
      end: 2.1,
      text: 'hello world',
      words: [
        { start: 1.23, end: 1.63, text: 'hello' },
        { start: 1.73, end: 2.1, text: 'world' },
      ],
    });
    expect(parsePs5Line('{"b":0.000,"d":0.500,"p":1.000,"t":"","w":[]}')).toBeNull();
    expect(parsePs5Line('INFO: something')).toBeNull();
  });
});
