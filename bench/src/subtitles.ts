// Subtitle part of bench/src/run.ts (`BENCH_ONLY=subtitles`, issue 36): the cues users download,
// on two long recordings built from ../shared/data/diarization (DIARIZATION_DATA overrides; nothing
// is downloaded):
// - a generated conversation of 10 speakers: the five speakers of librispeech-test-other-5 (ten
//   utterances each, in turns of one to three) and the five longest single utterances of the
//   reporting half (odd ids) of librispeech-train-clean-100, pauses of 0.2–1.5 s between turns,
//   seeded, with exact reference turns;
// - the meeting excerpts dev00, dev01, trn01…trn09 one after another (about 5.5 minutes, real meetings).
// Each is transcribed by the worker's pocketsphinx engine and diarized by the default diarizer; the
// segments are labelled as the coordinator stores them (labelSegments: fitTimeline,
// splitSegmentsBySpeaker, fitTimeline again). SRT is rendered twice: BEFORE, one cue per labelled
// segment on one line (the format before subtitle-cues.ts), and AFTER, the coordinator's
// transcriptSrt. Both files are read back with @plussub/srt-vtt-parser and measured here, with this
// file's own arithmetic (not the product module's figures).
//
// pocketsphinx runs at about real time on a loaded 2-core machine, so the transcript and the turns of
// each recording are cached beside the built WAVs (keyed by the WAV's hash) in
// $TMPDIR/sonar-subtitles-bench; BENCH_SUBTITLES_CACHE=0 transcribes and diarizes again.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { parse } from '@plussub/srt-vtt-parser';
import { transcriptSrt, type DownloadTranscript } from '../../coordinator/dist/speech/jobs/transcript-formats.js';
import { fitTimeline } from '../../coordinator/dist/speech/jobs/timeline.js';
import { splitSegmentsBySpeaker, type SourceSegment } from '../../coordinator/dist/speech/jobs/word-speakers.js';
import { createDiarizer, readWav, type Diarizer } from '../../worker/dist/diarization/index.js';
import { POCKETSPHINX_MODEL, createEngines, engineForModel, type TranscriptionEngine } from '../../worker/dist/engines/index.js';
import { canonicalWavHeader } from '../../worker/dist/media/wav.js';
import { decodeMono, speechSpan } from './diarization-corpus.js';
import { log, median, rng, type Fail, type Row } from './lib.js';

const run = promisify(execFile);
const RATE = 16000;
const SEED = 36;
const CACHE_DIR = path.join(os.tmpdir(), 'sonar-subtitles-bench');
const USE_CACHE = process.env.BENCH_SUBTITLES_CACHE !== '0';
const MEETING_FILES = ['dev00', 'dev01', ...Array.from({ length: 9 }, (_, i) => `trn0${i + 1}`)].map((f) => `${f}.wav`);

/** The limits of issue 36 (docs/speech.md, "Subtitles"), restated here rather than read from the product. */
const LIMITS = { maxChars: 42, maxLines: 2, maxSeconds: 7, maxCps: 20, minSeconds: 1, minGap: 0.08 };
/** Tolerance of SRT's millisecond times. */
const EPS = 0.0015;

export interface SubtitleBenchContext {
  root: string;
  row: Row;
  fail: Fail;
  target: (name: string, met: boolean, measured: string) => void;
  signal: AbortSignal;
}

interface Recording {
  name: string;
  file: string;
  duration: number;
  /** Reference speakers (the generated conversation's exact turns; the meetings' RTTM is not read). */
  speakers: number | null;
}

interface Transcribed {
  segments: SourceSegment[];
  turns: Array<[number, number, number]>;
  /** Seconds the engine and the diarizer took, when measured in this run (null: from the cache). */
  transcribeSeconds: number | null;
  diarizeSeconds: number | null;
}

const dataDir = (root: string) => path.resolve(process.env.DIARIZATION_DATA || path.join(root, '..', 'shared', 'data', 'diarization'));

// ---- recordings ----------------------------------------------------------------------------------

