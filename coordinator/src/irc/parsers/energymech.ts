/**
 * EnergyMech channel logs, `#chan_YYYYMMDD.log` (also `<network>_#chan_YYYYMMDD.log`). The lines are
 * EnergyMech's channel "spy" messages (parse.c / channel.c: send_spy), each behind a stamp:
 *
 *   [HH:MM:SS] <nick> message                     PRIVMSG
 *   [HH:MM:SS] * nick does something              ACTION
 *   [HH:MM:SS] -nick:#chan- text                  NOTICE (channel notice; `-nick- text` also read)
 *   [HH:MM:SS] *** Joins: nick (user@host)
 *   [HH:MM:SS] *** Parts: nick (user@host)        (EnergyMech logs no part reason)
 *   [HH:MM:SS] *** Quits: nick (reason)           (no host; reason "a.b c.d" → NETSPLIT)
 *   [HH:MM:SS] *** old is now known as new
 *   [HH:MM:SS] *** victim was kicked by op (reason)
 *   [HH:MM:SS] *** op sets mode: +o nick
 *   [HH:MM:SS] *** op changes topic to "topic"
 *   [HH:MM:SS] *** Joins nick / *** Parts nick / *** Quits nick (reason)   (older, colon-less)
 *
 * EnergyMech 3's spy-to-file writes the stamp as `[Jan 2 2017 12:34:56]` (logtime()): that form is
 * read too, and gives the day itself; `[HH:MM:SS]` lines need the day from the file name or --date.
 *
 * ZNC's log module (znc.ts) writes the same shapes except `*** Parts: nick (ident@host) (reason)`,
 * `*** Quits: nick (ident@host) (reason)`, `-nick- text` and `changes topic to 'topic'` (single
 * quotes). This parser reads both dialects (logs converted "to energymech format", as pisg reads
 * it, use the ZNC shapes). Detection: a sample with an EnergyMech-only shape (host-less quit,
 * reason-less part, `-nick:#chan-` notice, double-quoted topic, dated stamp) and no ZNC-only one
 * scores as EnergyMech; otherwise this format scores a little below what it reads, so a file whose
 * lines are truly identical in both (only messages, joins, modes, nicks, kicks) is taken as ZNC,
 * which parses it to the same events.
 */
import path from 'node:path';
import {
  type ChannelLine,
  dateFromParts,
  DayClock,
  finishEvents,
  hostAndReason,
  inChannel,
  isValidDate,
  modeLine,
  normalizeTime,
  parsedLine,
  presenceLine,
  quitLine,
  splitLines,
  stripFormatting,
} from './common.js';
import { ParseError, type FileNameInfo, type LogFormat, type ParsedEvent, type ParsedFile } from './types.js';

/** Which program's wording a line has, where only one of them writes it that way. */
export type Dialect = 'energymech' | 'znc';

export type EnergymechLine = ChannelLine & {
  time: string;
  /** The day, for `[Mon D YYYY HH:MM:SS]` stamps. */
  date?: string;
  dialect?: Dialect;
};

const TIME_STAMP = /^\[(\d{2}):(\d{2}):(\d{2})\] (.*)$/s;
const DATE_STAMP = /^\[([A-Z][a-z]{2}) +(\d{1,2}) (\d{4}) (\d{2}):(\d{2}):(\d{2})\] (.*)$/s;

type Body = ChannelLine & { dialect?: Dialect };

/** Parses one decoded line; null when it is not in a known shape. Formatting codes are removed. */
export function parseEnergymechLine(line: string): EnergymechLine | null {
  const text = line.replace(/\r$/, '');
  let time: string | null;
  let date: string | undefined;
  let rest: string;
  let m = TIME_STAMP.exec(text);
  if (m) {
    time = normalizeTime(m[1]!, m[2]!, m[3]);
    rest = m[4]!;
  } else if ((m = DATE_STAMP.exec(text))) {
    time = normalizeTime(m[4]!, m[5]!, m[6]);
    date = dateFromParts(m[3]!, m[1]!, m[2]!) ?? undefined;
    if (!date) return null;
    rest = m[7]!;
  } else return null;
  if (!time) return null;
  const p = parseBody(stripFormatting(rest));
  if (!p) return null;
  const out: EnergymechLine = { ...p, time };
  if (date) {
    out.date = date;
    out.dialect = 'energymech';
  }
  return out;
}

