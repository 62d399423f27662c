import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZoneRegistry } from '../../coordinator/src/dns/zone-registry.js';
import { DnsService } from '../../coordinator/src/dns/dns-service.js';
import { DyndnsService } from '../../coordinator/src/platform/dyndns/dyndns-service.js';
import { DyndnsTokens } from '../../coordinator/src/platform/dyndns/dyndns-token-repository.js';
import { startNamed, type NamedServer } from '../support/bind.js';
import { browserLogin, createTestApp, extractCsrf, randomName, type TestApp } from '../support/harness.js';

/**
 * Dynamic DNS (dyndns2) end to end: Debian's real ddclient and inadyn update host names through
 * /nic/update on a real port, the DNS service writes them to a real named (dig confirms), and the
 * protocol's answers (good, nochg, nohost, notfqdn, abuse, badauth, 911) come as clients read them.
 */
const run = promisify(execFile);
const Z = 'dyn.test';
/** inadyn lives in /usr/sbin, which a non-root PATH often lacks. */
const INADYN = existsSync('/usr/sbin/inadyn') ? '/usr/sbin/inadyn' : 'inadyn';

let ns: NamedServer;
let t: TestApp;
let base: string;
let port: number;
let dir: string;
let alice: { name: string; password: string; id: number; jwt: string };
let token: string;

const basic = (secret: string, user = 'anyone') => `Basic ${Buffer.from(`${user}:${secret}`).toString('base64')}`;
const dig = async (name: string, type: string) => (await ns.dig(['+short', name, type], { signed: false })).trim().split('\n').filter(Boolean).sort();
const update = (query: string, secret = token, extra: Record<string, string> = {}) =>
  t.app.inject({ method: 'GET', url: `/nic/update?${query}`, headers: { authorization: basic(secret), ...extra }, remoteAddress: '198.51.100.7' });

async function tokenFor(hostnames: string[], jwt = alice.jwt) {
  const res = await t.app.inject({
    method: 'POST',
    url: '/api/dyndns/tokens',
    headers: { authorization: `Bearer ${jwt}` },
    payload: { name: 'router', hostnames },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().token as string;
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'sonar-dyndns-'));
  ns = await startNamed({
    zones: [
      { name: Z, records: [{ name: `cname.${Z}`, type: 'CNAME', rdata: `www.${Z}.` }] },
      { name: 'other.test', records: [] },
    ],
  });
  t = await createTestApp({ env: { DYNDNS_RATE_LIMIT_PER_MINUTE: '1000', TRUST_PROXY: '127.0.0.1' } });
  for (const zone of [Z, 'other.test'])
    await new ZoneRegistry(t.orm).upsert({ zone, file: ns.zoneFile(zone), keyFile: ns.keyFile, server: '127.0.0.1', port: ns.port });
  const name = randomName();
  const { user, password } = await t.accounts.createUser({ username: name });
  await t.accounts.grantZone(name, Z, { read: true, write: true });
  await t.accounts.grantZone(name, 'other.test', { read: true, write: false });
  const login = await t.app.inject({ method: 'POST', url: '/api/account/login', payload: { username: name, password } });
  alice = { name, password, id: user.id, jwt: login.json().token };
  token = await tokenFor([`home.${Z}`, `ddclient.${Z}`, `inadyn.${Z}`, `both.${Z}`, `cname.${Z}`, `quick.${Z}`]);
  base = await t.app.listen({ port: 0, host: '127.0.0.1' });
  port = Number(new URL(base).port);
}, 120_000);

