/**
 * irssi's default log format (autolog to `~/irclogs/<network>/#chan.log`). The wording follows
 * irssi's defaults: the `log_open_string` / `log_close_string` / `log_day_changed` settings, the
 * `log_timestamp` setting ("%H:%M "), and the default theme's formats for channel events:
 *
 *   --- Log opened Sun Jan 01 00:00:00 2017
 *   --- Log closed Sun Jan 01 23:59:59 2017
 *   --- Day changed Mon Jan 02 2017
 *   HH:MM <@nick> message                  PRIVMSG (`< nick>` without a mode; `HH:MM:SS` with seconds configured)
 *   HH:MM  * nick does something           ACTION
 *   HH:MM -nick(user@host)- text           NOTICE (private); `-nick:#chan- text` (channel)
 *   HH:MM -!- nick [user@host] has joined #chan
 *   HH:MM -!- nick [user@host] has left #chan [reason]
 *   HH:MM -!- nick [user@host] has quit [reason]          (reason "a.b c.d" → NETSPLIT)
 *   HH:MM -!- old is now known as new
 *   HH:MM -!- mode/#chan [+o nick] by op                  (`ServerMode/#chan …` for server modes)
 *   HH:MM -!- op changed the topic of #chan to: topic     (`Topic unset by op on #chan` → empty topic)
 *   HH:MM -!- victim was kicked from #chan by op [reason]
 *   HH:MM -!- Netsplit hub.net <-> leaf.net quits: a, b   NETSPLIT, one row: reason "hub.net leaf.net", target "a, b"
 *   HH:MM -!- Netsplit over, joins: a, b                  NETMERGE, one row: target "a, b"
 *
 * Bookkeeping (neither events nor unparsed): the `---` lines, `-!- Irssi: …` status lines, the
 * topic/names/creation lines shown on join, and "You're now known as …". The day comes from
 * "Log opened" / "Day changed"; the file-name date (or --date) only places lines before the first.
 */
import path from 'node:path';
import {
  addDays,
  type ChannelLine,
  dateFromParts,
  DayClock,
  finishEvents,
  inChannel,
  isValidDate,
  modeLine,
  normalizeTime,
  parsedLine,
  quitLine,
  splitLines,
  stripFormatting,
  stripNickMode,
} from './common.js';
import { ParseError, type FileNameInfo, type LogFormat, type ParsedEvent, type ParsedFile } from './types.js';

/** A parsed event line: its `HH:MM:SS` time and, where the line names one, the channel. */
export type IrssiEventLine = ChannelLine & { time: string };
/** A `--- Log opened` / `--- Day changed` line (sets the day), or another line that is not an event. */
export type IrssiMarker = { marker: 'open' | 'day'; date: string } | { marker: 'skip' };
export type IrssiLine = IrssiEventLine | IrssiMarker;

const isMarker = (p: IrssiLine): p is IrssiMarker => 'marker' in p;

const LOG_OPEN_CLOSE = /^--- Log (opened|closed) \w{3} (\w{3}) +(\d{1,2}) \d{2}:\d{2}:\d{2} (\d{4})\s*$/;
const DAY_CHANGED = /^--- Day changed \w{3} (\w{3}) +(\d{1,2}) (\d{4})\s*$/;
const TIMED = /^(\d{2}):(\d{2})(?::(\d{2}))? (.*)$/s;

/** Parses one decoded line; null when it is not in a known shape. Formatting codes are removed. */
export function parseIrssiLine(line: string): IrssiLine | null {
  const text = line.replace(/\r$/, '');
  let m = LOG_OPEN_CLOSE.exec(text);
  if (m) {
    if (m[1] === 'closed') return { marker: 'skip' };
    const date = dateFromParts(m[4]!, m[2]!, m[3]!);
    return date ? { marker: 'open', date } : null;
  }
  if ((m = DAY_CHANGED.exec(text))) {
    const date = dateFromParts(m[3]!, m[1]!, m[2]!);
    return date ? { marker: 'day', date } : null;
  }
  if (!(m = TIMED.exec(text))) return null;
  const time = normalizeTime(m[1]!, m[2]!, m[3]);
  if (!time) return null;
  const rest = stripFormatting(m[4]!);
  const p = parseBody(rest);
  if (!p || 'marker' in p) return p;
  return { ...p, time };
}

