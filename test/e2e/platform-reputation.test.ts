import { createSocket } from 'node:dgram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DnsblClient, reversedAddress } from '../../coordinator/src/platform/reputation/dnsbl.js';
import { ReputationService, parseTarget } from '../../coordinator/src/platform/reputation/reputation-service.js';
import { startNamed, type NamedServer } from '../support/bind.js';
import { browserLogin, createTestApp, extractCsrf, randomName, type TestApp } from '../support/harness.js';

/**
 * Reputation of public things: community reports (deduplicated per reporter, weighted, decaying
 * with an injected clock) and DNS blocklists asked the RFC 5782 way, served by a real named with a
 * domain list and an IP list; people and profiles are refused.
 */
let ns: NamedServer;
let t: TestApp;
let resolver: string;
const V6 = '2001:db8::bad';

async function jwtOf(isAdmin = false) {
  const name = randomName();
  const { user, password } = await t.accounts.createUser({ username: name, isAdmin });
  const res = await t.app.inject({ method: 'POST', url: '/api/account/login', payload: { username: name, password } });
  return { id: user.id, name, password, jwt: res.json().token as string };
}

const lookup = (query: string) => t.app.inject({ method: 'GET', url: `/api/reputation?${query}`, remoteAddress: '198.51.100.20' });
const report = (jwt: string, payload: Record<string, unknown>, url = '/api/reputation/reports') =>
  t.app.inject({ method: 'POST', url, headers: { authorization: `Bearer ${jwt}` }, payload });

beforeAll(async () => {
  ns = await startNamed({
    zones: [
      {
        name: 'dbl.test',
        records: [
          { name: 'phish.example.dbl.test', type: 'A', rdata: '127.0.0.2' },
          { name: 'phish.example.dbl.test', type: 'TXT', rdata: '"Phishing site, listing 42"' },
          { name: 'odd.example.dbl.test', type: 'A', rdata: '192.0.2.1' },
          { name: 'refused.example.dbl.test', type: 'A', rdata: '127.255.255.254' },
        ],
      },
      {
        name: 'ipbl.test',
        records: [
          { name: '2.2.0.192.ipbl.test', type: 'A', rdata: '127.0.0.4' },
          { name: '2.2.0.192.ipbl.test', type: 'TXT', rdata: '"Botnet controller"' },
          { name: `${reversedAddress(V6)}.ipbl.test`, type: 'A', rdata: '127.0.0.3' },
        ],
      },
    ],
  });
  resolver = `127.0.0.1:${ns.port}`;
  t = await createTestApp({
    env: {
      REPUTATION_DNSBLS: 'dbl.test:domain, ipbl.test:ip',
      REPUTATION_DNS_RESOLVER: resolver,
      REPUTATION_DNS_TIMEOUT_MS: '1500',
      REPUTATION_REPORTS_PER_HOUR: '4',
    },
  });
}, 120_000);

afterAll(async () => {
  await t?.close();
  await ns?.stop();
});

describe('RFC 5782 query names', () => {
  it('reverses IPv4 octets and IPv6 nibbles', () => {
    expect(reversedAddress('192.0.2.99')).toBe('99.2.0.192');
    // RFC 5782 §2.4's example address.
    expect(reversedAddress('2001:db8:1:2:3:4:567:89ab')).toBe('b.a.9.8.7.6.5.0.4.0.0.0.3.0.0.0.2.0.0.0.1.0.0.0.8.b.d.0.1.0.0.2');
    expect(reversedAddress('::1')).toBe(`1.${Array(31).fill('0').join('.')}`);
  });
});

