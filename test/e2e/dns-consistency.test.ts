import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZoneRegistry } from '../../coordinator/src/dns/zone-registry.js';
import { parsePresentationRecords, type DnsRecord } from '../../coordinator/src/dns/wire/index.js';
import { startNamed, type NamedServer } from '../support/bind.js';
import { createTestApp, type TestApp } from '../support/harness.js';

/**
 * What the API refuses before sending (data BIND would ignore or refuse), what an update keeps,
 * the cache under concurrent writes, search modes, and the ACME transports ACME clients can use.
 * Checked against a real named with dig and against the cache table.
 */
const C = 'consist.test';

let ns: NamedServer;
let t: TestApp;
let zones: ZoneRegistry;
let key: string;

beforeAll(async () => {
  ns = await startNamed({
    zones: [
      {
        name: C,
        records: [
          { name: `busy.${C}`, type: 'A', rdata: '10.6.0.1' },
          { name: `busy.${C}`, type: 'TXT', rdata: '"busy"' },
          { name: `busy.${C}`, type: 'MX', rdata: `10 mail.${C}.` },
          { name: `mail.${C}`, type: 'A', rdata: '10.6.0.2' },
          { name: `alias.${C}`, type: 'CNAME', rdata: `mail.${C}.`, ttl: 300 },
          { name: `ttl.${C}`, type: 'A', rdata: '10.6.0.3', ttl: 120 },
          { name: '@', type: 'TXT', rdata: '"v=spf1 mx -all"' },
          { name: `v6.${C}`, type: 'AAAA', rdata: '2001:db8::5' },
        ],
      },
    ],
  });
  t = await createTestApp({ env: { DNS_DEFAULT_TTL: '3600' } });
  zones = new ZoneRegistry(t.orm);
  await zones.upsert({ zone: C, file: ns.zoneFile(C), keyFile: ns.keyFile, server: '127.0.0.1', port: ns.port });
  key = (await t.accounts.createDnsApiKey({ name: 'consist' })).key;
}, 60_000);

afterAll(async () => {
  await t?.close();
  await ns?.stop();
});

const get = (url: string) => t.app.inject({ method: 'GET', url, headers: { 'x-api-key': key } });
const post = (url: string, payload: object, headers: Record<string, string> = { 'x-api-key': key }) => t.app.inject({ method: 'POST', url, payload, headers });

async function dig(name: string, type: string): Promise<DnsRecord[]> {
  return parsePresentationRecords(await ns.dig(['+noall', '+answer', name, type])).filter((r) => r.type === type && r.name === name);
}
const serial = async () => Number((await dig(C, 'SOA'))[0]!.rdata.split(' ')[2]);

