/**
 * ZNC `log` module format, one file per channel-day: `#chan_YYYYMMDD.log(.txt)` (older ZNC, the
 * shared #qtox logs) or `…/#chan/YYYY-MM-DD.log` (ZNC ≥ 1.7's default `$NETWORK/$WINDOW/%Y-%m-%d.log`):
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
 * Also read, so a file of a neighbouring dialect loses nothing when it is parsed as ZNC: a quit or
 * part whose only parentheses hold a reason rather than `user@host` (`*** Quits: nick (Ping
 * timeout)`), and the older colon-less `*** Joins nick`, `*** Parts nick`, `*** Quits nick (reason)`.
 */
import path from 'node:path';
import { DayClock, finishEvents, hostAndReason, isNetsplitReason, isValidDate, normalizeTime, presenceLine, splitLines, stripFormatting } from './common.js';
import { ParseError, type FileNameInfo, type IrcEventType, type LogFormat, type ParsedEvent, type ParsedFile, type ParsedLine } from './types.js';

export { decodeLine, stripFormatting } from './common.js';

/** A parsed line plus its `HH:MM:SS` time. */
export type TimedLine = ParsedLine & { time: string };

const OLD_NAME = /^(.+)_(\d{4})(\d{2})(\d{2})\.log(?:\.txt)?$/;
const NEW_NAME = /^(\d{4}-\d{2}-\d{2})\.log(?:\.txt)?$/;

/** `#qtox_20160601.log.txt` → `{channel: '#qtox', date: '2016-06-01'}`; `…/#qtox/2016-06-01.log` likewise; else null. */
export function parseLogFileName(filePath: string): { channel: string; date: string } | null {
  const base = path.basename(filePath);
  let m = OLD_NAME.exec(base);
  if (m) {
    const date = `${m[2]}-${m[3]}-${m[4]}`;
    return isValidDate(date) ? { channel: m[1]!, date } : null;
  }
  m = NEW_NAME.exec(base);
  if (m && isValidDate(m[1]!)) {
    const dir = path.basename(path.dirname(filePath));
    return WINDOW_NAME.test(dir) ? { channel: dir, date: m[1]! } : null;
  }
  return null;
}

/**
 * A folder named like a channel (`#`, `&`, `+` or `!`, then no space, comma or control character):
 * only such a folder gives a `YYYY-MM-DD.log` its channel. Any other folder (`logs`, `2016-backup`,
 * a query window named after a nick) names none: pass --channel, or --path with {channel}.
 */
// eslint-disable-next-line no-control-regex -- control characters are what the name must not hold
const WINDOW_NAME = /^[#&+!][^\s,\x00-\x1f\x7f]{1,199}$/;

const LINE = /^\[(\d{2}):(\d{2}):(\d{2})\] (.*)$/s;

const ev = (eventType: IrcEventType, time: string, nick: string | null, messageText: string | null, extra: Partial<ParsedLine> = {}): TimedLine => ({
  eventType,
  time,
  nick,
  messageText,
  target: null,
  toNick: null,
  ...extra,
});

/** Parses one decoded line; null when it is not in a known shape. Formatting codes are removed. */
export function parseZncLine(line: string): TimedLine | null {
  const m = LINE.exec(line.replace(/\r$/, ''));
  if (!m) return null;
  const time = normalizeTime(m[1]!, m[2]!, m[3]);
  if (!time) return null;
  const rest = stripFormatting(m[4]!);
  let r: RegExpExecArray | null;

  if ((r = /^<([^>\s]+)> ?(.*)$/s.exec(rest))) return ev('PRIVMSG', time, r[1]!, r[2]!);
  if ((r = /^\*\*\* (.*)$/s.exec(rest))) return parseStatus(time, r[1]!);
  if ((r = /^\* (\S+) ?(.*)$/s.exec(rest))) return ev('ACTION', time, r[1]!, r[2]!);
  if ((r = /^-(\S+)-(?: (.*))?$/s.exec(rest))) return ev('NOTICE', time, r[1]!, r[2] ?? '');
  return null;
}

function parseStatus(time: string, s: string): TimedLine | null {
  let r: RegExpExecArray | null;
  const presence = presenceLine(s);
  if (presence) {
    // A parenthesised text that is not `user@host` is the reason (see hostAndReason).
    const { reason } = hostAndReason(presence.inner);
    if (presence.kind === 'Joins') return ev('JOIN', time, presence.nick, null);
    if (presence.kind === 'Parts') return ev('PART', time, presence.nick, reason);
    return ev(isNetsplitReason(reason) ? 'NETSPLIT' : 'QUIT', time, presence.nick, reason);
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

/**
 * A line ZNC itself writes. The parser also reads a few shapes of neighbouring dialects (see the
 * file comment) so that nothing is lost when a file is read as ZNC; detection does not count them
 * for ZNC, so a file with such lines goes to the format that writes them (EnergyMech).
 */
function isZncShape(line: string): boolean {
  if (parseZncLine(line) === null) return false;
  const body = LINE.exec(line)?.[4] ?? '';
  const status = /^\*\*\* (.*)$/s.exec(body);
  const presence = status ? presenceLine(status[1]!) : null;
  if (presence && (!presence.colon || (presence.kind !== 'Joins' && hostAndReason(presence.inner).shape === 'reason'))) return false;
  return !/^-\S+?:[#&+!]\S*-/.test(body);
}

/**
 * Parses a whole file's bytes for day `date` (`YYYY-MM-DD`). Each line is decoded on its own
 * (UTF-8, else Windows-1252). Netsplit bursts, merges and addressees are found by finishEvents.
 */
export function parseZncLog(content: Buffer | string, date: string, lastTime: string | null = null): ParsedFile {
  const buf = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
  const events: ParsedEvent[] = [];
  const unparsed: ParsedFile['unparsed'] = [];
  const clock = new DayClock(date, lastTime);
  let lines = 0;
  for (const { lineNo, raw, text } of splitLines(buf)) {
    lines += 1;
    const p = parseZncLine(text);
    if (!p) {
      unparsed.push({ lineNo, text });
      continue;
    }
    const { time, ...line } = p;
    events.push({ ...line, lineNo, raw, localTime: clock.at(time)!, utcOffsetMinutes: null, netsplitBurst: null });
  }
  return { events: finishEvents(events), unparsed, lines, channel: null };
}

export const zncFormat: LogFormat = {
  name: 'znc',
  description: 'ZNC log module (#chan_YYYYMMDD.log, or #chan/YYYY-MM-DD.log)',
  parseFileName: (filePath): FileNameInfo | null => parseLogFileName(filePath),
  detect: (lines) => (lines.length ? lines.filter(isZncShape).length / lines.length : 0),
  parse(content, ctx) {
    if (!ctx.date) throw new ParseError('ZNC log lines carry only a time; the file name (or --date) must give the day');
    return parseZncLog(content, ctx.date, ctx.time);
  },
};
