import { mkdtempSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { IrcImportService, lineHash } from '../src/irc/import-service.js';
import { zncFormat } from '../src/irc/parsers/znc.js';
import { irssiFormat } from '../src/irc/parsers/irssi.js';
import { detectFormat } from '../src/irc/parsers/index.js';
import { useTestOrm } from '../../test/support/harness.js';

const LOGS = '/work/shared/data/irc/znc-qtox';
const firstLine = (file: string) => {
  const b = readFileSync(file);
  return b.subarray(0, b.indexOf(0x0a));
};
const JUNE = path.join(LOGS, '2016/06');

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

describe('format detection over the whole shared data set', () => {
  it('still detects every real ZNC file of the #qtox logs as znc (not energymech)', () => {
    const files: string[] = [];
    const walk = (dir: string) => {
      for (const name of readdirSync(dir)) {
        const p = path.join(dir, name);
        if (statSync(p).isDirectory()) walk(p);
        else if (name.endsWith('.log.txt')) files.push(p);
      }
    };
    walk(LOGS);
    expect(files.length).toBeGreaterThan(200);
    const wrong = files.filter((f) => detectFormat(f, readFileSync(f))?.name !== 'znc');
    expect(wrong).toEqual([]);
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
