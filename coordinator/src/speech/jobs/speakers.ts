import type { DiarizationState } from '@sonar/shared';
import type { StatedSpeakers } from './entities.js';

/**
 * Speakers of one transcription pass: how a worker's turns become segment labels, how speakers are
 * named, and the speaker-aware transcript. Pure functions, shared by the job page, the API
 * presenter, callbacks, reports, share pages and revisions.
 *
 * A worker numbers speakers 0..k-1; the coordinator stores them as keys `S1`..`Sk` on segments and
 * in `diarization_turns` (`[[start, end, speakerIndex], ...]`). The owner may name a key in the
 * speaker editor (`speaker_labels`: key → name); unnamed keys read "Speaker N".
 */

/** One diarization turn as stored: start and end in seconds, the worker's speaker index. */
export type StoredTurn = [start: number, end: number, speaker: number];

export type SpeakerLabels = Record<string, string>;

export const speakerKey = (index: number) => `S${index + 1}`;

const KEY = /^S([1-9][0-9]{0,3})$/;
export const isSpeakerKey = (key: string) => KEY.test(key);

/** The name people see for a speaker key: the owner's name for it, else "Speaker N". */
export function speakerName(key: string, labels: SpeakerLabels): string {
  const named = labels[key]?.trim();
  if (named) return named;
  const m = KEY.exec(key);
  return m ? `Speaker ${m[1]}` : key;
}

/**
 * The speaker of a segment: the turn that overlaps it most; a segment no turn overlaps (speech the
 * VAD missed) takes the nearest turn, so every segment of a diarized pass has a speaker. Turns must
 * be sorted by start. Null only when there are no turns at all.
 */
export function speakerForSegment(start: number, end: number, turns: readonly StoredTurn[]): string | null {
  if (turns.length === 0) return null;
  const overlap = new Map<number, number>();
  let nearest = turns[0]![2];
  let nearestGap = Infinity;
  for (const [s, e, spk] of turns) {
    if (s >= end) {
      // turns are sorted: this is the first one after the segment, and the last one to look at
      if (s - end < nearestGap) nearest = spk;
      break;
    }
    const o = Math.min(end, e) - Math.max(start, s);
    if (o > 0) overlap.set(spk, (overlap.get(spk) ?? 0) + o);
    else {
      const gap = start - e;
      if (gap < nearestGap) [nearest, nearestGap] = [spk, gap];
    }
  }
  let best: number | null = null;
  let bestOverlap = 0;
  for (const [spk, o] of overlap) if (o > bestOverlap) [best, bestOverlap] = [spk, o];
  return speakerKey(best ?? nearest);
}

export interface TranscriptSegment {
  start: number;
  end: number;
  text: string;
  speaker: string | null;
}

/**
 * The transcript as speaker turns: consecutive segments of one speaker form a paragraph headed by
 * the speaker's name and start time ("[00:01:05] Alice: ..."). Null when no segment has a speaker.
 */
export function speakerAwareTranscript(segments: readonly TranscriptSegment[], labels: SpeakerLabels): string | null {
  if (!segments.some((s) => s.speaker)) return null;
  const paragraphs: string[] = [];
  let current: { speaker: string | null; start: number; parts: string[] } | null = null;
  const flush = () => {
    if (!current) return;
    const who = current.speaker ? speakerName(current.speaker, labels) : 'Unknown speaker';
    paragraphs.push(`[${clock(current.start)}] ${who}: ${current.parts.join(' ')}`);
  };
  for (const s of segments) {
    const text = s.text.trim();
    if (!text) continue;
    if (current && current.speaker === s.speaker) current.parts.push(text);
    else {
      flush();
      current = { speaker: s.speaker, start: s.start, parts: [text] };
    }
  }
  flush();
  return paragraphs.join('\n\n');
}

const clock = (seconds: number) => {
  const t = Math.max(0, Math.floor(seconds));
  return [Math.floor(t / 3600), Math.floor((t % 3600) / 60), t % 60].map((n) => String(n).padStart(2, '0')).join(':');
};

