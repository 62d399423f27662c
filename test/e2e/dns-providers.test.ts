import { execFile } from 'node:child_process';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZoneRegistry } from '../../coordinator/src/dns/zone-registry.js';
import { startNamed, type NamedServer } from '../support/bind.js';
import { startCloudflareStub, type CloudflareStub } from '../support/cloudflare-stub.js';
import { browserLogin, CookieJar, createTestApp, extractCsrf, randomName, type TestApp } from '../support/harness.js';

/**
 * Provider zones (zones served by Cloudflare, mapped or NS-detected) against a
 * local stand-in of Cloudflare's v4 API (test/support/cloudflare-stub.ts) and, for NS detection, a
 * real named whose zone's NS set is Cloudflare's. Every write is checked in the stand-in's records
 * (what Cloudflare would have), and in the row cache.
 */
const CF = 'cf.test'; // mapped with the CLI
const BIG = 'big.test'; // mapped, 1,203 records: three pages of the record list
const LEGACY = 'legacy.test'; // only in the older host-side config file
const MOVED = 'moved.test'; // local zone whose NS set is Cloudflare's, reachable with the token
const LOST = 'lost.test'; // local zone whose NS set is Cloudflare's, unknown to the token
const LOCAL = 'local.test'; // plain local zone
const BAD = 'bad.test'; // mapped with a token Cloudflare refuses

let ns: NamedServer;
let cf: CloudflareStub;
let t: TestApp;
let zones: ZoneRegistry;
let dir: string;
let key = '';
let admin: { name: string; password: string };
let plain: { name: string; password: string };

const cli = fileURLToPath(new URL('../../coordinator/dist/cli.js', import.meta.url));
let cliEnv: NodeJS.ProcessEnv;
const runCli = (args: string[]) =>
  new Promise<{ code: number; out: string; err: string }>((resolve) =>
    execFile(process.execPath, [cli, '--json', ...args], { env: cliEnv }, (err, stdout, stderr) =>
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out: stdout, err: stderr }),
    ),
  );

const get = (url: string) => t.app.inject({ method: 'GET', url, headers: { 'x-api-key': key } });
const post = (url: string, payload: object) => t.app.inject({ method: 'POST', url, payload, headers: { authorization: `Bearer ${key}` } });
/** What Cloudflare has at a name: `TYPE content` (or TYPE data) strings, sorted. */
const at = (zoneId: string, name: string) =>
  cf
    .records(zoneId)
    .filter((r) => r.name === name)
    .map((r) => `${r.type} ${r.priority !== undefined ? `${r.priority} ` : ''}${r.content ?? JSON.stringify(r.data)} ${r.ttl}`)
    .sort();
async function cacheRows(zone: string, name?: string) {
  const res = await zones
    .knex()
    .raw(
      `select c.name, c.type, c.rdata, c.ttl from dns_record_cache c join dns_zones z on z.id = c.zone_id where z.zone = ? ${name ? 'and c.name = ?' : ''} order by c.name, c.type, c.rdata`,
      name ? [zone, name] : [zone],
    );
  return res.rows as Array<{ name: string; type: string; rdata: string; ttl: number }>;
}
const writesSince = (n: number) => cf.requests.slice(n).filter((r) => r.method !== 'GET');

