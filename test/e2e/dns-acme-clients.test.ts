import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZoneRegistry } from '../../coordinator/src/dns/zone-registry.js';
import { freePort } from '../../coordinator/src/infra/ports.js';
import { parsePresentationRecords } from '../../coordinator/src/dns/wire/index.js';
import { startNamed, type NamedServer } from '../support/bind.js';
import { createTestApp, type TestApp } from '../support/harness.js';

/**
 * ACME clients as they are, against the API on a real port and a real named: Debian's Pebble (a
 * test ACME CA, validating DNS-01 by asking the test named) issues real certificates to lego with
 * its `httpreq` provider (HTTP Basic auth carrying a DNS API key, default and RAW modes); an
 * acme.sh `acmeproxy`-style request and the certbot manual hook in deploy/acme do their part.
 * Afterwards no challenge record is left in BIND.
 */
const run = promisify(execFile);
const Z = 'acme.test';
const hook = fileURLToPath(new URL('../../deploy/acme/certbot-dns-hook.sh', import.meta.url));

let ns: NamedServer;
let t: TestApp;
let key: string;
let base: string;
let dir: string;
let pebble: ChildProcess;
let pebbleUrl: string;
let caFile: string;
const pebbleLog: string[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'sonar-acme-'));
  ns = await startNamed({ zones: [{ name: Z, records: [{ name: `www.${Z}`, type: 'A', rdata: '10.4.0.1' }] }] });
  t = await createTestApp();
  await new ZoneRegistry(t.orm).upsert({ zone: Z, file: ns.zoneFile(Z), keyFile: ns.keyFile, server: '127.0.0.1', port: ns.port });
  key = (await t.accounts.createDnsApiKey({ name: 'acme' })).key;
  base = await t.app.listen({ port: 0, host: '127.0.0.1' });

  // Pebble serves ACME over TLS: a throwaway certificate for 127.0.0.1 that lego is told to trust.
  caFile = path.join(dir, 'pebble.pem');
  const keyFile = path.join(dir, 'pebble.key');
  await run('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-days',
    '1',
    '-subj',
    '/CN=pebble',
    '-addext',
    'subjectAltName=IP:127.0.0.1,DNS:localhost',
    '-keyout',
    keyFile,
    '-out',
    caFile,
  ]);
  const port = await freePort();
  const config = path.join(dir, 'pebble.json');
  await writeFile(
    config,
    JSON.stringify({
      pebble: {
        listenAddress: `127.0.0.1:${port}`,
        managementListenAddress: `127.0.0.1:${await freePort()}`,
        certificate: caFile,
        privateKey: keyFile,
        httpPort: await freePort(),
        tlsPort: await freePort(),
        ocspResponderURL: '',
        externalAccountBindingRequired: false,
      },
    }),
  );
  pebbleUrl = `https://127.0.0.1:${port}/dir`;
  pebble = spawn('pebble', ['-config', config, '-dnsserver', `127.0.0.1:${ns.port}`], {
    env: { ...process.env, PEBBLE_VA_NOSLEEP: '1', PEBBLE_WFE_NONCEREJECT: '0', PEBBLE_AUTHZREUSE: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // Ready when it says so (it logs the listen address once it serves).
  await new Promise<void>((resolve, reject) => {
    const onLine = (b: Buffer) => {
      pebbleLog.push(b.toString());
      if (/Listening on/.test(pebbleLog.join(''))) resolve();
    };
    pebble.stdout?.on('data', onLine);
    pebble.stderr?.on('data', onLine);
    pebble.once('exit', (code) => reject(new Error(`pebble exited (${code}): ${pebbleLog.join('')}`)));
  });
}, 60_000);

afterAll(async () => {
  pebble?.kill('SIGTERM');
  await t?.close();
  await ns?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function challengeRecords(): Promise<string[]> {
  const axfr = parsePresentationRecords(await ns.dig(['+noall', '+answer', Z, 'AXFR']));
  return axfr.filter((r) => r.name.startsWith('_acme-challenge.')).map((r) => `${r.name} ${r.rdata}`);
}

async function lego(domain: string, env: Record<string, string>) {
  const storage = await mkdtemp(path.join(dir, 'lego-'));
  const { stdout, stderr } = await run(
    'lego',
    [
      '--server',
      pebbleUrl,
      '--accept-tos',
      '--email',
      'ops@example.org',
      '--path',
      storage,
      '--key-type',
      'ec256',
      '--dns',
      'httpreq',
      '--dns.disable-cp',
      '--domains',
      domain,
      'run',
    ],
    {
      env: { ...process.env, LEGO_CA_CERTIFICATES: caFile, HTTPREQ_ENDPOINT: `${base}/api/dns/acme/`, HTTPREQ_USERNAME: 'lego', HTTPREQ_PASSWORD: key, ...env },
      timeout: 60_000,
    },
  ).catch((e: unknown) => {
    const err = e as { stdout?: string; stderr?: string; message: string };
    throw new Error(`lego failed: ${err.message}\n${err.stdout ?? ''}\n${err.stderr ?? ''}\npebble: ${pebbleLog.join('').slice(-2000)}`);
  });
  const cert = path.join(storage, 'certificates', `${domain.replace('*', '_')}.crt`);
  const text = (await run('openssl', ['x509', '-in', cert, '-noout', '-ext', 'subjectAltName'])).stdout;
  return { text, log: stdout + stderr };
}

describe('real certificates from Pebble through the API', () => {
  it('lego httpreq (default mode, Basic auth with a DNS API key)', async () => {
    const { text } = await lego(`www.${Z}`, {});
    expect(text).toContain(`DNS:www.${Z}`);
    expect(await challengeRecords()).toEqual([]);
    // Pebble checked the TXT record on the test named (not a public resolver) and found it valid.
    expect(pebbleLog.join('')).toContain(`Using custom DNS resolver for ACME challenges: 127.0.0.1:${ns.port}`);
    expect(pebbleLog.join('')).toMatch(/set VALID by completed challenge/);
  }, 60_000);

  it('lego httpreq HTTPREQ_MODE=RAW (the API computes the TXT value from keyAuth)', async () => {
    const { text } = await lego(`raw.${Z}`, { HTTPREQ_MODE: 'RAW' });
    expect(text).toContain(`DNS:raw.${Z}`);
    expect(await challengeRecords()).toEqual([]);
  }, 60_000);
});

describe('other ACME hooks', () => {
  it('acme.sh acmeproxy: {fqdn, value} with Basic auth to present and cleanup', async () => {
    const auth = `Basic ${Buffer.from(`acmesh:${key}`).toString('base64')}`;
    for (const action of ['present', 'cleanup']) {
      const res = await fetch(`${base}/api/dns/acme/${action}`, {
        method: 'POST',
        headers: { authorization: auth, 'content-type': 'application/json' },
        body: JSON.stringify({ fqdn: `_acme-challenge.proxy.${Z}.`, value: 'acmesh-token' }),
      });
      expect(res.status, await res.clone().text()).toBe(200);
      const records = await challengeRecords();
      if (action === 'present') expect(records).toEqual([`_acme-challenge.proxy.${Z} "acmesh-token"`]);
      else expect(records).toEqual([]);
    }
  });

  it('the certbot manual hook script publishes and then removes the validation', async () => {
    const env = { ...process.env, SONAR_URL: base, SONAR_DNS_API_KEY: key, CERTBOT_DOMAIN: `hook.${Z}`, CERTBOT_VALIDATION: 'certbot-validation_1' };
    await run('sh', [hook], { env });
    expect(await challengeRecords()).toEqual([`_acme-challenge.hook.${Z} "certbot-validation_1"`]);
    await run('sh', [hook], { env: { ...env, CERTBOT_AUTH_OUTPUT: '' } });
    expect(await challengeRecords()).toEqual([]);
  });
});
