import { execFile } from 'node:child_process';
import { chmod } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZoneRegistry } from '../../coordinator/src/dns/zone-registry.js';
import { parsePresentationRecords } from '../../coordinator/src/dns/wire/index.js';
import { setZonePolicy, startNamed, type NamedServer } from '../support/bind.js';
import { browserLogin, createTestApp, extractCsrf, randomName, type TestApp } from '../support/harness.js';

/**
 * More of the DNS API against a real BIND named: whitelist writes with DNS_WHITELIST_WRITE, the
 * CSRF rule for browser sessions, the time-based cache expiry, the bulk one-by-one retry path and
 * the dns:zone:* CLI commands. Every write is checked with an independent `dig`.
 */
const Z = 'more.test';
const Y = 'expiry.test';
const WL_IP = '192.0.2.50';

let ns: NamedServer;
/** Default settings (DNS_WHITELIST_WRITE unset). */
let t: TestApp;
/** DNS_WHITELIST_WRITE=true. */
let tw: TestApp;
let zones: ZoneRegistry;
let globalKey = '';
let admin: { name: string; password: string };

beforeAll(async () => {
  ns = await startNamed({
    zones: [
      { name: Z, records: [{ name: `www.${Z}`, type: 'A', rdata: '10.5.0.1' }] },
      { name: Y, records: [{ name: `www.${Y}`, type: 'A', rdata: '10.6.0.1' }] },
    ],
  });
  await chmod(ns.keyFile, 0o644);
  t = await createTestApp();
  tw = await createTestApp({ env: { DNS_WHITELIST_WRITE: 'true' } });
  zones = new ZoneRegistry(t.orm);
  for (const app of [t, tw]) {
    const reg = new ZoneRegistry(app.orm);
    for (const z of [Z, Y]) await reg.upsert({ zone: z, file: ns.zoneFile(z), keyFile: ns.keyFile, server: '127.0.0.1', port: ns.port });
    await app.accounts.addWhitelist(WL_IP);
  }
  globalKey = (await t.accounts.createDnsApiKey({ name: 'global' })).key;
  admin = { name: randomName(), password: '' };
  admin.password = (await t.accounts.createUser({ username: admin.name, permissions: [], isAdmin: true })).password;
}, 90_000);

afterAll(async () => {
  await t?.close();
  await tw?.close();
  await ns?.stop();
});

const get = (url: string) => t.app.inject({ method: 'GET', url, headers: { 'x-api-key': globalKey } });
const post = (url: string, payload: unknown) => t.app.inject({ method: 'POST', url, payload: payload as object, headers: { 'x-api-key': globalKey } });

async function digRdata(name: string, type: string): Promise<string[]> {
  const out = await ns.dig(['+noall', '+answer', name, type]);
  return parsePresentationRecords(out)
    .filter((r) => r.type === type && r.name === name)
    .map((r) => r.rdata)
    .sort();
}

describe('IP whitelist writes (DNS_WHITELIST_WRITE)', () => {
  const add = (app: TestApp, domain: string, target: string) =>
    app.app.inject({ method: 'POST', url: '/api/dns/records/add', remoteAddress: WL_IP, payload: { domain, type: 'A', target } });

  it('without it a whitelisted address reads but gets 403 on a write', async () => {
    const list = await t.app.inject({ method: 'GET', url: '/api/dns/zones', remoteAddress: WL_IP });
    expect(list.json()).toMatchObject({ ok: true, access_type: 'ip_whitelist', count: 2 });
    expect(list.json().zones.every((z: { can_write: unknown }) => z.can_write === false)).toBe(true);
    const w = await add(t, `wl-off.${Z}`, '10.5.1.1');
    expect(w.statusCode).toBe(403);
    expect(w.json()).toMatchObject({ ok: false, reason: 'forbidden' });
    const clear = await t.app.inject({ method: 'POST', url: `/api/dns/zones/${Z}/cache/clear`, remoteAddress: WL_IP });
    expect(clear.statusCode).toBe(403);
    expect(await digRdata(`wl-off.${Z}`, 'A')).toEqual([]);
  });

  it('with DNS_WHITELIST_WRITE=true the same address writes (seen on the master); others stay 401', async () => {
    const list = await tw.app.inject({ method: 'GET', url: '/api/dns/zones', remoteAddress: WL_IP });
    expect(list.json().zones.every((z: { can_write: unknown }) => z.can_write === true)).toBe(true);
    const w = await add(tw, `wl-on.${Z}`, '10.5.1.2');
    expect(w.statusCode).toBe(200);
    expect(w.json()).toMatchObject({ ok: true, record: { name: `wl-on.${Z}`, type: 'A', rdata: '10.5.1.2' } });
    expect(await digRdata(`wl-on.${Z}`, 'A')).toEqual(['10.5.1.2']);
    const stranger = await tw.app.inject({
      method: 'POST',
      url: '/api/dns/records/add',
      remoteAddress: '198.51.100.9',
      payload: { domain: `wl-x.${Z}`, type: 'A', target: '10.5.1.3' },
    });
    expect(stranger.statusCode).toBe(401);
    expect(await digRdata(`wl-x.${Z}`, 'A')).toEqual([]);
  });
});