describe('refused before sending (nothing reaches the master)', () => {
  it('a CNAME beside A, TXT and MX data: 409 cname_conflict naming the types', async () => {
    const before = await serial();
    const res = await post('/api/dns/records/add', { domain: `busy.${C}`, type: 'CNAME', target: `mail.${C}.` });
    expect(res.statusCode, res.body).toBe(409);
    expect(res.json()).toMatchObject({ ok: false, reason: 'cname_conflict' });
    expect(res.json().message).toMatch(/busy\.consist\.test already has (?=.*\bA\b)(?=.*\bTXT\b)(?=.*\bMX\b).* data; a CNAME cannot coexist/);
    expect(await dig(`busy.${C}`, 'CNAME')).toEqual([]);
    expect(await serial()).toBe(before);
  });

  it('a CNAME where a CNAME exists: 409, the old one (and its TTL) stays; update replaces it and keeps the TTL', async () => {
    const before = await serial();
    const res = await post('/api/dns/records/add', { domain: `alias.${C}`, type: 'CNAME', target: `busy.${C}.` });
    expect(res.statusCode, res.body).toBe(409);
    expect(res.json()).toMatchObject({ reason: 'cname_conflict' });
    expect(res.json().message).toMatch(/already has a CNAME to mail\.consist\.test.*records\/update/);
    expect(await dig(`alias.${C}`, 'CNAME')).toEqual([expect.objectContaining({ ttl: 300, rdata: `mail.${C}` })]);
    expect(await serial()).toBe(before);
    const upd = await post('/api/dns/records/update', { domain: `alias.${C}`, type: 'CNAME', new_target: `busy.${C}.` });
    expect(upd.statusCode, upd.body).toBe(200);
    expect(upd.json().record).toMatchObject({ ttl: 300, rdata: `busy.${C}` });
    expect(await dig(`alias.${C}`, 'CNAME')).toEqual([expect.objectContaining({ ttl: 300, rdata: `busy.${C}` })]);
  });

  it('TXT beside a CNAME: 409 cname_conflict (BIND would acknowledge and ignore it)', async () => {
    const res = await post('/api/dns/records/add', { domain: `alias.${C}`, type: 'TXT', target: '"beside"' });
    expect(res.statusCode, res.body).toBe(409);
    expect(res.json()).toMatchObject({ reason: 'cname_conflict' });
    expect(res.json().message).toMatch(
      new RegExp(
        `^alias\\.${C} has a CNAME to \\S+; a CNAME cannot coexist with other data at one name \\(here TXT\\), so remove that CNAME first\\. Nothing was changed\\.$`,
      ),
    );
  });

  it('an A or MX at an owner that is not a host name (named check-names REFUSED): 400 naming domain, not 503', async () => {
    const before = await serial();
    const a = await post('/api/dns/records/add', { domain: `bad_owner.${C}`, type: 'A', target: '10.6.0.50' });
    expect(a.statusCode, a.body).toBe(400);
    expect(a.json()).toMatchObject({ reason: 'validation_failed' });
    expect(a.json().errors.domain[0]).toMatch(/bad_owner\.consist\.test is not a host name.*check-names/);
    const mx = await post('/api/dns/records/add', { domain: `mx_owner.${C}`, type: 'MX', target: `10 mail.${C}.` });
    expect(mx.statusCode, mx.body).toBe(400);
    expect(mx.json().errors.domain[0]).toMatch(/mx_owner\.consist\.test is not a host name/);
    expect(await dig(`bad_owner.${C}`, 'A')).toEqual([]);
    expect(await serial()).toBe(before);
    // The same owner takes a TXT (check-names does not apply to it); in a bulk the refused A is reported on its own.
    const bulk = await post('/api/dns/records/bulk', {
      operations: [
        { action: 'ADD', domain: `bad_owner.${C}`, type: 'TXT', target: '"fine"' },
        { action: 'ADD', domain: `bad_owner.${C}`, type: 'A', target: '10.6.0.50' },
      ],
    });
    expect(bulk.statusCode, bulk.body).toBe(200);
    expect(bulk.json().results).toMatchObject([{ ok: true }, { ok: false, reason: 'validation_failed', message: expect.stringMatching(/not a host name/) }]);
    expect(await dig(`bad_owner.${C}`, 'TXT')).toEqual([expect.objectContaining({ rdata: '"fine"' })]);
    expect(await dig(`bad_owner.${C}`, 'A')).toEqual([]);
  });

  it('a delegation (NS below the apex, answered as a referral) is read back and cached, not a false 409', async () => {
    // A cache first, so the row seen below comes from the write's sync (not from a transfer).
    expect((await t.app.inject({ method: 'GET', url: `/api/dns/zones/${C}/axfr`, headers: { 'x-api-key': key } })).statusCode).toBe(200);
    const add = await post('/api/dns/records/add', { domain: `sub.${C}`, type: 'NS', target: 'ns1.example.org.' });
    expect(add.statusCode, add.body).toBe(200);
    expect(add.json()).toMatchObject({ verified: true });
    // named answers the delegation in the authority section.
    expect(await ns.dig(['+noall', '+authority', `sub.${C}`, 'NS'])).toMatch(/sub\.consist\.test\.\s+\d+\s+IN\s+NS\s+ns1\.example\.org\./);
    const cached = await t.app.inject({
      method: 'GET',
      url: `/api/dns/zones/${C}/search?q=${encodeURIComponent(`name:sub.${C}`)}`,
      headers: { 'x-api-key': key },
    });
    expect(cached.json().zoneData).toEqual([expect.objectContaining({ name: `sub.${C}`, type: 'NS', rdata: 'ns1.example.org' })]);
    const del = await post('/api/dns/records/delete', { domain: `sub.${C}`, type: 'NS', target: 'ns1.example.org.' });
    expect(del.statusCode, del.body).toBe(200);
    expect(await ns.dig(['+noall', '+authority', `sub.${C}`, 'NS'])).not.toMatch(/ns1\.example\.org/);
  });

  it('an MX or an apex NS whose in-zone target has no address: 400 validation_failed naming the target', async () => {
    const before = await serial();
    const mx = await post('/api/dns/records/add', { domain: `m.${C}`, type: 'MX', target: `10 nohost.${C}.` });
    expect(mx.statusCode, mx.body).toBe(400);
    expect(mx.json()).toMatchObject({ reason: 'validation_failed' });
    expect(mx.json().errors.target[0]).toMatch(/nohost\.consist\.test has no A or AAAA record.*refuses an MX/);
    const nsAdd = await post('/api/dns/records/add', { domain: C, type: 'NS', target: `ns9.${C}.` });
    expect(nsAdd.statusCode, nsAdd.body).toBe(400);
    expect(nsAdd.json().errors.target[0]).toMatch(/ns9\.consist\.test has no A or AAAA record.*zone apex NS/);
    const upd = await post('/api/dns/records/update', { domain: `busy.${C}`, type: 'MX', new_target: `10 nohost.${C}.` });
    expect(upd.statusCode, upd.body).toBe(400);
    expect(upd.json().errors.new_target).toBeDefined();
    expect(await serial()).toBe(before);
    // With the address added in the same bulk, the MX goes through.
    const bulk = await post('/api/dns/records/bulk', {
      operations: [
        { action: 'ADD', domain: `m.${C}`, type: 'MX', target: `10 nohost.${C}.` },
        { action: 'ADD', domain: `nohost.${C}`, type: 'A', target: '10.6.0.9' },
      ],
    });
    expect(bulk.statusCode, bulk.body).toBe(200);
    expect(bulk.json()).toMatchObject({ ok: true, update_messages: 1 });
    expect(await dig(`m.${C}`, 'MX')).toEqual([expect.objectContaining({ rdata: `10 nohost.${C}` })]);
  });
});

