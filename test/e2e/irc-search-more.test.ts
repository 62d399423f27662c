/**
 * Chat-log search beyond the basics: event_type, order=desc, last message vs last presence,
 * recipient without MODE/NICK rows, the same 422 for an unknown network or channel everywhere,
 * NUL bytes, oversized URLs, term limits, the statement timeout, and tokens (dotted names,
 * URL segments, emoji). The fixture channel is generated here.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IrcArchiveService, type LogSearch } from '../../coordinator/src/irc/archive-service.js';
import { IrcImportService } from '../../coordinator/src/irc/import-service.js';
import { parseQuery } from '../../coordinator/src/irc/search-terms.js';
import { createTestApp, type TestApp } from '../support/harness.js';

const DAY = [
  '[09:00:00] *** Joins: ann (~a@h.example)',
  '[09:00:10] <ann> bob: call this.flowManager.start() before render',
  '[09:00:20] <bob> see https://github.com/acme/widget/issues/12 for the flowManager bug',
  '[09:00:30] * bob shrugs 😀😀😀',
  '[09:00:40] -ChanServ- notice for everyone',
  '[09:01:00] *** ChanServ sets mode: +o bob',
  '[09:02:00] *** bob is now known as bobby',
  '[09:03:00] <ann> bobby: thanks',
  '[09:04:00] <carl> plain words about gitlab.com only',
  '[09:05:00] *** Quits: ann (~a@h.example) (Quit: bye)',
].join('\n');

let t: TestApp;
let dir: string;
let network: number;
let channel: number;

const get = async (url: string) => {
  const res = await t.app.inject({ method: 'GET', url });
  return { status: res.statusCode, body: res.json<Record<string, any>>() };
};
const logs = async (qs: string) => {
  const r = await get(`/irc/api/logs?network_id=${network}&${qs}`);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body as { total: number; results: Array<Record<string, any>>; nick_profile: any };
};

beforeAll(async () => {
  t = await createTestApp({ env: { IRC_API_RATE_LIMIT_MAX: '100000' } });
  dir = mkdtempSync(path.join(os.tmpdir(), 'irc-more-'));
  writeFileSync(path.join(dir, '#more_20240501.log'), `${DAY}\n`);
  await new IrcImportService(t.orm).importPaths([dir], { network: 'more', source: 'production' });
  const k = t.orm.em.getConnection().getKnex();
  network = Number((await k.raw(`select id from irc_networks where name = 'more'`)).rows[0].id);
  channel = Number((await k.raw(`select id from irc_channels where name = '#more'`)).rows[0].id);
});
afterAll(async () => {
  await t?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('filters and order', () => {
  it('filters by event_type (comma-separated, any case)', async () => {
    const b = await logs('event_type=privmsg,ACTION,NOTICE');
    expect(b.total).toBe(6);
    expect(new Set(b.results.map((r) => r.event_type))).toEqual(new Set(['PRIVMSG', 'ACTION', 'NOTICE']));
    expect((await logs('event_type=JOIN')).results.map((r) => r.nick)).toEqual(['ann']);
    const bad = await get(`/irc/api/logs?event_type=PRIVMSG,SHOUT`);
    expect(bad.status).toBe(422);
    expect(bad.body.error).toMatch(/^event_type: must be event types/);
  });

  it('answers newest first with order=desc, paging from the newest', async () => {
    const asc = await logs('event_type=PRIVMSG');
    const desc = await logs('event_type=PRIVMSG&order=desc');
    expect(desc.results.map((r) => r.id)).toEqual([...asc.results.map((r) => r.id)].reverse());
    expect((await logs('nick=ann&event_type=PRIVMSG&order=desc&limit=1')).results.map((r) => r.message_text)).toEqual(['bobby: thanks']);
    expect((await logs('q=flowmanager&order=desc&limit=1')).results.map((r) => r.nick)).toEqual(['bob']);
    expect((await logs('order=desc&limit=2&offset=1')).results.map((r) => r.occurred_at)).toEqual(['2024-05-01 09:04:00', '2024-05-01 09:03:00']);
    expect((await get('/irc/api/logs?order=newest')).body.error).toBe('order: must be asc or desc');
  });

  it('tells the last message from the last presence in nick_profile', async () => {
    const p = (await logs('nick=ann&limit=1')).nick_profile;
    expect(p).toMatchObject({ nick: 'ann', last_seen: '2024-05-01 09:05:00', last_message: '2024-05-01 09:03:00' });
    expect((await logs('nick=ChanServ&limit=1')).nick_profile).toMatchObject({ last_message: null });
  });

  it('recipient leaves out MODE and NICK rows', async () => {
    const b = await logs('recipient=bob');
    expect(b.results.map((r) => [r.event_type, r.message_text])).toEqual([['PRIVMSG', 'bob: call this.flowManager.start() before render']]);
    expect((await logs('recipient=bobby')).results.map((r) => r.message_text)).toEqual(['bobby: thanks']);
  });

  it('answers 422 for an unknown network or channel on /logs, as /channels does', async () => {
    const missing = 999_999;
    for (const url of [`/irc/api/logs?network_id=${missing}`, `/irc/api/networks/${missing}/channels`]) {
      const r = await get(url);
      expect(r.status, url).toBe(422);
      expect(r.body.error, url).toMatch(new RegExp(`^network(_i|I)d: no network ${missing} in the production archive$`));
    }
    const other = await get(`/irc/api/logs?network_id=${network}&source=sandbox`);
    expect(other.status).toBe(422);
    const ch = await get(`/irc/api/logs?channel_id=${missing}`);
    expect(ch).toMatchObject({ status: 422, body: { success: false, error: `channel_id: no channel ${missing} in the production archive` } });
    expect((await get(`/irc/api/logs?channel_id=${channel}&aggregate=dates`)).status).toBe(200);
  });
});

describe('hostile input', () => {
  it.each(['q', 'nick', 'recipient', 'include_terms', 'exclude_terms'])('a NUL byte in %s is 422 naming it', async (name) => {
    const r = await get(`/irc/api/logs?${name}=a%00b`);
    expect(r.status).toBe(422);
    expect(r.body).toEqual({ success: false, error: expect.stringMatching(new RegExp(`^${name}: must not contain control characters`)) });
  });

  it('answers an oversized URL 431 in the chat-log shape', async () => {
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const port = (t.app.server.address() as net.AddressInfo).port;
    const raw = await new Promise<string>((resolve, reject) => {
      const s = net.connect(port, '127.0.0.1', () => s.write(`GET /irc/api/logs?q=${'a'.repeat(100_000)} HTTP/1.1\r\nHost: x\r\n\r\n`));
      let data = '';
      s.on('data', (d) => (data += d.toString()));
      s.on('close', () => resolve(data));
      s.on('error', (e) => (data ? resolve(data) : reject(e)));
    });
    expect(raw).toMatch(/^HTTP\/1\.1 431 /);
    const body = JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4));
    expect(body).toEqual({ success: false, error: expect.stringMatching(/too large/) });
  });

  it('merges repeated terms and refuses too many terms or too short substrings', async () => {
    const many = Array.from({ length: 17 }, (_, i) => `w${i}`).join(' ');
    expect((await get(`/irc/api/logs?q=${encodeURIComponent(many)}`)).body.error).toMatch(/^q: at most 16 different terms/);
    // The same term 70 times is one term.
    expect((await get(`/irc/api/logs?network_id=${network}&q=${encodeURIComponent(Array(70).fill('thanks').join(' '))}`)).body.total).toBe(1);
    const short = await get(`/irc/api/logs?q=${encodeURIComponent(Array(166).fill('*e').join(' '))}`);
    expect(short).toMatchObject({ status: 422, body: { error: 'q: a substring term ("*e") needs at least 3 characters' } });
    expect((await get(`/irc/api/logs?include_terms=${encodeURIComponent('*aaa *bbb *ccc *ddd *eee')}`)).body.error).toMatch(
      /^include_terms: at most 4 \*substring terms/,
    );
    expect((await logs(`q=${encodeURIComponent('*owMan')}`)).total).toBeGreaterThan(0);
  });

  it('stops a search that runs past the statement timeout with a clear error', async () => {
    const archive = new IrcArchiveService(t.orm, { queryTimeoutMs: 200 });
    const search: LogSearch = {
      source: 'production',
      networkId: network,
      channelId: null,
      ...parseQuery('thanks'),
      nick: null,
      recipient: null,
      privateOnly: false,
      date: null,
      datetimeFrom: null,
      datetimeTo: null,
      dateFrom: null,
      dateTo: null,
      limit: 10,
      offset: 0,
      includeNetsplit: false,
      bulkNetsplit: true,
      eventTypes: null,
      order: 'asc',
    };
    expect((await archive.search(search)).total).toBe(1);
    // Another session holds a lock the search must wait for: the wait counts against the timeout.
    const blocker = new pg.Client({ connectionString: t.db.url });
    await blocker.connect();
    try {
      await blocker.query('begin');
      await blocker.query('lock table irc_events in access exclusive mode');
      await expect(archive.search(search)).rejects.toMatchObject({ reason: 'service_unavailable', message: expect.stringMatching(/longer than 0.2 s/) });
    } finally {
      await blocker.query('rollback');
      await blocker.end();
    }
  });
});

describe('tokens', () => {
  it('finds a dotted name or URL segment by its parts, and the whole as written', async () => {
    expect((await logs('q=flowManager')).results.map((r) => r.nick)).toEqual(['ann', 'bob']);
    expect((await logs(`q=${encodeURIComponent('this.flowManager.start')}`)).results.map((r) => r.nick)).toEqual(['ann']);
    expect((await logs('q=widget')).results.map((r) => r.nick)).toEqual(['bob']);
    expect((await logs('q=github.com')).results.map((r) => r.nick)).toEqual(['bob']);
    // -github drops the github.com link, and only that.
    const rest = await logs('q=-github&event_type=PRIVMSG');
    expect(rest.results.map((r) => r.nick)).toEqual(['ann', 'ann', 'carl']);
  });

  it('finds one emoji inside a run of them', async () => {
    expect((await logs(`q=${encodeURIComponent('😀')}`)).results.map((r) => r.event_type)).toEqual(['ACTION']);
  });
});

describe('channels imported side by side', () => {
  it('keeps nick statistics, nick links and counters exact when the same nicks speak in channels imported at once', async () => {
    const side = mkdtempSync(path.join(os.tmpdir(), 'irc-side-'));
    try {
      // Six channels, three days each, in small batches (many statements per transaction), every
      // channel with the same nicks in a different order, so lanes update the same nick rows.
      const nicks = ['ann', 'bob', 'carl', 'dora', 'eve', 'finn', 'gus', 'hal'];
      for (let c = 0; c < 6; c++)
        for (let d = 1; d <= 3; d++) {
          const lines: string[] = [];
          for (let i = 0; i < 240; i++) {
            const who = nicks[(i * (c + 3) + d) % nicks.length]!;
            const s = 3600 + i * 13;
            const at = `${String(Math.floor(s / 3600)).padStart(2, '0')}:${String(Math.floor(s / 60) % 60).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}`;
            lines.push(
              i % 60 === 7
                ? `[${at}] *** ${who} is now known as ${who}_away`
                : i % 60 === 8
                  ? `[${at}] *** ${who}_away is now known as ${who}`
                  : `[${at}] <${who}> line ${i} of channel ${c} day ${d}`,
            );
          }
          writeFileSync(path.join(side, `#side${c}_2024060${d}.log`), `${lines.join('\n')}\n`);
        }
      const counts = await new IrcImportService(t.orm).importPaths([side], { network: 'side', source: 'production', batchSize: 50, concurrency: 3 });
      expect(counts).toMatchObject({ inserted: 6 * 3 * 240, problems: [] });
      const k = t.orm.em.getConnection().getKnex();
      const net = Number((await k.raw(`select id from irc_networks where name = 'side'`)).rows[0].id);
      // What the counters say equals a recount of the rows.
      const kept = await k.raw(
        `select nick_key, first_at, last_at, last_message_at, message_count, event_count from irc_nicks where network_id = ? order by nick_key`,
        [net],
      );
      const recount = await k.raw(
        `select lower(e.nick) as nick_key, min(e.occurred_at) as first_at, max(e.occurred_at) as last_at,
                max(e.occurred_at) filter (where e.event_type in ('PRIVMSG', 'ACTION')) as last_message_at,
                count(*) filter (where e.event_type in ('PRIVMSG', 'ACTION')) as message_count, count(*) as event_count
           from irc_events e join irc_channels c on c.id = e.channel_id where c.network_id = ? and e.nick is not null group by 1 order by 1`,
        [net],
      );
      expect(kept.rows.length).toBeGreaterThanOrEqual(nicks.length);
      expect(kept.rows).toEqual(recount.rows);
      const links = await k.raw(`select nick_key || ' ' || other_key as l from irc_nick_links where network_id = ? order by 1`, [net]);
      expect(links.rows.map((r: { l: string }) => r.l)).toEqual(
        nicks.filter((n) => links.rows.some((r: { l: string }) => r.l === `${n} ${n}_away`)).map((n) => `${n} ${n}_away`),
      );
      expect(links.rows.length).toBeGreaterThan(0);
      const channels = await k.raw(
        `select c.event_count::int as kept, (select count(*)::int from irc_events e where e.channel_id = c.id) as rows from irc_channels c where c.network_id = ?`,
        [net],
      );
      expect(channels.rows).toHaveLength(6);
      for (const r of channels.rows) expect(r.kept).toBe(r.rows);
    } finally {
      rmSync(side, { recursive: true, force: true });
    }
  });
});

describe('chat text is never read as HTML', () => {
  it('words written like tags are indexed and found: <marquee>, and the words after <style> or <script>', async () => {
    const tags = mkdtempSync(path.join(os.tmpdir(), 'irc-tags-'));
    try {
      writeFileSync(
        path.join(tags, '#tags_20240502.log'),
        [
          '[10:00:00] <ann> who still uses <marquee> these days',
          '[10:00:10] <bob> it has a <style> element, could you export it',
          '[10:00:20] <carl> <script>alert(1)</script> then nothing else matters',
        ].join('\n') + '\n',
      );
      await new IrcImportService(t.orm).importPaths([tags], { network: 'tags', source: 'production' });
      const k = t.orm.em.getConnection().getKnex();
      const id = Number((await k.raw(`select id from irc_networks where name = 'tags'`)).rows[0].id);
      const find = async (q: string) => {
        const r = await get(`/irc/api/logs?network_id=${id}&q=${encodeURIComponent(q)}`);
        expect(r.status, JSON.stringify(r.body)).toBe(200);
        return (r.body.results as Array<{ nick: string }>).map((x) => x.nick);
      };
      expect(await find('marquee')).toEqual(['ann']);
      expect(await find('<marquee>')).toEqual(['ann']);
      expect(await find('export')).toEqual(['bob']);
      expect(await find('element')).toEqual(['bob']);
      expect(await find('"a <style> element"')).toEqual(['bob']);
      expect(await find('matters')).toEqual(['carl']);
      expect(await find('alert')).toEqual(['carl']);
    } finally {
      rmSync(tags, { recursive: true, force: true });
    }
  });
});
