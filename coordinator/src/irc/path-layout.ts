/**
 * Channel and day from where a log file lies: `--path` patterns (`{channel}/{yyyy}/{mm}/{dd}.log`)
 * and the common layouts recognised without one.
 *
 * A pattern is matched against the end of a file's path, one `/`-separated segment per segment:
 *   {channel}  a channel or query name (one segment or part of one)
 *   {network}  any text, not used
 *   {yyyy} {mm} {dd}   year, month, day (each must agree where it occurs twice)
 *   {date}     YYYY-MM-DD        {yyyymmdd}  YYYYMMDD
 *   *          any text within a segment
 */
import { isValidDate } from './parsers/common.js';
import type { FileNameInfo } from './parsers/types.js';

const TOKENS: Record<string, string> = {
  channel: '[^/]+?',
  network: '[^/]+?',
  yyyy: '\\d{4}',
  mm: '\\d{2}',
  dd: '\\d{2}',
  date: '\\d{4}-\\d{2}-\\d{2}',
  yyyymmdd: '\\d{8}',
};

export interface PathPattern {
  pattern: string;
  /** Channel and day of a path, or null when the path does not fit; the day null when the pattern names none. */
  match(filePath: string): FileNameInfo | null;
  /** Whether the pattern names the channel. */
  hasChannel: boolean;
  hasDate: boolean;
}

/** Compiles a `--path` pattern; throws an Error naming what is wrong. */
export function compilePathPattern(pattern: string): PathPattern {
  const p = pattern.replace(/\\/g, '/').replace(/^\.?\/+/, '');
  if (!p) throw new Error('the path pattern is empty');
  const names: string[] = [];
  let re = '';
  let i = 0;
  while (i < p.length) {
    const ch = p[i]!;
    if (ch === '{') {
      const end = p.indexOf('}', i);
      const name = end < 0 ? '' : p.slice(i + 1, end);
      if (!(name in TOKENS))
        throw new Error(
          `unknown placeholder {${name}} in "${pattern}"; placeholders: ${Object.keys(TOKENS)
            .map((t) => `{${t}}`)
            .join(' ')}`,
        );
      names.push(name);
      re += `(${TOKENS[name]})`;
      i = end + 1;
    } else if (ch === '*') {
      re += '[^/]*';
      i += 1;
    } else {
      re += ch.replace(/[.+?^$()|[\]\\]/g, '\\$&');
      i += 1;
    }
  }
  const hasChannel = names.includes('channel');
  const hasDate = names.includes('date') || names.includes('yyyymmdd') || ['yyyy', 'mm', 'dd'].every((n) => names.includes(n));
  if (!hasDate && names.some((n) => n === 'yyyy' || n === 'mm' || n === 'dd'))
    throw new Error(`"${pattern}" names part of a day: give {yyyy}, {mm} and {dd} together`);
  if (!hasChannel && !hasDate) throw new Error(`"${pattern}" names neither {channel} nor a day`);
  const regex = new RegExp(`(?:^|/)${re}$`);
  return {
    pattern,
    hasChannel,
    hasDate,
    match(filePath) {
      const m = regex.exec(filePath.replace(/\\/g, '/'));
      if (!m) return null;
      const seen = new Map<string, string>();
      for (let k = 0; k < names.length; k += 1) {
        const name = names[k]!;
        const value = m[k + 1]!;
        const before = seen.get(name);
        if (before !== undefined && before !== value) return null;
        seen.set(name, value);
      }
      let date: string | null = null;
      if (seen.has('date')) date = seen.get('date')!;
      else if (seen.has('yyyymmdd')) {
        const d = seen.get('yyyymmdd')!;
        date = `${d.slice(0, 4)}-${d.slice(4, 6)}-${d.slice(6, 8)}`;
      } else if (seen.has('yyyy')) date = `${seen.get('yyyy')}-${seen.get('mm')}-${seen.get('dd')}`;
      if (date !== null && !isValidDate(date)) return null;
      if (date !== null && seen.has('yyyy') && !date.startsWith(seen.get('yyyy')!)) return null;
      return { channel: seen.get('channel') ?? null, date };
    },
  };
}

const EXT = ['.log', '.txt', '.log.txt'];
/**
 * Layouts recognised without `--path`, tried in order when the format's own file naming does not
 * fit. `{channel}` in these only counts when the folder is named like a channel (`#chan`, `&chan`);
 * otherwise the channel must come from `--channel`.
 */
export const COMMON_LAYOUTS: readonly PathPattern[] = [
  '{channel}/{yyyy}/{mm}/{dd}',
  '{channel}/{yyyy}/{mm}/{yyyy}-{mm}-{dd}',
  '{channel}/{yyyy}/{yyyy}-{mm}-{dd}',
  '{channel}/{yyyy}-{mm}-{dd}',
  '{channel}/{yyyy}{mm}{dd}',
  '{yyyy}/{mm}/{channel}_{yyyy}{mm}{dd}',
  '{yyyy}/{mm}/{channel}.{yyyy}-{mm}-{dd}',
  '{yyyy}/{mm}/{dd}',
  '{yyyy}/{mm}/{yyyy}-{mm}-{dd}',
  '{yyyy}/{yyyy}-{mm}-{dd}',
  '{yyyy}-{mm}-{dd}',
  '{yyyy}{mm}{dd}',
].flatMap((base) => EXT.map((ext) => compilePathPattern(`${base}${ext}`)));

/** Channel and day from the first common layout the path fits (a `{channel}` that does not look like a channel is dropped). */
export function matchCommonLayout(filePath: string): (FileNameInfo & { layout: string }) | null {
  for (const layout of COMMON_LAYOUTS) {
    const m = layout.match(filePath);
    if (!m) continue;
    const channel = m.channel !== null && /^[#&+!]/.test(m.channel) ? m.channel : null;
    if (layout.hasChannel && channel === null) continue;
    return { channel, date: m.date, layout: layout.pattern };
  }
  return null;
}
