import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { zoneText } from '../../coordinator/src/dns/named-runtime.js';
import { ZoneRegistry } from '../../coordinator/src/dns/zone-registry.js';
import { freePort } from '../../coordinator/src/infra/ports.js';
import { createTestApp, type TestApp } from '../support/harness.js';

/**
 * DNS API when the master cannot be reached: a zone whose master port has nobody listening
 * (connection refused) and one whose master accepts the connection but never answers (timeout).
 * Reads and every kind of write answer 503 service_unavailable with Retry-After, in the
 * documented `{ok:false, reason, message}` shape and without internals; nothing is a 500.
 */
const DOWN = 'down.test';
const SILENT = 'silent.test';

let t: TestApp;
let dir: string;
let key: string;
let silent: Server;
const sockets = new Set<Socket>();

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'sonar-dns-down-'));
  const keyFile = path.join(dir, 'tsig.key');
  await writeFile(keyFile, `key "down-key" {\n\talgorithm hmac-sha256;\n\tsecret "${randomBytes(32).toString('base64')}";\n};\n`);
  // Accepts connections and never says a word: every exchange ends by the client's timeout.
  silent = createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {});
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  t = await createTestApp({ env: { DNS_TIMEOUT_MS: '300' } });
  const zones = new ZoneRegistry(t.orm);
  for (const [zone, port] of [
    [DOWN, await freePort()],
    [SILENT, (silent.address() as { port: number }).port],
  ] as const) {
    const file = path.join(dir, `db.${zone}`);
    await writeFile(file, zoneText({ name: zone, records: [{ name: `www.${zone}`, type: 'A', rdata: '10.7.0.1' }] }));
    await zones.upsert({ zone, file, keyFile, server: '127.0.0.1', port });
  }
  key = (await t.accounts.createDnsApiKey({ name: 'down' })).key;
});

afterAll(async () => {
  await t?.close();
  for (const s of sockets) s.destroy();
  await new Promise<void>((resolve) => (silent ? silent.close(() => resolve()) : resolve()));
  if (dir) await rm(dir, { recursive: true, force: true });
});

const call = (method: 'GET' | 'POST', url: string, payload?: object) =>
  t.app.inject({ method, url, headers: { 'x-api-key': key }, ...(payload ? { payload } : {}) });

function expectUnavailable(res: Awaited<ReturnType<typeof call>>, zone: string) {
  expect(res.statusCode, res.body).toBe(503);
  expect(res.headers['retry-after']).toBe('5');
  const body = res.json();
  expect(body).toMatchObject({ ok: false, reason: 'service_unavailable' });
  expect(Object.keys(body).sort()).toEqual(['message', 'ok', 'reason']);
  expect(body.message).toMatch(/master/i);
  expect(res.body).not.toMatch(/\bat .+:\d+:\d+|Error\b|node_modules|\.ts:\d+/);
  expect(res.body).not.toContain(zone === DOWN ? 'TIMEOUT' : 'ECONNREFUSED');
}

describe.each([
  { zone: DOWN, what: 'connection refused' },
  { zone: SILENT, what: 'no answer in time' },
])('master of $zone unreachable ($what)', ({ zone }) => {
  it('reads that need the master (AXFR, stale cache) are 503 with Retry-After', async () => {
    expectUnavailable(await call('GET', `/api/dns/zones/${zone}/axfr`), zone);
    expectUnavailable(await call('GET', `/api/dns/zones/${zone}`), zone);
  });

  it('an address record add (its CNAME pre-check asks the master first) is 503', async () => {
    expectUnavailable(await call('POST', '/api/dns/records/add', { domain: `new.${zone}`, type: 'A', target: '10.7.0.2' }), zone);
  });

  it('a TXT add, a delete and an update are 503', async () => {
    expectUnavailable(await call('POST', '/api/dns/records/add', { domain: `txt.${zone}`, type: 'TXT', target: '"hello"' }), zone);
    expectUnavailable(await call('POST', '/api/dns/records/delete', { domain: `www.${zone}`, type: 'A', target: '10.7.0.1' }), zone);
    expectUnavailable(
      await call('POST', '/api/dns/records/update', { domain: `www.${zone}`, type: 'A', old_target: '10.7.0.1', new_target: '10.7.0.3' }),
      zone,
    );
    expectUnavailable(await call('POST', '/api/dns/records/update', { domain: `mx.${zone}`, type: 'MX', new_target: `10 mail.${zone}.` }), zone);
  });

  it('a bulk write is 503', async () => {
    expectUnavailable(
      await call('POST', '/api/dns/records/bulk', { operations: [{ action: 'add', domain: `b.${zone}`, type: 'A', target: '10.7.0.4' }] }),
      zone,
    );
  });

  it('the ACME helpers are 503', async () => {
    expectUnavailable(await call('POST', '/api/dns/acme/present', { domain: `www.${zone}`, challenge: 'token-1' }), zone);
    expectUnavailable(await call('POST', '/api/dns/acme/cleanup', { domain: `www.${zone}`, challenge: 'token-1' }), zone);
    expectUnavailable(await call('POST', '/api/dns/acme/cleanup-stale', { domain: `www.${zone}` }), zone);
  });

  it('reads that do not need the master still work', async () => {
    const file = await call('GET', `/api/dns/zones/${zone}?method=file`);
    expect(file.statusCode).toBe(200);
    expect(file.json()).toMatchObject({ ok: true, method: 'FILE', zone });
    const cache = await call('GET', `/api/dns/zones/${zone}/cache`);
    expect(cache.statusCode).toBe(200);
    expect(cache.json()).toMatchObject({ ok: true, source: 'needs_axfr' });
  });
});
