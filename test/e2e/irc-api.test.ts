import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IrcAliasService } from '../../coordinator/src/irc/alias-service.js';
import { COMMON_TERMS, FREQUENT_TERMS, IrcCommonTerms } from '../../coordinator/src/irc/common-terms.js';
import { IrcEventStore, type NewIrcEvent } from '../../coordinator/src/irc/event-store.js';
import { IrcImportService } from '../../coordinator/src/irc/import-service.js';
import { createJwtUser, createTestApp, type TestApp } from '../support/harness.js';
import { pairCounts } from '../support/irc-pairs.js';

// A small, hand-checked channel (UTC) next to a real month of #qtox logs (BST).
const LAB_DAY1 = [
  '[10:00:00] *** Joins: alice (~a@host)',
  '[10:00:05] <alice> hello world from the lab',
  '[10:00:10] <bob> alice: see https://example.org/docs and foo_bar() in C++.',
  '[10:00:20] * alice waves at bob',
  '[10:01:00] *** alice is now known as alice_away',
  '[10:02:00] <alice_away> still here, testing phrase search',
  '[10:03:00] *** Quits: carol (~c@h) (*.net *.split)',
  '[10:03:01] *** Quits: dave (~d@h) (*.net *.split)',
  '[10:03:02] *** Quits: erin (~e@h) (*.net *.split)',
  '[10:05:00] *** Joins: carol (~c@h)',
  '[10:05:01] *** Joins: dave (~d@h)',
  '[10:06:00] <f10__> rysiek|pl: the qtox build broke again',
  '[10:07:00] <bob> hello there, nothing about worlds',
  '[10:08:00] -ChanServ- services notice',
].join('\n');
const LAB_DAY2 = ['[09:00:00] <alice> good morning world', '[09:30:00] <bob> qtox release notes are out'].join('\n');
const QUERY = ['[11:00:00] <me> hi bob, secret plan', '[11:00:10] <bob> ok me'].join('\n');
const QTOX_JUNE = '/work/shared/data/irc/znc-qtox/2016/06';

let t: TestApp;
let dir: string;
let ids: { freenode: number; testnet: number; sandboxNet: number; lab: number; query: number; sandboxLab: number };

const get = async (url: string, headers: Record<string, string> = {}) => {
  const res = await t.app.inject({ method: 'GET', url, headers });
  return { status: res.statusCode, body: res.json<Record<string, any>>(), headers: res.headers };
};
const logs = async (qs: string) => {
  const r = await get(`/irc/api/logs?${qs}`);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body as { success: boolean; source: string; total: number; limit: number; offset: number; results: Array<Record<string, any>>; nick_profile: any };
};
const texts = (b: { results: Array<Record<string, any>> }) => b.results.map((r) => r.message_text);

