// Word-level part of the diarization bench: the transcript a user reads. pocketsphinx transcribes
// a few reporting-half conversations with word times, the default diarizer finds the turns, and
// the coordinator's own word labelling (splitSegmentsBySpeaker, coordinator/dist) labels each word
// and splits the segments where the speaker changes. The split, labelled segments are scored
// against the exact reference like the diarizer's RTTM. pocketsphinx runs at about real time on a
// loaded 2-core machine, so only BENCH_DIARIZATION_WORD_CONVERSATIONS conversations (default 8:
// two of each speaker count) are transcribed.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { splitSegmentsBySpeaker, type SourceSegment } from '../../coordinator/dist/speech/jobs/word-speakers.js';
import type { Diarizer } from '../../worker/dist/diarization/index.js';
import { POCKETSPHINX_MODEL, createEngines, engineForModel } from '../../worker/dist/engines/index.js';
import { canonicalWavHeader } from '../../worker/dist/media/wav.js';
import { scoreDiarization, type DerResult } from './der.js';
import type { Recording } from './diarization-corpus.js';
import { log } from './lib.js';

export interface WordScores {
  conversations: number;
  words: number;
  /** Scored from the RTTM of the same runs, for comparison. */
  rttm: DerResult[];
  labelled: DerResult[];
}

function writeWav(file: string, samples: Float32Array) {
  const pcm = Buffer.alloc(samples.length * 2);
  for (let i = 0; i < samples.length; i++) pcm.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(samples[i]! * 32767))), i * 2);
  writeFileSync(file, Buffer.concat([canonicalWavHeader(pcm.length), pcm]));
}

export async function scoreLabelledWords(diarizer: Diarizer, recordings: Recording[], count: number, collar: number, signal: AbortSignal): Promise<WordScores> {
  const engine = engineForModel(createEngines(), POCKETSPHINX_MODEL);
  if (!engine) throw new Error('pocketsphinx with its en-us model is not installed (apt-get install pocketsphinx pocketsphinx-en-us)');
  // Two of each speaker count, in the order the generator made them.
  const chosen = [2, 3, 4, 5].flatMap((k) => recordings.filter((r) => r.speakers === k).slice(0, Math.ceil(count / 4))).slice(0, count);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sonar-bench-words-'));
  const out: WordScores = { conversations: 0, words: 0, rttm: [], labelled: [] };
  try {
    for (const rec of chosen) {
      signal.throwIfAborted();
      const wav = path.join(dir, `${rec.id}.wav`);
      writeWav(wav, rec.samples);
      log(`diarization words: transcribing ${rec.id}`);
      const transcript = await engine.transcribe({ wavPath: wav, model: POCKETSPHINX_MODEL, signal, onSegment: () => undefined });
      const turns = (await diarizer.diarize(rec.samples, 16000, { signal })).turns;
      const stored = turns.map((t) => [t.start, t.end, t.speaker] as [number, number, number]);
      const segments: SourceSegment[] = transcript.segments.map((s) => ({ start: s.start, end: s.end, text: s.text, words: s.words ?? null }));
      const labelled = splitSegmentsBySpeaker(segments, stored).filter((s) => s.speaker !== null);
      out.conversations++;
      out.words += segments.reduce((n, s) => n + (s.words?.length ?? 0), 0);
      out.rttm.push(
        scoreDiarization(
          rec.reference,
          turns.map((t) => ({ start: t.start, end: t.end, speaker: String(t.speaker) })),
          { collar },
        ),
      );
      out.labelled.push(
        scoreDiarization(
          rec.reference,
          labelled.map((s) => ({ start: s.start, end: s.end, speaker: s.speaker! })),
          { collar },
        ),
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return out;
}
