/**
 * ZNC `log` module format, one file per channel-day (`#chan_YYYYMMDD.log.txt`):
 *
 *   [HH:MM:SS] <nick> message            PRIVMSG
 *   [HH:MM:SS] * nick does something     ACTION
 *   [HH:MM:SS] -nick- text               NOTICE
 *   [HH:MM:SS] *** Joins: nick (ident@host)
 *   [HH:MM:SS] *** Parts: nick (ident@host) (reason)
 *   [HH:MM:SS] *** Quits: nick (ident@host) (reason)   (reason "a.b c.d" → NETSPLIT)
 *   [HH:MM:SS] *** old is now known as new
 *   [HH:MM:SS] *** nick sets mode: +o other
 *   [HH:MM:SS] *** nick changes topic to 'topic'
 *   [HH:MM:SS] *** victim was kicked by op (reason)
 *
 * Pure: bytes or text in, events out. Times stay local (`YYYY-MM-DD HH:MM:SS`); the importer converts.
 */

export const IRC_EVENT_TYPES = ['PRIVMSG', 'ACTION', 'NOTICE', 'JOIN', 'PART', 'QUIT', 'NICK', 'KICK', 'MODE', 'TOPIC', 'NETSPLIT'] as const;
export type IrcEventType = (typeof IRC_EVENT_TYPES)[number];

export interface ParsedLine {
  eventType: IrcEventType;
  /** `HH:MM:SS` as written in the log (local time). */
  time: string;
  nick: string | null;
  messageText: string | null;
  target: string | null;
  toNick: string | null;
}

export interface ParsedEvent extends ParsedLine {
  /** 1-based line number in the file. */
  lineNo: number;
  /** The line's raw bytes (without the line ending), for idempotency hashing. */
  raw: Buffer;
  /** `YYYY-MM-DD HH:MM:SS`, local time of the log. */
  localTime: string;
  /** For NETSPLIT rows: line number of the first quit of the burst this one belongs to. */
  netsplitBurst: number | null;
}

export interface ParsedFile {
  events: ParsedEvent[];
  /** Non-empty lines that are not in a known shape. */
  unparsed: Array<{ lineNo: number; text: string }>;
  /** Non-empty lines in the file. */
  lines: number;
}

// eslint-disable-next-line no-control-regex
const FORMATTING = /\x03(?:\d{1,2}(?:,\d{1,2})?)?|\x04(?:[0-9a-fA-F]{6}(?:,[0-9a-fA-F]{6})?)?|[\x02\x0f\x11\x16\x1d\x1e\x1f]/g;