/** The speech inside an utterance (the corpus's rule: within 35 dB of the loudest frame, 30 ms kept either side). */
function trimToSpeech(samples: Float32Array): Float32Array {
  return samples.subarray(...speechSpan(samples, 0, samples.length));
}

function writeWav(file: string, samples: Float32Array) {
  const pcm = Buffer.alloc(samples.length * 2);
  for (let i = 0; i < samples.length; i++) pcm.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(samples[i]! * 32767))), i * 2);
  writeFileSync(file, Buffer.concat([canonicalWavHeader(pcm.length), pcm]));
}

/**
 * The 10-speaker conversation. Each test-other speaker's ten utterances (in file order) are cut into
 * turns of 1–3 utterances (0.1–0.4 s between utterances of a turn); each train-clean speaker has one
 * turn. The next turn is drawn from the speakers with turns left, in proportion to what they have
 * left, never the speaker who just spoke while another can; 0.2–1.5 s between turns.
 */
async function buildConversation(dir: string): Promise<Recording> {
  const file = path.join(CACHE_DIR, `conversation-10spk-seed${SEED}.wav`);
  const meta = `${file}.json`;
  if (existsSync(file) && existsSync(meta)) return JSON.parse(readFileSync(meta, 'utf8')) as Recording;
  const random = rng(SEED);
  const otherDir = path.join(dir, 'librispeech-test-other-5');
  const others = readdirSync(otherDir)
    .filter((d) => /^\d+$/.test(d))
    .sort((a, b) => Number(a) - Number(b));
  const trainDir = path.join(dir, 'librispeech-train-clean-100');
  const oddFiles = readdirSync(trainDir)
    .filter((f) => f.endsWith('.flac') && Number(f.split('-')[0]) % 2 === 1)
    .sort();
  const { stdout } = await run('soxi', ['-D', ...oddFiles.map((f) => path.join(trainDir, f))]);
  const lengths = stdout.trim().split('\n').map(Number);
  const longest = oddFiles
    .map((f, i) => ({ f, seconds: lengths[i]! }))
    .sort((a, b) => b.seconds - a.seconds || a.f.localeCompare(b.f))
    .slice(0, 5)
    .map((x) => x.f);
  // queues[s]: speaker s's turns, each a list of trimmed utterances.
  const queues: Float32Array[][][] = [];
  for (const spk of others) {
    const files = readdirSync(path.join(otherDir, spk))
      .filter((f) => f.endsWith('.flac'))
      .sort();
    const utterances = await Promise.all(files.map(async (f) => trimToSpeech(await decodeMono(path.join(otherDir, spk, f)))));
    const turns: Float32Array[][] = [];
    while (utterances.length) turns.push(utterances.splice(0, 1 + Math.floor(random() * 3)));
    queues.push(turns);
  }
  for (const f of longest) queues.push([[trimToSpeech(await decodeMono(path.join(trainDir, f)))]]);
  const placed: Array<{ at: number; samples: Float32Array }> = [];
  const reference: Array<{ start: number; end: number; speaker: number }> = [];
  let cursor = Math.round(0.5 * RATE);
  let last = -1;
  while (queues.some((q) => q.length)) {
    const ready = queues.map((q, s) => (q.length && s !== last ? q.length : 0));
    const total = ready.reduce((a, b) => a + b, 0);
    let s = last;
    if (total > 0) {
      let pick = random() * total;
      s = ready.findIndex((n) => (pick -= n) < 0);
      if (s < 0) s = ready.findLastIndex((n) => n > 0);
    }
    if (reference.length) cursor += Math.round((0.2 + random() * 1.3) * RATE);
    const start = cursor;
    for (const [i, u] of queues[s]!.shift()!.entries()) {
      if (i > 0) cursor += Math.round((0.1 + random() * 0.3) * RATE);
      placed.push({ at: cursor, samples: u });
      cursor += u.length;
    }
    reference.push({ start: start / RATE, end: cursor / RATE, speaker: s });
    last = s;
  }
  const samples = new Float32Array(cursor + Math.round(0.5 * RATE));
  for (const p of placed) samples.set(p.samples, p.at);
  mkdirSync(CACHE_DIR, { recursive: true });
  writeWav(file, samples);
  const rec: Recording = { name: '10-speaker conversation', file, duration: samples.length / RATE, speakers: queues.length };
  writeFileSync(meta, JSON.stringify(rec));
  writeFileSync(
    `${file}.rttm`,
    reference.map((r) => `SPEAKER conversation 1 ${r.start.toFixed(3)} ${(r.end - r.start).toFixed(3)} <NA> <NA> spk${r.speaker} <NA> <NA>\n`).join(''),
  );
  return rec;
}

