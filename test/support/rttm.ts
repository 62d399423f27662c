/** One RTTM speaker turn: seconds, and the speaker label of its line. */
export interface RttmTurn {
  file: string;
  start: number;
  end: number;
  speaker: string;
}

/**
 * Parses RTTM as the coordinator writes it, strictly: every non-empty line is
 * `SPEAKER <file> 1 <start> <dur> <NA> <NA> <speaker> <NA> <NA>` (ten fields), with finite, non-negative
 * times. Throws on anything else, naming the line.
 */
export function parseRttm(text: string): RttmTurn[] {
  const out: RttmTurn[] = [];
  for (const [n, line] of text.split('\n').entries()) {
    if (!line.trim()) continue;
    const f = line.split(' ');
    const start = Number(f[3]);
    const dur = Number(f[4]);
    const ok =
      f.length === 10 &&
      f[0] === 'SPEAKER' &&
      !!f[1] &&
      f[2] === '1' &&
      Number.isFinite(start) &&
      Number.isFinite(dur) &&
      start >= 0 &&
      dur >= 0 &&
      f[5] === '<NA>' &&
      f[6] === '<NA>' &&
      !!f[7] &&
      f[8] === '<NA>' &&
      f[9] === '<NA>';
    if (!ok) throw new Error(`RTTM line ${n + 1}: cannot parse "${line}"`);
    out.push({ file: f[1]!, start, end: start + dur, speaker: f[7]! });
  }
  return out;
}

/** The speaker of the turn that overlaps [start, end] most (the nearest turn when none does); null without turns. */
export function rttmSpeakerAt(turns: readonly RttmTurn[], start: number, end: number): string | null {
  let best: { speaker: string; overlap: number; gap: number } | null = null;
  for (const t of turns) {
    const overlap = Math.min(end, t.end) - Math.max(start, t.start);
    const gap = overlap > 0 ? 0 : Math.max(t.start - end, start - t.end, 0);
    if (!best || overlap > best.overlap || (overlap <= 0 && best.overlap <= 0 && gap < best.gap)) best = { speaker: t.speaker, overlap, gap };
  }
  return best?.speaker ?? null;
}
