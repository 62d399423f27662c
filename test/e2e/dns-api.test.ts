import { execFile } from 'node:child_process';
import { chmod } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZoneRegistry } from '../../coordinator/src/dns/zone-registry.js';
import { parsePresentationRecords, type DnsRecord } from '../../coordinator/src/dns/wire/index.js';
import { setZonePolicy, startNamed, type NamedServer, type ZoneRecordSpec } from '../support/bind.js';
import { browserLogin, createTestApp, randomName, type TestApp } from '../support/harness.js';

/**
 * The DNS API against a real BIND named and real PostgreSQL. Every write is checked with an
 * independent `dig`; the cache is checked in its table; external changes come from nsupdate.
 */
const A = 'alpha.test';
const B = 'beta.test';

let ns: NamedServer;
let t: TestApp;
let zones: ZoneRegistry;
const keys: Record<'global' | 'writer' | 'reader' | 'none', string> = { global: '', writer: '', reader: '', none: '' };
let admin: { name: string; password: string };

const hosts: ZoneRecordSpec[] = Array.from({ length: 30 }, (_, i) => ({ name: `host${String(i).padStart(2, '0')}.${A}`, type: 'A', rdata: `10.1.0.${i + 1}` }));

beforeAll(async () => {
  ns = await startNamed({
    zones: [
      {
        name: A,
        records: [
          { name: `www.${A}`, type: 'A', rdata: '10.0.0.1' },
          { name: `alias.${A}`, type: 'CNAME', rdata: `www.${A}.` },
          { name: `txt.${A}`, type: 'TXT', rdata: '"hello world"' },
          { name: `@`, type: 'MX', rdata: `10 mail.${A}.` },
          { name: `mail.${A}`, type: 'A', rdata: '10.0.0.2' },
          ...hosts,
        ],
      },
      { name: B, records: [{ name: `www.${B}`, type: 'A', rdata: '10.9.0.1' }] },
    ],
  });
  await chmod(ns.keyFile, 0o644);
  t = await createTestApp({ env: { DNS_DEFAULT_TTL: '300' } });
  zones = new ZoneRegistry(t.orm);
  for (const z of [A, B]) await zones.upsert({ zone: z, file: ns.zoneFile(z), keyFile: ns.keyFile, server: '127.0.0.1', port: ns.port });
  const mk = async (isAdmin = false) => {
    const name = randomName();
    const { password } = await t.accounts.createUser({ username: name, permissions: [], isAdmin });
    return { name, password };
  };
  admin = await mk(true);
  const writer = await mk();
  const reader = await mk();
  const none = await mk();
  await t.accounts.grantZone(writer.name, A, { read: true, write: true });
  await t.accounts.grantZone(reader.name, A, { read: true, write: false });
  keys.global = (await t.accounts.createDnsApiKey({ name: 'global' })).key;
  keys.writer = (await t.accounts.createDnsApiKey({ name: 'w', username: writer.name })).key;
  keys.reader = (await t.accounts.createDnsApiKey({ name: 'r', username: reader.name })).key;
  keys.none = (await t.accounts.createDnsApiKey({ name: 'n', username: none.name })).key;
}, 60_000);

afterAll(async () => {
  await t?.close();
  await ns?.stop();
});

type Who = keyof typeof keys;
const get = (url: string, who: Who | null = 'global') => t.app.inject({ method: 'GET', url, headers: who ? { 'x-api-key': keys[who] } : {} });
const post = (url: string, payload: unknown, who: Who | null = 'global') =>
  t.app.inject({ method: 'POST', url, payload: payload as object, headers: who ? { authorization: `Bearer ${keys[who]}` } : {} });

async function digRecords(name: string, type: string): Promise<DnsRecord[]> {
  const out = await ns.dig(['+noall', '+answer', name, type]);
  return parsePresentationRecords(out).filter((r) => r.type === type && r.name === name);
}
const digRdata = async (name: string, type: string) => (await digRecords(name, type)).map((r) => r.rdata).sort();