afterAll(async () => {
  await t?.close();
  await ns?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('tokens', () => {
  it('are created only for host names inside zones the user may write, stored hashed, listed without the secret', async () => {
    const bad = await t.app.inject({
      method: 'POST',
      url: '/api/dyndns/tokens',
      headers: { authorization: `Bearer ${alice.jwt}` },
      payload: { name: 'x', hostnames: [`a.other.test`, 'not a name', `nowhere.example`, Z] },
    });
    expect(bad.statusCode).toBe(422);
    expect(Object.keys(bad.json().errors).sort()).toEqual(['hostnames.0', 'hostnames.1', 'hostnames.2', 'hostnames.3']);
    expect(bad.json().errors['hostnames.0'][0]).toMatch(/may not change zone other\.test/);

    const list = await t.app.inject({ method: 'GET', url: '/api/dyndns/tokens', headers: { authorization: `Bearer ${alice.jwt}` } });
    expect(list.statusCode).toBe(200);
    expect(list.body).not.toContain(token);
    expect(list.json().tokens[0].hostnames).toContain(`home.${Z}`);
    const rows = await t.orm.em.getConnection().execute(`select token_hash from dyndns_tokens`);
    expect(JSON.stringify(rows)).not.toContain(token);
  });

  it('can be made and revoked on the /dyndns page (CSRF form, no script)', async () => {
    const { jar } = await browserLogin(t.app, alice.name, alice.password);
    const page = await t.app.inject({ method: 'GET', url: '/dyndns', headers: { cookie: jar.header() } });
    expect(page.statusCode).toBe(200);
    const csrf = extractCsrf(page.body);
    const form = (body: string) =>
      t.app.inject({
        method: 'POST',
        url: '/dyndns/tokens',
        headers: { cookie: jar.header(), 'content-type': 'application/x-www-form-urlencoded' },
        payload: body,
      });
    const refused = await form(`_csrf=${encodeURIComponent(csrf)}&name=p&hostnames=${encodeURIComponent('x.other.test')}`);
    expect(refused.statusCode).toBe(422);
    expect(refused.body).toContain('may not change zone other.test');
    const made = await form(`_csrf=${encodeURIComponent(csrf)}&name=page&hostnames=${encodeURIComponent(`page.${Z}, page2.${Z}`)}`);
    expect(made.statusCode).toBe(201);
    const secret = /sonar_ddns_[A-Za-z0-9_-]+/.exec(made.body)![0];
    expect((await update(`hostname=page.${Z}&myip=192.0.2.99`, secret)).body).toBe('good 192.0.2.99\n');
    const id = /data-token="(\d+)"/.exec(made.body)![1];
    const revoke = await t.app.inject({
      method: 'POST',
      url: `/dyndns/tokens/${id}/revoke`,
      headers: { cookie: jar.header(), 'content-type': 'application/x-www-form-urlencoded' },
      payload: `_csrf=${encodeURIComponent(csrf)}`,
    });
    expect(revoke.statusCode).toBe(303);
    const after = await update(`hostname=page.${Z}&myip=192.0.2.98`, secret);
    expect(after.statusCode).toBe(401);
    expect(after.body).toBe('badauth\n');
  });
});

describe('CLI', () => {
  it('dyndns:token:create/list/revoke (compiled CLI; build with tsc -b first)', async () => {
    const cli = fileURLToPath(new URL('../../coordinator/dist/cli.js', import.meta.url));
    const env = { PATH: process.env.PATH ?? '', DATABASE_URL: t.db.url };
    const made = await run(process.execPath, [cli, '--json', 'dyndns:token:create', alice.name, `cli.${Z}`, '--name', 'from-cli'], { env });
    const created = JSON.parse(made.stdout);
    expect(created).toMatchObject({ ok: true, name: 'from-cli', hostnames: [`cli.${Z}`] });
    expect((await update(`hostname=cli.${Z}&myip=192.0.2.77`, created.secret)).body).toBe('good 192.0.2.77\n');
    const refused = await run(process.execPath, [cli, 'dyndns:token:create', alice.name, 'x.other.test', '--name', 'nope'], { env }).catch(
      (e: unknown) => e as { code: number; stderr: string },
    );
    expect(refused).toMatchObject({ code: 1, stderr: expect.stringContaining('may not change zone other.test') });
    const list = JSON.parse((await run(process.execPath, [cli, '--json', 'dyndns:token:list', alice.name], { env })).stdout);
    expect(list.tokens.map((x: { id: number }) => x.id)).toContain(created.id);
    await run(process.execPath, [cli, 'dyndns:token:revoke', alice.name, String(created.id)], { env });
    expect((await update(`hostname=cli.${Z}&myip=192.0.2.78`, created.secret)).statusCode).toBe(401);
  }, 60_000);
});

describe('the dyndns2 protocol', () => {
  it('good, then nochg; several hosts answer one line each; IPv6 goes to AAAA', async () => {
    // A cached copy of the zone first: the update must keep it in step with the master.
    const key = (await t.accounts.createDnsApiKey({ name: 'read' })).key;
    expect((await t.app.inject({ method: 'GET', url: `/api/dns/zones/${Z}`, headers: { 'x-api-key': key } })).statusCode).toBe(200);
    const first = await update(`hostname=home.${Z}&myip=192.0.2.1`);
    expect(first.statusCode).toBe(200);
    expect(first.headers['content-type']).toMatch(/^text\/plain/);
    expect(first.body).toBe('good 192.0.2.1\n');
    expect(await dig(`home.${Z}`, 'A')).toEqual(['192.0.2.1']);
    expect((await update(`hostname=home.${Z}&myip=192.0.2.1`)).body).toBe('nochg 192.0.2.1\n');

    const many = await update(`hostname=home.${Z},both.${Z},nope.${Z},bad_name&myip=192.0.2.2,2001:DB8:0:0::2`);
    expect(many.body).toBe(`good 192.0.2.2,2001:db8::2\ngood 192.0.2.2,2001:db8::2\nnohost\nnotfqdn\n`);
    expect(await dig(`both.${Z}`, 'A')).toEqual(['192.0.2.2']);
    expect(await dig(`both.${Z}`, 'AAAA')).toEqual(['2001:db8::2']);
    expect((await update(`hostname=both.${Z}&myipv6=2001:db8::3`)).body).toBe('good 2001:db8::3\n');
    expect(await dig(`both.${Z}`, 'AAAA')).toEqual(['2001:db8::3']);
    expect(await dig(`both.${Z}`, 'A')).toEqual(['192.0.2.2']);
    // The zone cache follows the write (the DNS API's cached search shows it).
    const search = await t.app.inject({ method: 'GET', url: `/api/dns/zones/${Z}/search?q=both`, headers: { 'x-api-key': key } });
    expect(search.statusCode).toBe(200);
    expect(JSON.stringify(search.json().zoneData)).toContain('2001:db8::3');
  });

  it('without myip uses the client address, through the trusted proxy header', async () => {
    expect((await update(`hostname=home.${Z}`)).body).toBe('good 198.51.100.7\n');
    const proxied = await t.app.inject({
      method: 'GET',
      url: `/api/dyndns/update?hostname=home.${Z}&myip=`,
      headers: { authorization: basic(token), 'x-forwarded-for': '203.0.113.5' },
      remoteAddress: '127.0.0.1',
    });
    expect(proxied.body).toBe('good 203.0.113.5\n');
    // An untrusted peer's header is ignored.
    const direct = await t.app.inject({
      method: 'GET',
      url: `/api/dyndns?hostname=home.${Z}`,
      headers: { authorization: basic(token), 'x-forwarded-for': '203.0.113.6' },
      remoteAddress: '198.51.100.8',
    });
    expect(direct.body).toBe('good 198.51.100.8\n');
  });

  it('badauth for missing, unknown or other kinds of credentials; badrequest with field errors; dnserr at a CNAME', async () => {
    for (const authorization of [undefined, basic('sonar_ddns_unknown'), `Bearer ${alice.jwt}`, basic('wrong')]) {
      const res = await t.app.inject({ method: 'GET', url: `/nic/update?hostname=home.${Z}`, headers: authorization ? { authorization } : {} });
      expect(res.statusCode).toBe(401);
      expect(res.body).toBe('badauth\n');
      expect(res.headers['www-authenticate']).toMatch(/^Basic realm=/);
    }
    const bad = await update(`hostname=home.${Z}&myip=999.1.1.1`);
    expect(bad.statusCode).toBe(400);
    expect(bad.body).toMatch(/^badrequest\nmyip: "999\.1\.1\.1" is not an IPv4 or IPv6 address/);
    // Two IPv4 addresses: the message says so (both are valid addresses).
    const two = await update(`hostname=home.${Z}&myip=192.0.2.70,192.0.2.71`);
    expect(two.statusCode).toBe(400);
    expect(two.body).toBe(
      'badrequest\nmyip: holds two IPv4 addresses ("192.0.2.70" and "192.0.2.71"); give at most one IPv4 and one IPv6 address, comma-separated\n',
    );
    // A NUL (or a line break) the request sent is echoed escaped, never raw.
    const nul = await update(`hostname=home.${Z}&myip=1%00%0Ax`);
    expect(nul.statusCode).toBe(400);
    expect(nul.body.includes('\0')).toBe(false);
    expect(nul.body).toBe('badrequest\nmyip: "1\\u0000\\u000ax" is not an IPv4 or IPv6 address (at most one of each, comma-separated)\n');
    expect((await update('myip=192.0.2.1')).body).toBe('notfqdn\n');
    expect((await update(`hostname=cname.${Z}&myip=192.0.2.1`)).body).toBe('dnserr\n');
  });

  it('nohost once the owner lost write access to the zone', async () => {
    const name = randomName();
    const u = await t.accounts.createUser({ username: name });
    await t.accounts.grantZone(name, Z, { read: true, write: true });
    const jwt = (await t.app.inject({ method: 'POST', url: '/api/account/login', payload: { username: name, password: u.password } })).json().token;
    const secret = await tokenFor([`lost.${Z}`], jwt);
    expect((await update(`hostname=lost.${Z}&myip=192.0.2.50`, secret)).body).toBe('good 192.0.2.50\n');
    await t.accounts.grantZone(name, Z, { read: true, write: false });
    expect((await update(`hostname=lost.${Z}&myip=192.0.2.51`, secret)).body).toBe('nohost\n');
  });

  it('abuse after repeated identical updates, for the block time (injected clock)', async () => {
    let now = new Date('2030-01-01T00:00:00Z');
    const dns = new DnsService(t.orm, t.config);
    const svc = new DyndnsService(
      new DyndnsTokens(t.orm),
      dns,
      t.accounts,
      { ...t.config, DYNDNS_NOCHG_LIMIT: 2, DYNDNS_NOCHG_WINDOW_SECONDS: 600, DYNDNS_ABUSE_BLOCK_SECONDS: 3600 },
      () => now,
    );
    const user = (await t.accounts.findActiveUser(alice.id))!;
    const [row] = await t.orm.em
      .getConnection()
      .execute<Array<{ id: number }>>(`select id from dyndns_tokens where owner_id = ? order by id limit 1`, [alice.id]);
    const tokenId = Number(row!.id);
    const tick = (s: number) => (now = new Date(now.getTime() + s * 1000));
    expect(await svc.update(user, tokenId, `quick.${Z}`, { v4: '192.0.2.60' })).toEqual(['good 192.0.2.60']);
    tick(60);
    expect(await svc.update(user, tokenId, `quick.${Z}`, { v4: '192.0.2.60' })).toEqual(['nochg 192.0.2.60']);
    tick(60);
    expect(await svc.update(user, tokenId, `quick.${Z}`, { v4: '192.0.2.60' })).toEqual(['nochg 192.0.2.60']);
    tick(60);
    expect(await svc.update(user, tokenId, `quick.${Z}`, { v4: '192.0.2.60' })).toEqual(['abuse']);
    // Blocked: even a real change is refused until the block ends.
    tick(3000);
    expect(await svc.update(user, tokenId, `quick.${Z}`, { v4: '192.0.2.61' })).toEqual(['abuse']);
    expect(await dig(`quick.${Z}`, 'A')).toEqual(['192.0.2.60']);
    tick(700);
    expect(await svc.update(user, tokenId, `quick.${Z}`, { v4: '192.0.2.61' })).toEqual(['good 192.0.2.61']);
    // Identical updates far apart are what a forced periodic refresh looks like: no streak.
    for (let i = 0; i < 4; i++) {
      tick(3600);
      expect(await svc.update(user, tokenId, `quick.${Z}`, { v4: '192.0.2.61' })).toEqual(['nochg 192.0.2.61']);
    }
  });

  it('911 while the master is down, good again once it is back', async () => {
    await ns.signal('SIGSTOP');
    try {
      const res = await update(`hostname=home.${Z}&myip=192.0.2.70`);
      expect(res.statusCode).toBe(200);
      expect(res.body).toBe('911\n');
    } finally {
      await ns.signal('SIGCONT');
    }
    expect((await update(`hostname=home.${Z}&myip=192.0.2.70`)).body).toBe('good 192.0.2.70\n');
  }, 60_000);
});

describe('request rate', () => {
  it('over DYNDNS_RATE_LIMIT_PER_MINUTE the update paths answer 429 abuse together (one budget per address)', async () => {
    const small = await createTestApp({ env: { DYNDNS_RATE_LIMIT_PER_MINUTE: '2' } });
    try {
      const hit = (url: string) =>
        small.app.inject({ method: 'GET', url, headers: { authorization: basic('sonar_ddns_unknown') }, remoteAddress: '198.51.100.30' });
      expect((await hit(`/nic/update?hostname=a.${Z}`)).statusCode).toBe(401);
      expect((await hit(`/api/dyndns/update?hostname=a.${Z}`)).statusCode).toBe(401);
      const over = await hit(`/api/dyndns?hostname=a.${Z}`);
      expect(over.statusCode).toBe(429);
      expect(over.body).toBe('abuse\n');
      expect(over.headers['retry-after']).toBeDefined();
    } finally {
      await small.close();
    }
  }, 60_000);
});

describe('real clients', () => {
  it('ddclient (dyndns2, /nic/update) sets an A and then an AAAA record', async () => {
    // ddclient 3.10's dyndns2 sends one `myip`: usev4 feeds it an IPv4 address; an IPv6 one only
    // comes through the older `use=ip` (its usev6 does not reach dyndns2 yet).
    for (const [ip, use] of [
      ['192.0.2.20', 'usev4=ipv4, ipv4=192.0.2.20'],
      ['2001:db8::20', 'use=ip, ip=2001:db8::20'],
    ] as const) {
      const conf = path.join(dir, 'ddclient.conf');
      await writeFile(
        conf,
        [
          'daemon=0',
          'syslog=no',
          'ssl=no',
          'protocol=dyndns2',
          `server=127.0.0.1:${port}`,
          'script=/nic/update',
          'login=router',
          `password='${token}'`,
          use,
          `ddclient.${Z}`,
          '',
        ].join('\n'),
        { mode: 0o600 },
      );
      const out = await run('ddclient', ['-foreground', '-daemon=0', '-force', '-verbose', '-file', conf, '-cache', path.join(dir, 'ddclient.cache')], {
        timeout: 60_000,
      });
      const log = out.stdout + out.stderr;
      expect(log, log).toMatch(new RegExp(`SUCCESS:\\s+updating ddclient\\.dyn\\.test: good: IP address set to ${ip.replace(/\./g, '\\.')}`));
    }
    expect(await dig(`ddclient.${Z}`, 'A')).toEqual(['192.0.2.20']);
    expect(await dig(`ddclient.${Z}`, 'AAAA')).toEqual(['2001:db8::20']);
  }, 120_000);

  it('inadyn (custom dyndns2 provider, --once) sets the A record', async () => {
    const conf = path.join(dir, 'inadyn.conf');
    await writeFile(
      conf,
      [
        'custom sonar {',
        '  username = router',
        `  password = "${token}"`,
        `  ddns-server = "127.0.0.1:${port}"`,
        '  ddns-path = "/nic/update?hostname=%h&myip=%i"',
        '  ssl = false',
        '  checkip-command = "echo 192.0.2.30"',
        `  hostname = "inadyn.${Z}"`,
        '}',
        '',
      ].join('\n'),
      { mode: 0o600 },
    );
    const out = await run(
      INADYN,
      ['--once', '--foreground', '--force', '--no-pidfile', '-l', 'debug', '-f', conf, '--cache-dir', path.join(dir, 'inadyn-cache')],
      { timeout: 60_000 },
    ).catch((err: unknown) => {
      const e = err as { stdout?: string; stderr?: string; message?: string };
      return { stdout: e.stdout ?? '', stderr: e.stderr ?? e.message ?? '' };
    });
    const log = out.stdout + out.stderr;
    expect(await dig(`inadyn.${Z}`, 'A'), log).toEqual(['192.0.2.30']);
    expect(log).toMatch(/good 192\.0\.2\.30/);
  }, 120_000);
});
