/**
 * The ZNC parser against lines copied from the #qtox logs (two days of them in fixtures/irc/znc-qtox), the older colon-less
 * lines ZNC and EnergyMech share, and `--path` / common folder layouts: pure parsing, the unit tier.
 * Importing into PostgreSQL is irc-import.test.ts and irc-import-honesty.test.ts.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseEnergymechLine } from '../src/irc/parsers/energymech.js';
import { detectFormat } from '../src/irc/parsers/index.js';
import { decodeLine, parseLogFileName, parseZncLine, parseZncLog, stripFormatting } from '../src/irc/parsers/znc.js';
import { compilePathPattern, matchCommonLayout } from '../src/irc/path-layout.js';
import { localToUtcMs, formatUtc } from '../src/irc/time-zone.js';

/** Two days of the #qtox logs, copied into the repository (fixtures/irc/znc-qtox/SOURCE.md). */
const LOGS = path.join(import.meta.dirname, 'fixtures/irc/znc-qtox');
const JUNE = path.join(LOGS, '2016/06');
const lines = (...ls: string[]) => `${ls.join('\n')}\n`;

describe('ZNC log parser (lines copied from the #qtox logs)', () => {
  it('reads channel messages, actions and notices', () => {
    expect(parseZncLine('[16:05:12] <zetok> sudden6: ok')).toEqual({
      eventType: 'PRIVMSG',
      time: '16:05:12',
      nick: 'zetok',
      messageText: 'sudden6: ok',
      target: null,
      toNick: null,
    });
    expect(parseZncLine("[16:19:53] * zetok wonders how it'll work")).toMatchObject({
      eventType: 'ACTION',
      nick: 'zetok',
      messageText: "wonders how it'll work",
    });
    expect(parseZncLine('[14:40:01] -qtox-git-spam- [qTox] tux3 pushed 1 new commit to master: https://git.io/vrpmr')).toMatchObject({
      eventType: 'NOTICE',
      nick: 'qtox-git-spam',
      messageText: '[qTox] tux3 pushed 1 new commit to master: https://git.io/vrpmr',
    });
  });

  it('reads joins, parts and quits with their reasons', () => {
    expect(parseZncLine('[02:12:50] *** Joins: Rowen_Stipe (~rowen_sti@ )')).toMatchObject({
      eventType: 'JOIN',
      time: '02:12:50',
      nick: 'Rowen_Stipe',
      messageText: null,
    });
    expect(parseZncLine('[06:18:11] *** Parts: tdmps (~ray@ ) ()')).toMatchObject({ eventType: 'PART', nick: 'tdmps', messageText: null });
    expect(parseZncLine('[14:03:56] *** Parts: cisc (~cisc@ ) ("Konversation terminated!")')).toMatchObject({
      eventType: 'PART',
      nick: 'cisc',
      messageText: '"Konversation terminated!"',
    });
    expect(parseZncLine('[02:06:03] *** Quits: f10 (~flo@ ) (Ping timeout: 240 seconds)')).toMatchObject({
      eventType: 'QUIT',
      nick: 'f10',
      messageText: 'Ping timeout: 240 seconds',
    });
  });

  it('reads nick changes, modes and topics', () => {
    expect(parseZncLine('[16:05:00] *** shiva is now known as in1t3r')).toMatchObject({ eventType: 'NICK', nick: 'shiva', toNick: 'in1t3r' });
    expect(parseZncLine('[11:42:41] *** ChanServ sets mode: +o tux3')).toMatchObject({
      eventType: 'MODE',
      nick: 'ChanServ',
      messageText: '+o tux3',
      target: 'tux3',
    });
    expect(parseZncLine("[19:38:33] *** zetok changes topic to 'qTox support channel | qTox User Party Hub'")).toMatchObject({
      eventType: 'TOPIC',
      nick: 'zetok',
      messageText: 'qTox support channel | qTox User Party Hub',
    });
  });

  it("reads kicks (no kick occurs in the #qtox logs; this is ZNC's kick line shape)", () => {
    expect(parseZncLine('[12:00:01] *** spammer was kicked by tux3 (spam (again))')).toMatchObject({
      eventType: 'KICK',
      nick: 'tux3',
      toNick: 'spammer',
      messageText: 'spam (again)',
    });
  });

  it('marks a quit whose reason is two host names as a netsplit, and groups the burst', () => {
    expect(parseZncLine('[11:16:13] *** Quits: BHR27 (~Bheru27@ ) (*.net *.split)')).toMatchObject({
      eventType: 'NETSPLIT',
      nick: 'BHR27',
      messageText: '*.net *.split',
    });
    expect(parseZncLine('[11:16:13] *** Quits: x (~x@ ) (irc.example.net hub.example.org)')?.eventType).toBe('NETSPLIT');
    expect(parseZncLine('[11:16:13] *** Quits: x (~x@ ) (Quit: leaving now)')?.eventType).toBe('QUIT');
    expect(parseZncLine('[11:16:13] *** Quits: x (~x@ ) (Remote host closed the connection)')?.eventType).toBe('QUIT');
    const file = readFileSync(path.join(JUNE, '#qtox_20160616.log.txt'));
    const splits = parseZncLog(file, '2016-06-16').events.filter((e) => e.eventType === 'NETSPLIT');
    expect(splits.slice(0, 3).map((e) => [e.lineNo, e.nick, e.netsplitBurst])).toEqual([
      [5, 'rysiek|pl', 5],
      [6, 'chain', 5],
      [7, 'Andrew7', 5],
    ]);
    const later = parseZncLog('[00:12:55] *** Quits: a (~a@ ) (*.net *.split)\n[03:00:00] *** Quits: b (~b@ ) (*.net *.split)\n', '2016-06-16').events;
    expect(later.map((e) => e.netsplitBurst)).toEqual([1, 2]);
  });

  it('strips mIRC colour and format codes', () => {
    expect(stripFormatting('\x0304,12red\x03 \x02bold\x02 \x1ditalic\x1d \x1funder\x1f\x0f \x0399x \x04ff0000hex')).toBe('red bold italic under x hex');
    expect(parseZncLine('[16:05:12] <zetok> \x0303green\x03 text')?.messageText).toBe('green text');
  });

  it('decodes UTF-8, and Windows-1252 per line where a line is not UTF-8 (real line 143 of 2016-06-01)', () => {
    const file = readFileSync(path.join(JUNE, '#qtox_20160601.log.txt'));
    const { events } = parseZncLog(file, '2016-06-01');
    const line = events.find((e) => e.lineNo === 143)!;
    expect(line).toMatchObject({ eventType: 'PRIVMSG', nick: 'tux3', messageText: 'Not Dead™', localTime: '2016-06-01 16:36:05' });
    expect(decodeLine(Buffer.from('caf\xe9', 'latin1'))).toBe('café');
    expect(decodeLine(Buffer.from([0x80, 0x93, 0x94, 0x85, 0xfc]))).toBe('€“”…ü');
    expect(decodeLine(Buffer.from('café ™', 'utf8'))).toBe('café ™');
    // A bad line does not change how its UTF-8 neighbours decode.
    const mixed = Buffer.concat([Buffer.from('[00:00:01] <a> caf'), Buffer.from([0xe9]), Buffer.from('\n[00:00:02] <b> naïve ✓\n', 'utf8')]);
    expect(parseZncLog(mixed, '2016-06-01').events.map((e) => e.messageText)).toEqual(['café', 'naïve ✓']);
  });

  it('rejects lines and file names that are not ZNC log shapes', () => {
    expect(parseZncLine('no timestamp here')).toBeNull();
    expect(parseZncLine('[25:00:00] <a> b')).toBeNull();
    expect(parseZncLine('[10:00:00] *** something unknown happened')).toBeNull();
    expect(parseLogFileName('#qtox_20160601.log.txt')).toEqual({ channel: '#qtox', date: '2016-06-01' });
    expect(parseLogFileName('#chan_with_underscores_20170228.log')).toEqual({ channel: '#chan_with_underscores', date: '2017-02-28' });
    expect(parseLogFileName('#qtox_20160231.log.txt')).toBeNull();
    expect(parseLogFileName('SOURCE.md')).toBeNull();
  });

  it('converts local times to UTC, including across DST changes', () => {
    expect(formatUtc(localToUtcMs('2016-06-01 02:06:03', 'Europe/Stockholm'))).toBe('2016-06-01 00:06:03');
    expect(formatUtc(localToUtcMs('2017-01-15 12:00:00', 'Europe/Stockholm'))).toBe('2017-01-15 11:00:00');
    expect(formatUtc(localToUtcMs('2016-06-01 02:06:03', 'America/New_York'))).toBe('2016-06-01 06:06:03');
    // Clocks went back at 03:00 CEST on 2016-10-30: 02:30 happens twice; the first one is taken.
    expect(formatUtc(localToUtcMs('2016-10-30 02:30:00', 'Europe/Stockholm'))).toBe('2016-10-30 00:30:00');
    expect(formatUtc(localToUtcMs('2016-06-01 02:06:03', 'UTC'))).toBe('2016-06-01 02:06:03');
    // Offsets are remembered per local hour; the hours around both changes must still be right.
    const at = (l: string) => formatUtc(localToUtcMs(l, 'Europe/Stockholm'));
    expect(['2016-03-27 01:59:59', '2016-03-27 03:00:00', '2016-03-27 03:30:00', '2016-03-27 01:00:00'].map(at)).toEqual([
      '2016-03-27 00:59:59',
      '2016-03-27 01:00:00',
      '2016-03-27 01:30:00',
      '2016-03-27 00:00:00',
    ]);
    expect(['2016-10-30 01:59:59', '2016-10-30 02:59:59', '2016-10-30 03:00:00', '2016-10-30 02:00:00'].map(at)).toEqual([
      '2016-10-29 23:59:59',
      '2016-10-30 00:59:59',
      '2016-10-30 02:00:00',
      '2016-10-30 00:00:00',
    ]);
  });
});

