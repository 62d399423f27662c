import { describe, expect, it } from 'vitest';
import { presentDiarization, type DiarizationRecord, type StoredTurn } from '../src/speech/jobs/speakers.js';
import { transcriptRttm } from '../src/speech/jobs/transcript-formats.js';
import { splitSegmentsBySpeaker, speakerForWord, type Word } from '../src/speech/jobs/word-speakers.js';

const w = (text: string, start: number, end: number): Word => ({ text, start, end });

describe('word speakers', () => {
  const turns: StoredTurn[] = [
    [0, 2, 0],
    [2, 5, 1],
  ];

  it('gives a word straddling a turn change the speaker it overlaps most', () => {
    expect(speakerForWord(w('across', 1.7, 2.1), turns)).toBe('S1');
    expect(speakerForWord(w('across', 1.9, 2.4), turns)).toBe('S2');
  });

  it('gives a word in no turn the nearest turn', () => {
    const gappy: StoredTurn[] = [
      [0, 1, 0],
      [4, 5, 1],
    ];
    expect(speakerForWord(w('late', 1.2, 1.5), gappy)).toBe('S1');
    expect(speakerForWord(w('early', 3.2, 3.6), gappy)).toBe('S2');
    expect(speakerForWord(w('after', 6, 6.5), gappy)).toBe('S2');
    expect(speakerForWord(w('before', -1, -0.5), [[2, 3, 1]])).toBe('S2');
  });

  it('takes the speaker with most overlap where turns overlap', () => {
    const overlapping: StoredTurn[] = [
      [0, 3, 0],
      [1.5, 4, 1],
    ];
    expect(speakerForWord(w('both', 1.6, 2.0), overlapping)).toBe('S1'); // a tie: the first
    expect(speakerForWord(w('both', 2.5, 3.5), overlapping)).toBe('S2');
    expect(speakerForWord(w('one', 0.5, 1.0), overlapping)).toBe('S1');
  });

  it('splits a segment where its words change speaker', () => {
    const out = splitSegmentsBySpeaker(
      [
        {
          start: 0.2,
          end: 3.9,
          text: 'Hello there. Hi, how are you?',
          words: [w('Hello', 0.3, 0.7), w('there.', 0.8, 1.9), w('Hi,', 2.2, 2.5), w('how', 2.6, 2.8), w('are', 2.9, 3.1), w('you?', 3.2, 3.8)],
        },
      ],
      turns,
    );
    expect(out.map((s) => [s.start, s.end, s.text, s.speaker, s.split, s.source])).toEqual([
      [0.2, 1.9, 'Hello there.', 'S1', true, 0],
      [2.2, 3.9, 'Hi, how are you?', 'S2', true, 0],
    ]);
    expect(out[1]!.words).toHaveLength(4);
  });

  it('keeps a one-speaker segment whole, with its own text', () => {
    const out = splitSegmentsBySpeaker([{ start: 0, end: 1.5, text: ' Hello, world ', words: [w('Hello,', 0.1, 0.5), w('world', 0.6, 1.4)] }], turns);
    expect(out).toEqual([
      { start: 0, end: 1.5, text: ' Hello, world ', speaker: 'S1', words: [w('Hello,', 0.1, 0.5), w('world', 0.6, 1.4)], source: 0, split: false },
    ]);
  });

  it('labels segments without words (or with empty words) per segment', () => {
    const out = splitSegmentsBySpeaker(
      [
        { start: 0, end: 2.5, text: 'no words', words: null },
        { start: 1.5, end: 4, text: 'empty words', words: [] },
        { start: 4, end: 4.5, text: 'blank words', words: [w('  ', 4, 4.2)] },
      ],
      turns,
    );
    expect(out.map((s) => [s.text, s.speaker, s.split])).toEqual([
      ['no words', 'S1', false],
      ['empty words', 'S2', false],
      ['blank words', 'S2', false],
    ]);
  });

  it('labels nothing without turns, and splits back and forth (A B A)', () => {
    expect(splitSegmentsBySpeaker([{ start: 0, end: 1, text: 'x', words: [w('x', 0, 1)] }], [])[0]!.speaker).toBeNull();
    const abA: StoredTurn[] = [
      [0, 1, 0],
      [1, 2, 1],
      [2, 3, 0],
    ];
    const out = splitSegmentsBySpeaker(
      [{ start: 0, end: 3, text: 'a b c d', words: [w('a', 0.1, 0.5), w('b', 1.1, 1.5), w('c', 1.6, 1.9), w('d', 2.2, 2.9)] }],
      abA,
    );
    expect(out.map((s) => [s.text, s.speaker])).toEqual([
      ['a', 'S1'],
      ['b c', 'S2'],
      ['d', 'S1'],
    ]);
    expect(out.at(-1)!.end).toBe(3);
  });
});

describe('presentDiarization', () => {
  const record = (turns: StoredTurn[]): DiarizationRecord => ({
    requested: true,
    state: 'completed',
    engine: 'x',
    speaker_count: 3,
    error: null,
    updated_at: null,
    rerun_requested_at: null,
    turns,
  });

  it('lists and counts only the speakers who own labelled speech', () => {
    const d = presentDiarization(
      record([
        [0, 1, 0],
        [1, 2, 1],
        [2, 3, 2],
      ]),
      {},
      [
        { speaker: 'S1', segments: 2, seconds: 1.5 },
        { speaker: 'S3', segments: 1, seconds: 1 },
      ],
    );
    expect(d.speaker_count).toBe(2);
    expect(d.speakers.map((s) => [s.key, s.name, s.segment_count])).toEqual([
      ['S1', 'Speaker 1', 2],
      ['S3', 'Speaker 3', 1],
    ]);
  });
});

describe('transcriptRttm', () => {
  it('writes one SPEAKER line per turn, sorted, with the job keys and no whitespace in the file id', () => {
    expect(
      transcriptRttm('my talk', [
        [2.5, 4.25, 1],
        [0, 2.5, 0],
        [5, 5, 0], // empty: left out
      ]),
    ).toBe('SPEAKER my_talk 1 0.000 2.500 <NA> <NA> S1 <NA> <NA>\nSPEAKER my_talk 1 2.500 1.750 <NA> <NA> S2 <NA> <NA>\n');
    expect(transcriptRttm('x', [])).toBe('');
  });
});