describe('update keeps what it is not told to change', () => {
  it('without ttl the RRset keeps its TTL; a new RRset gets the default', async () => {
    const res = await post('/api/dns/records/update', { domain: `ttl.${C}`, type: 'A', old_target: '10.6.0.3', new_target: '10.6.0.4' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().record.ttl).toBe(120);
    expect(await dig(`ttl.${C}`, 'A')).toEqual([expect.objectContaining({ ttl: 120, rdata: '10.6.0.4' })]);
    const fresh = await post('/api/dns/records/update', { domain: `freshttl.${C}`, type: 'A', new_target: '10.6.0.5' });
    expect(fresh.json().record.ttl).toBe(3600);
  });

  it('an add without ttl joins the RRset at its TTL (RFC 2181); an explicit other ttl changes the whole RRset and says so', async () => {
    const one = await post('/api/dns/records/add', { domain: `rrttl.${C}`, type: 'TXT', target: 'one', ttl: 300 });
    expect(one.statusCode, one.body).toBe(200);
    const two = await post('/api/dns/records/add', { domain: `rrttl.${C}`, type: 'TXT', target: 'two' });
    expect(two.statusCode, two.body).toBe(200);
    expect(two.json().record.ttl).toBe(300);
    expect((await dig(`rrttl.${C}`, 'TXT')).map((r) => [r.rdata, r.ttl]).sort()).toEqual([
      ['"one"', 300],
      ['"two"', 300],
    ]);
    const three = await post('/api/dns/records/add', { domain: `rrttl.${C}`, type: 'TXT', target: 'three', ttl: 600 });
    expect(three.statusCode, three.body).toBe(200);
    expect(three.json().message).toContain('now have TTL 600 too (was 300)');
    expect(new Set((await dig(`rrttl.${C}`, 'TXT')).map((r) => r.ttl))).toEqual(new Set([600]));
    // A new RRset gets DNS_DEFAULT_TTL.
    expect((await post('/api/dns/records/add', { domain: `rrnew.${C}`, type: 'TXT', target: 'new' })).json().record.ttl).toBe(3600);

    // Bulk: the same rules, and an add without ttl beside one with ttl in a new RRset takes that one.
    await post('/api/dns/records/add', { domain: `bulkttl.${C}`, type: 'TXT', target: 'one', ttl: 300 });
    const bulk = await post('/api/dns/records/bulk', {
      operations: [
        { action: 'ADD', domain: `bulkttl.${C}`, type: 'TXT', target: 'two' },
        { action: 'ADD', domain: `bulknew.${C}`, type: 'TXT', target: 'a' },
        { action: 'ADD', domain: `bulknew.${C}`, type: 'TXT', target: 'b', ttl: 120 },
        { action: 'ADD', domain: `ttl.${C}`, type: 'A', target: '10.6.0.9', ttl: 240 },
      ],
    });
    expect(bulk.statusCode, bulk.body).toBe(200);
    expect(bulk.json()).toMatchObject({ ok: true });
    expect((await dig(`bulkttl.${C}`, 'TXT')).map((r) => r.ttl)).toEqual([300, 300]);
    expect((await dig(`bulknew.${C}`, 'TXT')).map((r) => r.ttl)).toEqual([120, 120]);
    expect(new Set((await dig(`ttl.${C}`, 'A')).map((r) => r.ttl))).toEqual(new Set([240]));
    expect(bulk.json().results[3].message).toContain('now have TTL 240 too (was 120)');
  });
});

describe('search', () => {
  it('q=spf1 finds the apex v=spf1 TXT; q=2001:db8 is an ip search', async () => {
    await get(`/api/dns/zones/${C}/axfr`);
    const spf = (await get(`/api/dns/zones/${C}/search?q=spf1`)).json();
    expect(spf.zoneData).toEqual(expect.arrayContaining([expect.objectContaining({ name: C, type: 'TXT', rdata: '"v=spf1 mx -all"' })]));
    const v6 = (await get(`/api/dns/zones/${C}/search?q=2001:db8`)).json();
    expect(v6).toMatchObject({ search_mode: 'ip', record_count: 1 });
    expect(v6.zoneData[0]).toMatchObject({ name: `v6.${C}`, type: 'AAAA' });
  });
});

describe('the cache under concurrent writes', () => {
  it("after parallel adds the cached serial is the master's, or the answer says the cache is stale; a zone read catches up", async () => {
    await get(`/api/dns/zones/${C}/axfr`);
    for (let round = 0; round < 3; round++) {
      const results = await Promise.all(
        Array.from({ length: 6 }, (_, i) => post('/api/dns/records/add', { domain: `par${round}-${i}.${C}`, type: 'TXT', target: `p${i}` })),
      );
      expect(results.map((r) => r.statusCode)).toEqual([200, 200, 200, 200, 200, 200]);
      const master = await serial();
      const cached = (await get(`/api/dns/zones/${C}/cache?limit=1`)).json();
      if (cached.serial !== master) expect(cached).toMatchObject({ source: 'from_database_stale', cache_is_stale: true });
      else expect(cached).toMatchObject({ source: 'from_database', cache_is_stale: false });
      const read = (await get(`/api/dns/zones/${C}?limit=1`)).json();
      expect(read.serial).toBe(master);
      expect(read.cache_is_stale).toBe(false);
      expect((await get(`/api/dns/zones/${C}/cache?limit=1`)).json()).toMatchObject({ serial: master, source: 'from_database' });
    }
  });

  it('200 concurrent adds: record_count equals the rows, pages add up, the SOA row matches serial', async () => {
    await get(`/api/dns/zones/${C}/axfr`);
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) => post('/api/dns/records/add', { domain: `c${i}.${C}`, type: 'A', target: `10.7.${i >> 8}.${i & 255}` })),
    );
    expect(results.map((r) => r.statusCode).filter((s) => s !== 200)).toEqual([]);
    const rows = Number(
      (
        await zones
          .knex()
          .raw<{ rows: Array<{ n: string }> }>(`select count(*) as n from dns_record_cache c join dns_zones z on z.id = c.zone_id where z.zone = ?`, [C])
      ).rows[0]!.n,
    );
    const first = (await get(`/api/dns/zones/${C}/cache?limit=100`)).json();
    expect(first.record_count).toBe(rows);
    let seen = 0;
    for (let page = 1; ; page++) {
      const p = (await get(`/api/dns/zones/${C}/cache?limit=100&page=${page}`)).json();
      seen += (p.zoneData as unknown[]).length;
      expect(p.has_more).toBe(seen < rows);
      if (!p.has_more) break;
    }
    expect(seen).toBe(rows);
    const written = await zones
      .knex()
      .raw<{ rows: Array<{ n: string }> }>(
        `select count(distinct c.name) as n from dns_record_cache c join dns_zones z on z.id = c.zone_id where z.zone = ? and c.name ~ '^c[0-9]+\\.'`,
        [C],
      );
    expect(Number(written.rows[0]!.n)).toBe(200);
    const soaRow = (await get(`/api/dns/zones/${C}/cache?limit=1`)).json();
    expect(Number(soaRow.zoneData[0].rdata.split(' ')[2])).toBe(soaRow.serial);
    // After a refresh the cache is exactly the master's zone.
    const fresh = (await get(`/api/dns/zones/${C}/axfr?limit=1`)).json();
    const axfr = parsePresentationRecords(await ns.dig(['+noall', '+answer', C, 'AXFR'])).filter((r) => r.type !== 'TSIG');
    expect(fresh.record_count).toBe(axfr.length - 1);
    expect(fresh.serial).toBe(await serial());
    expect(Number(fresh.zoneData[0].rdata.split(' ')[2])).toBe(fresh.serial);
  }, 60_000);
});