async function cacheRows(zone: string) {
  const res = await zones
    .knex()
    .raw(`select c.id, c.name, c.type, c.rdata, c.ttl from dns_record_cache c join dns_zones z on z.id = c.zone_id where z.zone = ? order by c.id`, [zone]);
  return res.rows as Array<{ id: string; name: string; type: string; rdata: string; ttl: number }>;
}

describe('authentication and zone visibility', () => {
  it('401 without credentials and with an unknown key', async () => {
    const none = await get('/api/dns/zones', null);
    expect(none.statusCode).toBe(401);
    expect(none.json()).toMatchObject({ ok: false, reason: 'unauthenticated' });
    const bad = await t.app.inject({ method: 'GET', url: '/api/dns/zones', headers: { 'x-api-key': 'sdk_nope' } });
    expect(bad.statusCode).toBe(401);
  });

  it('lists zones by caller: global key all, user keys by permission rows, admin session all', async () => {
    const g = (await get('/api/dns/zones')).json();
    expect(g).toMatchObject({ ok: true, count: 2, is_admin: false, access_type: 'api_key_global' });
    expect(g.zones.map((z: { zone: string }) => z.zone)).toEqual([A, B]);
    expect(g.zones[0]).toMatchObject({ zone: A, server: '127.0.0.1', port: ns.port });
    // The zone file and TSIG key file paths are for administrators only, not for a global key.
    expect(g.zones[0]).not.toHaveProperty('key');
    expect(g.zones[0]).not.toHaveProperty('file');
    const w = (await get('/api/dns/zones', 'writer')).json();
    expect(w).toMatchObject({ count: 1, access_type: 'authenticated', is_admin: false });
    expect(w.zones[0]).toMatchObject({ zone: A, can_write: true });
    expect((await get('/api/dns/zones', 'reader')).json().zones[0]).toMatchObject({ zone: A, can_write: false });
    expect((await get('/api/dns/zones', 'none')).json()).toMatchObject({ count: 0, zones: [] });
    const { jar } = await browserLogin(t.app, admin.name, admin.password);
    const s = (await t.app.inject({ method: 'GET', url: '/api/dns/zones', headers: { cookie: jar.header() } })).json();
    expect(s).toMatchObject({ count: 2, is_admin: true, access_type: 'authenticated' });
    expect(s.zones[0]).toMatchObject({ zone: A, key: ns.keyFile, file: ns.zoneFile(A) });
    for (const who of ['writer', 'reader'] as const)
      for (const zone of (await get('/api/dns/zones', who)).json().zones) {
        expect(zone).not.toHaveProperty('key');
        expect(zone).not.toHaveProperty('file');
      }
  });

  it('accepts the key as Bearer, X-API-Key and ?api_key=', async () => {
    for (const res of [
      await t.app.inject({ method: 'GET', url: '/api/dns/zones', headers: { authorization: `Bearer ${keys.writer}` } }),
      await t.app.inject({ method: 'GET', url: '/api/dns/zones', headers: { 'x-api-key': keys.writer } }),
      await t.app.inject({ method: 'GET', url: `/api/dns/zones?api_key=${keys.writer}` }),
    ]) {
      expect(res.statusCode).toBe(200);
      expect(res.json().count).toBe(1);
    }
  });

  it('403 forbidden for a zone without rights (read and write); 404 for an unknown zone', async () => {
    const r = await get(`/api/dns/zones/${B}/cache`, 'writer');
    expect(r.statusCode).toBe(403);
    expect(r.json()).toMatchObject({ ok: false, reason: 'forbidden' });
    const w = await post('/api/dns/records/add', { domain: `x.${A}`, type: 'A', target: '10.0.0.9' }, 'reader');
    expect(w.statusCode).toBe(403);
    expect(w.json().reason).toBe('forbidden');
    expect(await digRdata(`x.${A}`, 'A')).toEqual([]);
    expect((await get('/api/dns/zones/nothere.test/cache')).statusCode).toBe(404);
  });
});

