import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { IrcImportService, lineHash } from '../src/irc/import-service.js';
import { decodeLine, parseLogFileName, parseZncLine, parseZncLog, stripFormatting, zncFormat } from '../src/irc/parsers/znc.js';
import { irssiFormat } from '../src/irc/parsers/irssi.js';
import { localToUtcMs, formatUtc } from '../src/irc/time-zone.js';
import { useTestOrm } from '../../test/support/harness.js';

const LOGS = '/work/shared/data/irc/znc-qtox';
const firstLine = (file: string) => {
  const b = readFileSync(file);
  return b.subarray(0, b.indexOf(0x0a));
};
const JUNE = path.join(LOGS, '2016/06');

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

describe('IRC import into PostgreSQL (the June 2016 #qtox folder)', () => {
  const pg = useTestOrm();
  const { sql } = pg;
  let svc: IrcImportService;

  // Expected counts are read independently of the parser: every non-empty line of these files is timestamped.
  const juneFiles = readdirSync(JUNE).filter((f) => f.endsWith('.log.txt'));
  const juneLines = juneFiles.reduce(
    (n, f) =>
      n +
      readFileSync(path.join(JUNE, f), 'latin1')
        .split('\n')
        .filter((l) => l.length > 0).length,
    0,
  );

  beforeAll(() => {
    svc = new IrcImportService(pg.orm);
  });

  it('imports every line of the month, converting times with the given zone', async () => {
    expect(juneFiles.length).toBe(30);
    expect(juneLines).toBe(7291);
    const counts = await svc.importPaths([JUNE], { network: 'freenode', source: 'production', timeZone: 'Europe/Stockholm', batchSize: 500 });
    expect(counts).toMatchObject({ files: 30, lines: juneLines, inserted: juneLines, skipped: 0, unparsed: 0 });
    const [row] = await sql<{ n: string }>('select count(*) as n from irc_events');
    expect(Number(row!.n)).toBe(juneLines);

    // Line 1 of 2016-06-01: "[02:06:03] *** Quits: f10 (~flo@ ) (Ping timeout: 240 seconds)" at CEST (+02:00).
    const hash = lineHash('#qtox', '2016-06-01 02:06:03', 0, firstLine(path.join(JUNE, '#qtox_20160601.log.txt')));
    const rows = await sql<{ event_type: string; at: string; nick: string; message_text: string }>(
      `select event_type, to_char(occurred_at, 'YYYY-MM-DD HH24:MI:SS') as at, nick, message_text from irc_events where line_hash = ?`,
      [hash],
    );
    expect(rows).toEqual([{ event_type: 'QUIT', at: '2016-06-01 00:06:03', nick: 'f10', message_text: 'Ping timeout: 240 seconds' }]);

    const tm = await sql<{ message_text: string }>(`select message_text from irc_events where nick = 'tux3' and message_text like 'Not Dead%'`);
    expect(tm.map((r) => r.message_text)).toEqual(['Not Dead™']);
    const groups = await sql<{ g: string; n: string }>(
      `select netsplit_group as g, count(*) as n from irc_events where event_type = 'NETSPLIT' group by 1 order by min(id)`,
    );
    expect(groups.length).toBeGreaterThan(0);
    expect(groups.every((g) => g.g !== null)).toBe(true);
    expect(Number(groups[0]!.n)).toBe(3); // 2016-06-03 lines 34-36, one burst
  });

  it('imports nothing the second time, and keeps one network and one channel row', async () => {
    const again = await svc.importPaths([JUNE, path.join(JUNE, '#qtox_20160601.log.txt')], {
      network: 'freenode',
      source: 'production',
      timeZone: 'Europe/Stockholm',
    });
    expect(again).toMatchObject({ files: 31, lines: juneLines + 613, inserted: 0, skipped: juneLines + 613 });
    expect(await sql('select source, name from irc_networks')).toEqual([{ source: 'production', name: 'freenode' }]);
    expect((await sql<{ name: string }>('select name from irc_channels')).map((r) => r.name)).toEqual(['#qtox']);
    const [row] = await sql<{ n: string }>('select count(*) as n from irc_events');
    expect(Number(row!.n)).toBe(juneLines);
  });

  it('keeps sandbox networks apart and finds rows through the full-text index expression', async () => {
    const c = await svc.importPaths([path.join(JUNE, '#qtox_20160601.log.txt')], { network: 'freenode', source: 'sandbox' });
    expect(c).toMatchObject({ files: 1, inserted: 613 });
    expect(Number((await sql<{ n: string }>('select count(*) as n from irc_networks'))[0]!.n)).toBe(2);
    const hits = await sql<{ n: string }>(
      `select count(*) as n from irc_events where to_tsvector('simple', coalesce(nick,'') || ' ' || coalesce(message_text,'')) @@ plainto_tsquery('simple', 'konversation')`,
    );
    expect(Number(hits[0]!.n)).toBeGreaterThan(0);
  });

  it('refuses unknown formats, sources and zones with a clear message', async () => {
    await expect(svc.importPaths([JUNE], { network: 'x', source: 'production', format: 'mirc' })).rejects.toThrow(
      /unknown log format "mirc"; formats: auto, znc/,
    );
    await expect(svc.importPaths([JUNE], { network: 'x', source: 'staging' as never })).rejects.toThrow(/unknown source/);
    await expect(svc.importPaths([JUNE], { network: 'x', source: 'production', timeZone: 'Mars/Olympus' })).rejects.toThrow(/unknown time zone/);
  });
});

