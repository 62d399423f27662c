/**
 * WeeChat logger plugin files (`~/.local/share/weechat/logs/irc.libera.#chan.weechatlog` with the
 * default mask `$plugin.$name.weechatlog`): one line per buffer line, `TIME\tPREFIX\tMESSAGE`.
 *
 * TIME is `logger.file.time_format`: `%Y-%m-%d %H:%M:%S` (local time) before WeeChat 4.8; 4.8.0
 * changed the default to `%@%F %T.%fZ`, UTC with microseconds (`2025-09-01 12:34:56.123456Z`;
 * WeeChat UPGRADING.md "New time format in log files", ChangeLog "logger: change default time
 * format to `%@%F %T.%fZ` (UTC)"). Any ISO 8601 date-time is read (`T` or space, fraction, `Z` /
 * `±HH:MM` / `±HHMM`); a stamp with an offset sets utcOffsetMinutes.
 *
 * PREFIX/MESSAGE, worded as WeeChat's irc plugin prints them (irc-protocol.c):
 *
 *   @nick            message                                       PRIVMSG (mode prefix dropped)
 *    *               nick does something                           ACTION
 *   -->              nick (user@host) has joined #chan
 *   <--              nick (user@host) has left #chan (reason)
 *   <--              nick (user@host) has quit (reason)            (reason "a.b c.d" → NETSPLIT)
 *   <--              op has kicked victim (reason)
 *   --               old is now known as new
 *   --               Mode #chan [+o nick] by op
 *   --               op has changed topic for #chan from "old" to "new"   (also `… to "new"`, `op has unset topic for #chan`)
 *   --               Notice(nick) -> #chan: text                   NOTICE (also `PvNotice(nick): text`, older `Notice(nick): text`)
 *
 * Bookkeeping: `****  Beginning of log  ****` / `****  End of log  ****` (logger.file.info_lines),
 * "You are now known as …", and the topic/nicks/modes/creation lines shown on join.
 */
import path from 'node:path';
import {
  type ChannelLine,
  parseSelfDatedLog,
  inChannel,
  isValidDate,
  type LineStamp,
  modeLine,
  parsedLine,
  parseIsoStamp,
  quitLine,
  stripFormatting,
  stripNickMode,
} from './common.js';
import type { FileNameInfo, LogFormat, ParsedFile } from './types.js';

export type WeechatEventLine = ChannelLine & LineStamp;
export type WeechatLine = WeechatEventLine | { marker: 'skip' };

/** Parses one decoded line; null when it is not in a known shape. Formatting codes are removed. */
export function parseWeechatLine(line: string): WeechatLine | null {
  const text = line.replace(/\r$/, '');
  const tab1 = text.indexOf('\t');
  if (tab1 < 0) return null;
  const stamp = parseIsoStamp(text.slice(0, tab1));
  if (!stamp) return null;
  const rest = text.slice(tab1 + 1);
  const tab2 = rest.indexOf('\t');
  const prefix = stripFormatting(tab2 < 0 ? rest : rest.slice(0, tab2)).trim();
  const msg = tab2 < 0 ? '' : stripFormatting(rest.slice(tab2 + 1));
  if (tab2 < 0) return /^\*+\s*(?:Beginning|End) of log\s*\*+$/i.test(prefix) ? { marker: 'skip' } : null;
  const p = parseBody(prefix, msg);
  if (!p || 'marker' in p) return p;
  return { ...p, ...stamp };
}

type Body = ChannelLine | { marker: 'skip' };

function parseBody(prefix: string, msg: string): Body | null {
  let r: RegExpExecArray | null;
  switch (prefix) {
    case '-->':
      if ((r = /^(\S+) (?:.* )?has joined (\S+)$/.exec(msg))) return inChannel(parsedLine('JOIN', r[1]!, null), r[2]);
      return null;
    case '<--':
      if ((r = /^(\S+)(?: \([^)]*\))? has left (\S+)(?: \((.*)\))?$/s.exec(msg))) return inChannel(parsedLine('PART', r[1]!, r[3] || null), r[2]);
      if ((r = /^(\S+)(?: \([^)]*\))? has quit(?: \((.*)\))?$/s.exec(msg))) return quitLine(r[1]!, r[2]);
      return kick(msg);
    case '--':
      return parseNetwork(msg);
    case '*':
      if ((r = /^(\S+)(?: (.*))?$/s.exec(msg))) return parsedLine('ACTION', stripNickMode(r[1]!), r[2] ?? '');
      return null;
    default: {
      const nick = stripNickMode(prefix);
      if (!nick || /\s/.test(nick) || /^[-<>=*!]/.test(nick)) return null;
      return parsedLine('PRIVMSG', nick, msg);
    }
  }
}