/** The meeting excerpts one after another, by sox. */
async function buildMeetings(dir: string): Promise<Recording> {
  const file = path.join(CACHE_DIR, 'meetings-dev00-trn09.wav');
  mkdirSync(CACHE_DIR, { recursive: true });
  if (!existsSync(file)) await run('sox', [...MEETING_FILES.map((f) => path.join(dir, f)), '-r', String(RATE), '-c', '1', '-b', '16', file]);
  const { stdout } = await run('soxi', ['-D', file]);
  return { name: 'meeting excerpts', file, duration: Number(stdout.trim()), speakers: null };
}

// ---- transcription -------------------------------------------------------------------------------

async function transcribe(rec: Recording, engine: TranscriptionEngine, diarizer: Diarizer, signal: AbortSignal): Promise<Transcribed> {
  const hash = createHash('sha256').update(readFileSync(rec.file)).digest('hex').slice(0, 16);
  const cached = path.join(CACHE_DIR, `${hash}.${engine.name}.${diarizer.name}.json`);
  if (USE_CACHE && existsSync(cached)) {
    const c = JSON.parse(readFileSync(cached, 'utf8')) as Omit<Transcribed, 'transcribeSeconds' | 'diarizeSeconds'>;
    return { ...c, transcribeSeconds: null, diarizeSeconds: null };
  }
  log(`subtitles: transcribing ${rec.name} (${rec.duration.toFixed(0)} s of audio)`);
  let t0 = performance.now();
  const result = await engine.transcribe({ wavPath: rec.file, model: POCKETSPHINX_MODEL, signal, onSegment: () => undefined });
  const transcribeSeconds = (performance.now() - t0) / 1000;
  log(`subtitles: diarizing ${rec.name}`);
  const { samples, sampleRate } = await readWav(rec.file);
  t0 = performance.now();
  const out = await diarizer.diarize(samples, sampleRate, { signal });
  const diarizeSeconds = (performance.now() - t0) / 1000;
  const segments = result.segments.map((s) => ({ start: s.start, end: s.end, text: s.text, words: s.words ?? null }));
  const turns = out.turns.map((t) => [t.start, t.end, t.speaker] as [number, number, number]);
  writeFileSync(cached, JSON.stringify({ segments, turns }));
  return { segments, turns, transcribeSeconds, diarizeSeconds };
}

// ---- the two renderings --------------------------------------------------------------------------

