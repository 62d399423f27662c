import { chmod } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZoneCache } from '../../coordinator/src/dns/zone-cache.js';
import { ZoneRegistry } from '../../coordinator/src/dns/zone-registry.js';
import { startNamed, type NamedServer } from '../support/bind.js';
import { createTestApp, type TestApp } from '../support/harness.js';

/**
 * Cached page reads past the first keyset anchor (every 1,000th row): every page of a 2,600-row
 * zone, at page sizes that do and do not divide 1,000, equals the same slice of the cache in its
 * documented order; after a write that shifts every row the deep pages shift too (the anchors
 * belong to the cache generation they were read at).
 */
const Z = 'paging.test';
const Z2 = 'paging2.test';
let ns: NamedServer;
let t: TestApp;
let zones: ZoneRegistry;
let key = '';

beforeAll(async () => {
  ns = await startNamed({
    zones: [
      {
        name: Z,
        records: Array.from({ length: 2600 }, (_, i) => ({ name: `h${String(i).padStart(4, '0')}.${Z}`, type: 'A', rdata: `10.7.${i >> 8}.${i & 255}` })),
      },
      { name: Z2, records: Array.from({ length: 500 }, (_, i) => ({ name: `g${i}.${Z2}`, type: 'A', rdata: `10.9.${i >> 8}.${i & 255}` })) },
    ],
  });
  await chmod(ns.keyFile, 0o644);
  t = await createTestApp({ env: { DNS_RATE_LIMIT_PER_MINUTE: '100000' } });
  zones = new ZoneRegistry(t.orm);
  await zones.upsert({ zone: Z, file: ns.zoneFile(Z), keyFile: ns.keyFile, server: '127.0.0.1', port: ns.port });
  await zones.upsert({ zone: Z2, file: ns.zoneFile(Z2), keyFile: ns.keyFile, server: '127.0.0.1', port: ns.port });
  key = (await t.accounts.createDnsApiKey({ name: 'paging' })).key;
}, 60_000);

afterAll(async () => {
  await t?.close();
  await ns?.stop();
});

const get = async (url: string) => {
  const r = await t.app.inject({ method: 'GET', url, headers: { 'x-api-key': key } });
  expect(r.statusCode, r.body).toBe(200);
  return r.json<{ zoneData: Array<{ name: string; type: string; rdata: string }>; record_count: number; has_more: boolean; page: number }>();
};

/** The cache in the documented order (reversed owner labels, SOA, NS, type, rdata, id). */
async function ordered(): Promise<string[]> {
  const res = await zones
    .knex()
    .raw<{ rows: Array<{ name: string; type: string; rdata: string }> }>(
      `select c.name, c.type, c.rdata from dns_record_cache c join dns_zones z on z.id = c.zone_id where z.zone = ? order by c.sort_key, c.type_rank, c.type, c.rdata, c.id`,
      [Z],
    );
  return res.rows.map((r) => `${r.name} ${r.type} ${r.rdata}`);
}
const line = (r: { name: string; type: string; rdata: string }) => `${r.name} ${r.type} ${r.rdata}`;

async function allPages(limit: number): Promise<string[]> {
  const out: string[] = [];
  for (let page = 1; ; page++) {
    const body = await get(`/api/dns/zones/${Z}?page=${page}&limit=${limit}`);
    out.push(...body.zoneData.map(line));
    if (!body.has_more) break;
  }
  return out;
}

describe('deep cached pages', () => {
  it('every page at limit 100, 7 and 1000 is the matching slice of the ordered cache', async () => {
    await get(`/api/dns/zones/${Z}/axfr`);
    const all = await ordered();
    expect(all.length).toBe(2603); // 2,600 A + SOA + NS + the NS target's A
    for (const limit of [100, 7, 1000]) expect(await allPages(limit)).toEqual(all);
    // Single pages right at and across the anchor boundaries.
    for (const [page, limit] of [
      [143, 7], // rows 994..1000
      [11, 100], // rows 1000..1099
      [286, 7], // rows 1995..2001
      [27, 100], // the last, short page
    ] as const) {
      const body = await get(`/api/dns/zones/${Z}/cache?page=${page}&limit=${limit}`);
      expect(body.zoneData.map(line)).toEqual(all.slice((page - 1) * limit, page * limit));
    }
    // Past the end: an empty page.
    expect((await get(`/api/dns/zones/${Z}?page=40&limit=100`)).zoneData).toEqual([]);
  });

  it('a write that shifts every row shifts the deep pages too', async () => {
    const before = (await get(`/api/dns/zones/${Z}?page=21&limit=100`)).zoneData.map(line);
    const add = await t.app.inject({
      method: 'POST',
      url: '/api/dns/records/add',
      headers: { 'x-api-key': key },
      payload: { domain: `a0.${Z}`, type: 'A', target: '10.8.0.1', ttl: 300 },
    });
    expect(add.statusCode, add.body).toBe(200);
    const all = await ordered();
    expect(all.length).toBe(2604);
    const after = (await get(`/api/dns/zones/${Z}?page=21&limit=100`)).zoneData.map(line);
    expect(after).toEqual(all.slice(2000, 2100));
    expect(after.slice(1)).toEqual(before.slice(0, 99));
    expect(await allPages(100)).toEqual(all);
  });
});

