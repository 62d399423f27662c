/**
 * One file of each chat-log format beside ZNC (helpers/irc-format-fixtures.ts), imported into
 * PostgreSQL with the format detected per file: channels, times in the import's zone (or UTC where
 * the format says so), netsplit grouping, and a second import that adds nothing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IrcImportService } from '../src/irc/import-service.js';
import { useTestOrm } from '../../test/support/harness.js';
import { FIXTURES, writeFormatFixtures } from './helpers/irc-format-fixtures.js';

let tmp: string;
beforeAll(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'irc-formats-import-'));
  writeFormatFixtures(tmp);
});
afterAll(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe('importing one file of each format into PostgreSQL (auto-detected)', () => {
  const pg = useTestOrm();
  const { sql } = pg;
  let svc: IrcImportService;
  const totalEvents = FIXTURES.reduce((n, f) => n + f.events, 0);
  const totalLines = FIXTURES.reduce((n, f) => n + f.lines, 0);

  beforeAll(() => {
    svc = new IrcImportService(pg.orm);
  });

  it('imports each file with its own format, channel and times', async () => {
    const counts = await svc.importPaths([path.join(tmp, 'logs')], { network: 'libera', source: 'production', timeZone: 'Europe/Stockholm' });
    expect(counts.ignoredFiles).toEqual([]);
    expect(counts.formats).toEqual({ irssi: 1, weechat: 1, limnoria: 1, hexchat: 1, energymech: 1 });
    expect(counts).toMatchObject({ files: 5, lines: totalLines, inserted: totalEvents, unparsed: 0, skipped: totalLines - totalEvents });

    const perChannel = await sql<{ name: string; n: string }>(
      'select c.name, count(e.id) as n from irc_channels c left join irc_events e on e.channel_id = c.id group by c.name order by c.name',
    );
    expect(perChannel.map((r) => [r.name, Number(r.n)])).toEqual([
      ['#energymech', 10],
      ['#hexchat', 10],
      ['#irssi', 13],
      ['#limnoria', 10],
      ['#weechat', 10],
    ]);

    const row = async (channel: string, where: string) =>
      sql<{ event_type: string; nick: string; to_nick: string | null; message_text: string | null; at: string }>(
        `select e.event_type, e.nick, e.to_nick, e.message_text, to_char(e.occurred_at, 'YYYY-MM-DD HH24:MI:SS') as at
         from irc_events e join irc_channels c on c.id = e.channel_id where c.name = ? and ${where} order by e.occurred_at, e.id`,
        [channel],
      );
    // irssi: local wall clock in Europe/Stockholm (CET, +01:00 in January); Day changed moves to the 3rd.
    expect(await row('#irssi', `e.nick = 'bobby' and e.event_type = 'PRIVMSG'`)).toEqual([
      { event_type: 'PRIVMSG', nick: 'bobby', to_nick: null, message_text: 'late', at: '2017-01-02 22:59:00' },
      { event_type: 'PRIVMSG', nick: 'bobby', to_nick: null, message_text: 'early', at: '2017-01-02 23:01:00' },
    ]);
    expect(await row('#irssi', `e.event_type = 'KICK'`)).toEqual([
      { event_type: 'KICK', nick: 'alice', to_nick: 'carol', message_text: 'spam', at: '2017-01-02 09:07:00' },
    ]);
    // WeeChat 4.8 stamps are UTC ("…Z"): the zone given to the import does not move them.
    expect(await row('#weechat', `e.event_type in ('PRIVMSG', 'NETSPLIT')`)).toEqual([
      { event_type: 'PRIVMSG', nick: 'alice', to_nick: null, message_text: 'hello', at: '2017-01-02 11:00:02' },
      { event_type: 'NETSPLIT', nick: 'erin', to_nick: null, message_text: '*.net *.split', at: '2017-01-02 11:00:09' },
    ]);
    expect(await row('#limnoria', `e.event_type = 'TOPIC'`)).toEqual([
      { event_type: 'TOPIC', nick: 'alice', to_nick: null, message_text: 'new topic', at: '2017-01-02 11:00:05' },
    ]);
    expect(await row('#hexchat', `e.event_type = 'MODE'`)).toEqual([
      { event_type: 'MODE', nick: 'alice', to_nick: null, message_text: '+o bob', at: '2017-01-02 11:00:04' },
    ]);
    expect(await row('#energymech', `e.event_type = 'QUIT'`)).toEqual([
      { event_type: 'QUIT', nick: 'erin', to_nick: null, message_text: 'Quit: leaving', at: '2017-01-02 11:00:09' },
    ]);
    const splits = await sql<{ g: string | null; leader: boolean }>(
      `select netsplit_group as g, netsplit_leader as leader from irc_events where event_type = 'NETSPLIT'`,
    );
    expect(splits).toHaveLength(1);
    expect(splits[0]!.g).not.toBeNull();
    expect(splits[0]!.leader).toBe(true);
  });

  it('imports nothing the second time', async () => {
    const again = await svc.importPaths([path.join(tmp, 'logs')], { network: 'libera', source: 'production', timeZone: 'Europe/Stockholm' });
    expect(again).toMatchObject({ files: 5, lines: totalLines, inserted: 0, skipped: totalLines, unparsed: 0 });
    expect(again.formats).toEqual({ irssi: 1, weechat: 1, limnoria: 1, hexchat: 1, energymech: 1 });
    const [n] = await sql<{ n: string }>('select count(*) as n from irc_events');
    expect(Number(n!.n)).toBe(totalEvents);
  });
});
