/**
 * Imports that never lose data silently, and undoing them: path layouts (`--path`, common layouts,
 * `--date` with one file only), ZNC reading a parenthesised reason that is not `user@host`, the
 * older colon-less EnergyMech lines, detection once per channel, unparsed lines listed with their
 * numbers, dry runs, import batches, revert and delete with the counters, nick statistics, nick
 * links and netsplit leaders they leave behind. Fixture files are generated here. The parser and
 * path-layout checks that need no database are in irc-parsers.test.ts (the unit tier).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IrcAliasService } from '../src/irc/alias-service.js';
import { IrcCorrectionService } from '../src/irc/correction-service.js';
import { IrcImportService } from '../src/irc/import-service.js';
import { parseLogFileName } from '../src/irc/parsers/znc.js';
import { useTestOrm } from '../../test/support/harness.js';

const lines = (...ls: string[]) => `${ls.join('\n')}\n`;
let tmp: string;
const write = (rel: string, text: string) => {
  const file = path.join(tmp, rel);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, text);
  return file;
};

beforeAll(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'irc-honesty-'));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('importing into PostgreSQL', () => {
  const pg = useTestOrm();
  const { sql } = pg;
  let svc: IrcImportService;
  let fix: IrcCorrectionService;
  beforeAll(() => {
    svc = new IrcImportService(pg.orm);
    fix = new IrcCorrectionService(pg.orm);
  });
  const count = async (where = 'true', b: unknown[] = []) =>
    Number((await sql<{ n: string }>(`select count(*) as n from irc_events e where ${where}`, b))[0]!.n);
  const channel = async (name: string) =>
    (
      await sql<{ event_count: string; first_at: string | null; last_at: string | null; netsplit_count: string; netsplit_leader_count: string }>(
        `select event_count, to_char(first_at, 'YYYY-MM-DD HH24:MI:SS') as first_at, to_char(last_at, 'YYYY-MM-DD HH24:MI:SS') as last_at,
                netsplit_count, netsplit_leader_count from irc_channels where name = ?`,
        [name],
      )
    )[0];

  /** irc_term_months must always equal what the rows say (write path, revert and delete keep it). */
  const termCountsDrift = async () =>
    sql(
      `with truth as (
         select t.lexeme as term, e.channel_id, date_trunc('month', e.occurred_at)::date as month, count(*)::int as n,
                bit_or(1 << (extract(day from e.occurred_at)::int - 1)) as days
           from irc_events e cross join lateral unnest(e.search_vector) t
          where e.event_type not in ('NETSPLIT', 'NETMERGE') group by 1, 2, 3)
       select * from truth full join irc_term_months k using (term, channel_id, month)
        where truth.n is distinct from k.n or truth.days is distinct from k.days limit 5`,
    );

  /** `YYYY/MM/DD.log`, three days in two months, channel nowhere in the path. */
  const dated = () => {
    const root = path.join(tmp, 'dated');
    write('dated/2019/01/31.log', lines('[23:00:00] <ann> last of january', '[23:30:00] *** Quits ann (Quit: night)'));
    write('dated/2019/02/01.log', lines('[08:00:00] *** Joins ann', '[08:00:05] <ann> first of february'));
    write('dated/2019/02/02.log', lines('[09:00:00] <bo> hi'));
    return root;
  };

  it('takes each day from a YYYY/MM/DD.log layout, and says so when no channel is given', async () => {
    const root = dated();
    const none = await svc.importPaths([root], { network: 'n1', source: 'production' });
    expect(none.files).toBe(0);
    expect(none.ignoredFiles).toHaveLength(3);
    expect(none.ignoredFiles[0]!.reason).toMatch(/pass --channel, or --path with \{channel\}/);
    expect(none.problems[0]).toMatch(/3 log file\(s\) not imported/);

    const c = await svc.importPaths([root], { network: 'n1', source: 'production', channel: '#dated' });
    expect(c).toMatchObject({ files: 3, lines: 5, inserted: 5, unparsed: 0, ignoredFiles: [], problems: [] });
    const at = await sql<{ at: string; message_text: string }>(
      `select to_char(occurred_at, 'YYYY-MM-DD HH24:MI:SS') as at, message_text from irc_events where event_type in ('PRIVMSG', 'QUIT') order by occurred_at`,
    );
    expect(at).toEqual([
      { at: '2019-01-31 23:00:00', message_text: 'last of january' },
      { at: '2019-01-31 23:30:00', message_text: 'Quit: night' },
      { at: '2019-02-01 08:00:05', message_text: 'first of february' },
      { at: '2019-02-02 09:00:00', message_text: 'hi' },
    ]);
  });

  it('a YYYY-MM-DD.log takes its channel only from a folder named like a channel', async () => {
    expect(parseLogFileName('/x/net/#qtox/2016-06-01.log')).toEqual({ channel: '#qtox', date: '2016-06-01' });
    expect(parseLogFileName('/x/net/&local/2016-06-01.log')).toEqual({ channel: '&local', date: '2016-06-01' });
    expect(parseLogFileName('/x/backup/logs/2016-06-01.log')).toBeNull();
    expect(parseLogFileName('/x/2016 backup/2016-06-01.log')).toBeNull();
    expect(parseLogFileName('2016-06-01.log')).toBeNull();
  });

  it('files that are no log format are listed as such in every mode, never as unparsed lines (--channel, --path or neither)', async () => {
    const root = path.join(tmp, 'mixed');
    for (const day of ['01', '02', '03', '04', '05', '06'])
      write(`mixed/#mixed/2019-03-${day}.log`, lines('[10:00:00] <ann> hello', '[10:00:05] <bo> hi', '[10:00:09] <ann> bye', '[10:00:10] <bo> bye'));
    write('mixed/#mixed/organize.py', lines('import os', 'for f in os.listdir("."):', '    print(f)'));
    write('mixed/#mixed/NOTES.txt', lines('These logs came from the old server.', 'Ask ann about March.'));
    const modes = [{}, { channel: '#mixed' }, { pathPattern: '{channel}/{yyyy}-{mm}-{dd}.log' }];
    for (const [i, mode] of modes.entries()) {
      const c = await svc.importPaths([root], { network: `mixed${i}`, source: 'production', dryRun: true, ...mode });
      expect(c, JSON.stringify(mode)).toMatchObject({ files: 6, lines: 24, unparsed: 0, unparsedFiles: [], notLogs: 2, problems: [] });
      expect(c.ignoredFiles.map((f) => [path.basename(f.path), f.reason.startsWith('not a known chat-log format')]).sort()).toEqual([
        ['NOTES.txt', true],
        ['organize.py', true],
      ]);
    }
  });

  it('refuses --date with more than one file', async () => {
    await expect(svc.importPaths([path.join(tmp, 'dated')], { network: 'n1', source: 'production', channel: '#x', date: '2019-01-01' })).rejects.toThrow(
      /--date gives the day of one file, but 3 files were given/,
    );
  });

  it('takes channel and day from --path, and from a #chan/YYYY/MM/DD.log layout by itself', async () => {
    write('bychan/#one/2020/05/06.log', lines('[12:00:00] <a> one'));
    write('bychan/#two/2020/05/07.log', lines('[12:00:00] <b> two'));
    const c = await svc.importPaths([path.join(tmp, 'bychan')], { network: 'n2', source: 'production', pathPattern: '{channel}/{yyyy}/{mm}/{dd}.log' });
    expect(c).toMatchObject({ files: 2, inserted: 2, problems: [] });
    write('bychan2/#three/2020/05/08.log', lines('[12:00:00] <c> three'));
    const auto = await svc.importPaths([path.join(tmp, 'bychan2')], { network: 'n2', source: 'production' });
    expect(auto).toMatchObject({ files: 1, inserted: 1, problems: [] });
    const rows = await sql<{ name: string; at: string }>(
      `select c.name, to_char(e.occurred_at, 'YYYY-MM-DD HH24:MI:SS') as at from irc_events e join irc_channels c on c.id = e.channel_id
        join irc_networks n on n.id = c.network_id where n.name = 'n2' order by 2`,
    );
    expect(rows).toEqual([
      { name: '#one', at: '2020-05-06 12:00:00' },
      { name: '#two', at: '2020-05-07 12:00:00' },
      { name: '#three', at: '2020-05-08 12:00:00' },
    ]);
    const miss = await svc.importPaths([path.join(tmp, 'bychan2')], { network: 'n2', source: 'production', pathPattern: '{channel}/{date}.log' });
    expect(miss.ignoredFiles[0]!.reason).toMatch(/does not fit --path/);
  });

  it('detects the format once per channel, reports files that alone look different, and keeps every quit reason', async () => {
    // EnergyMech dialect: host-less quits. One day starts with 60 netsplit rejoins (lines both
    // formats read alike), so alone it looks like ZNC.
    const day = (d: number, body: string[]) => write(`mech/#mech/2021-03-${String(d).padStart(2, '0')}.log`, lines(...body));
    day(1, ['[10:00:00] <a> hi', '[10:01:00] *** Quits: a (Ping timeout: 250 seconds)', '[10:02:00] *** Joins: b (~b@h.example)']);
    day(2, ['[10:00:00] *** Quits: c (Remote host closed the connection)', '[10:00:05] <d> ok']);
    const rejoins = Array.from({ length: 60 }, (_, i) => `[00:00:${String(i).padStart(2, '0')}] *** Joins: n${i} (~n@h.example)`);
    day(3, [...rejoins, ...Array.from({ length: 5 }, (_, i) => `[12:00:0${i}] *** Quits: q${i} (Quit: reason ${i})`)]);
    const c = await svc.importPaths([path.join(tmp, 'mech')], { network: 'n3', source: 'production' });
    expect(c.channels).toEqual([{ channel: '#mech', kind: 'channel', format: 'energymech', files: 3, detected: { energymech: 2, znc: 1 } }]);
    expect(c.warnings).toEqual([expect.stringMatching(/#mech: files alone look like different formats \(energymech 2, znc 1\); read as energymech/)]);
    expect(c.formats).toEqual({ energymech: 3 });
    const reasons = await sql<{ message_text: string | null }>(
      `select e.message_text from irc_events e join irc_channels c on c.id = e.channel_id where c.name = '#mech' and e.event_type = 'QUIT' order by e.occurred_at`,
    );
    expect(reasons.map((r) => r.message_text)).toEqual([
      'Ping timeout: 250 seconds',
      'Remote host closed the connection',
      'Quit: reason 0',
      'Quit: reason 1',
      'Quit: reason 2',
      'Quit: reason 3',
      'Quit: reason 4',
    ]);
  });

  it('lists unparsed lines per file with line numbers, and counts them as a problem unless allowed', async () => {
    const file = write(
      'conflict/#merge_20220101.log',
      lines('[10:00:00] <a> before', '<<<<<<< HEAD', '[10:00:01] <a> ours', '=======', '[10:00:01] <b> theirs', '>>>>>>> branch', '[10:00:02] <a> after'),
    );
    const dry = await svc.importPaths([file], { network: 'n4', source: 'production', dryRun: true });
    expect(dry.unparsedFiles).toEqual([
      {
        path: file,
        count: 3,
        lines: [
          { lineNo: 2, text: '<<<<<<< HEAD' },
          { lineNo: 4, text: '=======' },
          { lineNo: 6, text: '>>>>>>> branch' },
        ],
      },
    ]);
    expect(dry.problems).toEqual([expect.stringMatching(/^3 line\(s\) in 1 file\(s\) match no parser/)]);
    const small = await svc.importPaths([file], { network: 'n4', source: 'production', dryRun: true, chunkBytes: 40 });
    expect(small.unparsedFiles[0]!.lines.map((l) => l.lineNo)).toEqual([2, 4, 6]);
    expect((await svc.importPaths([file], { network: 'n4', source: 'production', dryRun: true, allowUnparsed: true })).problems).toEqual([]);
    expect((await svc.importPaths([file], { network: 'n4', source: 'production', dryRun: true, maxUnparsed: 3 })).problems).toEqual([]);
  });

  it('dry runs write nothing and count only rows not stored yet', async () => {
    const file = write('dry/#dry_20220102.log', lines('[10:00:00] <a> one', '[10:00:01] <a> two', '[10:00:01] <a> two'));
    const before = await count();
    const dry = await svc.importPaths([file], { network: 'n5', source: 'production', dryRun: true });
    expect(dry).toMatchObject({ dryRun: true, batchId: null, files: 1, lines: 3, inserted: 3, skipped: 0 });
    expect(await count()).toBe(before);
    expect(await sql(`select 1 from irc_networks where name = 'n5'`)).toEqual([]);
    await svc.importPaths([file], { network: 'n5', source: 'production' });
    expect(await svc.importPaths([file], { network: 'n5', source: 'production', dryRun: true })).toMatchObject({ inserted: 0, skipped: 3 });
  });

  it('records a batch on every imported row; revert removes them and fixes counters, nicks and links; a corrected re-import works', async () => {
    const file = write(
      'undo/#undo_20230301.log',
      lines(
        '[10:00:00] *** Joins: zed (~z@h.example)',
        '[10:00:05] <zed> hello',
        '[10:01:00] *** zed is now known as zed_away',
        '[10:02:00] *** Quits: x1 (~x@h) (*.net *.split)',
        '[10:02:01] *** Quits: x2 (~x@h) (*.net *.split)',
      ),
    );
    const first = await svc.importPaths([file], { network: 'n6', source: 'production', timeZone: 'Europe/Berlin' });
    expect(first.batchId).toEqual(expect.any(Number));
    expect(await count('e.import_batch_id = ?', [first.batchId])).toBe(5);
    const [listed] = await fix.listBatches({ network: 'n6' });
    expect(listed).toMatchObject({ id: first.batchId, network: 'n6', source: 'production', files: 1, lines: 5, inserted: 5, rows: 5, reverted_at: null });
    expect(listed!.options).toMatchObject({ tz: 'Europe/Berlin', format: 'auto' });
    expect(await channel('#undo')).toMatchObject({ event_count: '5', first_at: '2023-03-01 09:00:00', netsplit_count: '2', netsplit_leader_count: '1' });
    const aliases = new IrcAliasService(pg.orm);
    expect((await aliases.list('production', 'n6')).map((l) => [l.nick, l.alias])).toEqual([['zed', 'zed_away']]);

    // The zone was wrong: re-importing adds nothing until the batch is reverted.
    expect((await svc.importPaths([file], { network: 'n6', source: 'production', timeZone: 'UTC' })).inserted).toBe(0);
    // The dry run counts the nick links the revert removes (it said 0 whatever the batch held).
    expect(await fix.revertBatch(first.batchId!, { dryRun: true })).toMatchObject({ deleted: 5, linksRemoved: 1, dryRun: true });
    expect(await count('e.import_batch_id = ?', [first.batchId])).toBe(5);
    const r = await fix.revertBatch(first.batchId!);
    expect(r).toMatchObject({ deleted: 5, channels: 1, linksRemoved: 1, dryRun: false });
    expect(await channel('#undo')).toMatchObject({ event_count: '0', first_at: null, last_at: null, netsplit_count: '0', netsplit_leader_count: '0' });
    expect(await sql(`select 1 from irc_nicks k join irc_networks n on n.id = k.network_id where n.name = 'n6'`)).toEqual([]);
    expect(await aliases.list('production', 'n6')).toEqual([]);
    expect((await fix.listBatches({ network: 'n6' })).find((b) => b.id === first.batchId)).toMatchObject({ rows: 0, reverted_at: expect.any(String) });

    expect(await termCountsDrift()).toEqual([]);
    const again = await svc.importPaths([file], { network: 'n6', source: 'production', timeZone: 'UTC' });
    expect(again.inserted).toBe(5);
    expect(await termCountsDrift()).toEqual([]);
    expect(await channel('#undo')).toMatchObject({ event_count: '5', first_at: '2023-03-01 10:00:00' });
    await expect(fix.revertBatch(999_999)).rejects.toThrow(/no import batch 999999/);
  });

  it('deletes by channel and time, recounting channels and nicks, re-electing netsplit leaders, keeping admin links', async () => {
    const file = write(
      'del/#del_20230401.log',
      lines(
        '[08:00:00] <amy> early',
        '[09:00:00] *** amy is now known as amy_',
        '[10:00:00] *** Quits: s1 (~s@h) (*.net *.split)',
        '[10:00:01] *** Quits: s2 (~s@h) (*.net *.split)',
        '[11:00:00] <amy_> late',
        '[12:00:00] <bea> noon',
      ),
    );
    await svc.importPaths([file], { network: 'n7', source: 'production' });
    const aliases = new IrcAliasService(pg.orm);
    await aliases.add('production', 'n7', 'bea', 'bee');
    expect(await fix.deleteRows({ network: 'n7', source: 'production', channel: '#del', to: '2023-04-01 10:00:00', dryRun: true })).toMatchObject({
      deleted: 3,
      dryRun: true,
    });
    const r = await fix.deleteRows({ network: 'n7', source: 'production', channel: '#del', to: '2023-04-01 10:00:00' });
    expect(r).toMatchObject({ deleted: 3, channels: 1, linksRemoved: 1 });
    expect(await channel('#del')).toEqual({
      event_count: '3',
      first_at: '2023-04-01 10:00:01',
      last_at: '2023-04-01 12:00:00',
      netsplit_count: '1',
      netsplit_leader_count: '1',
    });
    expect(
      await sql(
        `select e.nick from irc_events e join irc_channels c on c.id = e.channel_id where c.name = '#del' and e.event_type = 'NETSPLIT' and e.netsplit_leader`,
      ),
    ).toEqual([{ nick: 's2' }]);
    const nicks = await sql<{ nick_key: string; event_count: string; message_count: string; first_at: string }>(
      `select nick_key, event_count, message_count, to_char(first_at, 'HH24:MI:SS') as first_at from irc_nicks k join irc_networks n on n.id = k.network_id
        where n.name = 'n7' order by nick_key`,
    );
    expect(nicks).toEqual([
      { nick_key: 'amy_', event_count: '1', message_count: '1', first_at: '11:00:00' },
      { nick_key: 'bea', event_count: '1', message_count: '1', first_at: '12:00:00' },
      { nick_key: 's2', event_count: '1', message_count: '0', first_at: '10:00:01' },
    ]);
    expect((await aliases.list('production', 'n7')).map((l) => [l.nick, l.alias, l.origin])).toEqual([['bea', 'bee', 'admin']]);

    expect(await termCountsDrift()).toEqual([]);
    await fix.deleteRows({ network: 'n7', source: 'production', from: '2023-04-01' });
    expect(await termCountsDrift()).toEqual([]);
    expect(await channel('#del')).toMatchObject({ event_count: '0' });
    await expect(fix.deleteRows({ network: 'n7', source: 'production', from: '2023-04-02', to: '2023-04-01' })).rejects.toThrow(/ends/);
    await expect(fix.deleteRows({ network: 'n7', source: 'production', from: 'yesterday' })).rejects.toThrow(/not a day/);
    await expect(fix.deleteRows({ network: 'nope', source: 'production' })).rejects.toThrow(/no network "nope"/);
  });
});