/** Removes mIRC colour (^C fg[,bg], ^D hex) and format codes (bold, italic, underline, reverse, …). */
export function stripFormatting(text: string): string {
  return text.replace(FORMATTING, '');
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
/** Windows-1252 for 0x80–0x9F (Node's 'windows-1252' decoder is plain ISO-8859-1 there); undefined bytes stay as C1 code points. */
const CP1252_HIGH = '\u20ac\u0081\u201a\u0192\u201e\u2026\u2020\u2021\u02c6\u2030\u0160\u2039\u0152\u008d\u017d\u008f'
  + '\u0090\u2018\u2019\u201c\u201d\u2022\u2013\u2014\u02dc\u2122\u0161\u203a\u0153\u009d\u017e\u0178';

function decodeCp1252(bytes: Uint8Array): string {
  let out = '';
  for (const b of bytes) out += b >= 0x80 && b < 0xa0 ? CP1252_HIGH[b - 0x80] : String.fromCharCode(b);
  return out;
}

/** UTF-8 when the bytes are valid UTF-8, otherwise Windows-1252 (the usual latin-1 superset). */
export function decodeLine(bytes: Uint8Array): string {
  try {
    return utf8.decode(bytes);
  } catch {
    return decodeCp1252(bytes);
  }
}

const FILE_NAME = /^(.+)_(\d{4})(\d{2})(\d{2})\.log(?:\.txt)?$/;

/** `#qtox_20160601.log.txt` → `{channel: '#qtox', date: '2016-06-01'}`; null when not a log file name. */
export function parseLogFileName(fileName: string): { channel: string; date: string } | null {
  const m = FILE_NAME.exec(fileName);
  if (!m) return null;
  const [, channel, y, mo, d] = m as unknown as [string, string, string, string, string];
  const date = `${y}-${mo}-${d}`;
  const check = new Date(`${date}T00:00:00Z`);
  if (Number.isNaN(check.getTime()) || check.toISOString().slice(0, 10) !== date) return null;
  return { channel, date };
}

const HOST = /^[A-Za-z0-9*-]+(?:\.[A-Za-z0-9*-]+)+$/;

/** A quit reason of exactly two host names (`*.net *.split`, `irc.a.net irc.b.net`) marks a netsplit. */
export function isNetsplitReason(reason: string | null): boolean {
  if (!reason) return false;
  const parts = reason.split(' ');
  return parts.length === 2 && parts.every((p) => HOST.test(p));
}

const LINE = /^\[(\d{2}):(\d{2}):(\d{2})\] (.*)$/s;

const ev = (eventType: IrcEventType, time: string, nick: string | null, messageText: string | null, extra: Partial<ParsedLine> = {}): ParsedLine =>
  ({ eventType, time, nick, messageText, target: null, toNick: null, ...extra });

/** Parses one decoded line; null when it is not in a known shape. Formatting codes are removed. */
export function parseZncLine(line: string): ParsedLine | null {
  const m = LINE.exec(line.replace(/\r$/, ''));
  if (!m) return null;
  const [, hh, mm, ss] = m as unknown as [string, string, string, string];
  if (+hh > 23 || +mm > 59 || +ss > 60) return null;
  const time = `${hh}:${mm}:${ss}`;
  const rest = stripFormatting(m[4]!);
  let r: RegExpExecArray | null;

  if ((r = /^<([^>\s]+)> ?(.*)$/s.exec(rest))) return ev('PRIVMSG', time, r[1]!, r[2]!);
  if ((r = /^\*\*\* (.*)$/s.exec(rest))) return parseStatus(time, r[1]!);
  if ((r = /^\* (\S+) ?(.*)$/s.exec(rest))) return ev('ACTION', time, r[1]!, r[2]!);
  if ((r = /^-(\S+)-(?: (.*))?$/s.exec(rest))) return ev('NOTICE', time, r[1]!, r[2] ?? '');
  return null;
}

function parseStatus(time: string, s: string): ParsedLine | null {
  let r: RegExpExecArray | null;
  if ((r = /^Joins: (\S+)(?: \(([^)]*)\))?$/.exec(s))) return ev('JOIN', time, r[1]!, null);
  if ((r = /^Parts: (\S+)(?: \(([^)]*)\))?(?: \((.*)\))?$/s.exec(s))) return ev('PART', time, r[1]!, r[3] || null);
  if ((r = /^Quits: (\S+)(?: \(([^)]*)\))?(?: \((.*)\))?$/s.exec(s))) {
    const reason = r[3] || null;
    return ev(isNetsplitReason(reason) ? 'NETSPLIT' : 'QUIT', time, r[1]!, reason);
  }
  if ((r = /^(\S+) is now known as (\S+)$/.exec(s))) return ev('NICK', time, r[1]!, null, { toNick: r[2]! });
  if ((r = /^(\S+) was kicked by (\S+)(?: \((.*)\))?$/s.exec(s))) return ev('KICK', time, r[2]!, r[3] ?? null, { toNick: r[1]! });
  if ((r = /^(\S+) sets mode: (\S+)(?: (.*))?$/s.exec(s))) {
    const args = r[3]?.trim() || null;
    return ev('MODE', time, r[1]!, args ? `${r[2]} ${args}` : r[2]!, { target: args });
  }
  if ((r = /^(\S+) changes topic to '(.*)'$/s.exec(s))) return ev('TOPIC', time, r[1]!, r[2]!);
  return null;
}

/** Seconds within the day for `HH:MM:SS`. */
const secondsOf = (t: string) => +t.slice(0, 2) * 3600 + +t.slice(3, 5) * 60 + +t.slice(6, 8);

/** How far apart (seconds) two netsplit quits with the same reason may be and still be one burst. */
export const NETSPLIT_BURST_GAP_S = 30;

/**
 * Parses a whole file's bytes for day `date` (`YYYY-MM-DD`). Each line is decoded on its own
 * (UTF-8, else Windows-1252), so one mis-encoded line does not spoil the rest. Netsplit quits with
 * the same reason no more than NETSPLIT_BURST_GAP_S apart form one burst.
 */
export function parseZncLog(content: Buffer | string, date: string): ParsedFile {
  const buf = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
  const events: ParsedEvent[] = [];
  const unparsed: ParsedFile['unparsed'] = [];
  let lines = 0;
  let burst: { first: number; reason: string; lastS: number } | null = null;
  let start = 0;
  let lineNo = 0;
  while (start <= buf.length) {
    let end = buf.indexOf(0x0a, start);
    if (end < 0) end = buf.length;
    lineNo += 1;
    let raw = buf.subarray(start, end);
    if (raw.length && raw[raw.length - 1] === 0x0d) raw = raw.subarray(0, raw.length - 1);
    start = end + 1;
    if (raw.length === 0) continue;
    lines += 1;
    const text = decodeLine(raw);
    const p = parseZncLine(text);
    if (!p) {
      unparsed.push({ lineNo, text });
      continue;
    }
    let netsplitBurst: number | null = null;
    if (p.eventType === 'NETSPLIT') {
      const s = secondsOf(p.time);
      if (!burst || burst.reason !== p.messageText || s - burst.lastS > NETSPLIT_BURST_GAP_S || s < burst.lastS) {
        burst = { first: lineNo, reason: p.messageText ?? '', lastS: s };
      }
      burst.lastS = s;
      netsplitBurst = burst.first;
    }
    events.push({ ...p, lineNo, raw: Buffer.from(raw), localTime: `${date} ${p.time}`, netsplitBurst });
  }
  return { events, unparsed, lines };
}