describe('browser session writes need the CSRF token', () => {
  it('403 csrf_invalid without (or with a forged) token; success with X-CSRF-Token from a page', async () => {
    const { jar } = await browserLogin(t.app, admin.name, admin.password);
    const cookie = jar.header();
    const payload = { domain: `csrf.${Z}`, type: 'A', target: '10.5.2.1' };
    const reads = await t.app.inject({ method: 'GET', url: '/api/dns/zones', headers: { cookie } });
    expect(reads.json()).toMatchObject({ ok: true, is_admin: true, access_type: 'authenticated' });

    const noToken = await t.app.inject({ method: 'POST', url: '/api/dns/records/add', headers: { cookie }, payload });
    expect(noToken.statusCode).toBe(403);
    expect(noToken.json()).toMatchObject({ ok: false, reason: 'csrf_invalid' });
    const forged = await t.app.inject({ method: 'POST', url: '/api/dns/records/add', headers: { cookie, 'x-csrf-token': 'forged' }, payload });
    expect(forged.statusCode).toBe(403);
    expect(forged.json().reason).toBe('csrf_invalid');
    expect(await digRdata(`csrf.${Z}`, 'A')).toEqual([]);

    const csrf = extractCsrf((await t.app.inject({ method: 'GET', url: '/account', headers: { cookie } })).body);
    const ok = await t.app.inject({ method: 'POST', url: '/api/dns/records/add', headers: { cookie, 'x-csrf-token': csrf }, payload });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toMatchObject({ ok: true, record: { name: `csrf.${Z}`, rdata: '10.5.2.1' } });
    expect(await digRdata(`csrf.${Z}`, 'A')).toEqual(['10.5.2.1']);
  });
});

/**
 * Ages the zone's cache by `seconds` on the clock it is measured with: its `cached_at` (written with
 * the database's now()) moves back, exactly as if that much time had passed. No test waits on a real
 * interval, so a loaded machine cannot make a fresh cache look expired or the other way round.
 */
async function ageCache(zone: string, seconds: number) {
  await t.orm.em
    .getConnection()
    .execute(`update dns_zone_cache_state set cached_at = cached_at - make_interval(secs => ?) where zone_id = (select id from dns_zones where zone = ?)`, [
      seconds,
      zone,
    ]);
}

describe('time-based cache expiry (invalidate_interval_seconds)', () => {
  // Long enough that the fresh-cache checks never race it; the cache is then aged past it.
  const INTERVAL = 120;

  it('the cache counts as gone after the interval: /cache says needs_axfr, a zone read transfers again', async () => {
    await setZonePolicy(zones.knex(), Y, { invalidateIntervalSeconds: INTERVAL, cacheTtlSeconds: 3 * INTERVAL });
    const first = await get(`/api/dns/zones/${Y}/axfr`);
    expect(first.json()).toMatchObject({ ok: true, method: 'AXFR' });
    const fresh = (await get(`/api/dns/zones/${Y}/cache`)).json();
    expect(fresh).toMatchObject({ source: 'from_database', method: 'CACHE' });
    expect(fresh.cache_policy.invalidate_interval_seconds).toBe(INTERVAL);
    expect((await get(`/api/dns/zones/${Y}`)).json().method).toBe('CACHE');

    await ageCache(Y, INTERVAL + 1);
    const expired = (await get(`/api/dns/zones/${Y}/cache`)).json();
    expect(expired).toMatchObject({ ok: true, source: 'needs_axfr', zone: Y });
    expect(expired.message).toMatch(/expired/);
    const reread = (await get(`/api/dns/zones/${Y}`)).json();
    expect(reread.method).toBe('AXFR');
    expect(reread.cache_age).toBe(0);
    expect((await get(`/api/dns/zones/${Y}/cache`)).json().source).toBe('from_database');
  });

  it('an interval with invalidation disabled never expires the cache', async () => {
    await setZonePolicy(zones.knex(), Y, { invalidateIntervalSeconds: 1, invalidateEnabled: false, cacheTtlSeconds: 3 * INTERVAL });
    await get(`/api/dns/zones/${Y}/axfr`);
    await ageCache(Y, INTERVAL);
    const aged = (await get(`/api/dns/zones/${Y}/cache`)).json();
    expect(aged.cache_age).toBeGreaterThanOrEqual(INTERVAL);
    expect(aged.source).toBe('from_database');
    await setZonePolicy(zones.knex(), Y, { invalidateIntervalSeconds: 0, invalidateEnabled: true, cacheTtlSeconds: null });
  });
});

