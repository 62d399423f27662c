/**
 * Pieces every format parser shares: per-line decoding (UTF-8, else Windows-1252), mIRC formatting
 * removal, netsplit recognition, day arithmetic for time-only formats, and the file-level passes
 * that group netsplit bursts, recognise the merge that follows, and find who a message addresses.
 */
import { isNetsplitReason, NetsplitTracker } from './netsplit.js';
import type { IrcEventType, ParsedEvent, ParsedFile, ParsedLine } from './types.js';

export { isNetsplitReason, NETMERGE_WINDOW_S } from './netsplit.js';

// eslint-disable-next-line no-control-regex -- mIRC colour and format codes are control characters (^B, ^C, ^D, ^O, ^V, …)
const FORMATTING = /\x03(?:\d{1,2}(?:,\d{1,2})?)?|\x04(?:[0-9a-fA-F]{6}(?:,[0-9a-fA-F]{6})?)?|[\x02\x0f\x11\x16\x1d\x1e\x1f]/g;

/** Removes mIRC colour (^C fg[,bg], ^D hex) and format codes (bold, italic, underline, reverse, …). */
export function stripFormatting(text: string): string {
  return text.replace(FORMATTING, '');
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
/** Windows-1252 for 0x80–0x9F (Node's 'windows-1252' decoder is plain ISO-8859-1 there); undefined bytes stay as C1 code points. */
const CP1252_HIGH =
  '\u20ac\u0081\u201a\u0192\u201e\u2026\u2020\u2021\u02c6\u2030\u0160\u2039\u0152\u008d\u017d\u008f' +
  '\u0090\u2018\u2019\u201c\u201d\u2022\u2013\u2014\u02dc\u2122\u0161\u203a\u0153\u009d\u017e\u0178';

function decodeCp1252(bytes: Uint8Array): string {
  let out = '';
  for (const b of bytes) out += b >= 0x80 && b < 0xa0 ? CP1252_HIGH.charAt(b - 0x80) : String.fromCharCode(b);
  return out;
}

/** UTF-8 when the bytes are valid UTF-8, otherwise Windows-1252 (the usual latin-1 superset). */
export function decodeLine(bytes: Uint8Array): string {
  // Most lines are ASCII: skip the decoder (it costs more than the scan).
  let ascii = true;
  for (let i = 0; i < bytes.length; i += 1) {
    if (bytes[i]! >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii) return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString('latin1');
  try {
    return utf8.decode(bytes);
  } catch {
    return decodeCp1252(bytes);
  }
}

export interface RawLine {
  /** 1-based */
  lineNo: number;
  /** Without the line ending (LF or CRLF). */
  raw: Buffer;
  /** Decoded on its own, so one mis-encoded line does not spoil its neighbours. A leading BOM is dropped. */
  text: string;
}

/** Non-empty lines of a file with their numbers, raw bytes and decoded text. */
export function* splitLines(buf: Buffer): Generator<RawLine> {
  let start = 0;
  let lineNo = 0;
  while (start < buf.length) {
    let end = buf.indexOf(0x0a, start);
    if (end < 0) end = buf.length;
    lineNo += 1;
    let raw = buf.subarray(start, end);
    start = end + 1;
    if (raw.length && raw[raw.length - 1] === 0x0d) raw = raw.subarray(0, raw.length - 1);
    if (raw.length === 0) continue;
    let text = decodeLine(raw);
    if (lineNo === 1 && text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    if (text.trim() === '') continue;
    yield { lineNo, raw: Buffer.from(raw), text };
  }
}

/** The first `n` non-empty decoded lines, for format detection. */
export function sampleLines(buf: Buffer, n = 50): string[] {
  const out: string[] = [];
  for (const l of splitLines(buf.subarray(0, 64 * 1024))) {
    out.push(l.text);
    if (out.length >= n) break;
  }
  return out;
}

/** `YYYY-MM-DD` plus `days`. */
export function addDays(date: string, days: number): string {
  const d = new Date(`${date}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() + days);
  return d.toISOString().slice(0, 10);
}

/** True for a real calendar day `YYYY-MM-DD`. */
export function isValidDate(date: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(date)) return false;
  const d = new Date(`${date}T00:00:00Z`);
  return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === date;
}

/**
 * `HH:MM[:SS]` → `HH:MM:SS`, or null when out of range. Second 60 (a leap second, `23:59:60`) is
 * kept in its minute and day as second 59: rows are stored to the second, and reading it as the
 * next minute would move a line stamped 23:59:60 to the next day.
 */
export function normalizeTime(hh: string, mm: string, ss: string | undefined): string | null {
  if (+hh > 23 || +mm > 59 || (ss !== undefined && +ss > 60)) return null;
  return `${hh.padStart(2, '0')}:${mm}:${ss === undefined ? '00' : +ss === 60 ? '59' : ss}`;
}

// eslint-disable-next-line no-control-regex -- the control characters are what is removed
const CONTROLS = /\x1b\[[0-?]*[ -/]*[@-~]|[\x00-\x08\x0a-\x1f\x7f]/g;

/**
 * Text as the archive stores it: without C0 control characters (NUL, BEL, ESC, …; an ANSI escape
 * sequence `ESC [ … m` goes whole) and DEL. PostgreSQL text cannot hold NUL, and the reader shows
 * none of the others (mIRC formatting codes are removed by the parsers, see stripFormatting). Tab
 * stays. `removed`: how many characters went.
 */
export function stripControls(text: string): { text: string; removed: number } {
  let removed = 0;
  const out = text.replace(CONTROLS, (m) => {
    removed += m.length;
    return '';
  });
  return { text: out, removed };
}

export const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
/** `Jan` / `January` → 1..12, or 0. */
export function monthNumber(name: string): number {
  return MONTHS.indexOf(name.slice(0, 3).toLowerCase()) + 1;
}

/**
 * Tracks the day for formats whose lines carry only a time of day. A time more than 12 hours
 * earlier than the one before means midnight passed without a marker (a day rollover); an
 * explicit marker (irssi's "Day changed") sets the day directly.
 */
export class DayClock {
  private lastSeconds: number;
  /** `lastTime`: the time of day of the line before the first one (a file read in pieces). */
  constructor(
    public date: string | null,
    lastTime?: string | null,
  ) {
    this.lastSeconds = lastTime ? secondsOfDay(lastTime) : -1;
  }

  set(date: string): void {
    this.date = date;
    this.lastSeconds = -1;
  }

  /** Full local time for `HH:MM:SS`, rolling the day over when the clock went backwards by more than 12 h. */
  at(time: string): string | null {
    if (!this.date) return null;
    const s = secondsOfDay(time);
    if (this.lastSeconds >= 0 && s < this.lastSeconds - 12 * 3600) this.date = addDays(this.date, 1);
    this.lastSeconds = s;
    return `${this.date} ${time}`;
  }
}

export const secondsOfDay = (t: string) => +t.slice(0, 2) * 3600 + +t.slice(3, 5) * 60 + +t.slice(6, 8);

/**
 * File-level passes run by every parser on its events (in file order):
 *  - netsplit quits with the same reason no more than NETSPLIT_BURST_GAP_S apart form one burst;
 *  - a JOIN by a nick that left in a netsplit within NETMERGE_WINDOW_S becomes NETMERGE, grouped
 *    into bursts the same way;
 *  - a PRIVMSG/ACTION starting `nick:` or `nick,` gets `toNick` when that nick appears in the file.
 */
export function finishEvents(events: ParsedEvent[]): ParsedEvent[] {
  // A burst is named after the line number of its first row (stable across re-imports).
  let lineNo = 0;
  const bursts = new NetsplitTracker(() => String(lineNo));
  const known = new Map<string, string>();
  for (const e of events) {
    if (e.nick) known.set(e.nick.toLowerCase(), e.nick);
    if (e.eventType === 'NICK' && e.toNick) known.set(e.toNick.toLowerCase(), e.toNick);
  }
  for (const e of events) {
    lineNo = e.lineNo;
    const atMs = Date.parse(`${e.localTime.replace(' ', 'T')}Z`);
    if (e.eventType === 'NETSPLIT') {
      e.netsplitBurst = Number(bursts.quit(e.nick, e.messageText, atMs).netsplitGroup ?? e.lineNo);
    } else if (e.eventType === 'JOIN' && e.nick) {
      const mark = bursts.join(e.nick, atMs);
      if (mark.eventType === 'NETMERGE') {
        e.eventType = 'NETMERGE';
        e.netsplitBurst = Number(mark.netsplitGroup);
      }
    } else if ((e.eventType === 'PRIVMSG' || e.eventType === 'ACTION') && !e.toNick && e.messageText) {
      const m = /^([^\s:,]{1,32})[:,](?:\s|$)/.exec(e.messageText);
      const addressed = m ? known.get(m[1]!.toLowerCase()) : undefined;
      if (addressed && addressed.toLowerCase() !== e.nick?.toLowerCase()) e.toNick = addressed;
    }
  }
  return events;
}

/** Channel name prefixes (RFC 2811); a log named otherwise is a private conversation with that nick. */
export const isChannelName = (name: string) => /^[#&+!]/.test(name);

// ---------------------------------------------------------------------------------------------
// Line-building helpers shared by the client log formats (irssi, WeeChat, Limnoria, HexChat,
// EnergyMech). Added alongside the ZNC parser; nothing above depends on them.

/** Mode prefixes clients show before a nick (`<@op>`, `< nick>`, `+voice`, `%halfop`, `~owner`, `&admin`); nicks never start with them. */
export function stripNickMode(nick: string): string {
  return nick.replace(/^[\s@+%~&!]+/, '');
}

/** A ParsedLine; `target` and `toNick` are null unless given. */
export function parsedLine(eventType: IrcEventType, nick: string | null, messageText: string | null, extra: Partial<ParsedLine> = {}): ParsedLine {
  return { eventType, nick, messageText, target: null, toNick: null, ...extra };
}

/** `ident@host` as ZNC and EnergyMech write it inside parentheses (ZNC leaves a space where it has no host: `~flo@ `). */
export const USER_HOST = /^[^\s()@]*@[^\s()]*\s?$/;

/**
 * What the parentheses after the nick of a join/part/quit line hold (`inner` is the text between
 * the first `(` and the last `)`): `(ident@host) (reason)`, `(ident@host)` alone, or `(reason)`
 * alone. A parenthesised text that is not `user@host` is a reason, never a host: older ZNC-style
 * and EnergyMech logs write `*** Quits: nick (Ping timeout)`.
 */
export function hostAndReason(inner: string | undefined): { shape: 'none' | 'host' | 'host+reason' | 'reason'; reason: string | null } {
  if (inner === undefined) return { shape: 'none', reason: null };
  const two = /^([^()]*)\) \((.*)$/s.exec(inner);
  if (two && USER_HOST.test(two[1]!)) return { shape: 'host+reason', reason: two[2] || null };
  if (USER_HOST.test(inner)) return { shape: 'host', reason: null };
  return { shape: 'reason', reason: inner || null };
}

/**
 * `Joins: nick (…)`, `Parts: nick (…)`, `Quits: nick (…)` and the older colon-less, host-less
 * `Joins nick` / `Parts nick` / `Quits nick (reason)`, as the text after `*** `; null otherwise.
 */
export function presenceLine(s: string): { kind: 'Joins' | 'Parts' | 'Quits'; colon: boolean; nick: string; inner: string | undefined } | null {
  const r = /^(Joins|Parts|Quits)(:?) (\S+)(?: \((.*)\))?$/s.exec(s);
  if (!r) return null;
  return { kind: r[1] as 'Joins' | 'Parts' | 'Quits', colon: r[2] === ':', nick: r[3]!, inner: r[4] };
}

/** QUIT, or NETSPLIT when the reason is two host names; an empty reason is null. */
export function quitLine(nick: string, reason: string | null | undefined): ParsedLine {
  const r = reason || null;
  return parsedLine(isNetsplitReason(r) ? 'NETSPLIT' : 'QUIT', nick, r);
}

/** MODE from a mode string with its arguments (`+o tux3`, `+nt`): messageText is all of it, target the arguments or null. */
export function modeLine(nick: string | null, modes: string): ParsedLine {
  const text = modes.trim().replace(/\s+/g, ' ');
  const space = text.indexOf(' ');
  return parsedLine('MODE', nick, text, { target: space < 0 ? null : text.slice(space + 1) });
}

/** A time stamp read from a line: the wall clock it shows, and its UTC offset when it carries one. */
export interface LineStamp {
  /** `YYYY-MM-DD HH:MM:SS` (fractions of a second dropped). */
  localTime: string;
  /** Minutes east of UTC (`Z` = 0); null when the stamp has no offset. */
  utcOffsetMinutes: number | null;
}

const ISO_STAMP = /^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:[.,]\d{1,9})? ?(?:([Zz])|([+-])(\d{2})(?::?(\d{2}))?)?$/;

/**
 * ISO 8601 date-time (`YYYY-MM-DDTHH:MM:SS`, also with a space or lower-case `t`, optional
 * fraction, optional `Z` / `±HH:MM` / `±HHMM` / `±HH`), or null when it is not one or not a real time.
 */
export function parseIsoStamp(s: string): LineStamp | null {
  const m = ISO_STAMP.exec(s.trim());
  if (!m || !isValidDate(m[1]!)) return null;
  const time = normalizeTime(m[2]!, m[3]!, m[4]);
  if (!time) return null;
  let offset: number | null = null;
  if (m[5]) offset = 0;
  else if (m[6]) {
    const hh = +m[7]!;
    const mm = m[8] ? +m[8] : 0;
    if (hh > 23 || mm > 59) return null;
    offset = (m[6] === '-' ? -1 : 1) * (hh * 60 + mm);
  }
  return { localTime: `${m[1]} ${time}`, utcOffsetMinutes: offset };
}

/** `YYYY-MM-DD` from a year, a month name (`Jan`) and a day, or null when that is no calendar day. */
export function dateFromParts(year: string | number, monthName: string, day: string | number): string | null {
  const month = monthNumber(monthName);
  if (!month) return null;
  const date = `${String(year).padStart(4, '0')}-${String(month).padStart(2, '0')}-${String(day).trim().padStart(2, '0')}`;
  return isValidDate(date) ? date : null;
}

/** A parsed line plus the channel it names (JOIN/PART/KICK/MODE/TOPIC lines of most formats do); formats report the first as ParsedFile.channel. */
export type ChannelLine = ParsedLine & { channel?: string };

/** The line with the channel it names, when it names one. */
export const inChannel = (line: ParsedLine, channel: string | null | undefined): ChannelLine => (channel ? { ...line, channel } : line);

/**
 * Whole-file pass for formats whose every line carries its own date (WeeChat, Limnoria): parse
 * each line, skip bookkeeping markers, remember the first channel a line names, then finishEvents.
 */
export function parseSelfDatedLog(content: Buffer | string, parseLine: (text: string) => (ChannelLine & LineStamp) | { marker: 'skip' } | null): ParsedFile {
  const buf = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
  const events: ParsedEvent[] = [];
  const unparsed: ParsedFile['unparsed'] = [];
  let channel: string | null = null;
  let lines = 0;
  for (const { lineNo, raw, text } of splitLines(buf)) {
    lines += 1;
    const p = parseLine(text);
    if (!p) {
      unparsed.push({ lineNo, text });
      continue;
    }
    if ('marker' in p) continue;
    const { channel: named, ...line } = p;
    if (named && !channel) channel = named;
    events.push({ ...line, lineNo, raw, netsplitBurst: null });
  }
  return { events: finishEvents(events), unparsed, lines, channel };
}