describe('parsers', () => {
  it('ZNC keeps a parenthesised reason that is not user@host, and sees netsplits in it', () => {
    expect(parseZncLine('[10:00:00] *** Quits: alice (Ping timeout: 240 seconds)')).toMatchObject({
      eventType: 'QUIT',
      nick: 'alice',
      messageText: 'Ping timeout: 240 seconds',
    });
    expect(parseZncLine('[10:00:00] *** Quits: alice (irc.a.example.net irc.b.example.net)')).toMatchObject({
      eventType: 'NETSPLIT',
      messageText: 'irc.a.example.net irc.b.example.net',
    });
    expect(parseZncLine('[10:00:00] *** Quits: alice (Quit: bye (for now))')).toMatchObject({ messageText: 'Quit: bye (for now)' });
    expect(parseZncLine('[10:00:00] *** Parts: alice (going home)')).toMatchObject({ eventType: 'PART', messageText: 'going home' });
    // The ZNC shapes themselves are unchanged.
    expect(parseZncLine('[10:00:00] *** Quits: f10 (~flo@ ) (Ping timeout: 240 seconds)')).toMatchObject({ messageText: 'Ping timeout: 240 seconds' });
    expect(parseZncLine('[10:00:00] *** Quits: f10 (~flo@host.example)')).toMatchObject({ eventType: 'QUIT', messageText: null });
    expect(parseZncLine('[10:00:00] *** Parts: tdmps (~ray@ ) ()')).toMatchObject({ eventType: 'PART', messageText: null });
  });

  it('both ZNC and EnergyMech read the older colon-less, host-less lines', () => {
    for (const parse of [parseZncLine, parseEnergymechLine]) {
      expect(parse('[10:00:00] *** Joins alice')).toMatchObject({ eventType: 'JOIN', nick: 'alice', messageText: null });
      expect(parse('[10:00:00] *** Parts alice')).toMatchObject({ eventType: 'PART', nick: 'alice', messageText: null });
      expect(parse('[10:00:00] *** Parts alice (later)')).toMatchObject({ eventType: 'PART', messageText: 'later' });
      expect(parse('[10:00:00] *** Quits alice (Read error: Connection reset by peer)')).toMatchObject({
        eventType: 'QUIT',
        messageText: 'Read error: Connection reset by peer',
      });
      expect(parse('[10:00:00] *** Quits alice (*.net *.split)')).toMatchObject({ eventType: 'NETSPLIT' });
      expect(parse('[10:00:00] *** Quits alice')).toMatchObject({ eventType: 'QUIT', messageText: null });
      expect(parse('[10:00:00] <<<<<<< HEAD')).toBeNull();
    }
    expect(parseEnergymechLine('[10:00:00] *** Joins alice')).toMatchObject({ dialect: 'energymech' });
    expect(detectFormat('x.log', Buffer.from(lines('[10:00:00] *** Joins alice', '[10:00:01] <alice> hi')))?.name).toBe('energymech');
  });
});

