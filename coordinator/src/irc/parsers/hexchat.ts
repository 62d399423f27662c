/**
 * HexChat (and XChat) logs: `~/.config/hexchat/logs/<network>-#chan.log` (default mask
 * `%n-%c.log`). A session starts with `**** BEGIN LOGGING AT Mon Jan  2 12:00:00 2017` and ends
 * with `**** ENDING LOGGING AT …`; each line is the log stamp (default `%b %d %H:%M:%S`), a space,
 * and the text event with its `$t` as a tab. The wording is HexChat's default text events
 * (src/common/textevents.in), colours removed:
 *
 *   Jan 02 12:34:56 <nick>\tmessage                                   PRIVMSG
 *   Jan 02 12:34:56 *\tnick does something                            ACTION
 *   Jan 02 12:34:56 -nick-\ttext  /  -nick/#chan-\ttext               NOTICE
 *   Jan 02 12:34:56 -->\tnick (user@host) has joined #chan
 *   Jan 02 12:34:56 <--\tnick (user@host) has left #chan (reason)
 *   Jan 02 12:34:56 <--\tnick has quit (reason)                       (reason "a.b c.d" → NETSPLIT)
 *   Jan 02 12:34:56 <--\top has kicked victim from #chan (reason)
 *   Jan 02 12:34:56 ---\told is now known as new
 *   Jan 02 12:34:56 ---\top has changed the topic to: topic
 *   Jan 02 12:34:56 ---\top gives channel operator status to nick    MODE "+o nick" (likewise
 *       removes … status from, gives/removes voice, half-operator, sets/removes ban/exempt/invite on,
 *       sets channel keyword/limit, removes channel keyword/user limit, sets mode, sets modes [...])
 *
 * The stamp has no year: it comes from BEGIN LOGGING (else from the file-name date or --date) and
 * rolls over when the month goes from December to January. Bookkeeping: the BEGIN/ENDING lines,
 * "You are now talking on", "Topic for …", "Users on …", "Channel … created/modes", "You are now
 * known as …", "You have left channel …".
 */
import path from 'node:path';
import {
  type ChannelLine,
  dateFromParts,
  finishEvents,
  inChannel,
  isValidDate,
  monthNumber,
  modeLine,
  normalizeTime,
  parsedLine,
  quitLine,
  splitLines,
  stripFormatting,
  stripNickMode,
} from './common.js';
import { ParseError, type FileNameInfo, type LogFormat, type ParsedEvent, type ParsedFile } from './types.js';

/** An event line: month/day and time from its stamp, and the channel where the line names one. */
export type HexchatEventLine = ChannelLine & { month: number; day: number; time: string };
/** BEGIN LOGGING (gives the date and so the year), or another line that is not an event. */
export type HexchatMarker = { marker: 'begin'; date: string } | { marker: 'skip' };
export type HexchatLine = HexchatEventLine | HexchatMarker;

const SESSION = /^\*\*\*\* (BEGIN|ENDING) LOGGING AT \w{3} (\w{3}) +(\d{1,2}) \d{2}:\d{2}:\d{2} (\d{4})\s*$/;
const STAMPED = /^([A-Z][a-z]{2}) (\d{2}) (\d{2}):(\d{2}):(\d{2}) (.*)$/s;

/** Parses one decoded line; null when it is not in a known shape. Formatting codes are removed. */
export function parseHexchatLine(line: string): HexchatLine | null {
  const text = line.replace(/\r$/, '');
  let m = SESSION.exec(text);
  if (m) {
    if (m[1] === 'ENDING') return { marker: 'skip' };
    const date = dateFromParts(m[4]!, m[2]!, m[3]!);
    return date ? { marker: 'begin', date } : null;
  }
  if (!(m = STAMPED.exec(text))) return null;
  const month = monthNumber(m[1]!);
  const day = +m[2]!;
  const time = normalizeTime(m[3]!, m[4]!, m[5]);
  if (!month || day < 1 || day > 31 || !time) return null;
  const body = m[6]!;
  const tab = body.indexOf('\t');
  if (tab < 0) return null;
  const p = parseEvent(stripFormatting(body.slice(0, tab)).trim(), stripFormatting(body.slice(tab + 1)));
  if (!p || 'marker' in p) return p;
  return { ...p, month, day, time };
}