describe('bulk: the one-by-one retry when the master refuses the combined UPDATE', () => {
  it('the refused operation is reported; the others still apply; results[] covers each', async () => {
    const ops = [
      { action: 'ADD', domain: `r1.${Z}`, type: 'A', target: '10.5.3.1' },
      // An address record at a name that is no host name: BIND (check-names) refuses the whole UPDATE
      // message. (An MX to an in-zone target without address is refused before sending, see dns-honesty.)
      { action: 'ADD', domain: `no_host.${Z}`, type: 'A', target: '10.5.3.9' },
      { action: 'ADD', domain: `r2.${Z}`, type: 'TXT', target: 'retry path' },
      { action: 'DELETE', domain: `www.${Z}`, type: 'A', target: '10.5.0.1' },
    ];
    const res = await post('/api/dns/records/bulk', { operations: ops });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    // 1 combined message, then one per operation.
    expect(body).toMatchObject({ ok: false, operation_count: 4, update_messages: 5 });
    expect(body.results).toHaveLength(4);
    expect(body.results.map((r: { index: number; ok: boolean; domain: string }) => [r.index, r.ok, r.domain])).toEqual([
      [0, true, `r1.${Z}`],
      [1, false, `no_host.${Z}`],
      [2, true, `r2.${Z}`],
      [3, true, `www.${Z}`],
    ]);
    expect(typeof body.results[1].reason).toBe('string');
    expect(body.results[1].reason).not.toBe('');
    expect(await digRdata(`r1.${Z}`, 'A')).toEqual(['10.5.3.1']);
    expect(await digRdata(`r2.${Z}`, 'TXT')).toEqual(['"retry path"']);
    expect(await digRdata(`www.${Z}`, 'A')).toEqual([]);
    expect(await digRdata(`no_host.${Z}`, 'A')).toEqual([]);
    expect(ns.logs().some((l) => /check-names/.test(l))).toBe(true);
  });
});

describe('dns:zone:add / list / remove (CLI child process)', () => {
  const cli = fileURLToPath(new URL('../../coordinator/dist/cli.js', import.meta.url));
  const run = (args: string[]) =>
    new Promise<{ code: number; out: string; err: string }>((resolve) =>
      execFile(process.execPath, [cli, '--json', ...args], { env: { ...process.env, DATABASE_URL: t.db.url } }, (err, stdout, stderr) =>
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out: stdout, err: stderr }),
      ),
    );

  it('registers a zone the API then serves, lists it, removes it', async () => {
    const zone = 'cli.more.test';
    // A registry entry only (named does not serve it): pointing at more.test's files keeps its paths readable.
    const add = await run(['dns:zone:add', zone, '--file', ns.zoneFile(Z), '--key-file', ns.keyFile, '--port', String(ns.port), '--invalidate-interval', '30']);
    expect(add.code, add.err).toBe(0);
    expect(JSON.parse(add.out)).toMatchObject({ zone, file: ns.zoneFile(Z), key: ns.keyFile, server: '127.0.0.1', port: ns.port });
    expect(await zones.get(zone)).toMatchObject({ zone, port: ns.port, invalidateIntervalSeconds: 30 });
    expect((await get('/api/dns/zones')).json().zones.map((z: { zone: string }) => z.zone)).toContain(zone);

    const list = await run(['dns:zone:list']);
    expect(list.code).toBe(0);
    const listed = JSON.parse(list.out).zones.find((z: { zone: string }) => z.zone === zone);
    expect(listed).toMatchObject({ zone, server: '127.0.0.1', port: ns.port, invalidate_interval_seconds: 30, invalidate_enabled: true });

    const rm = await run(['dns:zone:remove', zone]);
    expect(rm.code).toBe(0);
    expect(JSON.parse(rm.out)).toMatchObject({ zone });
    expect(await zones.get(zone)).toBeNull();
    expect((await get('/api/dns/zones')).json().zones.map((z: { zone: string }) => z.zone)).not.toContain(zone);
    expect(JSON.parse((await run(['dns:zone:list'])).out).zones.map((z: { zone: string }) => z.zone)).toEqual([Y, Z]);

    const again = await run(['dns:zone:remove', zone]);
    expect(again.code).not.toBe(0);
    const bad = await run(['dns:zone:add', 'bad"zone', '--file', ns.zoneFile(Z), '--key-file', ns.keyFile]);
    expect(bad.code).not.toBe(0);
    expect(await zones.get('bad"zone')).toBeNull();
  }, 60_000);
});