const clock = (seconds: number) => {
  const ms = Math.max(0, Math.round(seconds * 1000));
  const p = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${p(Math.floor(ms / 3_600_000))}:${p(Math.floor(ms / 60_000) % 60)}:${p(Math.floor(ms / 1000) % 60)},${p(ms % 1000, 3)}`;
};

/** BEFORE: SRT as written before subtitle-cues.ts: one cue per segment, `Name: text` on one line, the segment's times. */
function oneCuePerSegment(t: DownloadTranscript): string {
  return t.segments
    .map((s) => ({ ...s, text: s.text.replace(/\s+/g, ' ').trim() }))
    .filter((s) => s.text)
    .map((s, i) => {
      const end = s.end > s.start ? s.end : s.start + 0.1;
      const name = s.speaker ? `Speaker ${Number(s.speaker.slice(1))}: ` : '';
      return `${i + 1}\n${clock(s.start)} --> ${clock(end)}\n${name}${s.text}\n`;
    })
    .join('\n');
}

// ---- measuring -----------------------------------------------------------------------------------

interface ReadCue {
  n: number;
  start: number;
  end: number;
  lines: string[];
}

const segmenter = new Intl.Segmenter();
const chars = (s: string) => [...segmenter.segment(s)].length;
/** The speaker marker at a turn's first cue (`Speaker 3: ` or `- `): shown, so counted in the line, but not read, so not in the reading speed. */
const MARK = /^(Speaker \d+: |- )/;

/** The parser's declarations import './types' without an extension, which this project's module resolution does not follow: typed here. */
const parseSubtitles = parse as unknown as (raw: string) => { entries: Array<{ from: number; to: number; text: string }> };

function readSrt(text: string): ReadCue[] {
  return parseSubtitles(text).entries.map((e, i) => ({
    n: i + 1,
    start: e.from / 1000,
    end: e.to / 1000,
    lines: e.text.split('\n'),
  }));
}

interface Stats {
  cues: number;
  over7: ReadCue[];
  longest: number;
  longLines: Array<{ cue: ReadCue; line: string }>;
  longestLine: number;
  overLines: ReadCue[];
  fast: Array<{ cue: ReadCue; cps: number }>;
  short: ReadCue[];
  /** Cues over the reading speed, or under the shortest time, that had no room to run longer (excused). */
  fastExcused: number;
  shortExcused: number;
  gaps: Array<{ cue: ReadCue; gap: number }>;
  crossSpeaker: Array<{ cue: ReadCue; speakers: string[] }>;
  /**
   * A stricter reading of "where the audio allows" (not a target): excused cues under 1 s or over 20
   * characters/s whose room was taken by the next cue of the same turn, where the two together would
   * fit every limit (≤ 7 s, 2 lines of 42 by a greedy wrap, ≤ 20 characters/s).
   */
  mergeable: Array<{ cue: ReadCue; merged: string }>;
  /** Cues of one word under 0.5 s. */
  flashes: number;
}

/** A labelled word (or a segment without words) with its speaker, placed at its midpoint. */
interface Spoken {
  at: number;
  speaker: string | null;
}

function measure(cues: ReadCue[], spoken: Spoken[], duration: number): Stats {
  const s: Stats = {
    cues: cues.length,
    over7: [],
    longest: 0,
    longLines: [],
    longestLine: 0,
    overLines: [],
    fast: [],
    short: [],
    fastExcused: 0,
    shortExcused: 0,
    gaps: [],
    crossSpeaker: [],
    mergeable: [],
    flashes: 0,
  };
  cues.forEach((c, i) => {
    const len = c.end - c.start;
    s.longest = Math.max(s.longest, len);
    if (len > LIMITS.maxSeconds + EPS) s.over7.push(c);
    if (c.lines.length > LIMITS.maxLines) s.overLines.push(c);
    for (const line of c.lines) {
      s.longestLine = Math.max(s.longestLine, chars(line));
      if (chars(line) > LIMITS.maxChars) s.longLines.push({ cue: c, line });
    }
    const next = cues[i + 1];
    if (next && next.start - c.end < LIMITS.minGap - EPS) s.gaps.push({ cue: c, gap: next.start - c.end });
    // Where the audio allows: a cue that already runs to the next cue's start less the gap, to the
    // longest time on screen, or to the end of the audio could not be longer.
    const room = Math.min(next ? next.start - LIMITS.minGap : duration, c.start + LIMITS.maxSeconds, duration);
    const limited = c.end >= room - EPS;
    const read = c.lines.reduce((n, l, j) => n + chars(j === 0 ? l.replace(MARK, '') : l), 0);
    const cps = len > 0 ? read / len : Infinity;
    if (cps > LIMITS.maxCps + 1e-6) {
      if (limited) s.fastExcused++;
      else s.fast.push({ cue: c, cps });
    }
    if (len < LIMITS.minSeconds - EPS) {
      if (limited) s.shortExcused++;
      else s.short.push(c);
    }
    const shownWords = c.lines.flatMap((l, j) => (j === 0 ? l.replace(MARK, '') : l).split(' ')).filter(Boolean);
    if (shownWords.length === 1 && len < 0.5) s.flashes++;
    if (limited && next && !MARK.test(next.lines[0] ?? '') && (cps > LIMITS.maxCps + 1e-6 || len < LIMITS.minSeconds - EPS)) {
      const mark = MARK.exec(c.lines[0] ?? '')?.[0] ?? '';
      const words = [...shownWords, ...next.lines.join(' ').split(' ').filter(Boolean)];
      const mergedLen = next.end - c.start;
      const mergedRead = words.reduce((n, w) => n + chars(w), 0) + words.length - 1;
      if (mergedLen <= LIMITS.maxSeconds + EPS && mergedRead / mergedLen <= LIMITS.maxCps + 1e-6 && greedyLines(mark, words) <= LIMITS.maxLines)
        s.mergeable.push({ cue: c, merged: `${mark}${words.join(' ')}`.slice(0, 90) });
    }
    const speakers = new Set(spoken.filter((w) => w.at >= c.start && w.at <= c.end).map((w) => w.speaker ?? '(none)'));
    if (speakers.size > 1) s.crossSpeaker.push({ cue: c, speakers: [...speakers] });
  });
  return s;
}

/** Lines a greedy wrap at word boundaries needs (the turn's mark on the first line); Infinity when a word is longer than a line. */
function greedyLines(mark: string, words: readonly string[]): number {
  let lines = 1;
  let used = chars(mark);
  let first = true;
  for (const w of words) {
    const n = chars(w);
    if (n > LIMITS.maxChars) return Infinity;
    if (first) used += n;
    else if (used + 1 + n <= LIMITS.maxChars) used += 1 + n;
    else {
      lines++;
      used = n;
    }
    first = false;
  }
  return used > LIMITS.maxChars ? Infinity : lines;
}

const violations = (s: Stats) => s.over7.length + s.longLines.length + s.overLines.length + s.fast.length + s.short.length + s.gaps.length;

function statsText(s: Stats): string {
  return [
    `${s.cues} cues`,
    `over 7 s: ${s.over7.length} (longest ${s.longest.toFixed(1)} s)`,
    `lines over 42 characters: ${s.longLines.length} (longest line ${s.longestLine})`,
    `cues over 2 lines: ${s.overLines.length}`,
    `over 20 characters/s where the audio allows: ${s.fast.length} (${s.fastExcused} more with no room)`,
    `under 1 s where the audio allows: ${s.short.length} (${s.shortExcused} more with no room)`,
    `gaps under 80 ms: ${s.gaps.length}`,
    `across a change of speaker: ${s.crossSpeaker.length}`,
  ].join('; ');
}

const cueText = (c: ReadCue) => `#${c.n} ${c.start.toFixed(2)}–${c.end.toFixed(2)} s "${c.lines.join(' / ').slice(0, 90)}"`;

/** The first few cues that break a limit, each with why. */
function offenders(s: Stats, max = 3): string[] {
  return [
    ...s.over7.slice(0, max).map((c) => `${cueText(c)}: ${(c.end - c.start).toFixed(2)} s`),
    ...s.longLines.slice(0, max).map((x) => `${cueText(x.cue)}: a line of ${chars(x.line)} characters`),
    ...s.overLines.slice(0, max).map((c) => `${cueText(c)}: ${c.lines.length} lines`),
    ...s.fast.slice(0, max).map((x) => `${cueText(x.cue)}: ${x.cps.toFixed(1)} characters/s with room to run longer`),
    ...s.short.slice(0, max).map((c) => `${cueText(c)}: on screen ${(c.end - c.start).toFixed(2)} s with room to run longer`),
    ...s.gaps.slice(0, max).map((x) => `${cueText(x.cue)}: ${(x.gap * 1000).toFixed(0)} ms to the next cue`),
    ...s.crossSpeaker.slice(0, max).map((x) => `${cueText(x.cue)}: words of ${x.speakers.join(' and ')}`),
  ];
}

/** Stored segments and words strictly in time order: no overlap, every word inside its segment, words in order. */
function timeOrder(segments: readonly SourceSegment[]): string[] {
  const out: string[] = [];
  const at = (x: number) => x.toFixed(2);
  segments.forEach((s, i) => {
    if (!(s.end >= s.start)) out.push(`segment ${i + 1} ends (${at(s.end)}) before it starts (${at(s.start)})`);
    const prev = segments[i - 1];
    if (prev && s.start < prev.end - 1e-6)
      out.push(`segment ${i + 1} "${s.text.slice(0, 30)}" starts at ${at(s.start)}, before segment ${i} ends at ${at(prev.end)}`);
    (s.words ?? []).forEach((w, j) => {
      if (w.start < s.start - 1e-6 || w.end > s.end + 1e-6)
        out.push(`segment ${i + 1}, word "${w.text}" ${at(w.start)}–${at(w.end)} outside the segment ${at(s.start)}–${at(s.end)}`);
      const pw = s.words![j - 1];
      if (pw && w.start < pw.end - 1e-6) out.push(`segment ${i + 1}, word "${w.text}" starts at ${at(w.start)}, before "${pw.text}" ends at ${at(pw.end)}`);
    });
    const lastWord = prev?.words?.at(-1);
    const firstWord = s.words?.[0];
    if (lastWord && firstWord && firstWord.start < lastWord.end - 1e-6)
      out.push(
        `segment ${i + 1}'s first word "${firstWord.text}" starts at ${at(firstWord.start)}, before segment ${i}'s last word ends at ${at(lastWord.end)}`,
      );
  });
  return out;
}

// ---- the phase -----------------------------------------------------------------------------------

export async function subtitlesPhase(ctx: SubtitleBenchContext): Promise<void> {
  const dir = dataDir(ctx.root);
  const engine = engineForModel(createEngines(), POCKETSPHINX_MODEL);
  if (!engine) {
    ctx.fail('subtitles', new Error('pocketsphinx with its en-us model is not installed (apt-get install pocketsphinx pocketsphinx-en-us)'));
    return;
  }
  let diarizer: Diarizer;
  try {
    diarizer = await createDiarizer({ engine: 'default' });
  } catch (err) {
    ctx.fail('subtitles: diarization engine', err);
    return;
  }
  try {
    for (const build of [buildConversation, buildMeetings]) {
      ctx.signal.throwIfAborted();
      const rec = await build(dir);
      await recordingPart(ctx, rec, engine, diarizer);
    }
  } catch (err) {
    ctx.fail('subtitles', err);
  } finally {
    await diarizer.close?.();
  }
}

async function recordingPart(ctx: SubtitleBenchContext, rec: Recording, engine: TranscriptionEngine, diarizer: Diarizer) {
  const name = `subtitles, ${rec.name}`;
  const tr = await transcribe(rec, engine, diarizer, ctx.signal);
  // As the coordinator stores a diarized pass (labelSegments): the reported segments as PROGRESS
  // stored them, one timeline, then labelled and split at speaker changes, made one timeline again.
  const labelled = fitTimeline(splitSegmentsBySpeaker(fitTimeline(tr.segments), tr.turns));
  const words = tr.segments.reduce((n, s) => n + (s.words?.length ?? 0), 0);
  const found = new Set(tr.turns.map((t) => t[2])).size;
  ctx.row(
    `${name}: recording`,
    `${(rec.duration / 60).toFixed(1)} min (${path.basename(rec.file)}), ${rec.speakers === null ? 'several' : rec.speakers} speakers; diarizer found ${found}; pocketsphinx ${tr.segments.length} segments, ${words} words; ${labelled.length} labelled segments (split at speaker changes); ${
      tr.transcribeSeconds === null
        ? 'transcript and turns from the cache'
        : `transcribed in ${tr.transcribeSeconds.toFixed(0)} s, diarized in ${tr.diarizeSeconds!.toFixed(1)} s`
    }`,
  );
  const transcript: DownloadTranscript = {
    jobId: null,
    title: rec.name,
    language: 'en',
    model: POCKETSPHINX_MODEL,
    pass: 1,
    status: 'completed',
    durationSeconds: rec.duration,
    transcribedAt: null,
    transcriptText: null,
    segments: labelled.map((s) => ({ start: s.start, end: s.end, text: s.text, speaker: s.speaker, words: s.words })),
    speakerLabels: {},
    turns: null,
  };
  const spoken: Spoken[] = labelled.flatMap((s) =>
    s.words?.length ? s.words.map((w) => ({ at: (w.start + w.end) / 2, speaker: s.speaker })) : [{ at: (s.start + s.end) / 2, speaker: s.speaker }],
  );

  // The speaker test's own check: one cue per pocketsphinx segment, before the split at speaker
  // changes, must show the cues that cross a change of speaker.
  const unsplit = measure(
    readSrt(oneCuePerSegment({ ...transcript, segments: tr.segments.map((x) => ({ start: x.start, end: x.end, text: x.text, speaker: null })) })),
    spoken,
    rec.duration,
  );
  ctx.row(
    `${name}: check of the speaker test`,
    `one cue per pocketsphinx segment, before the split at speaker changes: ${unsplit.crossSpeaker.length} of ${unsplit.cues} cues across a change of speaker`,
  );
  const before = measure(readSrt(oneCuePerSegment(transcript)), spoken, rec.duration);
  ctx.row(`${name}: BEFORE (one cue per segment)`, statsText(before));

  // The cue building's cost: transcriptSrt (cues and the SRT text), median of 5 runs after a warm-up.
  const srt = transcriptSrt(transcript);
  const times: number[] = [];
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now();
    transcriptSrt(transcript);
    times.push(performance.now() - t0);
  }
  const after = measure(readSrt(srt), spoken, rec.duration);
  ctx.row(`${name}: AFTER (transcriptSrt)`, statsText(after));
  const ms = median(times);
  ctx.row(
    `${name}: cue building`,
    `${ms.toFixed(1)} ms per recording (transcriptSrt, median of 5), ${((ms / 1000 / rec.duration) * 100).toFixed(4)} % of the audio's duration`,
  );

  const raw = timeOrder(tr.segments);
  const stored = timeOrder(labelled);
  ctx.row(
    `${name}: time order`,
    `stored (labelled) segments: ${stored.length ? `${stored.length} faults, first: ${stored.slice(0, 3).join('; ')}` : 'in order, no overlaps, every word inside its segment'}; pocketsphinx's own segments: ${raw.length ? `${raw.length} faults` : 'in order'}`,
  );

  const bad = violations(after);
  ctx.target(
    `${name}: every cue within 2 lines × 42 characters, ≤ 7 s, ≥ 80 ms gaps, ≤ 20 characters/s and ≥ 1 s where the audio allows`,
    bad === 0,
    `${after.cues - new Set([...after.over7, ...after.longLines.map((x) => x.cue), ...after.overLines, ...after.fast.map((x) => x.cue), ...after.short, ...after.gaps.map((x) => x.cue)]).size} of ${after.cues} cues within the limits`,
  );
  ctx.target(`${name}: 0 cues across a change of speaker`, after.crossSpeaker.length === 0, `${after.crossSpeaker.length} of ${after.cues}`);
  ctx.target(`${name}: stored segments and words strictly in time order`, stored.length === 0, stored.length ? `${stored.length} faults` : 'in order');
  const examples = offenders(after);
  examples.forEach((e, i) => ctx.row(`${name}: AFTER offending cue ${i + 1}`, e));
  ctx.row(
    `${name}: AFTER, a stricter reading of "where the audio allows" (not a target)`,
    `${after.mergeable.length} of the ${after.fastExcused + after.shortExcused} excused cues (under 1 s or over 20 characters/s) had their room taken by the next cue of the same turn, and the two as one cue would fit 7 s, 2 lines of 42 characters and 20 characters/s; ${after.flashes} one-word cues under 0.5 s (BEFORE: ${before.mergeable.length} such excused cues, ${before.flashes} one-word cues under 0.5 s)`,
  );
  after.mergeable
    .slice(0, 5)
    .forEach((x, i) =>
      ctx.row(
        `${name}: AFTER short or fast cue ${i + 1} with room in its turn`,
        `${cueText(x.cue)} (${(x.cue.end - x.cue.start).toFixed(2)} s); with the next cue: "${x.merged}"`,
      ),
    );
  if (examples.length) log(`${name}: AFTER cues outside the limits:\n  ${examples.join('\n  ')}`);
}