describe('reads, cache and search', () => {
  it('before any cache: cache helper says needs_axfr, search 409 cache_unavailable, no q 422 missing_query', async () => {
    const c = await get(`/api/dns/zones/${A}/cache`);
    expect(c.statusCode).toBe(200);
    expect(c.json()).toMatchObject({ ok: true, source: 'needs_axfr', zone: A, cache_ttl_seconds: 300 });
    expect(c.json().cache_policy).toEqual({ invalidate_enabled: true, invalidate_interval_seconds: 0, last_invalidated_at: null, protect_from_clear: false });
    const s = await get(`/api/dns/zones/${A}/search?q=www`);
    expect(s.statusCode).toBe(409);
    expect(s.json().reason).toBe('cache_unavailable');
    const q = await get(`/api/dns/zones/${A}/search`);
    expect(q.statusCode).toBe(422);
    expect(q.json().reason).toBe('missing_query');
  });

  it('refresh transfers the zone; pages are ordered with has_more and display_signature', async () => {
    const axfrText = await ns.dig(['+noall', '+answer', A, 'AXFR']);
    const expected = parsePresentationRecords(axfrText).filter((r) => r.type !== 'TSIG').length - 1; // closing SOA
    const r = await get(`/api/dns/zones/${A}/axfr?limit=10`);
    expect(r.statusCode).toBe(200);
    const body = r.json();
    expect(body).toMatchObject({ ok: true, method: 'AXFR', zone: A, record_count: expected, page: 1, per_page: 10, has_more: true, cache_is_stale: false });
    expect(body.zoneData).toHaveLength(10);
    expect(body.zoneData[0]).toMatchObject({ name: A, type: 'SOA', class: 'IN' });
    const p2 = (await get(`/api/dns/zones/${A}/cache?limit=10&page=2`)).json();
    expect(p2).toMatchObject({ source: 'from_database', method: 'CACHE', page: 2 });
    expect(p2.display_signature).not.toBe(body.display_signature);
    const last = (await get(`/api/dns/zones/${A}/cache?limit=10&page=${Math.ceil(expected / 10)}`)).json();
    expect(last.has_more).toBe(false);
    const again = (await get(`/api/dns/zones/${A}?limit=10`)).json();
    expect(again.method).toBe('CACHE');
    expect(again.display_signature).toBe(body.display_signature);
    expect(typeof again.cached_at).toBe('string');
    expect(again.cache_age).toBeGreaterThanOrEqual(0);
  });

  it('method=file reads the zone file; bad paging is 400 validation_failed', async () => {
    const f = (await get(`/api/dns/zones/${A}?method=file&limit=500`)).json();
    expect(f.method).toBe('FILE');
    expect(f.zoneData.some((r: DnsRecord) => r.name === `www.${A}` && r.rdata === '10.0.0.1')).toBe(true);
    const bad = await get(`/api/dns/zones/${A}?limit=0`);
    expect(bad.statusCode).toBe(400);
    expect(bad.json().reason).toBe('validation_failed');
  });

  it('search modes: ip, type, name, data', async () => {
    const ip = (await get(`/api/dns/zones/${A}/search?q=10.0.0.1`)).json();
    expect(ip).toMatchObject({ ok: true, source: 'from_database', search_mode: 'ip', query: '10.0.0.1', record_count: 1 });
    expect(ip.zoneData[0]).toMatchObject({ name: `www.${A}`, type: 'A' });
    const ty = (await get(`/api/dns/zones/${A}/search?q=MX`)).json();
    expect(ty).toMatchObject({ search_mode: 'type', record_count: 1 });
    const nm = (await get(`/api/dns/zones/${A}/search?q=host1&limit=5`)).json();
    expect(nm).toMatchObject({ search_mode: 'name', record_count: 10, has_more: true });
    const da = (await get(`/api/dns/zones/${A}/search?q=${encodeURIComponent('hello world')}`)).json();
    expect(da).toMatchObject({ search_mode: 'data', record_count: 1 });
    expect(da.zoneData[0].name).toBe(`txt.${A}`);
  });
});

