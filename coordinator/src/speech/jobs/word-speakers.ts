import { speakerForSegment, type StoredTurn } from './speakers.js';
import { fitWords } from './timeline.js';

/**
 * Word-level speaker labelling: each word of a segment takes the speaker whose turns overlap it
 * most (the nearest turn when none does), and a segment whose words change speaker is split there,
 * so no labelled segment spans two speakers. Pure functions; the repository stores the result.
 */

/** One recognised word, times in seconds from the start of the audio. */
export interface Word {
  start: number;
  end: number;
  text: string;
}

/** A segment as the worker reported it (its `words` when the engine gave word times). */
export interface SourceSegment {
  start: number;
  end: number;
  text: string;
  words: readonly Word[] | null;
}

/** One labelled piece of a source segment: the whole segment, or the words of one speaker in it. */
export interface SplitSegment {
  start: number;
  end: number;
  text: string;
  speaker: string | null;
  /** The words of this piece; null when the source segment had none. */
  words: Word[] | null;
  /** Index of the source segment this piece comes from. */
  source: number;
  /** True when the source segment was cut into more than one piece. */
  split: boolean;
}

/** The speaker of one word: most overlap with the turns, else the nearest turn (turns sorted by start). */
export const speakerForWord = (word: Word, turns: readonly StoredTurn[]): string | null => speakerForSegment(word.start, word.end, turns);

/** Words joined as text: each trimmed, empty ones dropped, one space between. */
export function wordsText(words: readonly Word[]): string {
  return words
    .map((w) => w.text.trim())
    .filter(Boolean)
    .join(' ');
}

/**
 * Labels a pass: segments without words take the per-segment speaker (speakerForSegment);
 * segments with words are cut wherever consecutive words change speaker. A segment that stays
 * with one speaker keeps its own text and times; the pieces of a cut segment read their words and
 * run from their first word's start to their last word's end, except that the first piece starts
 * with the segment and the last one ends with it. The words are first fitted inside their segment
 * in text order (fitWords): a recogniser's word time that goes backwards or lies outside the
 * segment would otherwise make pieces cross each other or the neighbouring segments. So the pieces
 * of a segment stay inside it, in order; a pass that is one timeline (fitTimeline) stays one.
 * Turns need not be sorted.
 */
export function splitSegmentsBySpeaker(segments: readonly SourceSegment[], turns: readonly StoredTurn[]): SplitSegment[] {
  const sorted = [...turns].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const out: SplitSegment[] = [];
  segments.forEach((seg, source) => {
    const segEnd = Math.max(seg.start, seg.end);
    const fitted = seg.words ? fitWords(seg.words, seg.start, segEnd) : null;
    const words = fitted?.filter((w) => w.text.trim()) ?? [];
    const whole = (speaker: string | null): SplitSegment => ({
      start: seg.start,
      end: segEnd,
      text: seg.text,
      speaker,
      words: fitted,
      source,
      split: false,
    });
    if (!words.length || !sorted.length) {
      out.push(whole(speakerForSegment(seg.start, segEnd, sorted)));
      return;
    }
    const runs: Array<{ speaker: string | null; words: Word[] }> = [];
    for (const w of words) {
      const speaker = speakerForWord(w, sorted);
      const last = runs.at(-1);
      if (last && last.speaker === speaker) last.words.push(w);
      else runs.push({ speaker, words: [w] });
    }
    if (runs.length === 1) {
      out.push(whole(runs[0]!.speaker));
      return;
    }
    runs.forEach((run, i) => {
      const start = i === 0 ? seg.start : run.words[0]!.start;
      const end = i === runs.length - 1 ? segEnd : run.words.at(-1)!.end;
      out.push({ start, end, text: wordsText(run.words), speaker: run.speaker, words: run.words, source, split: true });
    });
  });
  return out;
}