function parseBody(rest: string): Body | null {
  let r: RegExpExecArray | null;
  if ((r = /^<([^>\s]+)> ?(.*)$/s.exec(rest))) return parsedLine('PRIVMSG', r[1]!, r[2]!);
  if ((r = /^\*\*\* (.*)$/s.exec(rest))) return parseStatus(r[1]!);
  if ((r = /^\* (\S+) ?(.*)$/s.exec(rest))) return parsedLine('ACTION', r[1]!, r[2]!);
  if ((r = /^-(\S+?):([#&+!]\S*)-(?: (.*))?$/s.exec(rest))) return { ...inChannel(parsedLine('NOTICE', r[1]!, r[3] ?? ''), r[2]), dialect: 'energymech' };
  if ((r = /^-(\S+)-(?: (.*))?$/s.exec(rest))) return parsedLine('NOTICE', r[1]!, r[2] ?? '');
  return null;
}

function parseStatus(s: string): Body | null {
  let r: RegExpExecArray | null;
  const presence = presenceLine(s);
  if (presence) {
    const { shape, reason } = hostAndReason(presence.inner);
    // ZNC writes `(ident@host) (reason)`; a colon-less line, a reason without a host and a part
    // without a reason are EnergyMech's.
    const dialect: Dialect = presence.colon && shape === 'host+reason' ? 'znc' : 'energymech';
    if (presence.kind === 'Joins') return presence.colon ? parsedLine('JOIN', presence.nick, null) : { ...parsedLine('JOIN', presence.nick, null), dialect };
    if (presence.kind === 'Parts') return { ...parsedLine('PART', presence.nick, reason), dialect };
    if (shape === 'none' && presence.colon) return quitLine(presence.nick, null);
    if (shape === 'host') return { ...quitLine(presence.nick, null), dialect: 'znc' };
    return { ...quitLine(presence.nick, reason), dialect };
  }
  if ((r = /^(\S+) is now known as (\S+)$/.exec(s))) return parsedLine('NICK', r[1]!, null, { toNick: r[2]! });
  if ((r = /^(\S+) was kicked by (\S+)(?: \((.*)\))?$/s.exec(s))) return parsedLine('KICK', r[2]!, r[3] || null, { toNick: r[1]! });
  if ((r = /^(\S+) sets mode: (\S.*?)\s*$/s.exec(s))) return modeLine(r[1]!, r[2]!);
  if ((r = /^(\S+) changes topic to "(.*)"$/s.exec(s))) return { ...parsedLine('TOPIC', r[1]!, r[2]!), dialect: 'energymech' };
  if ((r = /^(\S+) changes topic to '(.*)'$/s.exec(s))) return { ...parsedLine('TOPIC', r[1]!, r[2]!), dialect: 'znc' };
  return null;
}

/**
 * Parses a whole file. `date` (file name or --date) is the day of `[HH:MM:SS]` lines until a dated
 * stamp says otherwise; throws ParseError when such a line comes with no day known.
 */
export function parseEnergymechLog(content: Buffer | string, date: string | null, lastTime: string | null = null): ParsedFile {
  const buf = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
  const events: ParsedEvent[] = [];
  const unparsed: ParsedFile['unparsed'] = [];
  const clock = new DayClock(date, lastTime);
  let channel: string | null = null;
  let lines = 0;
  for (const { lineNo, raw, text } of splitLines(buf)) {
    lines += 1;
    const p = parseEnergymechLine(text);
    if (!p) {
      unparsed.push({ lineNo, text });
      continue;
    }
    const { time, date: day, dialect: _dialect, channel: named, ...line } = p;
    if (day && day !== clock.date) clock.set(day);
    const localTime = clock.at(time);
    if (!localTime) throw new ParseError('EnergyMech log lines carry only a time; the file name (or --date) must give the day');
    if (named && !channel) channel = named;
    events.push({ ...line, lineNo, raw, localTime, utcOffsetMinutes: null, netsplitBurst: null });
  }
  return { events: finishEvents(events), unparsed, lines, channel };
}

/**
 * Detection score: the share of lines read, in full only when the sample shows an EnergyMech-only
 * shape and no ZNC-only one (see the file comment).
 */
export function detectEnergymech(lines: string[]): number {
  if (!lines.length) return 0;
  let read = 0;
  let mech = 0;
  let znc = 0;
  for (const l of lines) {
    const p = parseEnergymechLine(l);
    if (!p) continue;
    read += 1;
    if (p.dialect === 'energymech') mech += 1;
    else if (p.dialect === 'znc') znc += 1;
  }
  const share = read / lines.length;
  return mech > 0 && znc === 0 ? share : share * 0.99;
}

const NAME = /^(.+)_(\d{4})(\d{2})(\d{2})\.log$/;

/** `#chan_20170102.log` or `<network>_#chan_20170102.log` → channel and day. */
export function parseEnergymechFileName(filePath: string): FileNameInfo | null {
  const m = NAME.exec(path.basename(filePath));
  if (!m) return null;
  const date = `${m[2]}-${m[3]}-${m[4]}`;
  if (!isValidDate(date)) return null;
  let channel = m[1]!;
  const at = channel.search(/_[#&+!]/);
  if (!/^[#&+!]/.test(channel) && at >= 0) channel = channel.slice(at + 1);
  return { channel, date };
}

export const energymechFormat: LogFormat = {
  name: 'energymech',
  description: 'EnergyMech channel log (#chan_YYYYMMDD.log; "[HH:MM:SS] *** Quits: nick (reason)")',
  parseFileName: parseEnergymechFileName,
  detect: detectEnergymech,
  parse: (content, ctx) => parseEnergymechLog(content, ctx.date, ctx.time),
};
