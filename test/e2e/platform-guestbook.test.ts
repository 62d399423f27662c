import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedBucketKey } from '../../coordinator/src/http/rate-limits.js';
import { browserLogin, createJwtUser, createTestApp, extractCsrf, type TestApp, type TestUser } from '../support/harness.js';
import { freePort } from '../support/processes.js';
import { startSpamd, type SpamdServer } from '../support/spamd.js';

/**
 * Guestbooks against a real SpamAssassin spamd (local rules): ham is published at once, GTUBE is
 * held, spamd down holds the entry with spam status `unavailable` (never published unscored), the
 * honeypot answers like a held entry and stores nothing, the 61st submission in a minute is 429,
 * and the owner moderates through the API and the no-JS pages.
 */
let spamd: SpamdServer;
let t: TestApp;
let down: TestApp;
let owner: TestUser;
let stranger: TestUser;
let bookId: number;

const GTUBE = 'XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X';
const HAM = 'Lovely evening at your concert on Friday. The second set with the string quartet was our favourite; see you next spring!';

beforeAll(async () => {
  spamd = await startSpamd();
  t = await createTestApp({ env: { SPAMD_PORT: String(spamd.port), SPAMD_TIMEOUT_MS: '60000' } });
  // A second coordinator whose spamd is not there.
  down = await createTestApp({ env: { SPAMD_PORT: String(await freePort()) } });
  owner = await createJwtUser(t, []);
  stranger = await createJwtUser(t, []);
}, 120_000);
afterAll(async () => {
  await t?.close();
  await down?.close();
  await spamd?.stop();
});

let client = 0;
/** Each submission from its own address unless one is given: the rate-limit test has its own. */
const sign = (app: TestApp, slug: string, body: Record<string, string>, remoteAddress = `198.51.100.${(++client % 250) + 1}`) =>
  app.app.inject({ method: 'POST', url: `/guestbook/${slug}/entries`, payload: body, remoteAddress });

const entries = async (app: TestApp, who: TestUser, id: number, status?: string) =>
  (await app.app.inject({ method: 'GET', url: `/api/guestbooks/${id}/entries${status ? `?status=${status}` : ''}`, headers: who.auth })).json()
    .entries as Array<{
    id: number;
    name: string;
    message: string;
    status: string;
    spam: { status: string; verdict: string | null; score: number | null; rules: Array<{ name: string }> };
  }>;

