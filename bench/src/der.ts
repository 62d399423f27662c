// Diarization error rate, scored as NIST md-eval does: within the UEM's scored regions, minus a
// forgiveness collar around every reference segment boundary, each reference speaker counts
// (overlapped speech counts once per speaker), and reference and hypothesis speakers are mapped
// one-to-one to maximise their common time (Hungarian assignment).
//   missed       = Σ max(0, Nref − Nhyp) · dt
//   false alarm  = Σ max(0, Nhyp − Nref) · dt
//   confusion    = Σ (min(Nref, Nhyp) − Ncorrect) · dt
//   DER          = (missed + false alarm + confusion) / Σ Nref · dt

export interface Segment {
  start: number;
  end: number;
  speaker: string;
}

/** Scored time ranges of one file. */
export interface UemRange {
  start: number;
  end: number;
}

export interface DerResult {
  /** Seconds of reference speech, each speaker counted (overlap counts twice). */
  total: number;
  missed: number;
  falseAlarm: number;
  confusion: number;
  /** (missed + falseAlarm + confusion) / total; 0 when there is no reference speech and no error. */
  der: number;
}

/** Parses RTTM `SPEAKER <file> <chan> <start> <dur> <NA> <NA> <speaker> ...` lines, grouped by file. */
export function parseRttm(text: string): Map<string, Segment[]> {
  const out = new Map<string, Segment[]>();
  for (const [n, line] of text.split('\n').entries()) {
    const f = line.trim().split(/\s+/);
    if (f[0] !== 'SPEAKER') continue;
    const start = Number(f[3]);
    const dur = Number(f[4]);
    const speaker = f[7];
    if (!f[1] || !Number.isFinite(start) || !Number.isFinite(dur) || dur < 0 || !speaker) throw new Error(`RTTM line ${n + 1}: cannot parse "${line}"`);
    const list = out.get(f[1]) ?? [];
    list.push({ start, end: start + dur, speaker });
    out.set(f[1], list);
  }
  return out;
}

/** Parses UEM `<file> <chan> <start> <end>` lines, grouped by file. */
export function parseUem(text: string): Map<string, UemRange[]> {
  const out = new Map<string, UemRange[]>();
  for (const [n, line] of text.split('\n').entries()) {
    const f = line.trim().split(/\s+/);
    if (!f[0] || f[0].startsWith(';')) continue;
    const start = Number(f[2]);
    const end = Number(f[3]);
    if (!Number.isFinite(start) || !Number.isFinite(end) || end < start) throw new Error(`UEM line ${n + 1}: cannot parse "${line}"`);
    const list = out.get(f[0]) ?? [];
    list.push({ start, end });
    out.set(f[0], list);
  }
  return out;
}

/** Union of ranges, sorted, overlapping and touching ranges merged. */
function union(ranges: UemRange[]): UemRange[] {
  const sorted = ranges.filter((r) => r.end > r.start).sort((a, b) => a.start - b.start);
  const out: UemRange[] = [];
  for (const r of sorted) {
    const last = out[out.length - 1];
    if (last && r.start <= last.end) last.end = Math.max(last.end, r.end);
    else out.push({ ...r });
  }
  return out;
}

/** Per speaker, the union of their segments (md-eval merges a speaker's overlapping segments). */
function bySpeaker(segments: Segment[]): Map<string, UemRange[]> {
  const m = new Map<string, UemRange[]>();
  for (const s of segments) m.set(s.speaker, [...(m.get(s.speaker) ?? []), { start: s.start, end: s.end }]);
  for (const [k, v] of m) m.set(k, union(v));
  return m;
}

const inside = (ranges: UemRange[], t: number) => ranges.some((r) => t >= r.start && t < r.end);

/**
 * Scores one file. `uem` limits the scored time (undefined: from 0 to the last reference or
 * hypothesis end); `collar` seconds either side of each reference segment boundary are not scored.
 */