beforeAll(async () => {
  cf = await startCloudflareStub();
  cf.addToken('tok-good', '*');
  cf.addToken('tok-refused', []);
  cf.addZone(CF, 'zcf', [
    { type: 'A', name: `www.${CF}`, content: '192.0.2.1', ttl: 300 },
    { type: 'CNAME', name: `alias.${CF}`, content: `www.${CF}`, ttl: 1 },
    { type: 'TXT', name: CF, content: '"v=spf1 -all"', ttl: 3600 },
    { type: 'MX', name: CF, content: `mail.${CF}`, priority: 10, ttl: 3600 },
    { type: 'TXT', name: `raw.${CF}`, content: 'plain text', ttl: 600 },
  ]);
  cf.addZone(
    BIG,
    'zbig',
    Array.from({ length: 1203 }, (_, i) => ({ type: 'A', name: `h${i}.${BIG}`, content: `10.${(i >> 8) & 255}.${i & 255}.1`, ttl: 300 })),
  );
  cf.addZone(LEGACY, 'zlegacy', [{ type: 'A', name: `www.${LEGACY}`, content: '192.0.2.50', ttl: 300 }]);
  cf.addZone(MOVED, 'zmoved', [{ type: 'A', name: `www.${MOVED}`, content: '198.51.100.7', ttl: 300 }]);
  cf.addZone(BAD, 'zbad', []);

  ns = await startNamed({
    zones: [
      { name: LOCAL, records: [{ name: `www.${LOCAL}`, type: 'A', rdata: '10.0.0.1' }] },
      // The local copies of the moved zones say something else than Cloudflare: a read must not show them.
      { name: MOVED, records: [{ name: `www.${MOVED}`, type: 'A', rdata: '10.66.0.1' }] },
      { name: LOST, records: [{ name: `www.${LOST}`, type: 'A', rdata: '10.67.0.1' }] },
    ],
  });
  await chmod(ns.keyFile, 0o644);
  // Hand the two zones over to Cloudflare's name servers, as a zone moved there looks at its old master.
  for (const z of [MOVED, LOST])
    await ns.nsupdate([
      `zone ${z}`,
      `update add ${z}. 300 NS ada.ns.cloudflare.com.`,
      `update add ${z}. 300 NS bob.ns.cloudflare.com.`,
      `update delete ${z}. NS ns1.${z}.`,
    ]);

  dir = await mkdtemp(path.join(tmpdir(), 'sonar-cf-'));
  const legacyFile = path.join(dir, 'cloudflare.env');
  // The older host-side config: token and zone id, no zone name (looked up by id).
  await writeFile(legacyFile, '# old deploy script config\nexport CF_API_TOKEN="tok-good"\nCF_ZONE_ID=zlegacy\n');
  process.env.SONAR_TEST_CF_TOKEN = 'tok-good';
  process.env.SONAR_TEST_CF_REFUSED = 'tok-refused';
  delete process.env.SONAR_TEST_CF_UNSET;
  const env = {
    DNS_CLOUDFLARE_API_URL: cf.url,
    DNS_CLOUDFLARE_TOKEN_REF: 'env:SONAR_TEST_CF_TOKEN',
    DNS_PROVIDER_LEGACY_FILE: legacyFile,
    DNS_TIMEOUT_MS: '2000',
    DNS_DEFAULT_TTL: '3600',
    DNS_RATE_LIMIT_PER_MINUTE: '100000',
  };
  t = await createTestApp({ env });
  cliEnv = { ...process.env, ...env, DATABASE_URL: t.db.url };
  zones = new ZoneRegistry(t.orm);
  for (const z of [LOCAL, MOVED, LOST]) await zones.upsert({ zone: z, file: ns.zoneFile(z), keyFile: ns.keyFile, server: '127.0.0.1', port: ns.port });
  key = (await t.accounts.createDnsApiKey({ name: 'global' })).key;
  const mk = async (isAdmin: boolean) => {
    const name = randomName();
    const { password } = await t.accounts.createUser({ username: name, permissions: [], isAdmin });
    return { name, password };
  };
  admin = await mk(true);
  plain = await mk(false);
}, 120_000);

