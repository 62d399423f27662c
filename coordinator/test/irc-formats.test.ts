/**
 * Chat-log formats beside ZNC: irssi, WeeChat, Limnoria, HexChat, EnergyMech. The sample lines are
 * written here from each program's own wording (no real logs of these formats are in the repo):
 *  - irssi: the default theme's formats and the log_open_string / log_close_string / log_day_changed
 *    / log_timestamp settings;
 *  - WeeChat: irc-protocol.c messages, logger-buffer.c ("****  Beginning of log  ****"), and the 4.8
 *    default logger.file.time_format `%@%F %T.%fZ` (UPGRADING.md, ChangeLog);
 *  - Limnoria: plugins/ChannelLogger/plugin.py and supybot.log.timestampFormat `%Y-%m-%dT%H:%M:%S`;
 *  - HexChat: src/common/textevents.in (default text events), "%b %d %H:%M:%S" log stamps;
 *  - EnergyMech: parse.c / channel.c send_spy() lines, and logtime() for dated stamps.
 * Fixture files (helpers/irc-format-fixtures.ts) are written into a temporary folder; importing
 * them into PostgreSQL is irc-formats-import.test.ts (this file is pure parsing: the unit tier).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseIsoStamp } from '../src/irc/parsers/common.js';
import { detectEnergymech, energymechFormat, parseEnergymechFileName, parseEnergymechLine, parseEnergymechLog } from '../src/irc/parsers/energymech.js';
import { parseHexchatFileName, parseHexchatLine, parseHexchatLog } from '../src/irc/parsers/hexchat.js';
import { detectFormat, LOG_FORMAT_NAMES } from '../src/irc/parsers/index.js';
import { parseIrssiFileName, parseIrssiLine, parseIrssiLog } from '../src/irc/parsers/irssi.js';
import { parseLimnoriaFileName, parseLimnoriaLine, parseLimnoriaLog } from '../src/irc/parsers/limnoria.js';
import { ParseError } from '../src/irc/parsers/types.js';
import { parseWeechatFileName, parseWeechatLine, parseWeechatLog } from '../src/irc/parsers/weechat.js';
import { ENERGYMECH, FIXTURES, HEXCHAT, IRSSI, LIMNORIA, WEECHAT, lines, writeFormatFixtures } from './helpers/irc-format-fixtures.js';

/** A UTF-8 file with one Windows-1252 line (`café “quoted”` as cp1252 bytes) in the middle. */
const withCp1252 = (before: string, cp1252Line: string, after: string) =>
  Buffer.concat([Buffer.from(`${before}\n`, 'utf8'), Buffer.from(cp1252Line, 'latin1'), Buffer.from(`\n${after}\n`, 'utf8')]);
const CP1252_TEXT = 'caf\xe9 \x93quoted\x94';