function kick(msg: string): ChannelLine | null {
  const r = /^(\S+) has kicked (\S+)(?: \((.*)\))?$/s.exec(msg);
  return r ? parsedLine('KICK', r[1]!, r[3] || null, { toNick: r[2]! }) : null;
}

const SKIP_NETWORK = [
  /^You are now known as /,
  /^Topic for \S+ is /,
  /^Topic set by /,
  /^Channel \S+: \d+ nicks? /,
  /^Nicks \S+: /,
  /^Channel created on /,
  /^Mode \S+ \[[^\]]*\]$/,
  /^URL for \S+: /,
];

function parseNetwork(msg: string): Body | null {
  let r: RegExpExecArray | null;
  if ((r = /^(\S+) is now known as (\S+)$/.exec(msg))) return parsedLine('NICK', r[1]!, null, { toNick: r[2]! });
  if ((r = /^Mode (\S+) \[(.+)\] by (\S+)$/s.exec(msg))) return inChannel(modeLine(r[3]!, r[2]!), r[1]);
  if ((r = /^(\S+) has changed topic for (\S+) from "(.*)" to "(.*)"$/s.exec(msg))) return inChannel(parsedLine('TOPIC', r[1]!, r[4]!), r[2]);
  if ((r = /^(\S+) has changed topic for (\S+) to "(.*)"$/s.exec(msg))) return inChannel(parsedLine('TOPIC', r[1]!, r[3]!), r[2]);
  if ((r = /^(\S+) has unset topic for (\S+)(?: .*)?$/s.exec(msg))) return inChannel(parsedLine('TOPIC', r[1]!, ''), r[2]);
  if ((r = /^(?:Pv)?Notice\(([^)]+)\)(?: -> (\S+))?: (.*)$/s.exec(msg))) return inChannel(parsedLine('NOTICE', stripNickMode(r[1]!), r[3]!), r[2]);
  const k = kick(msg);
  if (k) return k;
  if (SKIP_NETWORK.some((re) => re.test(msg))) return { marker: 'skip' };
  return null;
}

/** Parses a whole WeeChat log; every line carries its own date, so no day is needed. */
export function parseWeechatLog(content: Buffer | string): ParsedFile {
  return parseSelfDatedLog(content, parseWeechatLine);
}

const DATE_IN_NAME = /(?:^|[._-])(\d{4}-\d{2}-\d{2}|\d{8})(?=[._-]|$)/;

/**
 * `irc.libera.#chan.weechatlog` (default mask `$plugin.$name.weechatlog`, name = server.#chan),
 * `<server>/#chan.weechatlog`, with an optional `YYYY-MM-DD`/`YYYYMMDD` part and rotation suffix
 * (`.weechatlog.1`) → channel (or, for `irc.<server>.<nick>`, the query nick) and day.
 */
export function parseWeechatFileName(filePath: string): FileNameInfo | null {
  const m = /^(.*)\.weechatlog(?:\.\d+)?$/.exec(path.basename(filePath));
  if (!m) return null;
  let base = m[1]!;
  let date: string | null = null;
  const d = DATE_IN_NAME.exec(base);
  if (d) {
    const iso = d[1]!.length === 8 ? `${d[1]!.slice(0, 4)}-${d[1]!.slice(4, 6)}-${d[1]!.slice(6)}` : d[1]!;
    if (isValidDate(iso)) {
      date = iso;
      base = (base.slice(0, d.index) + base.slice(d.index + d[0].length)).replace(/^[._-]|[._-]$/g, '');
    }
  }
  let channel: string | null = null;
  const at = base.search(/(?:^|\.)[#&+!]/);
  if (at >= 0) channel = base.slice(base[at] === '.' ? at + 1 : at);
  else {
    const q = /^irc\.([^.]+)\.([^.]+)$/.exec(base);
    if (q && q[1] !== 'server') channel = q[2]!;
  }
  return { channel, date };
}

export const weechatFormat: LogFormat = {
  name: 'weechat',
  description: 'WeeChat logger (irc.<server>.#chan.weechatlog; "TIME<tab>PREFIX<tab>MESSAGE", ISO times, UTC "…Z" since 4.8)',
  parseFileName: parseWeechatFileName,
  detect: (lines) => (lines.length ? lines.filter((l) => parseWeechatLine(l) !== null).length / lines.length : 0),
  parse: (content) => parseWeechatLog(content),
};