type Body = ChannelLine | IrssiMarker;

function parseBody(rest: string): Body | null {
  let r: RegExpExecArray | null;
  if ((r = /^<([^>]*)> ?(.*)$/s.exec(rest))) {
    const nick = stripNickMode(r[1]!);
    return nick && !/\s/.test(nick) ? parsedLine('PRIVMSG', nick, r[2]!) : null;
  }
  if ((r = /^-!- (.*)$/s.exec(rest))) return parseStatus(r[1]!);
  if ((r = /^ ?\* (\S+)(?: (.*))?$/s.exec(rest))) return parsedLine('ACTION', r[1]!, r[2] ?? '');
  // -nick(user@host)- text (private notice) and -nick:#chan- text (channel notice).
  if ((r = /^-([^\s!][^\s]*?)(?:\(([^)]*)\)|:([#&+!]\S*?))?-(?: (.*))?$/s.exec(rest))) {
    return inChannel(parsedLine('NOTICE', r[1]!, r[4] ?? ''), r[3]);
  }
  // The names list printed on join: "[Users #chan]" and rows of "[@op   ] [ user  ]".
  if (/^\[Users \S+\]$/.test(rest) || /^(?:\[[^\]]*\]\s*)+$/.test(rest)) return { marker: 'skip' };
  return null;
}

/** fe-common/core and fe-common/irc formats that are not channel events (join info, account and away notes). */
const SKIP_STATUS = [
  /^Irssi: /,
  /^Topic for \S+:/,
  /^No topic set for /,
  /^Topic set by /,
  /^Channel \S+ created /,
  /^Home page for \S+:/,
  /^mode\/\S+ \[.*\]$/,
  /^You're now known as /,
  /^You are now talking in /,
  /^Your nickname is /,
  /^\S+ \[[^\]]*\] has (?:changed host|logged out of their account|logged in to account .*)$/,
  /^\S+ has been invited to \S+ by \S+$/,
  /^\S+ \[[^\]]*\] is (?:now away: .*|no longer away)$/,
];