afterAll(async () => {
  await t?.close();
  await ns?.stop();
  await cf?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('mapping table: CLI', () => {
  it('refuses a token where a token reference belongs, and a zone the token cannot see', async () => {
    const literal = await runCli(['dns:providers:add', CF, '--token-ref', 'tok-good']);
    expect(literal.code).toBe(1);
    expect(JSON.parse(literal.out)).toMatchObject({ ok: false, reason: 'validation_failed' });
    expect(literal.err).toMatch(/reference to the token, not the token/);
    const unknown = await runCli(['dns:providers:add', 'nowhere.test', '--token-ref', 'env:SONAR_TEST_CF_TOKEN']);
    expect(unknown.code).toBe(1);
    expect(unknown.err).toMatch(/cannot see a Cloudflare zone named nowhere\.test/);
  });

  it('adds mappings (zone id looked up by name, or given), lists them with the imported and detected zones', async () => {
    const add = await runCli(['dns:providers:add', CF, '--token-ref', 'env:SONAR_TEST_CF_TOKEN']);
    expect(add.code, add.err).toBe(0);
    expect(JSON.parse(add.out)).toMatchObject({ zone: CF, provider: 'cloudflare', provider_zone_id: 'zcf', token_ref: 'env:SONAR_TEST_CF_TOKEN' });
    expect((await runCli(['dns:providers:add', BIG, '--token-ref', 'env:SONAR_TEST_CF_TOKEN', '--zone-id', 'zbig'])).code).toBe(0);
    expect((await runCli(['dns:providers:add', BAD, '--token-ref', 'env:SONAR_TEST_CF_REFUSED', '--zone-id', 'zbad'])).code).toBe(0);
    // The table holds the reference, never the token.
    const rows = (await zones.knex().raw(`select token_ref from dns_provider_zones`)).rows.map((r: { token_ref: string }) => r.token_ref);
    expect(rows.sort()).toEqual(['env:SONAR_TEST_CF_REFUSED', 'env:SONAR_TEST_CF_TOKEN', 'env:SONAR_TEST_CF_TOKEN']);
    expect(JSON.stringify(rows)).not.toMatch(/tok-/);

    const list = await runCli(['dns:providers:list']);
    expect(list.code, list.err).toBe(0);
    const bySource = Object.fromEntries(JSON.parse(list.out).providers.map((p: { zone: string; source: string }) => [p.zone, p.source]));
    expect(bySource).toMatchObject({ [CF]: 'mapping', [BIG]: 'mapping', [BAD]: 'mapping', [MOVED]: 'detected', [LOST]: 'detected' });
    expect(bySource[LEGACY]).toMatch(/^imported/);
    expect(bySource[LOCAL]).toBeUndefined();
  });
});

describe('zone list', () => {
  it('lists provider zones as external entries and local zones as before', async () => {
    const res = await get('/api/dns/zones');
    expect(res.statusCode).toBe(200);
    const byZone = Object.fromEntries(res.json().zones.map((z: { zone: string }) => [z.zone, z]));
    expect(byZone[CF]).toEqual({
      zone: CF,
      file: null,
      can_write: true,
      provider: 'cloudflare',
      provider_label: 'Cloudflare',
      is_external: true,
      provider_zone_id: 'zcf',
      provider_ready: true,
      provider_source: 'mapping',
    });
    expect(byZone[LEGACY]).toMatchObject({ file: null, is_external: true, provider_zone_id: 'zlegacy', provider_ready: true, provider_source: 'imported' });
    expect(byZone[MOVED]).toMatchObject({ file: null, is_external: true, provider_zone_id: 'zmoved', provider_ready: true, provider_source: 'detected' });
    expect(byZone[LOST]).toMatchObject({ is_external: true, provider_zone_id: '', provider_ready: false, provider_source: 'detected' });
    // The zone file path is for administrators only (this is a DNS API key).
    expect(byZone[LOCAL]).toMatchObject({ zone: LOCAL, server: '127.0.0.1', port: ns.port });
    expect(byZone[LOCAL]).not.toHaveProperty('file');
    expect(byZone[LOCAL]).not.toHaveProperty('is_external');
  });
});

describe('reads', () => {
  it('a first read is a live provider fetch (method CLOUDFLARE); the next is the cache with source_method', async () => {
    const none = (await get(`/api/dns/zones/${CF}/cache`)).json();
    expect(none).toMatchObject({ ok: true, source: 'needs_axfr', provider: 'cloudflare', provider_label: 'Cloudflare' });
    const live = await get(`/api/dns/zones/${CF}`);
    expect(live.statusCode, live.body).toBe(200);
    const body = live.json();
    expect(body).toMatchObject({ ok: true, zone: CF, method: 'CLOUDFLARE', provider: 'cloudflare', provider_label: 'Cloudflare', record_count: 5 });
    expect(body).not.toHaveProperty('source_method');
    const rows = body.zoneData.map((r: { name: string; type: string; rdata: string; ttl: number }) => `${r.name} ${r.ttl} ${r.type} ${r.rdata}`);
    expect(rows).toEqual([
      `${CF} 3600 MX 10 mail.${CF}`,
      `${CF} 3600 TXT "v=spf1 -all"`,
      `alias.${CF} 300 CNAME www.${CF}`, // ttl 1 is Cloudflare's "automatic": 300 s
      `raw.${CF} 600 TXT "plain text"`,
      `www.${CF} 300 A 192.0.2.1`,
    ]);
    const cached = (await get(`/api/dns/zones/${CF}`)).json();
    expect(cached).toMatchObject({ method: 'CACHE', source_method: 'CLOUDFLARE', provider: 'cloudflare', record_count: 5 });
    expect(cached.display_signature).toBe(body.display_signature);
    const helper = (await get(`/api/dns/zones/${CF}/cache`)).json();
    expect(helper).toMatchObject({ method: 'CACHE', source: 'from_database', source_method: 'CLOUDFLARE', provider_label: 'Cloudflare' });
    const search = (await get(`/api/dns/zones/${CF}/search?q=spf1`)).json();
    expect(search).toMatchObject({ source: 'from_database', source_method: 'CLOUDFLARE', record_count: 1 });
    const file = await get(`/api/dns/zones/${CF}?method=file`);
    expect(file.statusCode).toBe(400);
    expect(file.json().errors.method[0]).toMatch(/Cloudflare zone/);
  });

  it('/axfr on a provider zone is a provider refresh: changes made at Cloudflare appear', async () => {
    cf.put('zcf', { type: 'A', name: `dash.${CF}`, content: '192.0.2.99', ttl: 120 });
    const before = cf.requests.length;
    const res = await get(`/api/dns/zones/${CF}/axfr?limit=100`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ method: 'CLOUDFLARE', record_count: 6, provider: 'cloudflare' });
    expect(cf.requests.slice(before).map((r) => `${r.method} ${r.path}`)).toEqual([`GET /zones/zcf/dns_records`]);
    expect(await cacheRows(CF, `dash.${CF}`)).toEqual([{ name: `dash.${CF}`, type: 'A', rdata: '192.0.2.99', ttl: 120 }]);
  });

  it('pages through the record list (page/per_page, result_info) on a refresh', async () => {
    const before = cf.requests.length;
    const res = await get(`/api/dns/zones/${BIG}/axfr?page=13&limit=100`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ method: 'CLOUDFLARE', record_count: 1203, page: 13, has_more: false });
    expect(res.json().zoneData).toHaveLength(3);
    const pages = cf.requests.slice(before).filter((r) => r.path === '/zones/zbig/dns_records');
    expect(pages.map((r) => r.query.page)).toEqual(['1', '2', '3']);
    expect(pages.every((r) => r.token === 'tok-good')).toBe(true);
    expect((await cacheRows(BIG)).length).toBe(1203);
  });

  it('the imported older config serves its zone (zone name looked up by id)', async () => {
    const res = await get(`/api/dns/zones/${LEGACY}`);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ method: 'CLOUDFLARE', provider: 'cloudflare' });
    expect(res.json().zoneData.map((r: { rdata: string }) => r.rdata)).toEqual(['192.0.2.50']);
  });

  it('NS detection: a local zone whose NS set is Cloudflare is read through Cloudflare, not its old master', async () => {
    const res = await get(`/api/dns/zones/${MOVED}`);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ method: 'CLOUDFLARE', provider: 'cloudflare' });
    expect(res.json().zoneData.map((r: { name: string; rdata: string }) => `${r.name} ${r.rdata}`)).toEqual([`www.${MOVED} 198.51.100.7`]);
    // A zone with Cloudflare's name servers that the token cannot access: said, not served from the stale master.
    const lost = await get(`/api/dns/zones/${LOST}`);
    expect(lost.statusCode).toBe(503);
    expect(lost.json()).toMatchObject({ ok: false, reason: 'service_unavailable' });
    expect(lost.json().message).toMatch(/cannot access the Cloudflare zone lost\.test/);
    // The plain local zone is untouched by all this.
    expect((await get(`/api/dns/zones/${LOCAL}`)).json()).toMatchObject({ method: 'AXFR' });
  });
});