beforeAll(async () => {
  t = await createTestApp({ env: { IRC_API_RATE_LIMIT_MAX: '100000' } });
  dir = mkdtempSync(path.join(os.tmpdir(), 'irc-api-'));
  mkdirSync(path.join(dir, 'lab'));
  writeFileSync(path.join(dir, 'lab', '#lab_20240310.log'), LAB_DAY1);
  writeFileSync(path.join(dir, 'lab', '#lab_20240311.log'), LAB_DAY2);
  writeFileSync(path.join(dir, 'lab', 'bob_20240310.log'), QUERY);
  writeFileSync(path.join(dir, 'sandbox.log'), '[12:00:00] <tester> sandbox only words\n');
  const importer = new IrcImportService(t.orm);
  await importer.importPaths([path.join(dir, 'lab')], { network: 'testnet', source: 'production' });
  await importer.importPaths([path.join(dir, 'sandbox.log')], { network: 'testnet', source: 'sandbox', channel: '#lab', date: '2024-03-10' });
  await importer.importPaths([QTOX_JUNE], { network: 'freenode', source: 'production', timeZone: 'Europe/London' });
  const k = t.orm.em.getConnection().getKnex();
  const nets = (await k.raw('select id, name, source from irc_networks')).rows as Array<{ id: number; name: string; source: string }>;
  const chans = (await k.raw('select c.id, c.name, n.source from irc_channels c join irc_networks n on n.id = c.network_id')).rows as Array<{
    id: number;
    name: string;
    source: string;
  }>;
  ids = {
    freenode: nets.find((n) => n.name === 'freenode')!.id,
    testnet: nets.find((n) => n.name === 'testnet' && n.source === 'production')!.id,
    sandboxNet: nets.find((n) => n.source === 'sandbox')!.id,
    lab: chans.find((c) => c.name === '#lab' && c.source === 'production')!.id,
    query: chans.find((c) => c.name === 'bob')!.id,
    sandboxLab: chans.find((c) => c.name === '#lab' && c.source === 'sandbox')!.id,
  };
});
afterAll(async () => {
  await t?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('networks and channels', () => {
  it('lists the networks of each archive separately', async () => {
    expect((await get('/irc/api/networks')).body).toEqual({
      success: true,
      source: 'production',
      networks: [
        { id: ids.freenode, name: 'freenode' },
        { id: ids.testnet, name: 'testnet' },
      ],
    });
    expect((await get('/irc/api/networks?source=sandbox')).body).toEqual({
      success: true,
      source: 'sandbox',
      networks: [{ id: ids.sandboxNet, name: 'testnet' }],
    });
  });

  it('lists channels with first and last event time (UTC) and event count, from counters kept at import', async () => {
    const r = await get(`/irc/api/networks/${ids.testnet}/channels`);
    expect(r.body).toEqual({
      success: true,
      source: 'production',
      channels: [
        { id: ids.lab, name: '#lab', first_date: '2024-03-10 10:00:00', last_date: '2024-03-11 09:30:00', event_count: 16 },
        { id: ids.query, name: 'bob', first_date: '2024-03-10 11:00:00', last_date: '2024-03-10 11:00:10', event_count: 2 },
      ],
    });
    // The real month: 7291 lines, times converted from BST. Line 1 of 2016-06-01 is 02:06:03 BST.
    const q = await get(`/irc/api/networks/${ids.freenode}/channels`);
    expect(q.body.channels).toEqual([
      { id: expect.any(Number), name: '#qtox', first_date: '2016-06-01 01:06:03', last_date: expect.stringMatching(/^2016-06-30 /), event_count: 7291 },
    ]);
  });

  it('answers 422 naming networkId for a network of the other archive or a bad id', async () => {
    const other = await get(`/irc/api/networks/${ids.sandboxNet}/channels`);
    expect(other.status).toBe(422);
    expect(other.body).toEqual({ success: false, error: `networkId: no network ${ids.sandboxNet} in the production archive` });
    expect((await get(`/irc/api/networks/${ids.sandboxNet}/channels?source=sandbox`)).body.channels.map((c: any) => c.id)).toEqual([ids.sandboxLab]);
    const bad = await get('/irc/api/networks/abc/channels');
    expect(bad.status).toBe(422);
    expect(bad.body.error).toMatch(/^networkId: /);
  });
});

describe('GET /irc/api/logs', () => {
  const lab = () => `network_id=${ids.testnet}`;

  it('returns rows in (occurred_at, id) order with the documented fields, netsplit rows hidden by default', async () => {
    const b = await logs(`${lab()}&limit=3`);
    expect(b).toMatchObject({ success: true, source: 'production', total: 13, limit: 3, offset: 0, nick_profile: null });
    expect(b.results[0]).toEqual({
      id: expect.any(Number),
      event_type: 'JOIN',
      occurred_at: '2024-03-10 10:00:00',
      nick: 'alice',
      message_text: null,
      target: null,
      to_nick: null,
      channel_id: ids.lab,
      channel_name: '#lab',
      network_id: ids.testnet,
    });
    expect(b.results[2]).toMatchObject({
      event_type: 'PRIVMSG',
      nick: 'bob',
      to_nick: 'alice',
      message_text: 'alice: see https://example.org/docs and foo_bar() in C++.',
    });
    const page2 = await logs(`${lab()}&limit=3&offset=3`);
    expect(page2.results.map((r) => r.event_type)).toEqual(['ACTION', 'NICK', 'PRIVMSG']);
    const all = await logs(`${lab()}&limit=1000`);
    expect(all.results.map((r) => r.occurred_at)).toEqual([...all.results.map((r) => r.occurred_at)].sort());
    expect(all.results.some((r) => r.event_type === 'NETSPLIT' || r.event_type === 'NETMERGE')).toBe(false);
    expect((await logs(`${lab()}&offset=500`)).results).toEqual([]);
  });

  it('matches words exactly (no stemming), phrases in order, and applies exclusions after inclusions', async () => {
    expect(texts(await logs(`${lab()}&q=world`))).toEqual(['hello world from the lab', 'good morning world']);
    expect(texts(await logs(`${lab()}&q=${encodeURIComponent('"hello world"')}`))).toEqual(['hello world from the lab']);
    expect(texts(await logs(`${lab()}&q=${encodeURIComponent('"world hello"')}`))).toEqual([]);
    expect(texts(await logs(`${lab()}&q=${encodeURIComponent('world -morning')}`))).toEqual(['hello world from the lab']);
    expect(texts(await logs(`${lab()}&q=${encodeURIComponent('+hello -"hello there"')}`))).toEqual(['hello world from the lab']);
    expect(texts(await logs(`${lab()}&q=HELLO`))).toHaveLength(2);
    expect(texts(await logs(`${lab()}&include_terms=${encodeURIComponent('hello, world')}`))).toEqual(['hello world from the lab']);
    expect(texts(await logs(`${lab()}&q=hello&exclude_terms=from`))).toEqual(['hello there, nothing about worlds']);
    // Only exclusions: counted as everything less the matches; the same as with a (no-op) date filter.
    const rest = await logs(`${lab()}&q=${encodeURIComponent('-hello -"good morning"')}&limit=1000`);
    expect(rest.total).toBe(10);
    expect(rest.results).toHaveLength(10);
    expect(texts(rest).filter((t) => t && /hello|good morning/.test(t))).toEqual([]);
    const viaDates = await logs(`${lab()}&q=${encodeURIComponent('-hello -"good morning"')}&date_from=2000-01-01&limit=1000`);
    expect(viaDates.results).toEqual(rest.results);
    expect((await logs(`${lab()}&q=-hello&include_netsplit=1&bulk_netsplit=0`)).total).toBe(16);
    // A term naming a channel matches that channel's rows too, so excluding it leaves none of #lab.
    expect(texts(await logs(`${lab()}&q=hello&exclude_terms=lab`))).toEqual([]);
  });

  it('keeps nicks, URLs and code tokens intact', async () => {
    expect(texts(await logs(`${lab()}&q=f10__`))).toEqual(['rysiek|pl: the qtox build broke again']);
    expect(texts(await logs(`${lab()}&q=${encodeURIComponent('rysiek|pl')}`))).toEqual(['rysiek|pl: the qtox build broke again']);
    const code = 'alice: see https://example.org/docs and foo_bar() in C++.';
    expect(texts(await logs(`${lab()}&q=foo_bar()`))).toEqual([code]);
    expect(texts(await logs(`${lab()}&q=${encodeURIComponent('c++')}`))).toEqual([code]);
    expect(texts(await logs(`${lab()}&q=${encodeURIComponent('https://example.org/docs')}`))).toEqual([code]);
    expect(texts(await logs(`${lab()}&q=example.org`))).toEqual([code]);
    // foo_bar is one token; "foo" alone is a word of it as well.
    expect(texts(await logs(`${lab()}&q=foo`))).toEqual([code]);
  });

  it('supports prefix* and *substring terms, and matches channel names', async () => {
    expect(texts(await logs(`${lab()}&q=${encodeURIComponent('qto*')}`))).toEqual(['rysiek|pl: the qtox build broke again', 'qtox release notes are out']);
    expect(texts(await logs(`network_id=${ids.testnet}&q=${encodeURIComponent('*ecret')}`))).toEqual(['hi bob, secret plan']);
    const inLab = await logs(`${lab()}&q=${encodeURIComponent('#lab -hello')}`);
    expect(inLab.total).toBe(9); // 11 rows of #lab (netsplits hidden) less the two with "hello"
    expect(inLab.results.every((r) => r.channel_name === '#lab')).toBe(true);
  });

  it("filters by nick with aliases from nick changes, and returns the person's profile", async () => {
    const b = await logs(`${lab()}&nick=alice`);
    expect(b.results.map((r) => [r.nick, r.event_type])).toEqual([
      ['alice', 'JOIN'],
      ['alice', 'PRIVMSG'],
      ['alice', 'ACTION'],
      ['alice', 'NICK'],
      ['alice_away', 'PRIVMSG'],
      ['alice', 'PRIVMSG'],
    ]);
    expect(b.nick_profile).toEqual({
      nick: 'alice',
      aliases: ['alice_away'],
      first_seen: '2024-03-10 10:00:00',
      last_seen: '2024-03-11 09:00:00',
      last_message: '2024-03-11 09:00:00',
      message_count: 4,
      event_count: 6,
      networks: [{ id: ids.testnet, name: 'testnet' }],
    });
    expect((await logs(`${lab()}&nick=ALICE_AWAY`)).total).toBe(6);
    const nobody = await logs(`${lab()}&nick=zed`);
    expect(nobody).toMatchObject({ total: 0, results: [], nick_profile: null });
  });

  it('lets an admin link and unlink nicks; an unlink survives re-import', async () => {
    const aliases = new IrcAliasService(t.orm);
    await aliases.add('production', 'testnet', 'bob', 'f10__');
    expect((await logs(`${lab()}&nick=bob`)).nick_profile.aliases).toEqual(['f10__']);
    await aliases.remove('production', 'testnet', 'alice', 'alice_away');
    expect((await logs(`${lab()}&nick=alice`)).total).toBe(5);
    await new IrcImportService(t.orm).importPaths([path.join(dir, 'lab')], { network: 'testnet', source: 'production' });
    expect((await logs(`${lab()}&nick=alice`)).total).toBe(5);
    await aliases.add('production', 'testnet', 'alice', 'alice_away');
    expect((await logs(`${lab()}&nick=alice`)).total).toBe(6);
    expect(await aliases.list('production', 'testnet', 'alice')).toEqual([
      { network: 'testnet', nick: 'alice', alias: 'alice_away', origin: 'admin', blocked: false },
    ]);
  });

  it('filters by recipient (to_nick or target) and private rows', async () => {
    expect(texts(await logs(`${lab()}&recipient=alice`))).toEqual(['alice: see https://example.org/docs and foo_bar() in C++.']);
    expect(texts(await logs(`network_id=${ids.testnet}&recipient=BOB`))).toEqual(['hi bob, secret plan']);
    const priv = await logs(`network_id=${ids.testnet}&private_only=1`);
    expect(priv.results.map((r) => [r.channel_name, r.nick, r.target])).toEqual([
      ['bob', 'me', 'bob'],
      ['bob', 'bob', null],
    ]);
  });

  it('applies date precedence: date, else datetime_from/to, else date_from/date_to', async () => {
    expect((await logs(`${lab()}&date=2024-03-11`)).total).toBe(2);
    expect((await logs(`${lab()}&date=2024-03-11&date_from=2024-03-10&datetime_from=2024-03-10 00:00:00`)).total).toBe(2);
    const dt = await logs(`${lab()}&datetime_from=${encodeURIComponent('2024-03-10 10:00:05')}&datetime_to=${encodeURIComponent('2024-03-10 10:00:20')}`);
    expect(dt.results.map((r) => r.occurred_at)).toEqual(['2024-03-10 10:00:05', '2024-03-10 10:00:10', '2024-03-10 10:00:20']);
    expect((await logs(`${lab()}&datetime_from=${encodeURIComponent('2024-03-11 00:00:00')}&date_from=2024-03-10`)).total).toBe(2);
    expect((await logs(`${lab()}&date_from=2024-03-10&date_to=2024-03-10`)).total).toBe(11);
    expect((await logs(`${lab()}&date_from=2024-03-11`)).total).toBe(2);
    const inverted = await get(`/irc/api/logs?date_from=2024-03-12&date_to=2024-03-11`);
    expect(inverted.status).toBe(422);
    expect(inverted.body.error).toBe('date_to: the time range ends before it starts (date_to is before date_from)');
    // Also where no channel is in scope.
    expect((await get(`/irc/api/logs?source=sandbox&private_only=1&datetime_from=2024-03-12 00:00:00&datetime_to=2024-03-11 00:00:00`)).body.error).toMatch(
      /^datetime_to: /,
    );
  });

  it('shows netsplits when asked, one row per burst unless bulk_netsplit=0', async () => {
    const bulk = await logs(`${lab()}&include_netsplit=1&q=&limit=100`);
    expect(bulk.total).toBe(15);
    const splits = bulk.results.filter((r) => r.event_type === 'NETSPLIT' || r.event_type === 'NETMERGE');
    expect(splits).toEqual([
      expect.objectContaining({
        event_type: 'NETSPLIT',
        nick: 'carol',
        message_text: '*.net *.split',
        netsplit_count: 3,
        netsplit_nicks: ['carol', 'dave', 'erin'],
        netsplit_last_at: '2024-03-10 10:03:02',
      }),
      expect.objectContaining({ event_type: 'NETMERGE', nick: 'carol', netsplit_count: 2, netsplit_nicks: ['carol', 'dave'] }),
    ]);
    const each = await logs(`${lab()}&include_netsplit=true&bulk_netsplit=0`);
    expect(each.total).toBe(18);
    expect(each.results.filter((r) => r.event_type === 'NETSPLIT').map((r) => r.nick)).toEqual(['carol', 'dave', 'erin']);
    expect(each.results.find((r) => r.event_type === 'NETSPLIT')!.netsplit_count).toBeUndefined();
  });

  it('aggregates distinct dates and their span', async () => {
    expect((await get(`/irc/api/logs?${lab()}&q=world&aggregate=dates`)).body).toEqual({
      success: true,
      source: 'production',
      aggregate: 'dates',
      total: 2,
      date_count: 2,
      first_date: '2024-03-10',
      last_date: '2024-03-11',
      span_days: 2,
      nick_profile: null,
    });
    const none = (await get(`/irc/api/logs?q=nosuchwordanywhere&aggregate=dates`)).body;
    expect(none).toMatchObject({ total: 0, date_count: 0, first_date: null, last_date: null, span_days: 0 });
  });

  it('keeps production and sandbox apart', async () => {
    expect(texts(await logs('q=sandbox'))).toEqual([]);
    expect(texts(await logs('source=sandbox&q=sandbox'))).toEqual(['sandbox only words']);
    // A channel of the other archive is unknown here: 422, as for a network (not an empty page).
    expect(await get(`/irc/api/logs?source=sandbox&channel_id=${ids.lab}`)).toMatchObject({
      status: 422,
      body: { success: false, error: `channel_id: no channel ${ids.lab} in the sandbox archive` },
    });
  });

  it('searches the real #qtox month', async () => {
    const b = await logs(`network_id=${ids.freenode}&q=konversation&limit=1`);
    expect(b.total).toBeGreaterThan(10);
    const tux = await logs(`network_id=${ids.freenode}&nick=tux3&q=${encodeURIComponent('"Not Dead"')}`);
    expect(tux.results.map((r) => [r.nick, r.message_text, r.occurred_at])).toEqual([['tux3', 'Not Dead™', '2016-06-01 15:36:05']]);
    expect(tux.nick_profile).toMatchObject({ nick: 'tux3' });
    expect(tux.nick_profile.message_count).toBeGreaterThan(100);
  });

  it('answers one-word searches from the per-term counts exactly as the row scan does', async () => {
    // A date bound that covers everything sends the same search down the row-scanning path.
    const scan = '&date_from=2000-01-01';
    for (const w of [
      'qtox',
      'the',
      'tux3',
      'build',
      'konversation',
      'hello',
      'zzzunknown',
      'qtox%20-the',
      'the%20-a%20-is',
      'build%20-%22the%20build%22',
      // One excluded common word: counted from the pair counts.
      'qtox%20-i',
      'the%20-to',
      'konversation%20-the',
      'zzzunknown%20-the',
      'the%20-the',
    ]) {
      for (const extra of ['', `&network_id=${ids.freenode}`, '&order=desc', '&offset=150&limit=20', '&order=desc&offset=40&limit=7']) {
        const fast = await logs(`q=${w}${extra}`);
        const slow = await logs(`q=${w}${extra}${scan}`);
        expect({ total: fast.total, ids: fast.results.map((r) => r.id) }, `${w}${extra}`).toEqual({ total: slow.total, ids: slow.results.map((r) => r.id) });
      }
      const a = (await get(`/irc/api/logs?q=${w}&aggregate=dates`)).body;
      expect(a.success, w).toBe(true);
      const b = (await get(`/irc/api/logs?q=${w}&aggregate=dates${scan}`)).body;
      expect(a, w).toEqual(b);
    }
  });

  it('keeps the pair counts of common and frequent terms exact through writes, list changes of both kinds and a refresh racing a writer', async () => {
    const k = t.orm.em.getConnection().getKnex();
    const common = new IrcCommonTerms(t.orm);
    const recount = () => pairCounts(t);
    // The imports chose the archive's most frequent words.
    const l = await common.list();
    expect(l.common).toHaveLength(COMMON_TERMS);
    expect(l.frequent).toHaveLength(FREQUENT_TERMS);
    expect(l.common).toEqual(expect.arrayContaining(['the', 'i', 'to', 'a']));
    let r = await recount();
    expect(r.rows).toBeGreaterThan(1000);
    expect(r.kept).toBe(r.counted);
    const scan = '&date_from=2000-01-01';
    const same = async (q: string) => {
      const fast = await logs(`q=${q}`);
      const slow = await logs(`q=${q}${scan}`);
      expect({ total: fast.total, ids: fast.results.map((x) => x.id) }, q).toEqual({ total: slow.total, ids: slow.results.map((x) => x.id) });
      return fast.total;
    };
    const before = await same('qtox%20-the');

    // Each kind of change, a term at a time: frequent terms leave and come back, common ones
    // become merely frequent (searches then fall back to the index) and common again.
    for (const opts of [{ frequent: FREQUENT_TERMS - 20 }, {}, { common: 3 }]) {
      const change = await common.refresh(opts);
      expect(change.rebuilt).toBe(false);
      expect(change.changed).toBe(opts.frequent ? 20 : opts.common ? COMMON_TERMS - 3 : 20);
      r = await recount();
      expect(r.kept).toBe(r.counted);
      expect(await same('qtox%20-the')).toBe(before);
    }
    // Many changes at once: everything recounted in one pass, and back.
    for (const opts of [{ frequent: 40, common: 2 }, { common: 3 }]) {
      expect((await common.refresh(opts)).rebuilt).toBe(true);
      r = await recount();
      expect(r.kept).toBe(r.counted);
    }

    // A writer holds rows with common words uncommitted while the common terms come back: the
    // refresh waits for it, and its rows are counted once (by the refresh, as the writer read the old list).
    const store = new IrcEventStore(t.orm);
    const channel = await store.ensureChannel(ids.testnet, '#pairs');
    const line = (i: number): NewIrcEvent => ({
      eventType: 'PRIVMSG',
      occurredAt: `2024-05-0${1 + (i % 3)} 10:00:0${i}`,
      nick: 'pairer',
      messageText: `${i % 2 ? '' : 'the '}qtox build is ok to use, i think ${i}`,
      target: null,
      toNick: null,
      netsplitGroup: null,
      netsplitLeader: false,
      lineHash: Buffer.from(`pairs-${i}`),
    });
    let release!: () => void;
    let written!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const inserted = new Promise<void>((resolve) => (written = resolve));
    const writer = k.transaction(async (trx) => {
      await store.insert(ids.testnet, channel, [0, 1, 2].map(line), { trx });
      written();
      await held;
    });
    await inserted;
    const growing = common.refresh();
    await expect
      .poll(async () => (await k.raw(`select count(*)::int as n from pg_locks where relation = 'irc_events'::regclass and not granted`)).rows[0].n)
      .toBeGreaterThan(0);
    release();
    await writer;
    expect(await growing).toMatchObject({ changed: COMMON_TERMS - 3, rebuilt: false });
    r = await recount();
    expect(r.kept).toBe(r.counted);
    // Written with the whole list: the pair counts follow at once.
    await store.insert(ids.testnet, channel, [3, 4, 5].map(line));
    r = await recount();
    expect(r.kept).toBe(r.counted);
    // Rows 1, 3 and 5 say qtox without the.
    expect(await same('qtox%20-the')).toBe(before + 3);
    expect(await same('qtox%20-i')).toBeGreaterThan(0);
  });

  it('accepts but does not require a bearer token', async () => {
    const r = await get('/irc/api/networks', { authorization: 'Bearer not-a-real-token' });
    expect(r.status).toBe(200);
  });
});

describe('bad parameters', () => {
  it.each([
    ['limit=0', /^limit: must be an integer from 1 to 1000$/],
    ['limit=1001', /^limit: /],
    ['limit=ten', /^limit: /],
    ['limit=5&limit=6', /^limit: give one value/],
    ['offset=-1', /^offset: /],
    ['source=staging', /^source: must be production or sandbox$/],
    ['date=2024-02-30', /^date: must be a date YYYY-MM-DD$/],
    ['date_from=yesterday', /^date_from: /],
    ['datetime_to=2024-01-01T25:00:00', /^datetime_to: /],
    ['private_only=maybe', /^private_only: must be 1\/0 or true\/false$/],
    ['include_netsplit=2', /^include_netsplit: /],
    ['aggregate=months', /^aggregate: must be dates$/],
    ['network_id=x', /^network_id: /],
    ['channel_id=0', /^channel_id: /],
    [`q=${'x'.repeat(501)}`, /^q: must be at most 500 characters$/],
    // Extreme dates: no year 0, and a whole day's range must end on a date (never a 500).
    ['date=0000-01-01', /^date: must be a day from 0001-01-01 to 9999-12-30 /],
    ['date_from=0000-01-01', /^date_from: must be a day from 0001-01-01/],
    ['datetime_from=0000-06-01 10:00:00', /^datetime_from: must be from 0001-01-01 00:00:00/],
    ['date_to=9999-12-31', /^date_to: must be a day from 0001-01-01 to 9999-12-30 /],
    ['date=9999-12-31', /^date: must be a day from 0001-01-01 to 9999-12-30 /],
  ])('%s → 422 naming the parameter', async (qs, message) => {
    const r = await get(`/irc/api/logs?${qs}`);
    expect(r.status).toBe(422);
    expect(Object.keys(r.body)).toEqual(['success', 'error']);
    expect(r.body.success).toBe(false);
    expect(r.body.error).toMatch(message);
  });

  it('extreme dates on the reader search page are the error page with 422, not a 500', async () => {
    for (const qs of ['date_from=0000-01-01', 'date_to=9999-12-31']) {
      const res = await t.app.inject({ method: 'GET', url: `/irc/search?q=x&${qs}` });
      expect(res.statusCode, qs).toBe(422);
      expect(res.body).toContain(qs.split('=')[0]!);
    }
  });

  it('unknown chat-log paths answer 404 in the chat-log shape', async () => {
    const r = await get('/irc/api/nothing');
    expect(r.status).toBe(404);
    expect(r.body).toEqual({ success: false, error: 'Not found.' });
  });
});

describe('legacy /api/irclog paths', () => {
  it('answer like /irc/api with a deprecation header naming the successor', async () => {
    const legacy = await get(`/api/irclog/logs?network_id=${ids.testnet}&q=world`);
    const current = await get(`/irc/api/logs?network_id=${ids.testnet}&q=world`);
    expect(legacy.status).toBe(200);
    expect(legacy.body).toEqual(current.body);
    expect(legacy.headers.deprecation).toBe('true');
    expect(legacy.headers.link).toBe('</irc/api/logs>; rel="successor-version"');
    expect(current.headers.deprecation).toBeUndefined();
    const nets = await get('/api/irclog/networks');
    expect(nets.body.networks).toHaveLength(2);
    const chans = await get(`/api/irclog/networks/${ids.testnet}/channels`);
    expect(chans.headers.link).toBe(`</irc/api/networks/${ids.testnet}/channels>; rel="successor-version"`);
    expect((await get('/api/irclog/logs?limit=0')).body).toEqual({ success: false, error: 'limit: must be an integer from 1 to 1000' });
  });
});

describe('limits and failures', () => {
  let d: TestApp;
  beforeAll(async () => {
    d = await createTestApp();
  });
  afterAll(async () => d?.close());

  it('allows 60 requests per minute per client by default, then 429 in the chat-log shape', async () => {
    expect(d.config.IRC_API_RATE_LIMIT_MAX).toBe(60);
    for (let i = 0; i < 60; i += 1) {
      const ok = await d.app.inject({ method: 'GET', url: '/irc/api/networks' });
      expect(ok.statusCode).toBe(200);
    }
    const limited = await d.app.inject({ method: 'GET', url: '/irc/api/logs' });
    expect(limited.statusCode).toBe(429);
    expect(limited.json()).toEqual({ success: false, error: 'Too many requests; slow down and retry later.' });
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    // Another client is not affected.
    const other = await d.app.inject({ method: 'GET', url: '/irc/api/networks', remoteAddress: '192.0.2.7' });
    expect(other.statusCode).toBe(200);
  });

  it('answers 500 without internals when the database fails', async () => {
    await d.orm.em.getConnection().getKnex().raw('alter table irc_channels rename to irc_channels_gone');
    const r = await d.app.inject({ method: 'GET', url: '/irc/api/logs?q=x', remoteAddress: '192.0.2.8' });
    expect(r.statusCode).toBe(500);
    expect(r.json()).toEqual({ success: false, error: 'Internal server error.' });
    expect(r.body).not.toMatch(/irc_events|relation|select/i);
  });
});

describe('admin alias table (/irc/api/admin/aliases)', () => {
  const call = (method: 'GET' | 'POST' | 'DELETE', auth: { authorization: string } | null, payload?: object, qs = '') =>
    t.app.inject({ method, url: `/irc/api/admin/aliases${qs}`, ...(payload ? { payload } : {}), headers: auth ?? {} });
  const tokenFor = async (isAdmin: boolean) => (await createJwtUser(t, [], { isAdmin, prefix: 'irc' })).auth;

  it('answers 401 without credentials and 403 to non-admins, in the chat-log shape', async () => {
    const anon = await call('POST', null, { network: 'testnet', nick: 'x', alias: 'y' });
    expect(anon.statusCode).toBe(401);
    expect(anon.json()).toEqual({ success: false, error: expect.any(String) });
    const user = await call('GET', await tokenFor(false), undefined, '?network=testnet');
    expect(user.statusCode).toBe(403);
    expect(user.json()).toEqual({ success: false, error: expect.any(String) });
  });

  it('lets an admin link, list and unlink nicks, which the nick filter follows', async () => {
    const admin = await tokenFor(true);
    expect((await call('POST', admin, { network: 'testnet', nick: 'carol', alias: 'erin' })).json()).toEqual({ success: true });
    const listed = await call('GET', admin, undefined, '?network=testnet&nick=erin');
    expect(listed.json()).toEqual({ success: true, links: [{ network: 'testnet', nick: 'carol', alias: 'erin', origin: 'admin', blocked: false }] });
    const profile = (await get(`/irc/api/logs?network_id=${ids.testnet}&nick=carol&include_netsplit=1&bulk_netsplit=0`)).body;
    expect(profile.results.map((r: any) => r.nick)).toEqual(['carol', 'erin', 'carol']);
    expect(profile.nick_profile.aliases).toEqual(['erin']);
    expect((await call('DELETE', admin, { network: 'testnet', nick: 'erin', alias: 'carol' })).json()).toEqual({ success: true, removed: true });
    expect((await get(`/irc/api/logs?network_id=${ids.testnet}&nick=carol`)).body.nick_profile.aliases).toEqual([]);
  });

  it('validates the body and names unknown networks', async () => {
    const admin = await tokenFor(true);
    const bad = await call('POST', admin, { network: 'testnet', nick: 'two words', alias: 'y' });
    expect(bad.statusCode).toBe(422);
    expect(bad.json().error).toMatch(/^nick: /);
    const same = await call('POST', admin, { network: 'testnet', nick: 'Same', alias: 'same' });
    expect(same.statusCode).toBe(422);
    const unknown = await call('POST', admin, { network: 'nonet', nick: 'a', alias: 'b' });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toEqual({ success: false, error: 'no network "nonet" in the production archive' });
  });
});