describe('path layouts', () => {
  it('compiles --path patterns and matches the end of a path', () => {
    const p = compilePathPattern('{channel}/{yyyy}/{mm}/{dd}.log');
    expect(p.match('/logs/#chan/2019/03/04.log')).toEqual({ channel: '#chan', date: '2019-03-04' });
    expect(p.match('/logs/#chan/2019/02/30.log')).toBeNull();
    expect(p.match('/logs/#chan/2019/03/04.txt')).toBeNull();
    expect(compilePathPattern('{yyyy}/{mm}/{channel}_{yyyy}{mm}{dd}.log').match('/x/2019/03/#a_b_20190304.log')).toEqual({
      channel: '#a_b',
      date: '2019-03-04',
    });
    expect(compilePathPattern('{yyyy}/{mm}/{channel}_{yyyy}{mm}{dd}.log').match('/x/2019/04/#a_20190304.log')).toBeNull();
    expect(compilePathPattern('{network}/{channel}/{date}.*').match('/x/libera/#a/2019-03-04.log')).toEqual({ channel: '#a', date: '2019-03-04' });
    expect(() => compilePathPattern('{chan}/{date}.log')).toThrow(/unknown placeholder \{chan\}/);
    expect(() => compilePathPattern('{yyyy}/{mm}.log')).toThrow(/\{yyyy\}, \{mm\} and \{dd\} together/);
    expect(() => compilePathPattern('logs/*.log')).toThrow(/neither/);
  });

  it('recognises common layouts without a pattern, taking a channel only from a channel-like folder', () => {
    expect(matchCommonLayout('/a/#chan/2019/03/04.log')).toMatchObject({ channel: '#chan', date: '2019-03-04' });
    expect(matchCommonLayout('/a/logs/2019/03/04.log')).toMatchObject({ channel: null, date: '2019-03-04' });
    expect(matchCommonLayout('/a/logs/2019/03/2019-03-04.log')).toMatchObject({ channel: null, date: '2019-03-04' });
    expect(matchCommonLayout('/a/#chan/2019-03-04.txt')).toMatchObject({ channel: '#chan', date: '2019-03-04' });
    expect(matchCommonLayout('/a/notes.log')).toBeNull();
  });
});