describe('a page of a zone read before: one statement', () => {
  /** The statements on the zone and its cache one request sends (not the API key's lookup, cached for AUTH_CACHE_SECONDS). */
  async function statementsOf(url: string) {
    const sent: string[] = [];
    const onQuery = (q: { sql: string }) => {
      if (/dns_(zones|record_cache|zone_cache_state)\b/.test(q.sql)) sent.push(q.sql);
    };
    const knex = zones.knex();
    knex.on('query', onQuery);
    try {
      return { body: await get(url), sent };
    } finally {
      knex.off('query', onQuery);
    }
  }

  it('reads the zone row, its cache state and the page together, deep pages included; a new cache generation is never answered from the old plan', async () => {
    await get(`/api/dns/zones/${Z}?page=1&limit=100`);
    await get(`/api/dns/zones/${Z}?page=21&limit=100`); // reads the anchors
    let all = await ordered();
    for (const page of [2, 21, 26]) {
      const { body, sent } = await statementsOf(`/api/dns/zones/${Z}?page=${page}&limit=100`);
      expect(sent).toHaveLength(1);
      expect(body.zoneData.map(line)).toEqual(all.slice((page - 1) * 100, page * 100));
    }
    // Another coordinator's write: new rows at a new generation, this coordinator's plan is old.
    await zones.knex().transaction(async (trx) => {
      const { rows } = await trx.raw<{ rows: Array<{ id: number }> }>('select id from dns_zones where zone = ?', [Z]);
      const id = rows[0]!.id;
      await trx.raw(
        `insert into dns_record_cache (zone_id, sort_key, type_rank, name, type, class, ttl, rdata) values (?, ?, 2, ?, 'A', 'IN', 300, '10.8.0.2')`,
        [id, `test.paging.a00`, `a00.${Z}`],
      );
      await trx.raw(`update dns_zone_cache_state set record_count = record_count + 1, generation = nextval('dns_cache_generation_seq') where zone_id = ?`, [
        id,
      ]);
    });
    all = await ordered();
    const { body, sent } = await statementsOf(`/api/dns/zones/${Z}?page=21&limit=100`);
    expect(body.zoneData.map(line)).toEqual(all.slice(2000, 2100));
    expect(body.record_count).toBe(all.length);
    expect(sent.length).toBeGreaterThan(1);
    // The next one is planned at the new generation again.
    const next = await statementsOf(`/api/dns/zones/${Z}?page=22&limit=100`);
    expect(next.body.zoneData.map(line)).toEqual(all.slice(2100, 2200));
    expect(next.sent.length).toBeLessThanOrEqual(2); // the new generation's anchors may still be read once
  });
});

