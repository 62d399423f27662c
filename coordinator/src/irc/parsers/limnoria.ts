/**
 * Limnoria (supybot) ChannelLogger plugin: `logs/ChannelLogger/<network>/#chan/#chan.log`, or
 * `#chan.YYYY-MM-DD.log` with rotateLogs (filenameTimestamp `%Y-%m-%d`). Each line starts with
 * `supybot.log.timestampFormat` and two spaces; Limnoria's default is `%Y-%m-%dT%H:%M:%S` (local
 * time, no offset), old supybot's was `[%d-%b-%Y %H:%M:%S]`; ISO stamps with an offset set
 * utcOffsetMinutes. The wording is ChannelLogger's (plugins/ChannelLogger/plugin.py):
 *
 *   2017-01-02T12:34:56  <nick> message                          PRIVMSG
 *   2017-01-02T12:34:56  * nick does something                   ACTION
 *   2017-01-02T12:34:56  -nick- text                             NOTICE
 *   2017-01-02T12:34:56  *** nick <nick!user@host> has joined #chan
 *   2017-01-02T12:34:56  *** nick <nick!user@host> has left #chan (reason)
 *   2017-01-02T12:34:56  *** nick <nick!user@host> has quit IRC (reason)     (reason "a.b c.d" → NETSPLIT)
 *   2017-01-02T12:34:56  *** old is now known as new
 *   2017-01-02T12:34:56  *** victim was kicked by op (reason)
 *   2017-01-02T12:34:56  *** op sets mode: +o nick
 *   2017-01-02T12:34:56  *** op changes topic to "topic"
 *
 * `*** nick <mask> invited other to #chan` is kept out as bookkeeping (there is no invite event type).
 */
import path from 'node:path';
import {
  type ChannelLine,
  parseSelfDatedLog,
  dateFromParts,
  inChannel,
  isValidDate,
  type LineStamp,
  modeLine,
  normalizeTime,
  parsedLine,
  parseIsoStamp,
  quitLine,
  stripFormatting,
} from './common.js';
import type { FileNameInfo, LogFormat, ParsedFile } from './types.js';

export type LimnoriaEventLine = ChannelLine & LineStamp;
export type LimnoriaLine = LimnoriaEventLine | { marker: 'skip' };

const ISO_LINE = /^(\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:[Zz]|[+-]\d{2}(?::?\d{2})?)?) {2}(.*)$/s;
const SUPYBOT_LINE = /^\[(\d{2})-([A-Za-z]{3})-(\d{4}) (\d{2}):(\d{2}):(\d{2})\] {2}(.*)$/s;

function stampOf(text: string): { stamp: LineStamp; rest: string } | null {
  let m = ISO_LINE.exec(text);
  if (m) {
    const stamp = parseIsoStamp(m[1]!);
    return stamp ? { stamp, rest: m[2]! } : null;
  }
  if ((m = SUPYBOT_LINE.exec(text))) {
    const date = dateFromParts(m[3]!, m[2]!, m[1]!);
    const time = normalizeTime(m[4]!, m[5]!, m[6]);
    return date && time ? { stamp: { localTime: `${date} ${time}`, utcOffsetMinutes: null }, rest: m[7]! } : null;
  }
  return null;
}

/** Parses one decoded line; null when it is not in a known shape. Formatting codes are removed. */
export function parseLimnoriaLine(line: string): LimnoriaLine | null {
  const s = stampOf(line.replace(/\r$/, ''));
  if (!s) return null;
  const rest = stripFormatting(s.rest);
  let r: RegExpExecArray | null;
  let p: ChannelLine | { marker: 'skip' } | null = null;
  if ((r = /^\*\*\* (.*)$/s.exec(rest))) p = parseStatus(r[1]!);
  else if ((r = /^<([^>\s]+)> ?(.*)$/s.exec(rest))) p = parsedLine('PRIVMSG', r[1]!, r[2]!);
  else if ((r = /^\* (\S+)(?: (.*))?$/s.exec(rest))) p = parsedLine('ACTION', r[1]!, r[2] ?? '');
  else if ((r = /^-(\S+?)-(?: (.*))?$/s.exec(rest))) p = parsedLine('NOTICE', r[1]!, r[2] ?? '');
  if (!p || 'marker' in p) return p;
  return { ...p, ...s.stamp };
}

function parseStatus(s: string): ChannelLine | { marker: 'skip' } | null {
  let r: RegExpExecArray | null;
  if ((r = /^(\S+) <\S*> has joined (\S+)$/.exec(s))) return inChannel(parsedLine('JOIN', r[1]!, null), r[2]);
  if ((r = /^(\S+) <\S*> has left (\S+)(?: \((.*)\))?$/s.exec(s))) return inChannel(parsedLine('PART', r[1]!, r[3] || null), r[2]);
  if ((r = /^(\S+) <\S*> has quit IRC(?: \((.*)\))?$/s.exec(s))) return quitLine(r[1]!, r[2]);
  if ((r = /^(\S+) is now known as (\S+)$/.exec(s))) return parsedLine('NICK', r[1]!, null, { toNick: r[2]! });
  if ((r = /^(\S+) was kicked by (\S+)(?: \((.*)\))?$/s.exec(s))) return parsedLine('KICK', r[2]!, r[3] || null, { toNick: r[1]! });
  if ((r = /^(\S+) sets mode: (\S.*?)\s*$/s.exec(s))) return modeLine(r[1]!, r[2]!);
  if ((r = /^(\S+) changes topic to "(.*)"$/s.exec(s))) return parsedLine('TOPIC', r[1]!, r[2]!);
  if (/^\S+ <\S*> invited \S+ to \S+$/.test(s)) return { marker: 'skip' };
  return null;
}

/** Parses a whole ChannelLogger file; every line carries its own date, so no day is needed. */
export function parseLimnoriaLog(content: Buffer | string): ParsedFile {
  return parseSelfDatedLog(content, parseLimnoriaLine);
}

/**
 * `#chan.log` and rotated `#chan.2017-01-02.log` → channel and day; a differently named file in
 * a channel folder (`…/ChannelLogger/<network>/#chan/…`) takes the folder's channel.
 */
export function parseLimnoriaFileName(filePath: string): FileNameInfo | null {
  const base = path.basename(filePath);
  const m = /^(.+?)(?:\.(\d{4}-\d{2}-\d{2}))?\.log$/.exec(base);
  if (!m) return null;
  const date = m[2] && isValidDate(m[2]) ? m[2] : null;
  if (/^[#&+!]/.test(m[1]!)) return { channel: m[1]!, date };
  const dir = path.basename(path.dirname(filePath));
  return /^[#&+!]/.test(dir) ? { channel: dir, date } : null;
}

export const limnoriaFormat: LogFormat = {
  name: 'limnoria',
  description: 'Limnoria/supybot ChannelLogger (#chan.log, #chan.YYYY-MM-DD.log; "YYYY-MM-DDTHH:MM:SS  <nick> text")',
  parseFileName: parseLimnoriaFileName,
  detect: (lines) => (lines.length ? lines.filter((l) => parseLimnoriaLine(l) !== null).length / lines.length : 0),
  parse: (content) => parseLimnoriaLog(content),
};