describe('GET /api/reputation', () => {
  it('a domain on the domain list is bad, with the 127.0.0.x code and the TXT reason', async () => {
    const res = await lookup('type=domain&target=Phish.Example.');
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ ok: true, target: { type: 'domain', value: 'phish.example' }, verdict: 'bad', complete: true });
    expect(body.blocklists).toEqual([
      { list: 'dbl.test', kind: 'domain', query: 'phish.example.dbl.test', status: 'listed', codes: ['127.0.0.2'], reasons: ['Phishing site, listing 42'] },
      { list: 'ipbl.test', kind: 'ip', query: null, status: 'not_applicable', codes: [], reasons: [] },
    ]);
  });

  it('URLs are checked by their host: a listed IPv4 and IPv6 host, and a clean domain', async () => {
    const v4 = (await lookup(`target=${encodeURIComponent('http://192.0.2.2/landing#x')}`)).json();
    expect(v4).toMatchObject({ target: { type: 'url', value: 'http://192.0.2.2/landing' }, verdict: 'bad' });
    expect(v4.blocklists[1]).toMatchObject({ query: '2.2.0.192.ipbl.test', status: 'listed', codes: ['127.0.0.4'], reasons: ['Botnet controller'] });
    const v6 = (await lookup(`type=ip&target=${encodeURIComponent('2001:DB8:0::BAD')}`)).json();
    expect(v6).toMatchObject({ target: { type: 'ip', value: V6 }, verdict: 'bad' });
    expect(v6.blocklists[1].codes).toEqual(['127.0.0.3']);
    const clean = (await lookup(`type=post&target=${encodeURIComponent('https://news.example/2026/11/a-post')}`)).json();
    expect(clean).toMatchObject({ verdict: 'clean', complete: true });
    expect(clean.blocklists[0]).toMatchObject({ query: 'news.example.dbl.test', status: 'not_listed' });
  });

  it('answers outside 127.0.0.0/8 and 127.255.255.x refusals are unavailable, never listed or clean', async () => {
    for (const d of ['odd.example', 'refused.example']) {
      const body = (await lookup(`type=domain&target=${d}`)).json();
      expect(body).toMatchObject({ verdict: 'unknown', complete: false });
      expect(body.blocklists[0]).toMatchObject({ status: 'unavailable', error: expect.stringContaining('not a listing') });
    }
    // A list the resolver refuses to answer for.
    const client = new DnsblClient([{ zone: 'nowhere.test', kind: 'domain' }], resolver, 1500);
    expect((await client.check({ domain: 'a.example' }))[0]).toMatchObject({ status: 'unavailable', error: expect.stringMatching(/REFUSED|SERVFAIL/) });
  });

  it('a list that times out is reported unavailable (verdict unknown), not clean', async () => {
    // A resolver that takes the queries and never answers: a bound UDP socket that drops them (a
    // SIGSTOPped named was used here before; once in a loaded CI run an answer still came back).
    const hole = createSocket('udp4');
    hole.on('message', () => {});
    await new Promise<void>((resolve) => hole.bind(0, '127.0.0.1', resolve));
    try {
      const silent = new DnsblClient([{ zone: 'dbl.test', kind: 'domain' }], `127.0.0.1:${hole.address().port}`, 500);
      const svc = new ReputationService(t.orm, silent, { REPUTATION_REPORT_HALF_LIFE_DAYS: 10, REPUTATION_REPORTS_PER_HOUR: 100 });
      const body = await svc.lookup(parseTarget('domain', 'quiet.example'));
      expect(body).toMatchObject({ verdict: 'unknown', complete: false });
      expect(body.blocklists[0]).toMatchObject({ status: 'unavailable', error: expect.stringContaining('ETIMEOUT') });
    } finally {
      hole.close();
    }
    // The same question to the real list: not listed, so clean.
    expect((await lookup('type=domain&target=quiet.example')).json().verdict).toBe('clean');
  }, 30_000);

  it('people and profiles are 422 with the reason; bad input is 422 with field errors', async () => {
    for (const q of [
      'type=person&target=alice',
      'type=profile&target=alice',
      `target=${encodeURIComponent('alice@example.org')}`,
      `target=${encodeURIComponent('mailto:alice@example.org')}`,
      `type=url&target=${encodeURIComponent('https://social.example/@alice')}`,
      `type=url&target=${encodeURIComponent('https://site.example/users/alice/')}`,
    ]) {
      const res = await lookup(q);
      expect(res.statusCode, q).toBe(422);
      expect(res.json()).toMatchObject({ ok: false, reason: 'validation_failed' });
      expect(JSON.stringify(res.json().errors), q).toMatch(/never for people or profiles/);
    }
    // A post under a profile path is content, not the profile.
    expect((await lookup(`type=post&target=${encodeURIComponent('https://social.example/@alice/113')}`)).statusCode).toBe(200);
    const bad = await lookup('type=domain&target=not_a..domain');
    expect(bad.statusCode).toBe(422);
    expect(bad.json().errors.target[0]).toMatch(/not a domain name/);
    expect((await lookup('type=planet&target=mars.example')).json().errors.type[0]).toMatch(/must be one of/);
    expect((await lookup('type=domain')).json().errors.target).toBeDefined();
  });

  it('the older path /api/reputation/lookup is an alias', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/reputation/lookup?type=domain&target=phish.example' });
    expect(res.json()).toMatchObject({ verdict: 'bad' });
  });
});