describe('the cache partition (unlogged)', () => {
  it('two zones refreshed at the same time both swap their partitions in (no lock upgrade deadlock on the parent table)', async () => {
    const cache = new ZoneCache(() => zones.knex(), 5000);
    const [a, b] = [(await zones.get(Z))!, (await zones.get(Z2))!];
    for (let round = 0; round < 4; round++) {
      const done = await Promise.all([cache.refresh(a, { force: true }), cache.refresh(b, { force: true }), cache.refresh(a, { force: true })]);
      expect(done.map((d) => d.transferred)).toEqual([true, true, true]);
    }
    expect((await cache.state(b.id))!.recordCount).toBe(503);
    expect((await ordered()).length).toBeGreaterThan(2600);
  });

  it('a refresh swapping a partition in does not deadlock with a reader that holds the parent and then reads the partition', async () => {
    const cache = new ZoneCache(() => zones.knex(), 5000);
    const zone = (await zones.get(Z2))!;
    await cache.refresh(zone, { force: true });
    await cache.settled();
    // A reader's order: the partitioned parent first, then the partition (as a query on the parent does).
    const reader = await zones.knex().transaction();
    try {
      await reader.raw('lock table only dns_record_cache in access share mode');
      const refreshing = cache.refresh(zone, { force: true });
      // The refresh has come to the swap and waits for the parent behind the reader.
      await expect
        .poll(
          async () =>
            Number(
              (
                await zones
                  .knex()
                  .raw<{ rows: Array<{ n: string }> }>(`select count(*) as n from pg_locks where not granted and relation = 'dns_record_cache'::regclass`)
              ).rows[0]!.n,
            ),
          { timeout: 20_000, interval: 20 },
        )
        .toBe(1);
      // Before the fix the refresh had already renamed (locked) the partition here: this read waited
      // for it while the refresh waited for the parent, and PostgreSQL broke the deadlock.
      const rows = await reader.raw<{ rows: Array<{ n: string }> }>(`select count(*) as n from dns_record_cache_z${zone.id}`);
      expect(Number(rows.rows[0]!.n)).toBeGreaterThan(0);
      await reader.commit();
      expect((await refreshing).transferred).toBe(true);
    } finally {
      if (!reader.isCompleted()) await reader.rollback();
      await cache.settled();
    }
  });

  it('the partition a refresh replaced is dropped after the answer; one left behind goes at the next refresh, or with the zone', async () => {
    const cache = new ZoneCache(() => zones.knex(), 5000);
    const zone = (await zones.get(Z2))!;
    const tables = async () =>
      (
        await zones.knex().raw<{ rows: Array<{ relname: string; parent: string | null }> }>(
          `select c.relname, i.inhparent::regclass::text as parent from pg_class c left join pg_inherits i on i.inhrelid = c.oid
              where c.relname like ? and c.relkind = 'r' order by 1`,
          [`dns_record_cache_z${zone.id}%`],
        )
      ).rows;
    await cache.refresh(zone, { force: true });
    await cache.settled();
    expect(await tables()).toEqual([{ relname: `dns_record_cache_z${zone.id}`, parent: 'dns_record_cache' }]);
    // A replaced partition whose drop never ran (the process ended first): the next refresh drops it before it replaces the current one.
    await zones.knex().raw(`create table dns_record_cache_z${zone.id}_replaced (x int)`);
    expect(await tables()).toHaveLength(2);
    await cache.refresh(zone, { force: true });
    await cache.settled();
    expect(await tables()).toEqual([{ relname: `dns_record_cache_z${zone.id}`, parent: 'dns_record_cache' }]);
    expect((await cache.state(zone.id))!.recordCount).toBe(503);
    // Clearing the cache drops both.
    await zones.knex().raw(`create table dns_record_cache_z${zone.id}_replaced (x int)`);
    await cache.clear(zone.id);
    expect(await tables()).toEqual([]);
    await cache.refresh(zone, { force: true });
    await cache.settled();
    expect(await tables()).toHaveLength(1);
  });

  it('a refresh whose load table cannot be made fails with that error, stops its transfer and leaves the cache as it was', async () => {
    const cache = new ZoneCache(() => zones.knex(), 5000);
    const zone = (await zones.get(Z2))!;
    const before = await cache.state(zone.id);
    // The load table is made beside the transfer (which starts at once); a table of its name in the way fails that step.
    await zones.knex().raw(`create table dns_record_cache_load_${zone.id} (x int)`);
    try {
      await expect(cache.refresh(zone, { force: true })).rejects.toThrow(/already exists/);
      expect(await cache.state(zone.id)).toEqual(before);
    } finally {
      await zones.knex().raw(`drop table dns_record_cache_load_${zone.id}`);
    }
    // The connection went back to the pool clean: the next refresh works.
    expect((await cache.refresh(zone, { force: true })).transferred).toBe(true);
    expect((await cache.state(zone.id))!.recordCount).toBe(503);
  });

  it('is unlogged, one per zone; a cache whose rows PostgreSQL dropped (crash recovery empties unlogged tables) is transferred again, not served empty', async () => {
    const knex = zones.knex();
    const zone = (await zones.get(Z))!;
    const part = await knex.raw<{ rows: Array<{ relpersistence: string; parent: string }> }>(
      `select c.relpersistence, i.inhparent::regclass::text as parent from pg_class c join pg_inherits i on i.inhrelid = c.oid where c.relname = ?`,
      [`dns_record_cache_z${zone.id}`],
    );
    expect(part.rows).toEqual([{ relpersistence: 'u', parent: 'dns_record_cache' }]);
    const before = await ordered();
    // What recovery does to an unlogged table: its rows are gone, the cache state row is not.
    await knex.raw(`truncate dns_record_cache_z${zone.id}`);
    const helper = await t.app.inject({ method: 'GET', url: `/api/dns/zones/${Z}/cache`, headers: { 'x-api-key': key } });
    expect(helper.json()).toMatchObject({ source: 'needs_axfr' });
    const read = await get(`/api/dns/zones/${Z}?page=1&limit=100`);
    expect(read).toMatchObject({ method: 'AXFR', record_count: before.length });
    expect(await ordered()).toEqual(before);
    // A write into such a cache leaves it alone (the next read transfers it).
    await knex.raw(`truncate dns_record_cache_z${zone.id}`);
    const add = await t.app.inject({
      method: 'POST',
      url: '/api/dns/records/add',
      headers: { 'x-api-key': key },
      payload: { domain: `a1.${Z}`, type: 'A', target: '10.8.0.2', ttl: 300 },
    });
    expect(add.statusCode, add.body).toBe(200);
    expect(await ordered()).toEqual([]);
    const again = await get(`/api/dns/zones/${Z}?page=1&limit=100`);
    expect(again).toMatchObject({ method: 'AXFR', record_count: before.length + 1 });
    // Removing the zone drops its partition.
    await zones.remove(Z);
    const gone = await knex.raw<{ rows: unknown[] }>(`select 1 from pg_class where relname = ?`, [`dns_record_cache_z${zone.id}`]);
    expect(gone.rows).toEqual([]);
  });
});