describe('guestbooks on a real spamd', () => {
  it('an owner creates a guestbook (slug unique, profile must be theirs)', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/api/guestbooks', headers: owner.auth, payload: { slug: 'concerts', title: 'Concert guestbook' } });
    expect(res.statusCode, res.body).toBe(201);
    bookId = res.json().guestbook.id;
    expect(res.json().guestbook).toMatchObject({ slug: 'concerts', hold_all: false, owner: owner.name, pending: 0, published: 0 });
    const dup = await t.app.inject({ method: 'POST', url: '/api/guestbooks', headers: stranger.auth, payload: { slug: 'concerts', title: 'x' } });
    expect(dup.json()).toMatchObject({ reason: 'validation_failed', errors: { slug: [expect.any(String)] } });
    const profile = await t.app.inject({
      method: 'POST',
      url: '/api/guestbooks',
      headers: stranger.auth,
      payload: { slug: 'pp', title: 'x', spam_profile_id: 999 },
    });
    expect(profile.json().errors).toHaveProperty('spam_profile_id');
    expect((await t.app.inject({ method: 'GET', url: `/api/guestbooks/${bookId}/entries`, headers: stranger.auth })).statusCode).toBe(404);
  });

  it('ham is scored and published at once; GTUBE is held as spam', async () => {
    const ham = await sign(t, 'concerts', { name: 'Åsa Lind', message: HAM });
    expect(ham.statusCode, ham.body).toBe(202);
    expect(ham.json()).toMatchObject({ ok: true, status: 'published' });
    const spam = await sign(t, 'concerts', { name: 'Winner', message: `Claim your prize now!\n${GTUBE}` });
    expect(spam.json()).toMatchObject({ ok: true, status: 'pending' });

    const pub = (await t.app.inject({ method: 'GET', url: '/api/guestbook/concerts/entries' })).json();
    expect(pub).toMatchObject({ ok: true, guestbook: { slug: 'concerts', title: 'Concert guestbook' }, total: 1 });
    expect(pub.entries).toEqual([{ id: expect.any(Number), name: 'Åsa Lind', message: HAM, created_at: expect.any(String) }]);
    expect(JSON.stringify(pub)).not.toMatch(/GTUBE|spam|client_ip/);

    const held = await entries(t, owner, bookId, 'pending');
    expect(held).toHaveLength(1);
    expect(held[0]).toMatchObject({ name: 'Winner', status: 'pending', spam: { verdict: 'spam', status: 'degraded' } });
    expect(held[0]!.spam.score).toBeGreaterThanOrEqual(1000);
    expect(held[0]!.spam.rules.map((r) => r.name)).toContain('GTUBE');
    const published = await entries(t, owner, bookId, 'published');
    expect(published[0]!.spam).toMatchObject({ verdict: 'ham', status: 'degraded' });
    expect(published[0]!.spam.score).toBeLessThan(5);
  });

  it('the owner approves, rejects and deletes entries; other users cannot', async () => {
    const [held] = await entries(t, owner, bookId, 'pending');
    expect((await t.app.inject({ method: 'POST', url: `/api/guestbooks/${bookId}/entries/${held!.id}/approve`, headers: stranger.auth })).statusCode).toBe(404);
    const approve = await t.app.inject({ method: 'POST', url: `/api/guestbooks/${bookId}/entries/${held!.id}/approve`, headers: owner.auth });
    expect(approve.statusCode, approve.body).toBe(200);
    expect(approve.json().entry).toMatchObject({ status: 'published', moderated_by: owner.name });
    expect((await t.app.inject({ method: 'GET', url: '/api/guestbook/concerts/entries' })).json().total).toBe(2);
    const reject = await t.app.inject({ method: 'POST', url: `/api/guestbooks/${bookId}/entries/${held!.id}/reject`, headers: owner.auth });
    expect(reject.json().entry.status).toBe('rejected');
    expect((await t.app.inject({ method: 'GET', url: '/api/guestbook/concerts/entries' })).json().total).toBe(1);
    expect((await t.app.inject({ method: 'DELETE', url: `/api/guestbooks/${bookId}/entries/${held!.id}`, headers: owner.auth })).statusCode).toBe(200);
    expect((await entries(t, owner, bookId, 'rejected')).length).toBe(0);
  });

  it('a guestbook that holds everything holds ham too; the owner can change that', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/guestbooks',
      headers: owner.auth,
      payload: { slug: 'strict', title: 'Strict', hold_all: true },
    });
    const id = res.json().guestbook.id;
    expect((await sign(t, 'strict', { name: 'Per', message: HAM })).json().status).toBe('pending');
    expect((await entries(t, owner, id))[0]).toMatchObject({ status: 'pending', spam: { verdict: 'ham' } });
    const patch = (who: TestUser, payload: Record<string, unknown>) =>
      t.app.inject({ method: 'PATCH', url: `/api/guestbooks/${id}`, headers: who.auth, payload });
    expect((await patch(stranger, { hold_all: false })).statusCode).toBe(404);
    expect((await patch(owner, { hold_all: false, title: 'Open' })).json().guestbook).toMatchObject({
      slug: 'strict',
      title: 'Open',
      hold_all: false,
      pending: 1,
    });
    expect((await sign(t, 'strict', { name: 'Per', message: HAM })).json().status).toBe('published');
    expect((await patch(owner, { spam_profile_id: 424242 })).json().errors).toHaveProperty('spam_profile_id');
    // Beyond PostgreSQL's integer: a 422 too, not a 500.
    expect((await patch(owner, { spam_profile_id: 2147483649 })).json().errors).toHaveProperty('spam_profile_id');
  });

  it('a filled honeypot looks accepted but nothing is stored', async () => {
    const before = (await entries(t, owner, bookId)).length;
    const res = await sign(t, 'concerts', { name: 'Bot', message: 'Great site', website: 'http://casino.example' });
    expect(res.statusCode).toBe(202);
    expect(res.json()).toMatchObject({ ok: true, status: 'pending' });
    expect((await entries(t, owner, bookId)).length).toBe(before);
    // The form post alike: the same redirect as a held entry.
    const form = await t.app.inject({
      method: 'POST',
      url: '/guestbook/concerts/entries',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ name: 'Bot', message: 'hi', website: 'x' }).toString(),
    });
    expect(form.statusCode).toBe(303);
    expect(form.headers.location).toBe('/guestbook/concerts?submitted=pending#sign');
    expect((await entries(t, owner, bookId)).length).toBe(before);
  });

  it('spamd unavailable: the entry is held with spam status unavailable, never published unscored', async () => {
    const u = await createJwtUser(down, []);
    const book = await down.app.inject({ method: 'POST', url: '/api/guestbooks', headers: u.auth, payload: { slug: 'offline', title: 'Offline' } });
    const res = await sign(down, 'offline', { name: 'Åsa', message: HAM });
    expect(res.statusCode, res.body).toBe(202);
    expect(res.json().status).toBe('pending');
    expect((await down.app.inject({ method: 'GET', url: '/api/guestbook/offline/entries' })).json().total).toBe(0);
    const [held] = await entries(down, u, book.json().guestbook.id);
    expect(held).toMatchObject({ status: 'pending', spam: { status: 'unavailable', verdict: null, score: null, rules: [] } });
  });

  it('validation: 422 with field errors (JSON), the page again with the message (form); unknown guestbook 404', async () => {
    const bad = await sign(t, 'concerts', { name: '', message: 'x' });
    expect(bad.statusCode).toBe(422);
    expect(bad.json()).toMatchObject({ ok: false, reason: 'validation_failed', errors: { name: [expect.any(String)] } });
    const form = await t.app.inject({
      method: 'POST',
      url: '/guestbook/concerts/entries',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: 'name=&message=hello',
    });
    expect(form.statusCode).toBe(422);
    expect(form.body).toContain('id="form-error"');
    expect(form.body).toContain('id="guestbook-form"');
    expect((await sign(t, 'missing', { name: 'a', message: 'b' })).json()).toMatchObject({ ok: false, reason: 'not_found' });
  });

  it('61 submissions in one counting window: the 61st is 429 rate_limited with Retry-After', async () => {
    const ip = '203.0.113.61';
    const key = sharedBucketKey(t.config.REDIS_KEY_PREFIX, 'guestbook', ip);
    // Honeypot submissions are cheap (no scoring) and count like any other.
    const submit = (i: number) => sign(t, 'concerts', { name: `n${i}`, message: 'm', website: 'x' }, ip);
    expect((await submit(1)).statusCode).toBe(202);
    // The first submission opened the limiter's counting window (60 s) under its own key: stretch
    // that window to an hour, so the submissions below can never straddle its end on a slow machine.
    expect(await t.redis.pexpire(key, 3_600_000)).toBe(1);
    for (let i = 2; i <= 60; i++) expect((await submit(i)).statusCode, `submission ${i}`).toBe(202);
    expect(await t.redis.get(key)).toBe('60');
    expect(await t.redis.pttl(key)).toBeGreaterThan(60_000);
    const over = await sign(t, 'concerts', { name: 'n61', message: HAM }, ip);
    expect(over.statusCode).toBe(429);
    expect(over.json()).toMatchObject({ ok: false, reason: 'rate_limited' });
    expect(Number(over.headers['retry-after'])).toBeGreaterThan(0);
    // The budget is per client: another address still signs.
    expect((await sign(t, 'concerts', { name: 'Other', message: HAM }, '203.0.113.62')).statusCode).toBe(202);
  }, 120_000);

  it('owner pages: create a guestbook and moderate without JavaScript, with CSRF', async () => {
    const { jar } = await browserLogin(t.app, owner.name, owner.password);
    const list = await t.app.inject({ method: 'GET', url: '/guestbooks', headers: { cookie: jar.header() } });
    expect(list.body).toContain('Concert guestbook');
    const csrf = extractCsrf(list.body);
    const form = (url: string, fields: Record<string, string>) =>
      t.app.inject({
        method: 'POST',
        url,
        headers: { cookie: jar.header(), 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams(fields).toString(),
      });
    expect((await form('/guestbooks', { slug: 'paged', title: 'Paged' })).statusCode).toBe(403);
    const created = await form('/guestbooks', { _csrf: csrf, slug: 'paged', title: 'Paged' });
    expect(created.statusCode).toBe(303);
    const at = String(created.headers.location);
    const NAME = 'Spammer <script>alert(1)</script>';
    await sign(t, 'paged', { name: NAME, message: GTUBE });
    const page = await t.app.inject({ method: 'GET', url: at, headers: { cookie: jar.header() } });
    expect(page.body).toContain('Spammer');
    const approve = /action="([^"]+\/approve)"/.exec(page.body)![1]!;
    expect((await form(approve, { _csrf: csrf })).statusCode).toBe(303);
    expect((await t.app.inject({ method: 'GET', url: '/api/guestbook/paged/entries' })).json().entries[0].name).toBe(NAME);
    // Published on the public page, escaped.
    const pub = (await t.app.inject({ method: 'GET', url: '/guestbook/paged' })).body;
    expect(pub).toContain('Spammer &lt;script&gt;alert(1)&lt;/script&gt;');
    expect(pub).not.toContain('<script>alert(1)');
    const other = await browserLogin(t.app, stranger.name, stranger.password);
    expect((await t.app.inject({ method: 'GET', url: at, headers: { cookie: other.jar.header() } })).statusCode).toBe(404);
  });
});