describe('community reports', () => {
  it('need a signed-in user; count once per reporter; administrators weigh 2; withdrawals and the audit trail', async () => {
    const target = { type: 'url', target: 'https://spam.example/offer' };
    expect((await t.app.inject({ method: 'POST', url: '/api/reputation/reports', payload: { ...target, category: 'spam' } })).statusCode).toBe(401);
    const a = await jwtOf();
    const first = await report(a.jwt, { ...target, category: 'spam', comment: 'bulk mail' });
    expect(first.statusCode, first.body).toBe(201);
    expect(first.json().report).toMatchObject({ target: { type: 'url', value: 'https://spam.example/offer' }, weight: 1, replaced: false });
    // The same reporter again replaces the first report (the older alias path works too).
    const again = await report(a.jwt, { ...target, category: 'scam' }, '/api/reputation/report');
    expect(again.json().report).toMatchObject({ replaced: true, category: 'scam' });
    let body = (await lookup(`type=url&target=${encodeURIComponent(target.target)}`)).json();
    expect(body.community).toMatchObject({ reporters: 1, categories: { scam: expect.closeTo(1, 2) } });
    expect(body.verdict).toBe('suspicious');

    const admin = await jwtOf(true);
    expect((await report(admin.jwt, { ...target, category: 'scam' })).json().report.weight).toBe(2);
    body = (await lookup(`type=url&target=${encodeURIComponent(target.target)}`)).json();
    expect(body.community.reporters).toBe(2);
    expect(body.community.score).toBeCloseTo(3, 2);
    expect(body.verdict).toBe('bad');

    const withdrawn = await t.app.inject({
      method: 'DELETE',
      url: `/api/reputation/reports/${first.json().report.id}`,
      headers: { authorization: `Bearer ${admin.jwt}` },
    });
    expect(withdrawn.statusCode).toBe(404); // not the administrator's report
    const mine = await t.app.inject({
      method: 'DELETE',
      url: `/api/reputation/reports/${first.json().report.id}`,
      headers: { authorization: `Bearer ${a.jwt}` },
    });
    expect(mine.statusCode).toBe(200);
    expect((await lookup(`type=url&target=${encodeURIComponent(target.target)}`)).json().community.reporters).toBe(1);

    const audit = await t.app.inject({
      method: 'GET',
      url: `/api/reputation/audit?type=url&target=${encodeURIComponent(target.target)}`,
      headers: { authorization: `Bearer ${admin.jwt}` },
    });
    expect(audit.statusCode).toBe(200);
    expect(audit.json().entries.map((e: { action: string; actor: string }) => `${e.action}:${e.actor}`)).toEqual([
      `withdraw:${a.name}`,
      `report:${admin.name}`,
      `replace:${a.name}`,
      `report:${a.name}`,
    ]);
    expect(
      (await t.app.inject({ method: 'GET', url: `/api/reputation/audit?type=url&target=x.example`, headers: { authorization: `Bearer ${a.jwt}` } })).statusCode,
    ).toBe(403);
  });

  it('reports of people are refused; a browser session needs the CSRF token', async () => {
    const a = await jwtOf();
    const res = await report(a.jwt, { type: 'user', target: 'bob', category: 'abuse' });
    expect(res.statusCode).toBe(422);
    expect(res.json().errors.type[0]).toMatch(/names a person or profile/);
    expect((await report(a.jwt, { type: 'domain', target: 'x.example', category: 'nonsense' })).json().errors.category).toBeDefined();
    const { jar } = await browserLogin(t.app, a.name, a.password);
    const payload = { type: 'domain', target: 'csrf.example', category: 'spam' };
    expect((await t.app.inject({ method: 'POST', url: '/api/reputation/reports', headers: { cookie: jar.header() }, payload })).statusCode).toBe(403);
    const csrf = extractCsrf((await t.app.inject({ method: 'GET', url: '/account', headers: { cookie: jar.header() } })).body);
    expect(
      (await t.app.inject({ method: 'POST', url: '/api/reputation/reports', headers: { cookie: jar.header(), 'x-csrf-token': csrf }, payload })).statusCode,
    ).toBe(201);
  });

  it('each user may report REPUTATION_REPORTS_PER_HOUR times an hour (429 beyond)', async () => {
    const a = await jwtOf();
    for (let i = 0; i < 4; i++) expect((await report(a.jwt, { type: 'domain', target: `r${i}.example`, category: 'spam' })).statusCode).toBe(201);
    const over = await report(a.jwt, { type: 'domain', target: 'r9.example', category: 'spam' });
    expect(over.statusCode).toBe(429);
    expect(over.json()).toMatchObject({ ok: false, reason: 'rate_limited' });
    expect(over.headers['retry-after']).toBeDefined();
    // Another user has a budget of their own.
    expect((await report((await jwtOf()).jwt, { type: 'domain', target: 'r9.example', category: 'spam' })).statusCode).toBe(201);
  });

  it('reports decay with age (half-life, injected clock) and a renewed report counts afresh', async () => {
    let now = new Date('2031-03-01T00:00:00Z');
    const svc = new ReputationService(
      t.orm,
      new DnsblClient([], '', 1000),
      { REPUTATION_REPORT_HALF_LIFE_DAYS: 10, REPUTATION_REPORTS_PER_HOUR: 100 },
      () => now,
    );
    const target = parseTarget('content', 'Buy cheap watches now!!!');
    expect(target.value).toMatch(/^sha256:[0-9a-f]{64}$/);
    const users = await Promise.all([0, 1, 2].map(async () => (await t.accounts.findActiveUser((await jwtOf()).id))!));
    for (const u of users) await svc.report(u, target, 'spam', '', '192.0.2.1');
    expect((await svc.lookup(target)).community.score).toBeCloseTo(3, 3);
    expect((await svc.lookup(target)).verdict).toBe('bad');
    now = new Date('2031-03-11T00:00:00Z'); // one half-life
    expect((await svc.lookup(target)).community.score).toBeCloseTo(1.5, 3);
    expect((await svc.lookup(target)).verdict).toBe('suspicious');
    now = new Date('2031-04-10T00:00:00Z'); // four half-lives
    expect((await svc.lookup(target)).community.score).toBeCloseTo(3 / 16, 2);
    expect((await svc.lookup(target)).verdict).toBe('clean');
    await svc.report(users[0]!, target, 'spam', 'still spamming', '192.0.2.1');
    expect((await svc.lookup(target)).community).toMatchObject({ reporters: 3, score: expect.closeTo(1 + 2 / 16, 2) });
  });
});
