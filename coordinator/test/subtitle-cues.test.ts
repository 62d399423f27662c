import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_CUE_LIMITS, buildCues, wrapLines, type CueLimits } from '../src/speech/jobs/subtitle-cues.js';
import { transcriptSrt, transcriptVtt, type DownloadTranscript } from '../src/speech/jobs/transcript-formats.js';
import { cueViolations as violations, cueWords, readCues as readBack, spokenWords as monologue } from '../../test/support/subtitles.js';

/**
 * The cue builder against limits computed from the rendered SRT and WebVTT as a third-party parser
 * reads them back (test/support/subtitles.ts), not from the module's own figures.
 */

const transcript = (segments: DownloadTranscript['segments'], speakerLabels: Record<string, string> = {}): DownloadTranscript => ({
  jobId: 1,
  title: 'test',
  language: 'en',
  model: 'm',
  pass: 1,
  status: 'completed',
  durationSeconds: null,
  transcribedAt: null,
  transcriptText: null,
  segments,
  speakerLabels,
  turns: null,
});

describe('subtitle cues', () => {
  it('wraps into balanced lines at word boundaries and refuses what cannot fit', () => {
    const words = 'the quick brown fox jumps over the lazy dog and runs far away into the woods'.split(' ');
    const lines = wrapLines(words, { maxChars: 42, maxLines: 2 })!;
    expect(lines).toHaveLength(2);
    expect(lines.join(' ')).toBe(words.join(' '));
    expect(Math.abs(lines[0]!.length - lines[1]!.length)).toBeLessThanOrEqual(8);
    expect(wrapLines(['short', 'line'], { maxChars: 42, maxLines: 2 })).toEqual(['short line']);
    expect(wrapLines(words, { maxChars: 20, maxLines: 2 })).toBeNull();
    // the speaker prefix takes room on the first line
    expect(wrapLines(['a'.repeat(30), 'b'.repeat(5)], { maxChars: 42, maxLines: 2 }, 10)).toEqual(['a'.repeat(30), 'b'.repeat(5)]);
  });

  it('cuts a 68-second monologue into cues within every limit', () => {
    const words = monologue(7, 68.9);
    const t = transcript([{ start: 0, end: 68.9, text: words.map((w) => w.text).join(' '), speaker: 'S1', words }], { S1: 'Anna' });
    for (const text of [transcriptSrt(t), transcriptVtt(t)]) {
      const cues = readBack(text);
      expect(cues.length).toBeGreaterThan(10);
      expect(violations(cues, DEFAULT_CUE_LIMITS)).toEqual([]);
    }
    // every word is shown once, in order
    const shown = readBack(transcriptVtt(t)).flatMap(cueWords);
    expect(shown).toEqual(words.map((w) => w.text));
    // the speaker is named once in SRT (one turn), on every cue in WebVTT
    expect(transcriptSrt(t).match(/Anna: /g)).toHaveLength(1);
    expect(transcriptVtt(t).match(/<v Anna>/g)).toHaveLength(readBack(transcriptVtt(t)).length);
  });

  it('breaks at a sentence end before clause punctuation and a pause', () => {
    const w = (text: string, start: number) => ({ text, start, end: start + 0.25 });
    const words = [
      w('one', 0),
      w('two', 0.3),
      w('three', 0.6),
      w('four.', 0.9),
      w('five', 1.5),
      w('six,', 1.8),
      w('seven', 2.1),
      w('eight', 2.9),
      w('nine', 3.2),
      w('ten', 3.5),
      w('eleven', 3.8),
      w('twelve', 4.1),
      w('thirteen', 4.4),
    ];
    const cues = buildCues([{ start: 0, end: 4.7, text: '', speakerKey: null, speakerName: null, words }], { ...DEFAULT_CUE_LIMITS, maxChars: 20 });
    expect(cues[0]!.lines.join(' ')).toBe('one two three four.');
  });

  it('never lets a cue cross a change of speaker, and marks each change', () => {
    const a = monologue(1, 9, 0);
    const b = [{ start: 9.3, end: 9.6, text: 'Yes.' }];
    const c = monologue(3, 5, 9.7);
    const segments = [
      { start: 0, end: 9, text: '', speaker: 'S1', words: a },
      { start: 9.3, end: 9.6, text: 'Yes.', speaker: 'S2', words: b },
      { start: 9.7, end: 15, text: '', speaker: 'S1', words: c },
    ];
    const t = transcript(segments, { S2: 'Bo' });
    for (const cue of readBack(transcriptVtt(t))) {
      const speakers = new Set(cueWords(cue).map((x) => (x === 'Yes.' ? 'S2' : 'S1')));
      expect(speakers.size).toBe(1);
    }
    const srt = transcriptSrt(t);
    expect(srt.match(/Speaker 1: /g)).toHaveLength(2);
    expect(srt.match(/Bo: Yes\./g)).toHaveLength(1);
    expect(violations(readBack(srt), DEFAULT_CUE_LIMITS)).toEqual([]);
  });

  it('splits a segment without word times by times proportional to characters', () => {
    const text =
      'This is a long segment without any word times, as older passes and whisper without words store them. It goes on for a while longer to fill the time.';
    const cues = buildCues([{ start: 10, end: 22, text, speakerKey: null, speakerName: null }]);
    expect(cues.length).toBeGreaterThan(1);
    expect(cues[0]!.start).toBe(10);
    expect(cues.map((c) => c.lines.join(' ')).join(' ')).toBe(text);
    expect(cues.at(-1)!.end).toBeLessThanOrEqual(22 + DEFAULT_CUE_LIMITS.maxSeconds);
  });

  it('keeps a short cue on screen for a second and readable where the silence allows', () => {
    const cues = buildCues([
      { start: 1, end: 1.3, text: 'Hello there friend.', speakerKey: null, speakerName: null },
      { start: 6, end: 6.4, text: 'Bye.', speakerKey: null, speakerName: null },
    ]);
    expect(cues[0]!.end - cues[0]!.start).toBeCloseTo(1, 3);
    expect(cues[1]!.end - cues[1]!.start).toBeCloseTo(1, 3);
  });

  it('holds the limits set per download', () => {
    const words = monologue(11, 40);
    const limits: CueLimits = { ...DEFAULT_CUE_LIMITS, maxChars: 32, maxLines: 1, maxSeconds: 4 };
    const t = transcript([{ start: 0, end: 40, text: '', speaker: null, words }]);
    expect(violations(readBack(transcriptSrt(t, limits)), limits)).toEqual([]);
  });

  it('holds the limits on any layout of segments, words and speakers (property)', () => {
    const word = fc.record({
      gap: fc.double({ min: -0.5, max: 3, noNaN: true }),
      dur: fc.double({ min: 0, max: 1.5, noNaN: true }),
      text: fc.stringMatching(/^[a-z]{1,12}[.,?]?$/),
    });
    const segment = fc.record({
      speaker: fc.constantFrom('S1', 'S2', 'S3', null),
      words: fc.array(word, { minLength: 1, maxLength: 40 }),
      timed: fc.boolean(),
    });
    fc.assert(
      fc.property(
        fc.array(segment, { minLength: 1, maxLength: 12 }),
        fc.integer({ min: 20, max: 60 }),
        fc.integer({ min: 1, max: 3 }),
        (segs, maxChars, maxLines) => {
          let t = 0;
          const segments = segs.map((s) => {
            const words = s.words.map((w) => {
              t = Math.max(0, t + w.gap);
              const out = { start: t, end: t + w.dur, text: w.text };
              t += w.dur;
              return out;
            });
            return {
              start: words[0]!.start,
              end: words.at(-1)!.end,
              text: words.map((w) => w.text).join(' '),
              speaker: s.speaker,
              words: s.timed ? words : null,
            };
          });
          const limits = { ...DEFAULT_CUE_LIMITS, maxChars, maxLines };
          const doc = transcript(segments);
          const cues = readBack(transcriptSrt(doc, limits));
          expect(violations(cues, limits)).toEqual([]);
          const shown = cues.flatMap(cueWords);
          expect(shown.join(' ')).toBe(segments.map((s) => s.text).join(' '));
        },
      ),
      { numRuns: 300 },
    );
  });
});