describe('writes through the provider', () => {
  it('add: created at Cloudflare, read back, cache rows synchronised', async () => {
    const res = await post('/api/dns/records/add', { domain: `new.${CF}`, type: 'A', target: '192.0.2.10', ttl: 600 });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ ok: true, zone: CF, verified: true, record: { name: `new.${CF}`, ttl: 600, type: 'A', rdata: '192.0.2.10' } });
    expect(at('zcf', `new.${CF}`)).toEqual(['A 192.0.2.10 600']);
    expect(await cacheRows(CF, `new.${CF}`)).toEqual([{ name: `new.${CF}`, type: 'A', rdata: '192.0.2.10', ttl: 600 }]);
    expect((await get(`/api/dns/zones/${CF}/cache`)).json().record_count).toBe(7);
    // TXT, MX and SRV take the provider's shapes (quoted content, priority, data).
    expect((await post('/api/dns/records/add', { domain: `t.${CF}`, type: 'TXT', target: 'hello world', ttl: 300 })).statusCode).toBe(200);
    expect(at('zcf', `t.${CF}`)).toEqual(['TXT "hello world" 300']);
    expect((await post('/api/dns/records/add', { domain: `_sip._tcp.${CF}`, type: 'SRV', target: `10 5 5060 sip.${CF}`, ttl: 300 })).statusCode).toBe(200);
    expect(at('zcf', `_sip._tcp.${CF}`)).toEqual([`SRV {"priority":10,"weight":5,"port":5060,"target":"sip.${CF}"} 300`]);
    expect(await cacheRows(CF, `_sip._tcp.${CF}`)).toEqual([{ name: `_sip._tcp.${CF}`, type: 'SRV', rdata: `10 5 5060 sip.${CF}`, ttl: 300 }]);
  });

  it('same validation as local zones: 400 before anything is sent', async () => {
    const before = cf.requests.length;
    const res = await post('/api/dns/records/add', { domain: `x.${CF}`, type: 'A', target: '999.1.1.1' });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ ok: false, reason: 'validation_failed' });
    expect(res.json().errors.target).toBeDefined();
    expect(cf.requests.length).toBe(before);
  });

  it('a provider 4xx caused by the data is a 4xx naming the field', async () => {
    const res = await post('/api/dns/records/add', { domain: `short.${CF}`, type: 'A', target: '192.0.2.11', ttl: 30 });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ ok: false, reason: 'validation_failed' });
    expect(res.json().errors.ttl[0]).toMatch(/Cloudflare refused it: .*Invalid TTL/);
    expect(at('zcf', `short.${CF}`)).toEqual([]);
  });

  it('CNAME pre-checks: 409 cname_conflict, nothing sent', async () => {
    const before = cf.requests.length;
    const cname = await post('/api/dns/records/add', { domain: `www.${CF}`, type: 'CNAME', target: `other.${CF}` });
    expect(cname.statusCode).toBe(409);
    expect(cname.json()).toMatchObject({ ok: false, reason: 'cname_conflict' });
    expect(cname.json().message).toMatch(/already has A data/);
    const beside = await post('/api/dns/records/add', { domain: `alias.${CF}`, type: 'A', target: '192.0.2.12' });
    expect(beside.statusCode).toBe(409);
    expect(beside.json().message).toMatch(new RegExp(`CNAME to www\\.${CF.replace('.', '\\.')}`));
    const second = await post('/api/dns/records/add', { domain: `alias.${CF}`, type: 'CNAME', target: `new.${CF}` });
    expect(second.statusCode).toBe(409);
    expect(writesSince(before)).toEqual([]);
    expect(at('zcf', `alias.${CF}`)).toEqual([`CNAME www.${CF} 1`]);
  });

  it('update: replaces one value keeping its TTL, or the whole RRset; CNAME may replace a CNAME', async () => {
    const res = await post('/api/dns/records/update', { domain: `www.${CF}`, type: 'A', old_target: '192.0.2.1', new_target: '192.0.2.2' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ ok: true, verified: true, old_rdata: '192.0.2.1', record: { rdata: '192.0.2.2', ttl: 300 } });
    expect(at('zcf', `www.${CF}`)).toEqual(['A 192.0.2.2 300']);
    const alias = await post('/api/dns/records/update', { domain: `alias.${CF}`, type: 'CNAME', new_target: `new.${CF}`, ttl: 900 });
    expect(alias.statusCode, alias.body).toBe(200);
    expect(at('zcf', `alias.${CF}`)).toEqual([`CNAME new.${CF} 900`]);
    expect(await cacheRows(CF, `alias.${CF}`)).toEqual([{ name: `alias.${CF}`, type: 'CNAME', rdata: `new.${CF}`, ttl: 900 }]);
    const missing = await post('/api/dns/records/update', { domain: `www.${CF}`, type: 'A', old_target: '192.0.2.77', new_target: '192.0.2.3' });
    expect(missing.statusCode).toBe(404);
    // Cloudflare's "automatic" TTL (1) is kept when the update gives none; PATCH leaves other fields (proxied) alone.
    cf.put('zcf', { type: 'A', name: `auto.${CF}`, content: '192.0.2.5', ttl: 1 });
    const before = cf.requests.length;
    const auto = await post('/api/dns/records/update', { domain: `auto.${CF}`, type: 'A', new_target: '192.0.2.6' });
    expect(auto.statusCode, auto.body).toBe(200);
    expect(auto.json().record).toMatchObject({ rdata: '192.0.2.6', ttl: 300 });
    expect(at('zcf', `auto.${CF}`)).toEqual(['A 192.0.2.6 1']);
    expect(writesSince(before).map((r) => r.method)).toEqual(['PATCH']);
  });

  it('delete: gone at Cloudflare and from the cache; an absent value is 404', async () => {
    const res = await post('/api/dns/records/delete', { domain: `new.${CF}`, type: 'A', target: '192.0.2.10' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ ok: true, verified: true });
    expect(at('zcf', `new.${CF}`)).toEqual([]);
    expect(await cacheRows(CF, `new.${CF}`)).toEqual([]);
    expect((await post('/api/dns/records/delete', { domain: `new.${CF}`, type: 'A', target: '192.0.2.10' })).statusCode).toBe(404);
  });

  it('bulk: each operation through the provider, per-operation results, one read-back', async () => {
    const res = await post('/api/dns/records/bulk', {
      operations: [
        { action: 'ADD', domain: `b1.${CF}`, type: 'A', target: '192.0.2.21', ttl: 300 },
        { action: 'ADD', domain: `b2.${CF}`, type: 'TXT', target: 'bulk two', ttl: 300 },
        { action: 'ADD', domain: `www.${CF}`, type: 'CNAME', target: `b1.${CF}` },
        { action: 'DELETE', domain: `t.${CF}`, type: 'TXT', target: '"hello world"' },
        { action: 'ADD', domain: `b3.${CF}`, type: 'A', target: '192.0.2.23', ttl: 5 },
      ],
    });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body.results.map((r: { ok: boolean; reason?: string }) => (r.ok ? 'ok' : r.reason))).toEqual([
      'ok',
      'ok',
      'cname_conflict',
      'ok',
      'validation_failed',
    ]);
    expect(body.ok).toBe(false);
    expect(at('zcf', `b1.${CF}`)).toEqual(['A 192.0.2.21 300']);
    expect(at('zcf', `b2.${CF}`)).toEqual(['TXT "bulk two" 300']);
    expect(at('zcf', `t.${CF}`)).toEqual([]);
    expect(at('zcf', `b3.${CF}`)).toEqual([]);
    expect(at('zcf', `www.${CF}`)).toEqual(['A 192.0.2.2 300']);
    expect((await cacheRows(CF, `b2.${CF}`)).map((r) => r.rdata)).toEqual(['"bulk two"']);
    expect(await cacheRows(CF, `t.${CF}`)).toEqual([]);
    // The cache counts stay exact: a refresh finds exactly what the synchronised cache says.
    const counted = (await get(`/api/dns/zones/${CF}/cache`)).json().record_count;
    expect((await get(`/api/dns/zones/${CF}/axfr`)).json().record_count).toBe(counted);
  });

  it('ACME helpers go through the provider too', async () => {
    const present = await post('/api/dns/acme/present', { domain: CF, challenge: 'chal-1' });
    expect(present.statusCode, present.body).toBe(200);
    expect(present.json()).toMatchObject({ owner: `_acme-challenge.${CF}`, verified: true });
    expect(at('zcf', `_acme-challenge.${CF}`)).toEqual(['TXT "chal-1" 60']);
    expect((await post('/api/dns/acme/present', { domain: CF, challenge: 'chal-2' })).statusCode).toBe(200);
    const stale = await post('/api/dns/acme/cleanup-stale', { domain: CF, keep_challenges: ['chal-2'] });
    expect(stale.json()).toMatchObject({ ok: true, removed: ['chal-1'], kept: ['chal-2'], removed_count: 1 });
    const cleanup = await post('/api/dns/acme/cleanup', { domain: CF, challenge: 'chal-2' });
    expect(cleanup.json()).toMatchObject({ ok: true, removed: true });
    expect(at('zcf', `_acme-challenge.${CF}`)).toEqual([]);
  });

  it('NS-detected zone: writes go to Cloudflare when the token can access it, never to the old master', async () => {
    const res = await post('/api/dns/records/add', { domain: `api.${MOVED}`, type: 'A', target: '198.51.100.8', ttl: 300 });
    expect(res.statusCode, res.body).toBe(200);
    expect(at('zmoved', `api.${MOVED}`)).toEqual(['A 198.51.100.8 300']);
    expect(await ns.dig(['+short', `api.${MOVED}`, 'A'])).toBe('');
    const lost = await post('/api/dns/records/add', { domain: `api.${LOST}`, type: 'A', target: '198.51.100.9' });
    expect(lost.statusCode).toBe(503);
    expect(lost.json().message).toMatch(/cannot access the Cloudflare zone lost\.test/);
    expect(await ns.dig(['+short', `api.${LOST}`, 'A'])).toBe('');
  });
});