function parseStatus(s: string): Body | null {
  let r: RegExpExecArray | null;
  // join_extended(_account) add "[account x] [realname [y]]" after the channel.
  if ((r = /^(\S+) \[[^\]]*\] has joined (\S+)(?: \[.*)?$/s.exec(s))) return inChannel(parsedLine('JOIN', r[1]!, null), r[2]);
  if ((r = /^(\S+) \[[^\]]*\] has left (\S+)(?: \[(.*)\])?$/s.exec(s))) return inChannel(parsedLine('PART', r[1]!, r[3] || null), r[2]);
  // quit_once (one window for all channels) puts the channel first.
  if ((r = /^(?:[#&+!]\S* )?(\S+) \[[^\]]*\] has quit(?: \[(.*)\])?$/s.exec(s))) return quitLine(r[1]!, r[2]);
  if ((r = /^(\S+) is now known as (\S+)$/.exec(s))) return parsedLine('NICK', r[1]!, null, { toNick: r[2]! });
  if ((r = /^(\S+) was kicked from (\S+) by (\S+)(?: \[(.*)\])?$/s.exec(s))) {
    return inChannel(parsedLine('KICK', r[3]!, r[4] || null, { toNick: r[1]! }), r[2]);
  }
  if ((r = /^(?:mode|ServerMode)\/(\S+) \[(.+)\] by (\S+)$/s.exec(s))) return inChannel(modeLine(r[3]!, r[2]!), r[1]);
  if ((r = /^(\S+) changed the topic of (\S+) to: ?(.*)$/s.exec(s))) return inChannel(parsedLine('TOPIC', r[1]!, r[3]!), r[2]);
  if ((r = /^Topic unset by (\S+) on (\S+)$/.exec(s))) return inChannel(parsedLine('TOPIC', r[1]!, ''), r[2]);
  if ((r = /^Netsplit (\S+) <-> (\S+) quits: (.*)$/s.exec(s))) {
    return parsedLine('NETSPLIT', null, `${r[1]} ${r[2]}`, { target: nickList(r[3]!) });
  }
  if ((r = /^Netsplit over, joins: (.*)$/s.exec(s))) return parsedLine('NETMERGE', null, null, { target: nickList(r[1]!) });
  if (SKIP_STATUS.some((re) => re.test(s))) return { marker: 'skip' };
  return null;
}

/** "a, b, c (+5 more, use /NETSPLIT to show all of them)" → "a, b, c". */
const nickList = (s: string) => s.replace(/\s*\(\+\d+ more[^)]*\)\s*$/, '').trim();

/**
 * Parses a whole irssi log. `date` (file name or --date) is the day of lines before the first
 * "Log opened"/"Day changed"; without it the first such line decides. Throws ParseError when
 * neither gives a day.
 */
export function parseIrssiLog(content: Buffer | string, date: string | null, lastTime: string | null = null): ParsedFile {
  const buf = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
  const rows = [...splitLines(buf)].map((l) => ({ ...l, p: parseIrssiLine(l.text) }));
  const clock = new DayClock(date ?? startDate(rows.map((r) => r.p)), date ? lastTime : null);
  if (!clock.date) throw new ParseError('irssi log has no "--- Log opened" or "--- Day changed" line, and the file name (or --date) gives no day');
  const events: ParsedEvent[] = [];
  const unparsed: ParsedFile['unparsed'] = [];
  let channel: string | null = null;
  for (const { lineNo, raw, text, p } of rows) {
    if (!p) {
      unparsed.push({ lineNo, text });
      continue;
    }
    if (isMarker(p)) {
      if (p.marker !== 'skip') clock.set(p.date);
      continue;
    }
    const { time, channel: named, ...line } = p;
    if (named && !channel) channel = named;
    const e: ParsedEvent = { ...line, lineNo, raw, localTime: clock.at(time)!, utcOffsetMinutes: null, netsplitBurst: null };
    // irssi prints a whole merge as one line; it is its own burst (finishEvents only groups JOINs it turns into merges).
    if (e.eventType === 'NETMERGE') e.netsplitBurst = lineNo;
    events.push(e);
  }
  return { events: finishEvents(events), unparsed, lines: rows.length, channel };
}

/** The day of the file's first lines when no date is given: from the first Log opened / Day changed line. */
function startDate(parsed: Array<IrssiLine | null>): string | null {
  let sawEvent = false;
  for (const p of parsed) {
    if (!p) continue;
    if (!isMarker(p)) {
      sawEvent = true;
      continue;
    }
    if (p.marker === 'open') return p.date;
    if (p.marker === 'day') return sawEvent ? addDays(p.date, -1) : p.date;
  }
  return null;
}

const NAME = /^(.+?)(?:[-._](\d{4}-\d{2}-\d{2}|\d{8}))?\.log$/;

/**
 * `#chan.log` (irssi's default autolog_path `~/irclogs/$tag/$0.log`), `#chan-2017-01-02.log`,
 * `#chan.2017-01-02.log`, `#chan_20170102.log` → channel and day (null when the name has none).
 */
export function parseIrssiFileName(filePath: string): FileNameInfo | null {
  const m = NAME.exec(path.basename(filePath));
  if (!m || !/^[#&+!]/.test(m[1]!)) return null;
  let date: string | null = null;
  if (m[2]) {
    date = m[2].length === 8 ? `${m[2].slice(0, 4)}-${m[2].slice(4, 6)}-${m[2].slice(6)}` : m[2];
    if (!isValidDate(date)) return null;
  }
  return { channel: m[1]!, date };
}

export const irssiFormat: LogFormat = {
  name: 'irssi',
  description: 'irssi autolog (~/irclogs/<network>/#chan.log; "--- Log opened", "HH:MM <nick> text", "-!-" events)',
  parseFileName: parseIrssiFileName,
  detect: (lines) => (lines.length ? lines.filter((l) => parseIrssiLine(l) !== null).length / lines.length : 0),
  parse: (content, ctx) => parseIrssiLog(content, ctx.date, ctx.time),
};
