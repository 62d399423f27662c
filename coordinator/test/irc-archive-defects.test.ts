/**
 * Issue 41, chat-log archive, through the importer and PostgreSQL: a NUL byte in one line no
 * longer aborts the batch (control characters are removed, counted and listed by file and line,
 * and a dry run predicts the real run), lines dated outside the archive's days are listed and
 * not stored, and the report says what `skipped` is made of, names folders as folders and lists
 * README.md. Fixture files are generated here. The rules that need no database are in
 * irc-archive-rules.test.ts.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IrcImportService } from '../src/irc/import-service.js';
import { useTestOrm } from '../../test/support/harness.js';

let tmp: string;
const write = (rel: string, text: string | Buffer) => {
  const file = path.join(tmp, rel);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, text);
  return file;
};
const lines = (...ls: string[]) => `${ls.join('\n')}\n`;

beforeAll(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'irc-defects-'));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('chat-log archive defects (issue 41)', () => {
  const pg = useTestOrm();
  const { sql } = pg;
  let svc: IrcImportService;
  beforeAll(() => {
    svc = new IrcImportService(pg.orm);
  });

  it('a NUL byte in one line is removed and reported; the batch finishes and the dry run predicts it', async () => {
    const root = path.join(tmp, 'nul');
    write('nul/#nul_20200101.log', lines('[10:00:00] <alice> first', '[10:00:01] <alice> before', '[10:00:02] <bob> hello'));
    write('nul/#nul_20200102.log', Buffer.from(lines('[11:00:00] <alice> ok', '[11:00:01] <bob> broken\x00line', '[11:00:02] <alice> after'), 'latin1'));
    write('nul/#nul_20200103.log', lines('[12:00:00] <carl> the rest of the files are read'));
    const dry = await svc.importPaths([root], { network: 'nul', source: 'production', dryRun: true });
    const real = await svc.importPaths([root], { network: 'nul', source: 'production' });
    expect(dry.inserted).toBe(7);
    expect(real.inserted).toBe(dry.inserted);
    expect(real.problems).toEqual([]);
    expect([dry.controlLines, real.controlLines]).toEqual([1, 1]);
    expect(real.controlFiles).toEqual([
      { path: path.join(root, '#nul_20200102.log'), count: 1, lines: [{ lineNo: 2, text: '[11:00:01] <bob> broken\\x00line' }] },
    ]);
    const [batch] = await sql<{ finished: boolean; inserted: string }>(
      'select finished_at is not null as finished, inserted from irc_import_batches where id = ?',
      [real.batchId],
    );
    expect(batch).toEqual({ finished: true, inserted: '7' });
    expect((await sql<{ m: string }>(`select message_text as m from irc_events where nick = 'bob' order by occurred_at`)).map((r) => r.m)).toEqual([
      'hello',
      'brokenline',
    ]);
    expect((await sql<{ n: string }>(`select count(*) as n from irc_events where nick = 'carl'`))[0]!.n).toBe('1');
  });

  it('ESC and BEL do not stay in message text', async () => {
    const file = write('ctl/#ctl_20200101.log', lines('[10:00:00] <alice> ding\x07 \x1b[31mred\x1b[0m text'));
    const c = await svc.importPaths([file], { network: 'ctl', source: 'production' });
    expect(c.controlLines).toBe(1);
    expect(
      (await sql<{ m: string }>(`select message_text as m from irc_events e join irc_channels c on c.id = e.channel_id where c.name = '#ctl'`))[0]!.m,
    ).toBe('ding red text');
  });

  it('23:59:60 stays on its day', async () => {
    const file = write('leap/#leap_20161231.log', lines('[23:59:59] <alice> before', '[23:59:60] <alice> leap'));
    await svc.importPaths([file], { network: 'leap', source: 'production' });
    expect(
      (
        await sql<{ t: string }>(
          `select to_char(occurred_at, 'YYYY-MM-DD HH24:MI:SS') as t from irc_events e join irc_channels c on c.id = e.channel_id where c.name = '#leap' order by e.id`,
        )
      ).map((r) => r.t),
    ).toEqual(['2016-12-31 23:59:59', '2016-12-31 23:59:59']);
  });

  it('years 0000 and 9999-12-31 are listed as out of range, not stored; 0050 is stored as 0050', async () => {
    const file = write(
      'years/#years.log',
      lines('0000-01-01T00:00:00  <alice> x', '0050-06-01T12:00:00  <alice> fifty', '2020-01-01T00:00:00  <alice> now', '9999-12-31T12:00:00  <alice> end'),
    );
    const dry = await svc.importPaths([file], { network: 'years', source: 'production', channel: '#years', format: 'limnoria', dryRun: true });
    const c = await svc.importPaths([file], { network: 'years', source: 'production', channel: '#years', format: 'limnoria' });
    expect([dry.inserted, c.inserted]).toEqual([2, 2]);
    expect([dry.outOfRange, c.outOfRange]).toEqual([2, 2]);
    expect(c.outOfRangeFiles[0]!.lines.map((l) => l.lineNo)).toEqual([1, 4]);
    expect(c.problems.join('\n')).toMatch(/2 line\(s\) in 1 file\(s\) are dated outside the archive's days \(0001-01-01 to 9999-12-30/);
    expect(
      (
        await sql<{ t: string }>(
          `select to_char(occurred_at, 'YYYY-MM-DD') as t from irc_events e join irc_channels c on c.id = e.channel_id where c.name = '#years' order by 1`,
        )
      ).map((r) => r.t),
    ).toEqual(['0050-06-01', '2020-01-01']);
  });

  it('says what skipped is made of, names a folder as a folder and lists README.md', async () => {
    const root = path.join(tmp, 'report');
    write('report/#fluid-tech/notes.txt', lines('some notes', 'that are not a log'));
    write('report/README.md', lines('# About these logs'));
    write(
      'report/#fluid_20200101.log',
      lines(
        '[10:00:00] <a> one',
        '[10:00:01] <a> two',
        'garbage 1',
        '[10:00:02] <a> three',
        'garbage 2',
        '[10:00:03] <a> four',
        'garbage 3',
        '[10:00:04] <a> five',
      ),
    );
    const first = await svc.importPaths([root], { network: 'report', source: 'production', allowUnparsed: true });
    expect(first.inserted).toBe(5);
    const again = await svc.importPaths([root], { network: 'report', source: 'production', allowUnparsed: true });
    expect({ skipped: again.skipped, unparsed: again.unparsed, duplicates: again.duplicates }).toEqual({ skipped: 8, unparsed: 3, duplicates: 5 });
    expect(again.ignoredFiles).toContainEqual({ path: path.join(root, 'README.md'), reason: 'Markdown notes, not a chat log' });
    expect(again.problems).toEqual([]);
    const folder = again.channels.find((ch) => ch.channel.endsWith('#fluid-tech'))!;
    expect(folder).toMatchObject({ kind: 'folder', channel: path.join(root, '#fluid-tech'), format: null });
    expect(again.channels.find((ch) => ch.channel === '#fluid')).toMatchObject({ kind: 'channel', format: 'znc' });
  });
});