describe('honest errors', () => {
  it('Cloudflare 5xx: 503 saying so, nothing changed', async () => {
    cf.failNext(1, 502);
    const res = await post('/api/dns/records/add', { domain: `e1.${CF}`, type: 'A', target: '192.0.2.31' });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({ ok: false, reason: 'service_unavailable' });
    expect(res.json().message).toMatch(/Cloudflare answered 502/);
    expect(res.json().message).toMatch(/nothing was sent/);
    expect(at('zcf', `e1.${CF}`)).toEqual([]);
    cf.failNext(1, 503);
    const read = await get(`/api/dns/zones/${CF}/axfr`);
    expect(read.statusCode).toBe(503);
    expect(read.json().message).toMatch(/Cloudflare answered 503/);
  });

  it('Cloudflare 429: 503 with its Retry-After', async () => {
    cf.failNext(1, 429, { retryAfter: '17' });
    const res = await post('/api/dns/records/add', { domain: `e2.${CF}`, type: 'A', target: '192.0.2.32' });
    expect(res.statusCode).toBe(503);
    expect(res.headers['retry-after']).toBe('17');
    expect(res.json().message).toMatch(/rate limit reached \(429\), retry after 17 s/);
  });

  it('a failure in the middle of a bulk says what was applied', async () => {
    // Requests: the pre-check reads of m3 and m4, POST m3 (passes), POST m4 (answers 502).
    cf.failNext(1, 502, { skip: 3 });
    const res = await post('/api/dns/records/bulk', {
      operations: [
        { action: 'ADD', domain: `m3.${CF}`, type: 'A', target: '192.0.2.43' },
        { action: 'ADD', domain: `m4.${CF}`, type: 'A', target: '192.0.2.44' },
      ],
    });
    expect(res.statusCode).toBe(503);
    expect(res.json().message).toMatch(/Cloudflare answered 502/);
    expect(res.json().message).toMatch(/Bulk stopped at operation 1: 1 operation\(s\) before it were applied \(0\); the rest were not sent/);
    expect(at('zcf', `m3.${CF}`)).toEqual(['A 192.0.2.43 3600']);
    expect(at('zcf', `m4.${CF}`)).toEqual([]);
    // The applied one is in the cache too.
    expect((await cacheRows(CF, `m3.${CF}`)).map((r) => r.rdata)).toEqual(['192.0.2.43']);
  });

  it('no answer to a write: the read-back decides (applied → 200 with a note)', async () => {
    cf.silenceNext(1, 'POST');
    const res = await post('/api/dns/records/add', { domain: `quiet.${CF}`, type: 'A', target: '192.0.2.51' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().message).toMatch(/Cloudflare did not answer the add of quiet\.cf\.test A; a read-back shows the change/);
    expect(at('zcf', `quiet.${CF}`)).toEqual(['A 192.0.2.51 3600']);
  });

  it('no answer and the read-back does not show it: 503 outcome_unknown, never "not applied"', async () => {
    cf.silenceNext(1, 'POST', { apply: false });
    const res = await post('/api/dns/records/add', { domain: `lost.${CF}`, type: 'A', target: '192.0.2.52' });
    expect(res.statusCode).toBe(503);
    expect(res.headers['retry-after']).toBeDefined();
    expect(res.json()).toMatchObject({ ok: false, reason: 'outcome_unknown' });
    expect(res.json().message).toMatch(/Outcome unknown: the add of lost\.cf\.test A was sent to Cloudflare, which did not answer/);
    expect(at('zcf', `lost.${CF}`)).toEqual([]);
  });

  it('a token Cloudflare refuses: a clear 503 naming the token reference', async () => {
    const res = await get(`/api/dns/zones/${BAD}`);
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({ ok: false, reason: 'service_unavailable' });
    expect(res.json().message).toMatch(
      /Cloudflare refused the API token from env:SONAR_TEST_CF_REFUSED \(GET \/zones\/zbad\/dns_records: Cloudflare answered 403: 10000 Authentication error\)/,
    );
    expect(res.json().message).not.toMatch(/tok-refused/);
  });

  it('a token reference that does not resolve: provider_ready false, reads and writes 503 saying why', async () => {
    expect((await runCli(['dns:providers:add', BAD, '--token-ref', 'env:SONAR_TEST_CF_UNSET', '--zone-id', 'zbad'])).code).toBe(0);
    const list = (await get('/api/dns/zones')).json().zones.find((z: { zone: string }) => z.zone === BAD);
    expect(list).toMatchObject({ provider_ready: false, is_external: true });
    const res = await post('/api/dns/records/add', { domain: `x.${BAD}`, type: 'A', target: '192.0.2.61' });
    expect(res.statusCode).toBe(503);
    expect(res.json().message).toMatch(/environment variable SONAR_TEST_CF_UNSET is not set/);
    // A token file's path is for administrators: API answers do not show it.
    const secretDir = path.join(dir, 'secret-place');
    expect((await runCli(['dns:providers:add', BAD, '--token-ref', `file:${secretDir}/cf.token`, '--zone-id', 'zbad'])).code).toBe(0);
    const file = await get(`/api/dns/zones/${BAD}`);
    expect(file.statusCode).toBe(503);
    expect(file.json().message).toMatch(/the token file is not readable \(ENOENT\)/);
    expect(file.body).not.toContain('secret-place');
  });
});

describe('admin page /admin/dns-providers', () => {
  it('is for administrators only', async () => {
    const { jar } = await browserLogin(t.app, plain.name, plain.password);
    const res = await t.app.inject({ method: 'GET', url: '/admin/dns-providers', headers: { cookie: jar.header(), accept: 'text/html' } });
    expect(res.statusCode).toBe(403);
    const anon = await t.app.inject({ method: 'GET', url: '/admin/dns-providers', headers: { accept: 'text/html' } });
    expect(anon.statusCode).toBe(303);
  });

  it('lists mappings, the imported and detected zones; saves the imported config as a mapping; removes a mapping', async () => {
    const { jar } = await browserLogin(t.app, admin.name, admin.password);
    const adminHome = await t.app.inject({ method: 'GET', url: '/admin', headers: { cookie: jar.header() } });
    expect(adminHome.body).toContain('href="/admin/dns-providers"');
    const page = async (j: CookieJar) => t.app.inject({ method: 'GET', url: '/admin/dns-providers', headers: { cookie: j.header() } });
    const res = await page(jar);
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain(`data-zone="${CF}" data-source="mapping"`);
    expect(res.body).toContain(`data-zone="${LEGACY}" data-source="imported"`);
    expect(res.body).toContain(`data-zone="${MOVED}" data-source="detected"`);
    expect(res.body).not.toContain('tok-good');
    const csrf = extractCsrf(res.body);

    // A token where its reference belongs: refused with the reason, the form kept.
    const bad = await t.app.inject({
      method: 'POST',
      url: '/admin/dns-providers',
      headers: { cookie: jar.header(), 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ _csrf: csrf, zone: 'typo.test', provider: 'cloudflare', provider_zone_id: '', token_ref: 'tok-good' }).toString(),
    });
    expect(bad.statusCode).toBe(422);
    expect(bad.body).toContain('not the token');

    // Save the imported legacy zone as a first-class mapping row.
    const save = await t.app.inject({
      method: 'POST',
      url: '/admin/dns-providers',
      headers: { cookie: jar.header(), 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({
        _csrf: csrf,
        zone: LEGACY,
        provider_zone_id: 'zlegacy',
        token_ref: `file:${path.join(dir, 'cloudflare.env')}#CF_API_TOKEN`,
      }).toString(),
    });
    expect(save.statusCode, save.body).toBe(303);
    const row = (
      await zones.knex().raw(`select m.provider_zone_id, m.token_ref from dns_provider_zones m join dns_zones z on z.id = m.zone_id where z.zone = ?`, [LEGACY])
    ).rows[0];
    expect(row).toEqual({ provider_zone_id: 'zlegacy', token_ref: `file:${path.join(dir, 'cloudflare.env')}#CF_API_TOKEN` });
    expect((await get('/api/dns/zones')).json().zones.find((z: { zone: string }) => z.zone === LEGACY)).toMatchObject({
      provider_source: 'mapping',
      provider_ready: true,
    });
    expect((await get(`/api/dns/zones/${LEGACY}/axfr`)).json()).toMatchObject({ method: 'CLOUDFLARE', record_count: 1 });

    // Remove the BAD mapping: the zone (no zone file) is gone with it.
    const rm = await t.app.inject({
      method: 'POST',
      url: '/admin/dns-providers/remove',
      headers: { cookie: jar.header(), 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ _csrf: csrf, zone: BAD }).toString(),
    });
    expect(rm.statusCode).toBe(303);
    expect(await zones.get(BAD)).toBeNull();
    expect((await page(jar)).body).not.toContain(`data-zone="${BAD}"`);
  });

  it('CLI remove and import', async () => {
    const rm = await runCli(['dns:providers:remove', LEGACY]);
    expect(rm.code, rm.err).toBe(0);
    // Still served as imported (the older config is there) until saved again.
    expect((await get('/api/dns/zones')).json().zones.find((z: { zone: string }) => z.zone === LEGACY)).toMatchObject({ provider_source: 'imported' });
    const imp = await runCli(['dns:providers:import']);
    expect(imp.code, imp.err).toBe(0);
    expect(JSON.parse(imp.out).saved).toEqual([
      { zone: LEGACY, provider_zone_id: 'zlegacy', token_ref: `file:${path.join(dir, 'cloudflare.env')}#CF_API_TOKEN` },
    ]);
    expect((await runCli(['dns:providers:remove', 'nowhere.test'])).code).toBe(1);
  });
});

describe('provider unreachable', () => {
  it('connection refused: 503 service_unavailable with Retry-After, saying so', async () => {
    await cf.close();
    const res = await get(`/api/dns/zones/${CF}/axfr`);
    expect(res.statusCode).toBe(503);
    expect(res.headers['retry-after']).toBeDefined();
    expect(res.json()).toMatchObject({ ok: false, reason: 'service_unavailable' });
    expect(res.json().message).toMatch(/the Cloudflare API could not be reached \(ECONNREFUSED\)/);
    const add = await post('/api/dns/records/add', { domain: `gone.${CF}`, type: 'A', target: '192.0.2.70' });
    expect(add.statusCode).toBe(503);
    expect(add.json().message).toMatch(/could not be reached.*nothing was sent/);
    // The cache still answers, marked as the provider's.
    expect((await get(`/api/dns/zones/${CF}/cache`)).json()).toMatchObject({ method: 'CACHE', source_method: 'CLOUDFLARE' });
  });
});