describe('large files are imported in pieces', () => {
  const pg = useTestOrm();
  const { sql } = pg;

  it('stores the same rows whether a file is read whole or in small pieces, across midnight without a marker', async () => {
    // irssi, three days; the second midnight has no "Day changed" line, and identical lines repeat within a second.
    const lines = ['--- Log opened Mon Jan 02 00:00:00 2017'];
    for (let day = 0; day < 3; day += 1) {
      if (day === 1) lines.push('--- Day changed Tue Jan 03 2017');
      for (let i = 0; i < 300; i += 1) {
        const s = i * 287;
        const hh = String(Math.floor(s / 3600)).padStart(2, '0');
        const mm = String(Math.floor(s / 60) % 60).padStart(2, '0');
        const ss = String(s % 60).padStart(2, '0');
        lines.push(`${hh}:${mm}:${ss} <nick${i % 7}> day ${day} line ${i}`);
        if (i % 50 === 0) lines.push(`${hh}:${mm}:${ss} <nick${i % 7}> same again`, `${hh}:${mm}:${ss} <nick${i % 7}> same again`);
      }
    }
    const dir = mkdtempSync(path.join(tmpdir(), 'irc-chunks-'));
    const file = path.join(dir, '#big.log');
    writeFileSync(file, `${lines.join('\n')}\n`);
    const svc = new IrcImportService(pg.orm);
    const whole = await svc.importPaths([file], { network: 'whole', source: 'production' });
    const pieces = await svc.importPaths([file], { network: 'pieces', source: 'production', chunkBytes: 700 });
    expect(whole).toMatchObject({ files: 1, inserted: 936, unparsed: 0 });
    expect(pieces).toMatchObject({ files: 1, lines: whole.lines, inserted: 936, unparsed: 0 });
    const rowsOf = (network: string) =>
      sql<{ t: string; nick: string; m: string }>(
        `select to_char(e.occurred_at, 'YYYY-MM-DD HH24:MI:SS') as t, e.nick, e.message_text as m
         from irc_events e join irc_channels c on c.id = e.channel_id join irc_networks n on n.id = c.network_id
        where n.name = ? order by e.occurred_at, e.id`,
        [network],
      );
    const a = await rowsOf('whole');
    expect(await rowsOf('pieces')).toEqual(a);
    expect(a.at(-1)).toEqual({ t: '2017-01-04 23:50:13', nick: 'nick5', m: 'day 2 line 299' });
    expect(a.filter((r) => r.m === 'same again')).toHaveLength(36);
    expect(await svc.importPaths([file], { network: 'pieces', source: 'production', chunkBytes: 700 })).toMatchObject({ inserted: 0 });
    expect(await svc.importPaths([file], { network: 'pieces', source: 'production' })).toMatchObject({ inserted: 0 });
  });

  it('rolls the day over at a cut when the next piece starts after midnight', () => {
    const next = Buffer.from('00:00:05 <a> after midnight\n');
    expect(irssiFormat.parse(next, { date: '2017-01-03', time: '23:50:13' }).events[0]!.localTime).toBe('2017-01-04 00:00:05');
    expect(irssiFormat.parse(next, { date: '2017-01-03' }).events[0]!.localTime).toBe('2017-01-03 00:00:05');
    expect(zncFormat.parse(Buffer.from('[00:00:05] <a> x\n'), { date: '2017-01-03', time: '23:59:59' }).events[0]!.localTime).toBe('2017-01-04 00:00:05');
  });
});