export function scoreDiarization(reference: Segment[], hypothesis: Segment[], opts: { uem?: UemRange[]; collar?: number } = {}): DerResult {
  const collar = opts.collar ?? 0.25;
  const ref = bySpeaker(reference);
  const hyp = bySpeaker(hypothesis);
  const lastEnd = Math.max(0, ...reference.map((s) => s.end), ...hypothesis.map((s) => s.end));
  const uem = union(opts.uem ?? [{ start: 0, end: lastEnd }]);
  const noScore = collar > 0 ? union([...ref.values()].flat().flatMap((r) => [r.start, r.end].map((t) => ({ start: t - collar, end: t + collar })))) : [];

  // Elementary intervals between every boundary; within one, who is active does not change.
  const cuts = new Set<number>();
  for (const list of [...ref.values(), ...hyp.values(), uem, noScore]) {
    for (const r of list) {
      cuts.add(r.start);
      cuts.add(r.end);
    }
  }
  const times = [...cuts].sort((a, b) => a - b);
  const refNames = [...ref.keys()];
  const hypNames = [...hyp.keys()];
  const overlap = refNames.map(() => new Float64Array(hypNames.length));
  const pieces: { dt: number; refs: number[]; hyps: number[] }[] = [];
  for (let i = 0; i + 1 < times.length; i++) {
    const a = times[i]!;
    const b = times[i + 1]!;
    const mid = (a + b) / 2;
    if (!inside(uem, mid) || inside(noScore, mid)) continue;
    const refs = refNames.flatMap((name, k) => (inside(ref.get(name)!, mid) ? [k] : []));
    const hyps = hypNames.flatMap((name, k) => (inside(hyp.get(name)!, mid) ? [k] : []));
    if (!refs.length && !hyps.length) continue;
    for (const r of refs) for (const h of hyps) overlap[r]![h]! += b - a;
    pieces.push({ dt: b - a, refs, hyps });
  }

  const mapping = assignMax(overlap.map((row) => [...row]));
  let total = 0;
  let missed = 0;
  let falseAlarm = 0;
  let confusion = 0;
  for (const { dt, refs, hyps } of pieces) {
    const nr = refs.length;
    const nh = hyps.length;
    const correct = refs.filter((r) => mapping[r] !== undefined && mapping[r] >= 0 && hyps.includes(mapping[r])).length;
    total += nr * dt;
    missed += Math.max(0, nr - nh) * dt;
    falseAlarm += Math.max(0, nh - nr) * dt;
    confusion += (Math.min(nr, nh) - correct) * dt;
  }
  const errors = missed + falseAlarm + confusion;
  return { total, missed, falseAlarm, confusion, der: total > 0 ? errors / total : errors > 0 ? Infinity : 0 };
}

/**
 * Maximum-weight one-to-one assignment of rows to columns (Hungarian algorithm with potentials,
 * O(n³), on the square matrix padded with zeros). Returns for each row its column, or -1.
 * Hand-written: about 40 lines, and the bench is not a workspace package with dependencies of its own.
 */
export function assignMax(weights: number[][]): number[] {
  const rows = weights.length;
  const cols = Math.max(0, ...weights.map((r) => r.length));
  const n = Math.max(rows, cols);
  if (!n) return [];
  const max = Math.max(0, ...weights.flat());
  // Minimise cost = max − weight over an n × n matrix (1-based arrays, as the classic formulation).
  const cost = (i: number, j: number) => max - (weights[i - 1]?.[j - 1] ?? 0);
  const u = new Float64Array(n + 1);
  const v = new Float64Array(n + 1);
  const p = new Int32Array(n + 1);
  const way = new Int32Array(n + 1);
  for (let i = 1; i <= n; i++) {
    p[0] = i;
    let j0 = 0;
    const minv = new Float64Array(n + 1).fill(Infinity);
    const used = new Uint8Array(n + 1);
    do {
      used[j0] = 1;
      const i0 = p[j0]!;
      let delta = Infinity;
      let j1 = 0;
      for (let j = 1; j <= n; j++) {
        if (used[j]) continue;
        const cur = cost(i0, j) - u[i0]! - v[j]!;
        if (cur < minv[j]!) {
          minv[j] = cur;
          way[j] = j0;
        }
        if (minv[j]! < delta) {
          delta = minv[j]!;
          j1 = j;
        }
      }
      for (let j = 0; j <= n; j++) {
        if (used[j]) {
          u[p[j]!]! += delta;
          v[j]! -= delta;
        } else minv[j]! -= delta;
      }
      j0 = j1;
    } while (p[j0] !== 0);
    do {
      const j1 = way[j0]!;
      p[j0] = p[j1]!;
      j0 = j1;
    } while (j0);
  }
  const result = new Array<number>(rows).fill(-1);
  for (let j = 1; j <= n; j++) {
    const i = p[j]!;
    if (i >= 1 && i <= rows && j <= cols && (weights[i - 1]?.[j - 1] ?? 0) > 0) result[i - 1] = j - 1;
  }
  return result;
}