type Body = ChannelLine | { marker: 'skip' };
const SKIP: Body = { marker: 'skip' };

function parseEvent(prefix: string, msg: string): Body | null {
  let r: RegExpExecArray | null;
  if ((r = /^<([^>]+)>$/.exec(prefix))) {
    const nick = stripNickMode(r[1]!);
    return nick && !/\s/.test(nick) ? parsedLine('PRIVMSG', nick, msg) : null;
  }
  switch (prefix) {
    case '*':
      // XChat-era status lines used the same `*` prefix as actions.
      if (/^(?:Now talking on \S+|Topic for \S+ (?:is|set by) .*)$/s.test(msg)) return SKIP;
      if ((r = /^(\S+)(?: (.*))?$/s.exec(msg))) return parsedLine('ACTION', r[1]!, r[2] ?? '');
      return null;
    case '-->':
      if ((r = /^(\S+)(?: \([^)]*\))? has joined (\S+)$/.exec(msg))) return inChannel(parsedLine('JOIN', r[1]!, null), r[2]);
      if (/^You are now talking on \S+$/.test(msg)) return SKIP;
      return null;
    case '<--':
      if ((r = /^(\S+)(?: \([^)]*\))? has left (\S+)(?: \((.*)\))?$/s.exec(msg))) return inChannel(parsedLine('PART', r[1]!, r[3] || null), r[2]);
      if ((r = /^(\S+)(?: \([^)]*\))? has quit(?: \((.*)\))?$/s.exec(msg))) return quitLine(r[1]!, r[2]);
      if ((r = /^(\S+) has kicked (\S+) from (\S+)(?: \((.*)\))?$/s.exec(msg))) {
        return inChannel(parsedLine('KICK', r[1]!, r[4] || null, { toNick: r[2]! }), r[3]);
      }
      return null;
    case '---':
      return parseServer(msg);
    default:
      // Notice: -nick-   Channel Notice: -nick/#chan-
      if ((r = /^-([^\s/]+?)(?:\/([#&+!]\S*))?-$/.exec(prefix))) return inChannel(parsedLine('NOTICE', r[1]!, msg), r[2]);
      return null;
  }
}

/** "gives channel operator status to" etc. → mode letter and sign (textevents.in: Channel Operator, DeOp, Voice, …). */
const MODE_PHRASES: Array<[RegExp, string]> = [
  [/^(\S+) gives channel operator status to (\S+)$/, '+o'],
  [/^(\S+) removes channel operator status from (\S+)$/, '-o'],
  [/^(\S+) gives channel half-operator status to (\S+)$/, '+h'],
  [/^(\S+) removes channel half-operator status from (\S+)$/, '-h'],
  [/^(\S+) gives voice to (\S+)$/, '+v'],
  [/^(\S+) removes voice from (\S+)$/, '-v'],
  [/^(\S+) sets ban on (\S+)$/, '+b'],
  [/^(\S+) removes ban on (\S+)$/, '-b'],
  [/^(\S+) sets exempt on (\S+)$/, '+e'],
  [/^(\S+) removes exempt on (\S+)$/, '-e'],
  [/^(\S+) sets invite on (\S+)$/, '+I'],
  [/^(\S+) removes invite on (\S+)$/, '-I'],
  [/^(\S+) sets channel keyword to (\S+)$/, '+k'],
  [/^(\S+) sets channel limit to (\S+)$/, '+l'],
  [/^(\S+) removes channel keyword$/, '-k'],
  [/^(\S+) removes user limit$/, '-l'],
];

const SKIP_SERVER = [
  /^You are now known as /,
  /^Topic for \S+ (?:is|set by) /,
  /^Users on \S+:/,
  /^Channel \S+ (?:created on|modes:) /,
  /^You have left channel /,
  /^You have been kicked from /,
  /^Disconnected \(/,
  /^Connect(?:ing|ed)\b/,
];

function parseServer(msg: string): Body | null {
  let r: RegExpExecArray | null;
  if ((r = /^(\S+) is now known as (\S+)$/.exec(msg))) return parsedLine('NICK', r[1]!, null, { toNick: r[2]! });
  if ((r = /^(\S+) has changed the topic to: ?(.*)$/s.exec(msg))) return parsedLine('TOPIC', r[1]!, r[2]!);
  for (const [re, mode] of MODE_PHRASES) {
    if ((r = re.exec(msg))) return modeLine(r[1]!, r[2] ? `${mode} ${r[2]}` : mode);
  }
  // Raw Modes: "op sets modes [+o nick]"; Channel Mode Generic: "op sets mode +m #chan" (the last word is the channel).
  if ((r = /^(\S+) sets modes \[(.+)\]$/s.exec(msg))) return modeLine(r[1]!, r[2]!);
  if ((r = /^(\S+) sets mode ([+-]\S+)(?: (.*))?$/s.exec(msg))) {
    const args = (r[3] ?? '').trim();
    return /^[#&+!]\S*$/.test(args) ? inChannel(modeLine(r[1]!, r[2]!), args) : modeLine(r[1]!, `${r[2]} ${args}`);
  }
  if (SKIP_SERVER.some((re) => re.test(msg))) return SKIP;
  return null;
}

/**
 * Parses a whole HexChat log. `date` (file name or --date) gives the year of lines before the
 * first BEGIN LOGGING; throws ParseError when a stamped line comes with no year known.
 */
export function parseHexchatLog(content: Buffer | string, date: string | null): ParsedFile {
  const buf = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
  const events: ParsedEvent[] = [];
  const unparsed: ParsedFile['unparsed'] = [];
  let year = date ? +date.slice(0, 4) : null;
  let lastMonth = date ? +date.slice(5, 7) : 0;
  let channel: string | null = null;
  let lines = 0;
  for (const { lineNo, raw, text } of splitLines(buf)) {
    lines += 1;
    const p = parseHexchatLine(text);
    if (!p) {
      unparsed.push({ lineNo, text });
      continue;
    }
    if ('marker' in p) {
      if (p.marker === 'begin') {
        year = +p.date.slice(0, 4);
        lastMonth = +p.date.slice(5, 7);
      }
      continue;
    }
    if (year === null) throw new ParseError('HexChat log line before any "**** BEGIN LOGGING AT" line, and the file name (or --date) gives no year');
    if (lastMonth === 12 && p.month === 1) year += 1;
    lastMonth = p.month;
    const day = `${year}-${String(p.month).padStart(2, '0')}-${String(p.day).padStart(2, '0')}`;
    if (!isValidDate(day)) {
      unparsed.push({ lineNo, text });
      continue;
    }
    const { month: _month, day: _day, time, channel: named, ...line } = p;
    if (named && !channel) channel = named;
    events.push({ ...line, lineNo, raw, localTime: `${day} ${time}`, utcOffsetMinutes: null, netsplitBurst: null });
  }
  return { events: finishEvents(events), unparsed, lines, channel };
}

/** `libera-#chan.log` (HexChat's `%n-%c.log`) or `#chan.log` → channel; HexChat names carry no day. */
export function parseHexchatFileName(filePath: string): FileNameInfo | null {
  const m = /^(?:(.*?)-)?([#&+!].*)\.log$/.exec(path.basename(filePath));
  return m ? { channel: m[2]!, date: null } : null;
}

export const hexchatFormat: LogFormat = {
  name: 'hexchat',
  description: 'HexChat/XChat (<network>-#chan.log; "**** BEGIN LOGGING AT", "Jan 02 12:34:56 <nick><tab>text")',
  parseFileName: parseHexchatFileName,
  detect: (lines) => (lines.length ? lines.filter((l) => parseHexchatLine(l) !== null).length / lines.length : 0),
  parse: (content, ctx) => parseHexchatLog(content, ctx.date),
};