describe('writes', () => {
  it('add: on the master (dig), only the written cache rows change, display_signature follows the page', async () => {
    const before = await cacheRows(A);
    const sigBefore = (await get(`/api/dns/zones/${A}/cache?limit=5`)).json().display_signature;
    const res = await post('/api/dns/records/add', { domain: `aaa.${A}`, type: 'A', target: '10.0.0.50', ttl: 120 }, 'writer');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ ok: true, record: { name: `aaa.${A}`, type: 'A', rdata: '10.0.0.50', ttl: 120 } });
    expect(await digRecords(`aaa.${A}`, 'A')).toEqual([{ name: `aaa.${A}`, ttl: 120, class: 'IN', type: 'A', rdata: '10.0.0.50' }]);
    const after = await cacheRows(A);
    // The written pair, and the SOA row with the serial the update gave the zone (the cached serial follows it).
    const soaBefore = before.find((r) => r.type === 'SOA')!;
    const soaAfter = after.find((r) => r.type === 'SOA')!;
    expect(after.filter((r) => !before.some((b) => b.id === r.id))).toEqual([
      expect.objectContaining({ name: `aaa.${A}`, type: 'A', rdata: '10.0.0.50' }),
      expect.objectContaining({ name: A, type: 'SOA' }),
    ]);
    expect(before.filter((b) => !after.some((r) => r.id === b.id))).toEqual([soaBefore]);
    const serialOf = (rdata: string) => Number(rdata.split(' ')[2]);
    expect(serialOf(soaAfter.rdata)).toBe(serialOf(soaBefore.rdata) + 1);
    const page = (await get(`/api/dns/zones/${A}/cache?limit=5`)).json();
    expect(page.record_count).toBe(after.length);
    expect(page.serial).toBe(serialOf(soaAfter.rdata));
    expect(page.display_signature).not.toBe(sigBefore);
    // The cached serial followed our own update, so a refresh finds nothing new and keeps the rows.
    expect((await get(`/api/dns/zones/${A}/axfr`)).json().zoneData[0]).toEqual(expect.objectContaining({ type: 'SOA', rdata: soaAfter.rdata }));
    expect((await cacheRows(A)).map((r) => r.id)).toEqual(after.map((r) => r.id));
  });

  it('A beside a CNAME: 409 cname_conflict naming the target; nothing sent', async () => {
    const res = await post('/api/dns/records/add', { domain: `alias.${A}`, type: 'A', target: '10.0.0.7' });
    expect(res.statusCode).toBe(409);
    expect(res.json()).toMatchObject({ ok: false, reason: 'cname_conflict' });
    expect(res.json().message).toContain(`www.${A}`);
    expect(await digRdata(`alias.${A}`, 'A')).toEqual([]);
    expect(await digRdata(`alias.${A}`, 'CNAME')).toEqual([`www.${A}`]);
  });

  it('validation_failed names the field', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ domain: `v.${A}`, type: 'BOGUS', target: 'x' }, 'type'],
      [{ domain: A, type: 'CNAME', target: `www.${A}` }, 'domain'],
      [{ domain: 'www.elsewhere.example', type: 'A', target: '10.0.0.1' }, 'domain'],
      [{ domain: `v.${A}`, type: 'A', target: '10.0.0.1', ttl: -5 }, 'ttl'],
      [{ domain: `v.${A}`, type: 'A', target: '300.1.1.1' }, 'target'],
      [{ domain: `${'a'.repeat(64)}.${A}`, type: 'A', target: '10.0.0.1' }, 'domain'],
      [{ domain: `v.${A}`, type: 'MX', target: 'nopriority' }, 'target'],
      [{ domain: 'bad"{name}', type: 'A', target: '10.0.0.1' }, 'domain'],
      [{ type: 'A', target: '10.0.0.1' }, 'domain'],
    ];
    for (const [payload, field] of cases) {
      const res = await post('/api/dns/records/add', payload);
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(res.json().reason).toBe('validation_failed');
      expect(Object.keys(res.json().errors)).toContain(field);
    }
    expect(await digRdata(`v.${A}`, 'A')).toEqual([]);
    // A field of the wrong JSON type is "must be a string", a missing one "is required".
    const wrongType = await post('/api/dns/records/add', { domain: `v.${A}`, type: 1, target: 'x' });
    expect(wrongType.statusCode).toBe(400);
    expect(wrongType.json()).toMatchObject({ message: 'type: must be a string', errors: { type: ['must be a string'] } });
    expect((await post('/api/dns/records/add', { type: 'A' })).json().errors).toEqual({ domain: ['is required'] });
    expect((await post('/api/dns/records/add', { domain: 5, type: 'A', target: [] })).json().errors).toEqual({ domain: ['must be a string'] });
    expect((await post('/api/dns/records/add', { domain: `v.${A}`, type: 'A', target: [] })).json().errors).toEqual({ target: ['must be a string'] });
    expect((await post('/api/dns/records/add', { domain: `v.${A}`, type: 'A' })).json().errors).toEqual({ target: ['is required'] });
  });

  it('a body over the 1 MiB limit is 400 validation_failed (a documented status), not 413', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/dns/records/add',
      headers: { authorization: `Bearer ${keys.global}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ domain: `big.${A}`, type: 'TXT', target: 'x'.repeat(2 * 1024 * 1024) }),
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ ok: false, reason: 'validation_failed', errors: { body: [expect.stringContaining('1 MiB')] } });
  });

  it('TXT longer than 255 bytes is split into strings', async () => {
    const long = 'x'.repeat(300);
    const res = await post('/api/dns/records/add', { domain: `long.${A}`, type: 'TXT', target: long });
    expect(res.statusCode).toBe(200);
    expect(await digRdata(`long.${A}`, 'TXT')).toEqual([`"${'x'.repeat(255)}" "${'x'.repeat(45)}"`]);
  });

  it('delete needs target; deletes only that value', async () => {
    await post('/api/dns/records/add', { domain: `multi.${A}`, type: 'A', target: '10.0.1.1' });
    await post('/api/dns/records/add', { domain: `multi.${A}`, type: 'A', target: '10.0.1.2' });
    const missing = await post('/api/dns/records/delete', { domain: `multi.${A}`, type: 'A' });
    expect(missing.statusCode).toBe(400);
    expect(missing.json().errors.target).toBeDefined();
    expect(await digRdata(`multi.${A}`, 'A')).toEqual(['10.0.1.1', '10.0.1.2']);
    const del = await post('/api/dns/records/delete', { domain: `multi.${A}`, type: 'A', target: '10.0.1.1' });
    expect(del.statusCode).toBe(200);
    expect(await digRdata(`multi.${A}`, 'A')).toEqual(['10.0.1.2']);
    const rows = (await cacheRows(A)).filter((r) => r.name === `multi.${A}`);
    expect(rows.map((r) => r.rdata)).toEqual(['10.0.1.2']);
    expect((await post('/api/dns/records/delete', { domain: `multi.${A}`, type: 'A', target: '10.0.1.1' })).statusCode).toBe(404);
  });

  it('update replaces old_target with new_target', async () => {
    const res = await post('/api/dns/records/update', { domain: `multi.${A}`, type: 'A', old_target: '10.0.1.2', new_target: '10.0.1.3', ttl: 60 });
    expect(res.statusCode).toBe(200);
    expect(await digRecords(`multi.${A}`, 'A')).toEqual([{ name: `multi.${A}`, ttl: 60, class: 'IN', type: 'A', rdata: '10.0.1.3' }]);
    const rows = (await cacheRows(A)).filter((r) => r.name === `multi.${A}`);
    expect(rows.map((r) => [r.rdata, r.ttl])).toEqual([['10.0.1.3', 60]]);
  });

  it('bulk: one UPDATE message when nothing conflicts; per-operation results; limits', async () => {
    const ops = [
      { action: 'ADD', domain: `b1.${A}`, type: 'A', target: '10.0.2.1' },
      { action: 'ADD', domain: `b2.${A}`, type: 'AAAA', target: '2001:db8::2' },
      { action: 'DELETE', domain: `www.${A}`, type: 'A', target: '10.0.0.1' },
      { action: 'ADD', domain: `alias.${A}`, type: 'A', target: '10.0.2.9' },
    ];
    const res = await post('/api/dns/records/bulk', { operations: ops });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    // The combined message goes out first with every add's CNAME rule as a prerequisite; the CNAME at
    // alias fails it as a whole (nothing changed), the pre-checks then name that operation and a
    // second message carries the other three.
    expect(body).toMatchObject({ ok: false, operation_count: 4, update_messages: 2 });
    expect(body.results.map((r: { ok: boolean; reason?: string }) => [r.ok, r.reason ?? null])).toEqual([
      [true, null],
      [true, null],
      [true, null],
      [false, 'cname_conflict'],
    ]);
    expect(await digRdata(`b1.${A}`, 'A')).toEqual(['10.0.2.1']);
    expect(await digRdata(`b2.${A}`, 'AAAA')).toEqual(['2001:db8::2']);
    expect(await digRdata(`www.${A}`, 'A')).toEqual([]);
    expect(await digRdata(`alias.${A}`, 'A')).toEqual([]);
    const clean = await post('/api/dns/records/bulk', {
      operations: [
        { action: 'ADD', domain: `b5.${A}`, type: 'A', target: '10.0.2.5' },
        { action: 'ADD', domain: `b6.${A}`, type: 'TXT', target: 'clean bulk' },
        { action: 'DELETE', domain: `b1.${A}`, type: 'A', target: '10.0.2.1' },
      ],
    });
    expect(clean.json()).toMatchObject({ ok: true, operation_count: 3, update_messages: 1 });
    expect(await digRdata(`b5.${A}`, 'A')).toEqual(['10.0.2.5']);
    expect(await digRdata(`b1.${A}`, 'A')).toEqual([]);
    const tooMany = await post('/api/dns/records/bulk', { operations: Array.from({ length: 101 }, (_, i) => ({ ...ops[0], domain: `n${i}.${A}` })) });
    expect(tooMany.statusCode).toBe(400);
    expect((await post('/api/dns/records/bulk', { operations: [] })).statusCode).toBe(400);
    const noTarget = await post('/api/dns/records/bulk', { operations: [{ action: 'ADD', domain: `b3.${A}`, type: 'A' }] });
    expect(noTarget.statusCode).toBe(400);
    expect(Object.keys(noTarget.json().errors)[0]).toContain('operations.0.target');
    const badData = await post('/api/dns/records/bulk', { operations: [ops[0], { action: 'ADD', domain: `b4.${A}`, type: 'A', target: 'nope' }] });
    expect(badData.statusCode).toBe(400);
    expect(badData.json().errors['operations.1.target']).toBeDefined();
  });

  it('a change made with nsupdate is noticed through the SOA serial on refresh; an unchanged serial transfers nothing (method SOA)', async () => {
    const before = (await get(`/api/dns/zones/${A}/axfr`)).json<{ serial: number; record_count: number; display_signature: string }>();
    const unchanged = (await get(`/api/dns/zones/${A}/axfr`)).json();
    expect(unchanged).toMatchObject({ ok: true, method: 'SOA', serial: before.serial, record_count: before.record_count });
    expect(unchanged.display_signature).toBe(before.display_signature);
    await ns.nsupdate([`update add ext.${A} 300 IN A 10.0.3.3`]);
    const cached = (await get(`/api/dns/zones/${A}/search?q=10.0.3.3`)).json();
    expect(cached.record_count).toBe(0);
    const moved = (await get(`/api/dns/zones/${A}/axfr`)).json();
    expect(moved).toMatchObject({ method: 'AXFR', record_count: before.record_count + 1 });
    expect(moved.serial).toBeGreaterThan(before.serial);
    const fresh = (await get(`/api/dns/zones/${A}/search?q=10.0.3.3`)).json();
    expect(fresh.record_count).toBe(1);
  });
});

describe('ACME helpers', () => {
  const owner = `_acme-challenge.${A}`;
  it('present for apex and wildcard at one owner: both survive; cleanup removes only its value', async () => {
    const p1 = await post('/api/dns/acme/present', { domain: A, challenge: 'apex-token-1', ttl: 30 }, 'writer');
    expect(p1.statusCode).toBe(200);
    expect(p1.json()).toMatchObject({ ok: true, owner, zone: A });
    const p2 = await post('/api/dns/acme/present', { domain: `*.${A}`, challenge: 'wild-token-2' }, 'writer');
    expect(p2.json().owner).toBe(owner);
    expect(await digRdata(owner, 'TXT')).toEqual(['"apex-token-1"', '"wild-token-2"']);
    const c = await post('/api/dns/acme/cleanup', { domain: owner, challenge: 'apex-token-1' }, 'writer');
    expect(c.json()).toMatchObject({ ok: true, removed: true });
    expect(await digRdata(owner, 'TXT')).toEqual(['"wild-token-2"']);
  });

  it('accepts {fqdn, value} bodies and echoes them', async () => {
    const p = await post('/api/dns/acme/present', { fqdn: `${owner}.`, value: 'lego-value-3' });
    expect(p.statusCode).toBe(200);
    expect(p.json()).toMatchObject({ fqdn: `${owner}.`, value: 'lego-value-3', owner });
    expect(await digRdata(owner, 'TXT')).toEqual(['"lego-value-3"', '"wild-token-2"']);
    const c = await post('/api/dns/acme/cleanup', { fqdn: `${owner}.`, value: 'lego-value-3' });
    expect(c.json()).toMatchObject({ fqdn: `${owner}.`, value: 'lego-value-3', removed: true });
    expect(await digRdata(owner, 'TXT')).toEqual(['"wild-token-2"']);
  });

  it('cleanup-stale: dry run lists, then removes all but keep_challenges', async () => {
    await post('/api/dns/acme/present', { domain: A, challenge: 'old-1' });
    await post('/api/dns/acme/present', { domain: A, challenge: 'old-2' });
    const dry = (await post('/api/dns/acme/cleanup-stale', { domain: A, keep_challenges: ['wild-token-2'], dry_run: true })).json();
    expect(dry).toMatchObject({ owner, zone: A, dry_run: true, removed_count: 2, kept: ['wild-token-2'], errors: [] });
    expect(dry.removed.sort()).toEqual(['old-1', 'old-2']);
    expect((await digRdata(owner, 'TXT')).length).toBe(3);
    const real = (await post('/api/dns/acme/cleanup-stale', { domain: A, keep_challenges: ['wild-token-2'], refresh_zone_cache: true })).json();
    expect(real).toMatchObject({ dry_run: false, removed_count: 2, kept: ['wild-token-2'] });
    expect(await digRdata(owner, 'TXT')).toEqual(['"wild-token-2"']);
    expect((await cacheRows(A)).filter((r) => r.name === owner).map((r) => r.rdata)).toEqual(['"wild-token-2"']);
  });

  it('maintenance command dns:acme:cleanup-stale and dns:zone:list run the same logic', async () => {
    await post('/api/dns/acme/present', { domain: A, challenge: 'cli-old' });
    const cli = fileURLToPath(new URL('../../coordinator/dist/cli.js', import.meta.url));
    const run = (args: string[]) =>
      new Promise<{ code: number; out: string }>((resolve) =>
        execFile('node', [cli, '--json', ...args], { env: { ...process.env, DATABASE_URL: t.db.url } }, (err, stdout) =>
          resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out: stdout }),
        ),
      );
    const list = await run(['dns:zone:list']);
    expect(list.code).toBe(0);
    expect(JSON.parse(list.out).zones.map((z: { zone: string }) => z.zone)).toContain(A);
    const res = await run(['dns:acme:cleanup-stale', A, '--keep', 'wild-token-2']);
    expect(res.code).toBe(0);
    expect(JSON.parse(res.out)).toMatchObject({ ok: true, owner, removed: ['cli-old'], removed_count: 1, kept: ['wild-token-2'] });
    expect(await digRdata(owner, 'TXT')).toEqual(['"wild-token-2"']);
  }, 30_000);

  it('ACME needs write rights', async () => {
    const r = await post('/api/dns/acme/present', { domain: A, challenge: 'nope' }, 'reader');
    expect(r.statusCode).toBe(403);
    expect(await digRdata(owner, 'TXT')).toEqual(['"wild-token-2"']);
  });
});

describe('cache clear policy and paths', () => {
  it('read-only callers get 403; protected and disabled zones refuse; a clear empties the cache', async () => {
    expect((await post(`/api/dns/zones/${A}/cache/clear`, {}, 'reader')).json().reason).toBe('forbidden');
    await setZonePolicy(zones.knex(), A, { protectFromClear: true });
    const prot = await post(`/api/dns/zones/${A}/cache/clear`, {});
    expect(prot.statusCode).toBe(403);
    expect(prot.json().reason).toBe('cache_clear_protected');
    await setZonePolicy(zones.knex(), A, { protectFromClear: false, invalidateEnabled: false });
    const dis = await post(`/api/dns/zones/${A}/cache/clear`, {});
    expect(dis.statusCode).toBe(403);
    expect(dis.json().reason).toBe('cache_invalidation_disabled');
    await setZonePolicy(zones.knex(), A, { invalidateEnabled: true });
    const ok = await post(`/api/dns/zones/${A}/cache/clear`, {}, 'writer');
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toMatchObject({ ok: true, zone: A });
    expect(ok.json().cache_policy.last_invalidated_at).not.toBeNull();
    expect(await cacheRows(A)).toEqual([]);
    expect((await get(`/api/dns/zones/${A}/cache`)).json().source).toBe('needs_axfr');
  });

  it('a stale cache is served as from_database_stale', async () => {
    await get(`/api/dns/zones/${B}/axfr`);
    await zones
      .knex()
      .raw(`update dns_zone_cache_state set cached_at = now() - interval '1 hour' where zone_id = (select id from dns_zones where zone = ?)`, [B]);
    const c = (await get(`/api/dns/zones/${B}/cache`)).json();
    expect(c).toMatchObject({ source: 'from_database_stale', cache_is_stale: true });
    expect(c.cache_age).toBeGreaterThanOrEqual(3600);
    expect((await get(`/api/dns/zones/${B}/search?q=www`)).json().source).toBe('from_database_stale');
  });

  it('404 required_paths_missing_or_unreadable when the zone file or key is not readable', async () => {
    await zones.upsert({ zone: 'gamma.test', file: '/nonexistent/db.gamma', keyFile: ns.keyFile, port: ns.port });
    const r = await get('/api/dns/zones/gamma.test');
    expect(r.statusCode).toBe(404);
    expect(r.json().reason).toBe('required_paths_missing_or_unreadable');
    const w = await post('/api/dns/records/add', { domain: 'x.gamma.test', type: 'A', target: '10.0.0.1' });
    expect(w.json().reason).toBe('required_paths_missing_or_unreadable');
    await zones.remove('gamma.test');
  });
});

describe('IP whitelist (last: it admits every credential-less inject from 127.0.0.1)', () => {
  it('reads every zone, writes none by default', async () => {
    await t.accounts.addWhitelist('127.0.0.1');
    const list = (await get('/api/dns/zones', null)).json();
    expect(list).toMatchObject({ ok: true, count: 2, access_type: 'ip_whitelist', is_admin: false });
    expect(list.zones.every((z: { can_write: boolean }) => !z.can_write)).toBe(true);
    expect((await get(`/api/dns/zones/${A}/axfr`, null)).statusCode).toBe(200);
    const w = await post('/api/dns/records/add', { domain: `wl.${A}`, type: 'A', target: '10.0.0.8' }, null);
    expect(w.statusCode).toBe(403);
    expect(await digRdata(`wl.${A}`, 'A')).toEqual([]);
    const other = await t.app.inject({ method: 'GET', url: '/api/dns/zones', remoteAddress: '192.0.2.7' });
    expect(other.statusCode).toBe(401);
  });
});