describe('ACME clients as they are', () => {
  const basic = (user: string, password: string) => ({ authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` });

  it('a DNS API key as the HTTP Basic password (any user name) on the ACME routes only', async () => {
    const res = await post('/api/dns/acme/present', { fqdn: `_acme-challenge.www.${C}.`, value: 'basic-1' }, basic('lego', key));
    expect(res.statusCode, res.body).toBe(200);
    expect(await dig(`_acme-challenge.www.${C}`, 'TXT')).toEqual([expect.objectContaining({ rdata: '"basic-1"' })]);
    const clean = await post('/api/dns/acme/cleanup', { fqdn: `_acme-challenge.www.${C}.`, value: 'basic-1' }, basic('', key));
    expect(clean.json()).toMatchObject({ ok: true, removed: true });
    expect((await post('/api/dns/acme/present', { domain: C, challenge: 'x' }, basic('lego', 'sonar_dns_wrong'))).statusCode).toBe(401);
    // Not a transport of the other DNS routes.
    const other = await t.app.inject({ method: 'GET', url: '/api/dns/zones', headers: basic('lego', key) });
    expect(other.statusCode).toBe(401);
  });

  it('lego HTTPREQ_MODE=RAW bodies {domain, token, keyAuth}: TXT = base64url(SHA-256(keyAuth))', async () => {
    const keyAuth = 'token-abc.thumbprint-xyz';
    const expected = createHash('sha256').update(keyAuth).digest('base64url');
    const res = await post('/api/dns/acme/present', { domain: `raw.${C}`, token: 'token-abc', keyAuth }, basic('u', key));
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ owner: `_acme-challenge.raw.${C}`, value: expected });
    expect(await dig(`_acme-challenge.raw.${C}`, 'TXT')).toEqual([expect.objectContaining({ rdata: `"${expected}"` })]);
    const clean = await post('/api/dns/acme/cleanup', { domain: `raw.${C}`, token: 'token-abc', keyAuth }, basic('u', key));
    expect(clean.json()).toMatchObject({ removed: true });
    expect(await dig(`_acme-challenge.raw.${C}`, 'TXT')).toEqual([]);
  });
});