/** The diarization of a pass as stored (speech_jobs columns, or a revision's `diarization` JSON). */
export interface DiarizationRecord {
  requested: boolean;
  /** The speaker count stated for it; null or absent: none (the diarizer counted by itself). */
  requested_speakers?: StatedSpeakers | null;
  state: DiarizationState;
  engine: string | null;
  speaker_count: number | null;
  error: string | null;
  updated_at: string | null;
  rerun_requested_at: string | null;
  turns: StoredTurn[] | null;
}

/** How much of a pass each speaker has: labelled segments and their seconds. */
export interface SpeakerStat {
  speaker: string;
  segments: number;
  seconds: number;
}

export function speakerStats(segments: readonly TranscriptSegment[]): SpeakerStat[] {
  const stats = new Map<string, SpeakerStat>();
  for (const s of segments) {
    // as the transcript shows them: a segment of only whitespace is no segment (transitions/segment-count.ts)
    if (!s.speaker || !/\S/.test(s.text)) continue;
    const st = stats.get(s.speaker) ?? { speaker: s.speaker, segments: 0, seconds: 0 };
    st.segments += 1;
    st.seconds += Math.max(0, s.end - s.start);
    stats.set(s.speaker, st);
  }
  return [...stats.values()];
}

/**
 * The `diarization` object on the wire: state, engine, and each speaker with its name and share of
 * the talk. Only speakers who own speech in the labelled transcript are listed and counted (a turn
 * whose words all went to other speakers names nobody); keys keep the worker's numbering.
 */
export function presentDiarization(d: DiarizationRecord, labels: SpeakerLabels, stats: readonly SpeakerStat[]) {
  const speakers = stats
    .filter((s) => s.segments > 0)
    .sort((a, b) => Number(a.speaker.slice(1)) - Number(b.speaker.slice(1)))
    .map((s) => ({
      key: s.speaker,
      name: speakerName(s.speaker, labels),
      renamed: Boolean(labels[s.speaker]?.trim()),
      segment_count: s.segments,
      seconds: Math.round(s.seconds * 10) / 10,
    }));
  return {
    requested: d.requested,
    requested_speakers: d.requested_speakers ?? null,
    state: d.state,
    engine: d.engine,
    speaker_count: d.state === 'completed' ? speakers.length : null,
    speakers,
    labelled_segment_count: stats.reduce((n, s) => n + s.segments, 0),
    error: d.error,
    updated_at: d.updated_at,
    rerun_pending: d.rerun_requested_at !== null && (d.state === 'pending' || d.state === 'running'),
  };
}

/** A stated speaker count in words: "exactly 3", "2 to 4", "at least 2", "at most 3". */
export function statedSpeakersText(s: StatedSpeakers): string {
  if (s.num_speakers !== undefined) return `exactly ${s.num_speakers}`;
  if (s.min_speakers !== undefined && s.max_speakers !== undefined) return `${s.min_speakers} to ${s.max_speakers}`;
  if (s.min_speakers !== undefined) return `at least ${s.min_speakers}`;
  return `at most ${s.max_speakers ?? '?'}`;
}

/**
 * Speaker turns read from the segments of a pass (their words' times where they have them): for
 * the RTTM of a pass its owner corrected, whose speakers are the segments' and no longer the
 * diarizer's. Consecutive stretches of one speaker join into one turn; sorted by start.
 */
export function turnsFromSegments(
  segments: ReadonlyArray<{
    startSeconds: number;
    endSeconds: number;
    text: string;
    speaker: string | null;
    words?: Array<{ start: number; end: number }> | null;
  }>,
): StoredTurn[] {
  const turns: StoredTurn[] = [];
  for (const s of segments) {
    const m = s.speaker ? KEY.exec(s.speaker) : null;
    if (!m || !s.text.trim()) continue;
    const index = Number(m[1]) - 1;
    const spans = s.words?.length ? s.words.map((w) => [w.start, w.end] as const) : [[s.startSeconds, s.endSeconds] as const];
    for (const [start, end] of spans) {
      const last = turns.at(-1);
      if (last && last[2] === index && start - last[1] < 0.5) last[1] = Math.max(last[1], end);
      else turns.push([start, end, index]);
    }
  }
  return turns.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
}