let tmp: string;
beforeAll(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'irc-formats-'));
  writeFormatFixtures(tmp);
});
afterAll(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

/** The events of a parsed file as [type, nick, text, toNick, target]. */
const shape = (events: Array<{ eventType: string; nick: string | null; messageText: string | null; toNick: string | null; target: string | null }>) =>
  events.map((e) => [e.eventType, e.nick, e.messageText, e.toNick, e.target]);

// ---------------------------------------------------------------------------------------------

describe('irssi (default theme and log_* settings)', () => {
  it('reads messages, actions and notices, dropping nick mode prefixes', () => {
    expect(parseIrssiLine('12:34 <@tux3> hello there')).toEqual({
      eventType: 'PRIVMSG',
      time: '12:34:00',
      nick: 'tux3',
      messageText: 'hello there',
      target: null,
      toNick: null,
    });
    expect(parseIrssiLine('12:34 < zetok> hi')).toMatchObject({ eventType: 'PRIVMSG', nick: 'zetok', messageText: 'hi' });
    expect(parseIrssiLine('12:34 <+voiced> hi')).toMatchObject({ nick: 'voiced' });
    expect(parseIrssiLine('12:34 <plain> hi')).toMatchObject({ nick: 'plain' });
    expect(parseIrssiLine('12:34:56 <@tux3> with seconds')).toMatchObject({ time: '12:34:56', nick: 'tux3' });
    expect(parseIrssiLine('12:34  * tux3 waves at everyone')).toMatchObject({ eventType: 'ACTION', nick: 'tux3', messageText: 'waves at everyone' });
    expect(parseIrssiLine('12:34 -NickServ(NickServ@services.)- This nickname is registered.')).toMatchObject({
      eventType: 'NOTICE',
      nick: 'NickServ',
      messageText: 'This nickname is registered.',
    });
    expect(parseIrssiLine('12:34 -qtox-git-spam:#qtox- [qTox] pushed 1 commit')).toMatchObject({
      eventType: 'NOTICE',
      nick: 'qtox-git-spam',
      messageText: '[qTox] pushed 1 commit',
      channel: '#qtox',
    });
  });

  it('reads joins, parts, quits (netsplit reasons too), nicks, modes, topics and kicks', () => {
    expect(parseIrssiLine('12:00 -!- alice [~alice@host.example] has joined #chan')).toMatchObject({
      eventType: 'JOIN',
      nick: 'alice',
      messageText: null,
      channel: '#chan',
    });
    expect(parseIrssiLine('12:00 -!- alice [~alice@host.example] has joined #chan [account alice] [realname [Alice A.]]')).toMatchObject({
      eventType: 'JOIN',
      nick: 'alice',
      channel: '#chan',
    });
    expect(parseIrssiLine('12:00 -!- alice [~alice@host.example] has left #chan [see you]')).toMatchObject({
      eventType: 'PART',
      nick: 'alice',
      messageText: 'see you',
    });
    expect(parseIrssiLine('12:00 -!- alice [~alice@host.example] has left #chan []')).toMatchObject({ eventType: 'PART', messageText: null });
    expect(parseIrssiLine('12:00 -!- alice [~alice@host.example] has quit [Ping timeout: 240 seconds]')).toMatchObject({
      eventType: 'QUIT',
      nick: 'alice',
      messageText: 'Ping timeout: 240 seconds',
    });
    expect(parseIrssiLine('12:00 -!- alice [~alice@host.example] has quit [*.net *.split]')).toMatchObject({
      eventType: 'NETSPLIT',
      messageText: '*.net *.split',
    });
    expect(parseIrssiLine('12:00 -!- #chan alice [~alice@host.example] has quit [bye]')).toMatchObject({
      eventType: 'QUIT',
      nick: 'alice',
      messageText: 'bye',
    });
    expect(parseIrssiLine('12:00 -!- alice is now known as alice_')).toMatchObject({ eventType: 'NICK', nick: 'alice', toNick: 'alice_' });
    expect(parseIrssiLine('12:00 -!- mode/#chan [+o bob] by ChanServ')).toMatchObject({
      eventType: 'MODE',
      nick: 'ChanServ',
      messageText: '+o bob',
      target: 'bob',
    });
    expect(parseIrssiLine('12:00 -!- mode/#chan [+nt] by alice')).toMatchObject({ eventType: 'MODE', messageText: '+nt', target: null });
    expect(parseIrssiLine('12:00 -!- ServerMode/#chan [+o bob] by irc.example.net')).toMatchObject({ eventType: 'MODE', nick: 'irc.example.net' });
    expect(parseIrssiLine('12:00 -!- alice changed the topic of #chan to: welcome | rules: be nice')).toMatchObject({
      eventType: 'TOPIC',
      nick: 'alice',
      messageText: 'welcome | rules: be nice',
    });
    expect(parseIrssiLine('12:00 -!- Topic unset by alice on #chan')).toMatchObject({ eventType: 'TOPIC', nick: 'alice', messageText: '' });
    expect(parseIrssiLine('12:00 -!- spammer was kicked from #chan by alice [spam [again]]')).toMatchObject({
      eventType: 'KICK',
      nick: 'alice',
      toNick: 'spammer',
      messageText: 'spam [again]',
    });
  });

  it("reads irssi's own netsplit summaries as one NETSPLIT / NETMERGE row per line", () => {
    expect(parseIrssiLine('12:00 -!- Netsplit hub.example.net <-> leaf.example.net quits: a, b, c (+2 more, use /NETSPLIT to show all of them)')).toMatchObject(
      { eventType: 'NETSPLIT', nick: null, messageText: 'hub.example.net leaf.example.net', target: 'a, b, c' },
    );
    expect(parseIrssiLine('12:05 -!- Netsplit over, joins: a, b')).toMatchObject({ eventType: 'NETMERGE', nick: null, target: 'a, b' });
    const f = parseIrssiLog(lines('12:00 -!- Netsplit hub.net <-> leaf.net quits: a, b', '12:05 -!- Netsplit over, joins: a, b'), '2017-01-02');
    expect(f.events.map((e) => [e.eventType, e.netsplitBurst])).toEqual([
      ['NETSPLIT', 1],
      ['NETMERGE', 2],
    ]);
  });

  it('treats log, day and status lines as bookkeeping, not as unparsed', () => {
    expect(parseIrssiLine('--- Log opened Sun Jan 01 00:00:00 2017')).toEqual({ marker: 'open', date: '2017-01-01' });
    expect(parseIrssiLine('--- Day changed Mon Jan 02 2017')).toEqual({ marker: 'day', date: '2017-01-02' });
    expect(parseIrssiLine('--- Log closed Mon Jan 02 10:00:00 2017')).toEqual({ marker: 'skip' });
    expect(parseIrssiLine('12:00 -!- Irssi: #chan: Total of 3 nicks [1 ops, 0 halfops, 0 voices, 2 normal]')).toEqual({ marker: 'skip' });
    expect(parseIrssiLine('12:00 [Users #chan]')).toEqual({ marker: 'skip' });
    expect(parseIrssiLine('12:00 [@alice] [ bob  ] [ carol]')).toEqual({ marker: 'skip' });
    expect(parseIrssiLine('12:00 -!- Topic for #chan: hello')).toEqual({ marker: 'skip' });
    expect(parseIrssiLine('12:00 -!- mode/#chan [+nt]')).toEqual({ marker: 'skip' });
    expect(parseIrssiLine('12:00 -!- alice [~alice@host.example] has changed host')).toEqual({ marker: 'skip' });
    expect(parseIrssiLine('just some text')).toBeNull();
    expect(parseIrssiLine('25:00 <a> b')).toBeNull();
    expect(parseIrssiLine('12:00 -!- something new happened')).toBeNull();
  });

  it('takes days from Log opened / Day changed, and counts every line', () => {
    const f = parseIrssiLog(IRSSI, null);
    expect(f.lines).toBe(17);
    expect(f.unparsed).toEqual([]);
    expect(f.channel).toBe('#irssi');
    expect(f.events).toHaveLength(13);
    expect(shape(f.events)).toEqual([
      ['JOIN', 'alice', null, null, null],
      ['PRIVMSG', 'alice', 'hello bob', null, null],
      ['PRIVMSG', 'bob', 'alice: hi', 'alice', null],
      ['ACTION', 'bob', 'waves', null, null],
      ['MODE', 'alice', '+o bob', null, 'bob'],
      ['TOPIC', 'alice', 'welcome', null, null],
      ['NICK', 'bob', null, 'bobby', null],
      ['KICK', 'alice', 'spam', 'carol', null],
      ['PART', 'dave', 'bye', null, null],
      ['QUIT', 'erin', 'Quit: leaving', null, null],
      ['NOTICE', 'alice', 'notice text', null, null],
      ['PRIVMSG', 'bobby', 'late', null, null],
      ['PRIVMSG', 'bobby', 'early', null, null],
    ]);
    expect(f.events[0]).toMatchObject({ lineNo: 2, localTime: '2017-01-02 10:00:00', utcOffsetMinutes: null, netsplitBurst: null });
    expect(f.events.at(-2)!.localTime).toBe('2017-01-02 23:59:00');
    expect(f.events.at(-1)!.localTime).toBe('2017-01-03 00:01:00');
    // The file-name date only places lines before the first Log opened.
    expect(
      parseIrssiLog(lines('09:00 <a> before', '--- Log opened Wed Mar 01 10:00:00 2017', '10:00 <a> after'), '2017-02-28').events.map((e) => e.localTime),
    ).toEqual(['2017-02-28 09:00:00', '2017-03-01 10:00:00']);
  });

  it('rolls the day over at midnight without a Day changed line, and needs some day', () => {
    expect(parseIrssiLog(lines('23:58 <a> x', '00:02 <a> y'), '2017-12-31').events.map((e) => e.localTime)).toEqual([
      '2017-12-31 23:58:00',
      '2018-01-01 00:02:00',
    ]);
    // Day changed first line without a date: lines before it (none here) would be the day before.
    expect(parseIrssiLog(lines('--- Day changed Fri Mar 03 2017', '00:00 <a> x'), null).events[0]!.localTime).toBe('2017-03-03 00:00:00');
    expect(parseIrssiLog(lines('23:00 <a> x', '--- Day changed Fri Mar 03 2017', '00:00 <a> y'), null).events.map((e) => e.localTime)).toEqual([
      '2017-03-02 23:00:00',
      '2017-03-03 00:00:00',
    ]);
    expect(() => parseIrssiLog(lines('12:00 <a> no day anywhere'), null)).toThrow(ParseError);
  });

  it('decodes a Windows-1252 line among UTF-8 ones and strips mIRC colours', () => {
    const f = parseIrssiLog(
      withCp1252('--- Log opened Mon Jan 02 10:00:00 2017\n10:00 <a> naïve ✓', `10:01 <b> ${CP1252_TEXT}`, '10:02 <c> \x0304,12red\x03 \x02bold\x02'),
      null,
    );
    expect(f.events.map((e) => e.messageText)).toEqual(['naïve ✓', 'café “quoted”', 'red bold']);
    expect(f.events[1]!.raw.toString('latin1')).toBe(`10:01 <b> ${CP1252_TEXT}`);
  });

  it('reads channel and day from the usual file names', () => {
    expect(parseIrssiFileName('/home/u/irclogs/libera/#qtox.log')).toEqual({ channel: '#qtox', date: null });
    expect(parseIrssiFileName('#qtox-2017-01-02.log')).toEqual({ channel: '#qtox', date: '2017-01-02' });
    expect(parseIrssiFileName('#qtox.2017-01-02.log')).toEqual({ channel: '#qtox', date: '2017-01-02' });
    expect(parseIrssiFileName('#qtox.2017-02-30.log')).toBeNull();
    expect(parseIrssiFileName('notes.txt')).toBeNull();
  });
});

describe('WeeChat logger (TIME<tab>PREFIX<tab>MESSAGE)', () => {
  it('reads the pre-4.8 local stamps and the 4.8 default UTC stamps with microseconds', () => {
    expect(parseWeechatLine('2017-01-02 12:34:56\tzetok\thello')).toEqual({
      eventType: 'PRIVMSG',
      nick: 'zetok',
      messageText: 'hello',
      target: null,
      toNick: null,
      localTime: '2017-01-02 12:34:56',
      utcOffsetMinutes: null,
    });
    // WeeChat 4.8: logger.file.time_format default "%@%F %T.%fZ".
    expect(parseWeechatLine('2025-09-01 22:34:56.123456Z\t@tux3\thi')).toMatchObject({ nick: 'tux3', localTime: '2025-09-01 22:34:56', utcOffsetMinutes: 0 });
    expect(parseWeechatLine('2025-09-01T22:34:56+02:00\tzetok\thi')).toMatchObject({ localTime: '2025-09-01 22:34:56', utcOffsetMinutes: 120 });
    expect(parseWeechatLine('2025-09-01T22:34:56.5-0530\tzetok\thi')).toMatchObject({ utcOffsetMinutes: -330 });
    expect(parseWeechatLine('2025-09-01t22:34:56z\tzetok\thi')).toMatchObject({ utcOffsetMinutes: 0 });
    expect(parseIsoStamp('2025-02-30 12:00:00')).toBeNull();
    expect(parseIsoStamp('2025-01-30 12:00:00+25:00')).toBeNull();
  });

  it('reads every event kind in WeeChat wording', () => {
    const at = '2017-01-02 12:00:00\t';
    expect(parseWeechatLine(`${at} *\ttux3 waves`)).toMatchObject({ eventType: 'ACTION', nick: 'tux3', messageText: 'waves' });
    expect(parseWeechatLine(`${at}-->\talice (~alice@host.example) has joined #chan`)).toMatchObject({ eventType: 'JOIN', nick: 'alice', channel: '#chan' });
    expect(parseWeechatLine(`${at}-->\talice has joined #chan`)).toMatchObject({ eventType: 'JOIN', nick: 'alice' });
    expect(parseWeechatLine(`${at}<--\talice (~alice@host.example) has left #chan (bye (really))`)).toMatchObject({
      eventType: 'PART',
      nick: 'alice',
      messageText: 'bye (really)',
    });
    expect(parseWeechatLine(`${at}<--\talice (~alice@host.example) has left #chan`)).toMatchObject({ eventType: 'PART', messageText: null });
    expect(parseWeechatLine(`${at}<--\talice (~alice@host.example) has quit (Remote host closed the connection)`)).toMatchObject({
      eventType: 'QUIT',
      messageText: 'Remote host closed the connection',
    });
    expect(parseWeechatLine(`${at}<--\talice (~alice@host.example) has quit (irc.a.net irc.b.net)`)).toMatchObject({ eventType: 'NETSPLIT' });
    expect(parseWeechatLine(`${at}<--\talice has kicked spammer (go away)`)).toMatchObject({
      eventType: 'KICK',
      nick: 'alice',
      toNick: 'spammer',
      messageText: 'go away',
    });
    expect(parseWeechatLine(`${at}--\talice is now known as alice_`)).toMatchObject({ eventType: 'NICK', nick: 'alice', toNick: 'alice_' });
    expect(parseWeechatLine(`${at}--\tMode #chan [+o bob] by ChanServ`)).toMatchObject({
      eventType: 'MODE',
      nick: 'ChanServ',
      messageText: '+o bob',
      target: 'bob',
    });
    expect(parseWeechatLine(`${at}--\talice has changed topic for #chan from "old" to "new "quoted""`)).toMatchObject({
      eventType: 'TOPIC',
      messageText: 'new "quoted"',
    });
    expect(parseWeechatLine(`${at}--\talice has changed topic for #chan to "first"`)).toMatchObject({
      eventType: 'TOPIC',
      nick: 'alice',
      messageText: 'first',
    });
    expect(parseWeechatLine(`${at}--\talice has unset topic for #chan`)).toMatchObject({ eventType: 'TOPIC', messageText: '' });
    expect(parseWeechatLine(`${at}--\tNotice(@alice) -> #chan: hello all`)).toMatchObject({ eventType: 'NOTICE', nick: 'alice', messageText: 'hello all' });
    expect(parseWeechatLine(`${at}--\tPvNotice(ChanServ): [#chan] welcome`)).toMatchObject({
      eventType: 'NOTICE',
      nick: 'ChanServ',
      messageText: '[#chan] welcome',
    });
    expect(parseWeechatLine(`${at}--\tNotice(NickServ): identify please`)).toMatchObject({ eventType: 'NOTICE', nick: 'NickServ' });
  });

  it('keeps info lines out, and rejects other shapes', () => {
    expect(parseWeechatLine('2017-01-02 12:00:00\t****  Beginning of log  ****')).toEqual({ marker: 'skip' });
    expect(parseWeechatLine('2017-01-02 12:00:00\t--\tChannel #chan: 12 nicks (2 ops, 0 voices, 10 normals)')).toEqual({ marker: 'skip' });
    expect(parseWeechatLine('2017-01-02 12:00:00\t--\tYou are now known as me_')).toEqual({ marker: 'skip' });
    expect(parseWeechatLine('2017-01-02 12:00:00\t=!=\tirc: command failed')).toBeNull();
    expect(parseWeechatLine('2017-01-02 12:00:00 zetok hello')).toBeNull();
    expect(parseWeechatLine('[12:00:00] <zetok> hello')).toBeNull();
  });

  it('parses a file (offsets kept, netsplits grouped, cp1252 fallback, colours stripped)', () => {
    const f = parseWeechatLog(WEECHAT);
    expect(f).toMatchObject({ lines: 11, unparsed: [], channel: '#weechat' });
    expect(f.events.map((e) => e.eventType)).toEqual(['JOIN', 'PRIVMSG', 'ACTION', 'MODE', 'TOPIC', 'NICK', 'KICK', 'PART', 'NETSPLIT', 'NOTICE']);
    expect(f.events.every((e) => e.utcOffsetMinutes === 0)).toBe(true);
    expect(f.events.find((e) => e.eventType === 'NETSPLIT')!.netsplitBurst).toBe(10);
    const mixed = parseWeechatLog(
      withCp1252('2017-01-02 12:00:00\ta\tnaïve', `2017-01-02 12:00:01\tb\t${CP1252_TEXT}`, '2017-01-02 12:00:02\tc\t\x0303green\x03'),
    );
    expect(mixed.events.map((e) => e.messageText)).toEqual(['naïve', 'café “quoted”', 'green']);
  });

  it('reads channel and day from logger file names', () => {
    expect(parseWeechatFileName('/x/logs/irc.libera.#qtox.weechatlog')).toEqual({ channel: '#qtox', date: null });
    expect(parseWeechatFileName('irc.libera.#c.d.weechatlog.2')).toEqual({ channel: '#c.d', date: null });
    expect(parseWeechatFileName('/x/libera/#qtox.weechatlog')).toEqual({ channel: '#qtox', date: null });
    expect(parseWeechatFileName('irc.libera.#qtox.2025-09-01.weechatlog')).toEqual({ channel: '#qtox', date: '2025-09-01' });
    expect(parseWeechatFileName('irc.libera.zetok.weechatlog')).toEqual({ channel: 'zetok', date: null });
    expect(parseWeechatFileName('irc.server.libera.weechatlog')).toEqual({ channel: null, date: null });
    expect(parseWeechatFileName('#qtox.log')).toBeNull();
  });
});

describe('Limnoria ChannelLogger', () => {
  it('reads every event kind in ChannelLogger wording', () => {
    expect(parseLimnoriaLine('2017-01-02T12:00:00  <zetok> hello  there')).toEqual({
      eventType: 'PRIVMSG',
      nick: 'zetok',
      messageText: 'hello  there',
      target: null,
      toNick: null,
      localTime: '2017-01-02 12:00:00',
      utcOffsetMinutes: null,
    });
    expect(parseLimnoriaLine('2017-01-02T12:00:00  * zetok waves')).toMatchObject({ eventType: 'ACTION', nick: 'zetok', messageText: 'waves' });
    expect(parseLimnoriaLine('2017-01-02T12:00:00  -qtox-bot- build passed')).toMatchObject({
      eventType: 'NOTICE',
      nick: 'qtox-bot',
      messageText: 'build passed',
    });
    expect(parseLimnoriaLine('2017-01-02T12:00:00  *** zetok <zetok!~z@host.example> has joined #qtox')).toMatchObject({
      eventType: 'JOIN',
      nick: 'zetok',
      channel: '#qtox',
    });
    expect(parseLimnoriaLine('2017-01-02T12:00:00  *** zetok <zetok!~z@host.example> has left #qtox (bye)')).toMatchObject({
      eventType: 'PART',
      messageText: 'bye',
    });
    expect(parseLimnoriaLine('2017-01-02T12:00:00  *** zetok <zetok!~z@host.example> has left #qtox')).toMatchObject({ eventType: 'PART', messageText: null });
    expect(parseLimnoriaLine('2017-01-02T12:00:00  *** zetok <zetok!~z@host.example> has quit IRC (Ping timeout: 240 seconds)')).toMatchObject({
      eventType: 'QUIT',
      messageText: 'Ping timeout: 240 seconds',
    });
    expect(parseLimnoriaLine('2017-01-02T12:00:00  *** zetok <zetok!~z@host.example> has quit IRC (*.net *.split)')).toMatchObject({ eventType: 'NETSPLIT' });
    expect(parseLimnoriaLine('2017-01-02T12:00:00  *** zetok <zetok!~z@host.example> has quit IRC')).toMatchObject({ eventType: 'QUIT', messageText: null });
    expect(parseLimnoriaLine('2017-01-02T12:00:00  *** zetok is now known as zetok_')).toMatchObject({ eventType: 'NICK', nick: 'zetok', toNick: 'zetok_' });
    expect(parseLimnoriaLine('2017-01-02T12:00:00  *** spammer was kicked by tux3 (spam)')).toMatchObject({
      eventType: 'KICK',
      nick: 'tux3',
      toNick: 'spammer',
      messageText: 'spam',
    });
    expect(parseLimnoriaLine('2017-01-02T12:00:00  *** ChanServ sets mode: +o tux3')).toMatchObject({
      eventType: 'MODE',
      nick: 'ChanServ',
      messageText: '+o tux3',
      target: 'tux3',
    });
    expect(parseLimnoriaLine('2017-01-02T12:00:00  *** tux3 sets mode: +nt ')).toMatchObject({ eventType: 'MODE', messageText: '+nt', target: null });
    expect(parseLimnoriaLine('2017-01-02T12:00:00  *** tux3 changes topic to "qTox | "support""')).toMatchObject({
      eventType: 'TOPIC',
      nick: 'tux3',
      messageText: 'qTox | "support"',
    });
    expect(parseLimnoriaLine('2017-01-02T12:00:00  *** tux3 <tux3!~t@h> invited zetok to #qtox')).toEqual({ marker: 'skip' });
  });

  it('reads the old supybot stamp and ISO stamps with an offset; rejects one-space and time-only lines', () => {
    expect(parseLimnoriaLine('[02-Jan-2017 12:00:00]  <zetok> hi')).toMatchObject({ nick: 'zetok', localTime: '2017-01-02 12:00:00', utcOffsetMinutes: null });
    expect(parseLimnoriaLine('2017-01-02T12:00:00+01:00  <zetok> hi')).toMatchObject({ localTime: '2017-01-02 12:00:00', utcOffsetMinutes: 60 });
    expect(parseLimnoriaLine('2017-01-02T12:00:00 <zetok> hi')).toBeNull();
    expect(parseLimnoriaLine('[12:00:00] <zetok> hi')).toBeNull();
  });

  it('parses a file (cp1252 fallback, colours stripped)', () => {
    const f = parseLimnoriaLog(LIMNORIA);
    expect(f).toMatchObject({ lines: 11, unparsed: [], channel: '#limnoria' });
    expect(f.events).toHaveLength(10);
    const mixed = parseLimnoriaLog(
      withCp1252('2017-01-02T12:00:00  <a> naïve', `2017-01-02T12:00:01  <b> ${CP1252_TEXT}`, '2017-01-02T12:00:02  <c> \x1funder\x1f'),
    );
    expect(mixed.events.map((e) => e.messageText)).toEqual(['naïve', 'café “quoted”', 'under']);
  });

  it('reads channel and day from file names', () => {
    expect(parseLimnoriaFileName('logs/ChannelLogger/libera/#qtox/#qtox.log')).toEqual({ channel: '#qtox', date: null });
    expect(parseLimnoriaFileName('logs/ChannelLogger/libera/#qtox/#qtox.2017-01-02.log')).toEqual({ channel: '#qtox', date: '2017-01-02' });
    expect(parseLimnoriaFileName('logs/ChannelLogger/libera/#qtox/qtox-week1.log')).toEqual({ channel: '#qtox', date: null });
    expect(parseLimnoriaFileName('misc.log')).toBeNull();
  });
});

describe('HexChat', () => {
  it('reads every event kind in HexChat wording (default text events)', () => {
    expect(parseHexchatLine('Jan 02 12:34:56 <zetok>\thello')).toEqual({
      eventType: 'PRIVMSG',
      nick: 'zetok',
      messageText: 'hello',
      target: null,
      toNick: null,
      month: 1,
      day: 2,
      time: '12:34:56',
    });
    expect(parseHexchatLine('Jan 02 12:34:56 <@tux3>\thi')).toMatchObject({ nick: 'tux3' });
    expect(parseHexchatLine('Jan 02 12:34:56 *\tzetok waves')).toMatchObject({ eventType: 'ACTION', nick: 'zetok', messageText: 'waves' });
    expect(parseHexchatLine('Jan 02 12:34:56 -NickServ-\tidentify')).toMatchObject({ eventType: 'NOTICE', nick: 'NickServ', messageText: 'identify' });
    expect(parseHexchatLine('Jan 02 12:34:56 -bot/#qtox-\tbuild passed')).toMatchObject({ eventType: 'NOTICE', nick: 'bot', channel: '#qtox' });
    expect(parseHexchatLine('Jan 02 12:34:56 -->\tzetok (~z@host.example) has joined #qtox')).toMatchObject({
      eventType: 'JOIN',
      nick: 'zetok',
      channel: '#qtox',
    });
    expect(parseHexchatLine('Jan 02 12:34:56 <--\tzetok (~z@host.example) has left #qtox (bye)')).toMatchObject({ eventType: 'PART', messageText: 'bye' });
    expect(parseHexchatLine('Jan 02 12:34:56 <--\tzetok (~z@host.example) has left #qtox')).toMatchObject({ eventType: 'PART', messageText: null });
    expect(parseHexchatLine('Jan 02 12:34:56 <--\tzetok has quit (Ping timeout: 240 seconds)')).toMatchObject({
      eventType: 'QUIT',
      nick: 'zetok',
      messageText: 'Ping timeout: 240 seconds',
    });
    expect(parseHexchatLine('Jan 02 12:34:56 <--\tzetok (~z@host.example) has quit (*.net *.split)')).toMatchObject({ eventType: 'NETSPLIT' });
    expect(parseHexchatLine('Jan 02 12:34:56 <--\ttux3 has kicked spammer from #qtox (spam)')).toMatchObject({
      eventType: 'KICK',
      nick: 'tux3',
      toNick: 'spammer',
      messageText: 'spam',
    });
    expect(parseHexchatLine('Jan 02 12:34:56 ---\tzetok is now known as zetok_')).toMatchObject({ eventType: 'NICK', nick: 'zetok', toNick: 'zetok_' });
    expect(parseHexchatLine('Jan 02 12:34:56 ---\ttux3 has changed the topic to: qTox support')).toMatchObject({
      eventType: 'TOPIC',
      nick: 'tux3',
      messageText: 'qTox support',
    });
  });

  it('maps the mode phrases to mode strings', () => {
    const mode = (text: string) => {
      const p = parseHexchatLine(`Jan 02 12:00:00 ---\t${text}`);
      return p && !('marker' in p) ? [p.eventType, p.nick, p.messageText, p.target] : p;
    };
    expect(mode('ChanServ gives channel operator status to tux3')).toEqual(['MODE', 'ChanServ', '+o tux3', 'tux3']);
    expect(mode('ChanServ removes channel operator status from tux3')).toEqual(['MODE', 'ChanServ', '-o tux3', 'tux3']);
    expect(mode('tux3 gives voice to zetok')).toEqual(['MODE', 'tux3', '+v zetok', 'zetok']);
    expect(mode('tux3 removes voice from zetok')).toEqual(['MODE', 'tux3', '-v zetok', 'zetok']);
    expect(mode('tux3 gives channel half-operator status to zetok')).toEqual(['MODE', 'tux3', '+h zetok', 'zetok']);
    expect(mode('tux3 sets ban on *!*@spam.example')).toEqual(['MODE', 'tux3', '+b *!*@spam.example', '*!*@spam.example']);
    expect(mode('tux3 removes ban on *!*@spam.example')).toEqual(['MODE', 'tux3', '-b *!*@spam.example', '*!*@spam.example']);
    expect(mode('tux3 sets channel limit to 50')).toEqual(['MODE', 'tux3', '+l 50', '50']);
    expect(mode('tux3 removes channel keyword')).toEqual(['MODE', 'tux3', '-k', null]);
    expect(mode('tux3 sets mode +m #qtox')).toEqual(['MODE', 'tux3', '+m', null]);
    expect(mode('tux3 sets modes [+ov zetok zetok]')).toEqual(['MODE', 'tux3', '+ov zetok zetok', 'zetok zetok']);
  });

  it('keeps session and join-info lines out, rejects other shapes', () => {
    expect(parseHexchatLine('**** BEGIN LOGGING AT Mon Jan  2 12:00:00 2017')).toEqual({ marker: 'begin', date: '2017-01-02' });
    expect(parseHexchatLine('**** ENDING LOGGING AT Mon Jan  2 13:00:00 2017')).toEqual({ marker: 'skip' });
    expect(parseHexchatLine('Jan 02 12:00:00 -->\tYou are now talking on #qtox')).toEqual({ marker: 'skip' });
    expect(parseHexchatLine('Jan 02 12:00:00 ---\tTopic for #qtox is qTox')).toEqual({ marker: 'skip' });
    expect(parseHexchatLine('Jan 02 12:00:00 <zetok> no tab')).toBeNull();
    expect(parseHexchatLine('Foo 02 12:00:00 <zetok>\thi')).toBeNull();
  });

  it('takes the year from BEGIN LOGGING and rolls it over from December to January', () => {
    const f = parseHexchatLog(
      lines(
        '**** BEGIN LOGGING AT Sat Dec 31 23:00:00 2016',
        'Dec 31 23:59:59 <a>\told year',
        'Jan 01 00:00:01 <a>\tnew year',
        '**** BEGIN LOGGING AT Mon Jan  2 12:00:00 2017',
        'Jan 02 12:00:00 <a>\tnext session',
      ),
      null,
    );
    expect(f.events.map((e) => e.localTime)).toEqual(['2016-12-31 23:59:59', '2017-01-01 00:00:01', '2017-01-02 12:00:00']);
    expect(parseHexchatLog(lines('Mar 01 10:00:00 <a>\tx'), '2019-02-27').events[0]!.localTime).toBe('2019-03-01 10:00:00');
    expect(() => parseHexchatLog(lines('Mar 01 10:00:00 <a>\tx'), null)).toThrow(ParseError);
  });

  it('parses a file (cp1252 fallback, colours stripped) and reads file names', () => {
    const f = parseHexchatLog(HEXCHAT, null);
    expect(f).toMatchObject({ lines: 12, unparsed: [], channel: '#hexchat' });
    expect(f.events.map((e) => e.eventType)).toEqual(['JOIN', 'PRIVMSG', 'ACTION', 'NOTICE', 'MODE', 'TOPIC', 'NICK', 'KICK', 'PART', 'QUIT']);
    const mixed = parseHexchatLog(
      withCp1252(
        '**** BEGIN LOGGING AT Mon Jan  2 12:00:00 2017\nJan 02 12:00:00 <a>\tnaïve',
        `Jan 02 12:00:01 <b>\t${CP1252_TEXT}`,
        'Jan 02 12:00:02 <\x0302c\x0f>\t\x0304red',
      ),
      null,
    );
    expect(mixed.events.map((e) => [e.nick, e.messageText])).toEqual([
      ['a', 'naïve'],
      ['b', 'café “quoted”'],
      ['c', 'red'],
    ]);
    expect(parseHexchatFileName('/home/u/.config/hexchat/logs/Libera.Chat-#qtox.log')).toEqual({ channel: '#qtox', date: null });
    expect(parseHexchatFileName('my-net-#qtox.log')).toEqual({ channel: '#qtox', date: null });
    expect(parseHexchatFileName('#qtox.log')).toEqual({ channel: '#qtox', date: null });
    expect(parseHexchatFileName('libera-server.log')).toBeNull();
  });
});

describe('EnergyMech', () => {
  it('reads every event kind, and tells EnergyMech-only wording from ZNC-only wording', () => {
    expect(parseEnergymechLine('[12:00:00] <zetok> hello')).toEqual({
      eventType: 'PRIVMSG',
      nick: 'zetok',
      messageText: 'hello',
      target: null,
      toNick: null,
      time: '12:00:00',
    });
    expect(parseEnergymechLine('[12:00:00] * zetok waves')).toMatchObject({ eventType: 'ACTION', nick: 'zetok', messageText: 'waves' });
    expect(parseEnergymechLine('[12:00:00] -qtox-bot:#qtox- build passed')).toMatchObject({
      eventType: 'NOTICE',
      nick: 'qtox-bot',
      messageText: 'build passed',
      channel: '#qtox',
      dialect: 'energymech',
    });
    expect(parseEnergymechLine('[12:00:00] -qtox-bot- build passed')).toMatchObject({ eventType: 'NOTICE', nick: 'qtox-bot' });
    expect(parseEnergymechLine('[12:00:00] *** Joins: zetok (~z@host.example)')).toMatchObject({ eventType: 'JOIN', nick: 'zetok' });
    expect(parseEnergymechLine('[12:00:00] *** Parts: zetok (~z@host.example)')).toMatchObject({
      eventType: 'PART',
      nick: 'zetok',
      messageText: null,
      dialect: 'energymech',
    });
    expect(parseEnergymechLine('[12:00:00] *** Parts: zetok (~z@host.example) (bye)')).toMatchObject({ eventType: 'PART', messageText: 'bye', dialect: 'znc' });
    expect(parseEnergymechLine('[12:00:00] *** Quits: zetok (Quit: bye (for now))')).toMatchObject({
      eventType: 'QUIT',
      nick: 'zetok',
      messageText: 'Quit: bye (for now)',
      dialect: 'energymech',
    });
    expect(parseEnergymechLine('[12:00:00] *** Quits: zetok (*.net *.split)')).toMatchObject({ eventType: 'NETSPLIT', messageText: '*.net *.split' });
    expect(parseEnergymechLine('[12:00:00] *** Quits: f10 (~flo@ ) (Ping timeout: 240 seconds)')).toMatchObject({
      eventType: 'QUIT',
      nick: 'f10',
      messageText: 'Ping timeout: 240 seconds',
      dialect: 'znc',
    });
    expect(parseEnergymechLine('[12:00:00] *** zetok is now known as zetok_')).toMatchObject({ eventType: 'NICK', nick: 'zetok', toNick: 'zetok_' });
    expect(parseEnergymechLine('[12:00:00] *** spammer was kicked by tux3 (spam)')).toMatchObject({
      eventType: 'KICK',
      nick: 'tux3',
      toNick: 'spammer',
      messageText: 'spam',
    });
    expect(parseEnergymechLine('[12:00:00] *** ChanServ sets mode: +o tux3')).toMatchObject({
      eventType: 'MODE',
      nick: 'ChanServ',
      messageText: '+o tux3',
      target: 'tux3',
    });
    expect(parseEnergymechLine('[12:00:00] *** tux3 changes topic to "qTox"')).toMatchObject({
      eventType: 'TOPIC',
      messageText: 'qTox',
      dialect: 'energymech',
    });
    expect(parseEnergymechLine("[12:00:00] *** tux3 changes topic to 'qTox'")).toMatchObject({ eventType: 'TOPIC', messageText: 'qTox', dialect: 'znc' });
    expect(parseEnergymechLine('[Jan 2 2017 12:00:00] <zetok> dated')).toMatchObject({
      nick: 'zetok',
      date: '2017-01-02',
      time: '12:00:00',
      dialect: 'energymech',
    });
    expect(parseEnergymechLine('[12:00:00] *** something else')).toBeNull();
  });

  it('needs a day for time-only stamps, rolls over at midnight, and reads dated stamps', () => {
    expect(parseEnergymechLog(lines('[23:59:00] <a> x', '[00:01:00] <a> y'), '2017-01-02').events.map((e) => e.localTime)).toEqual([
      '2017-01-02 23:59:00',
      '2017-01-03 00:01:00',
    ]);
    expect(parseEnergymechLog(lines('[Jan 2 2017 12:00:00] <a> x', '[12:00:05] <a> y'), null).events.map((e) => e.localTime)).toEqual([
      '2017-01-02 12:00:00',
      '2017-01-02 12:00:05',
    ]);
    expect(() => parseEnergymechLog(lines('[12:00:00] <a> x'), null)).toThrow(ParseError);
  });

  it('parses a file (cp1252 fallback, colours stripped) and reads file names', () => {
    const f = parseEnergymechLog(ENERGYMECH, '2017-01-02');
    expect(f).toMatchObject({ lines: 10, unparsed: [], channel: '#energymech' });
    expect(f.events.map((e) => e.eventType)).toEqual(['JOIN', 'PRIVMSG', 'ACTION', 'NOTICE', 'MODE', 'TOPIC', 'NICK', 'KICK', 'PART', 'QUIT']);
    const mixed = parseEnergymechLog(withCp1252('[12:00:00] <a> naïve', `[12:00:01] <b> ${CP1252_TEXT}`, '[12:00:02] <c> \x02bold\x02'), '2017-01-02');
    expect(mixed.events.map((e) => e.messageText)).toEqual(['naïve', 'café “quoted”', 'bold']);
    expect(parseEnergymechFileName('#qtox_20170102.log')).toEqual({ channel: '#qtox', date: '2017-01-02' });
    expect(parseEnergymechFileName('freenode_#qtox_20170102.log')).toEqual({ channel: '#qtox', date: '2017-01-02' });
    expect(parseEnergymechFileName('#qtox_20170231.log')).toBeNull();
  });

  it('scores below ZNC unless an EnergyMech-only shape shows', () => {
    const shared = ['[12:00:00] <a> hi', '[12:00:01] *** Joins: b (~b@h)'];
    expect(detectEnergymech(shared)).toBeCloseTo(0.99);
    expect(detectEnergymech([...shared, '[12:00:02] *** Quits: b (Quit: bye)'])).toBe(1);
    expect(detectEnergymech([...shared, '[12:00:02] *** Quits: b (Quit: bye)', '[12:00:03] *** Quits: c (~c@h) (Quit: bye)'])).toBeCloseTo(0.99);
  });
});

describe('format detection', () => {
  it('detects each fixture as its own format', () => {
    for (const f of FIXTURES) {
      const file = path.join(tmp, 'logs', f.rel);
      expect(detectFormat(file, readFileSync(file))?.name, f.rel).toBe(f.format);
      // Also under a name that says nothing about the format.
      expect(detectFormat(path.join(tmp, 'unnamed.txt'), Buffer.from(f.text))?.name, f.rel).toBe(f.format);
    }
  });

  it('takes an EnergyMech file with only ZNC-identical lines as znc (same events either way)', () => {
    const text = lines('[12:00:00] <a> hi', '[12:00:01] *** Joins: b (~b@h)', '[12:00:02] *** b sets mode: +o a');
    expect(detectFormat('#chan_20170102.log', Buffer.from(text))?.name).toBe('znc');
    expect(detectFormat('#chan_20170102.log', Buffer.from(`${text}[12:00:03] *** Quits: b (Quit: bye)\n`))?.name).toBe('energymech');
    expect(energymechFormat.parse(Buffer.from(text), { date: '2017-01-02' }).events).toHaveLength(3);
  });

  it('detects nothing in a file that is not a chat log', () => {
    const readme = lines('# Notes', '', 'This folder holds exported data.', 'Columns: id, name, created_at', '1,alice,2017-01-02', '2,bob,2017-01-03');
    expect(detectFormat(path.join(tmp, 'README.txt'), Buffer.from(readme))).toBeNull();
    expect(detectFormat(path.join(tmp, 'empty.log'), Buffer.alloc(0))).toBeNull();
    expect(LOG_FORMAT_NAMES).toEqual(['znc', 'irssi', 'weechat', 'limnoria', 'hexchat', 'energymech']);
  });
});
