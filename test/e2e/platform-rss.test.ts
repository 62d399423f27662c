import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { linkedFeeds } from '../../coordinator/src/platform/rss/feed-resolver.js';
import { browserLogin, createJwtUser, createTestApp, extractCsrf, type TestApp, type TestUser } from '../support/harness.js';
import { freePort } from '../support/processes.js';

/**
 * POST /api/rss/resolve-source against a local HTTP server serving real-world shaped fixtures: a
 * WordPress-style RSS 2.0 feed, an Atom feed, an RSS 1.0 (RDF) feed, a JSON Feed, HTML pages that
 * link their feeds (relative hrefs, <base>), a page that links none but has /feed at its root,
 * redirects, broken feeds, an oversized body, server errors — through the real outbound policy.
 */
let t: TestApp;
let user: TestUser;
let site: Server;
let base: string;
const hits: string[] = [];

const RSS = `<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0" xmlns:content="http://purl.org/rss/1.0/modules/content/" xmlns:atom="http://www.w3.org/2005/Atom">
<channel>
  <title>Example Garden Blog</title>
  <atom:link href="https://garden.example/feed/" rel="self" type="application/rss+xml" />
  <link>https://garden.example</link>
  <description>Notes from a small garden</description>
  <lastBuildDate>Mon, 23 Nov 2026 09:12:44 +0000</lastBuildDate>
  <language>en-US</language>
  <generator>https://wordpress.org/?v=6.6</generator>
  <item><title>Planting garlic in November</title><link>https://garden.example/2026/11/garlic/</link>
    <pubDate>Mon, 23 Nov 2026 09:12:44 +0000</pubDate><guid isPermaLink="false">https://garden.example/?p=412</guid>
    <description><![CDATA[<p>Cloves go in pointy end up &#8230;</p>]]></description></item>
  <item><title>Leaf mould, a year later</title><link>https://garden.example/2026/11/leaf-mould/</link>
    <pubDate>Tue, 10 Nov 2026 18:01:02 +0000</pubDate><guid isPermaLink="false">https://garden.example/?p=409</guid></item>
  <item><title>Rain gauge results</title><link>https://garden.example/2026/10/rain/</link>
    <pubDate>Sat, 31 Oct 2026 07:45:00 +0000</pubDate><guid isPermaLink="false">https://garden.example/?p=401</guid></item>
</channel>
</rss>`;

const ATOM = `<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom">
  <title>Release notes</title>
  <link href="https://code.example/project/releases" rel="alternate" type="text/html"/>
  <link href="https://code.example/project/releases.atom" rel="self"/>
  <id>tag:code.example,2008:https://code.example/project/releases</id>
  <updated>2026-11-20T14:03:11Z</updated>
  <entry><id>tag:code.example,2008:Repository/1/v2.4.0</id><updated>2026-11-20T14:03:11Z</updated>
    <link rel="alternate" type="text/html" href="https://code.example/project/releases/tag/v2.4.0"/><title>v2.4.0</title>
    <content type="html">&lt;p&gt;Faster imports&lt;/p&gt;</content><author><name>maintainer</name></author></entry>
  <entry><id>tag:code.example,2008:Repository/1/v2.3.1</id><updated>2026-10-02T08:00:00Z</updated><title>v2.3.1</title></entry>
</feed>`;

const RDF = `<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/">
  <channel rdf:about="https://old.example/rss.rdf"><title>Old Portal</title><link>https://old.example/</link>
    <description>RSS 1.0</description><items><rdf:Seq><rdf:li resource="https://old.example/a"/></rdf:Seq></items></channel>
  <item rdf:about="https://old.example/a"><title>First</title><link>https://old.example/a</link></item>
</rdf:RDF>`;

const JSON_FEED = JSON.stringify({
  version: 'https://jsonfeed.org/version/1.1',
  title: 'Micro notes',
  home_page_url: 'https://micro.example/',
  feed_url: 'https://micro.example/feed.json',
  items: [
    { id: '1', content_text: 'Hello', date_published: '2026-11-01T10:00:00Z' },
    { id: '2', content_text: 'Again', date_published: '2026-11-02T10:00:00Z' },
  ],
});

const page = (head: string) =>
  `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>A page</title>${head}</head><body><h1>Hello</h1><a href="/feed">not a link tag</a></body></html>`;

const routes: Record<string, { type: string; body: string | Buffer; status?: number; location?: string }> = {
  '/blog/feed/': { type: 'application/rss+xml; charset=UTF-8', body: RSS },
  '/releases.atom': { type: 'application/atom+xml', body: ATOM },
  '/rss.rdf': { type: 'application/rdf+xml', body: RDF },
  '/feed.json': { type: 'application/feed+json', body: JSON_FEED },
  // A page that links an RSS and an Atom feed (relative to its <base>), plus a stylesheet and a dead feed link.
  '/blog/': {
    type: 'text/html',
    body: page(`<base href="/blog/"><link rel="stylesheet" href="/style.css">
      <link rel="alternate" type="application/rss+xml" title="Garden &raquo; Feed" href="feed/">
      <link rel="alternate" type="application/atom+xml" href="/releases.atom">
      <link rel="alternate" type="application/rss+xml" href="/gone.xml">
      <link rel="alternate" hreflang="sv" href="/sv/">`),
  },
  // No feed links: the resolver tries common paths at the root; /rss answers.
  '/plain/page.html': { type: 'text/html; charset=utf-8', body: page('<meta name="description" content="no feeds here">') },
  '/rss': { type: 'application/rss+xml', body: RSS },
  '/moved': { type: 'text/plain', body: '', status: 301, location: '/blog/feed/' },
  '/broken.xml': { type: 'application/rss+xml', body: '<rss version="2.0"><channel><title>cut off' },
  '/huge.xml': { type: 'application/rss+xml', body: Buffer.alloc(3 * 1024 * 1024, 0x20) },
  '/error': { type: 'text/plain', body: 'boom', status: 500 },
  '/missing': { type: 'text/plain', body: 'no', status: 404 },
};

async function resolve(url: string, headers: Record<string, string> = {}) {
  return t.app.inject({
    method: 'POST',
    url: '/api/rss/resolve-source',
    headers: { ...user.auth, accept: 'application/json', 'content-type': 'application/json', ...headers },
    payload: JSON.stringify({ url }),
  });
}

beforeAll(async () => {
  site = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    hits.push(req.url ?? '/');
    const r = routes[req.url ?? ''] ?? routes[path];
    if (!r) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    res.writeHead(r.status ?? 200, { 'content-type': r.type, ...(r.location ? { location: r.location } : {}) }).end(r.body);
  });
  await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
  // The fixtures live on loopback, which the outbound policy refuses unless allowed.
  t = await createTestApp({ env: { OUTBOUND_ALLOW_RANGES: '127.0.0.0/8' } });
  user = await createJwtUser(t, []);
});
afterAll(async () => {
  await t?.close();
  await new Promise((resolve) => site?.close(resolve));
});

describe('POST /api/rss/resolve-source', () => {
  it('returns the URL itself when it is a feed: RSS, Atom, RDF and JSON Feed, with title, site and item count', async () => {
    const cases = [
      ['/blog/feed/', { type: 'rss', title: 'Example Garden Blog', site_url: 'https://garden.example/', item_count: 3 }],
      ['/releases.atom', { type: 'atom', title: 'Release notes', site_url: 'https://code.example/project/releases', item_count: 2 }],
      ['/rss.rdf', { type: 'rdf', title: 'Old Portal', site_url: 'https://old.example/', item_count: 1 }],
      ['/feed.json', { type: 'json', title: 'Micro notes', site_url: 'https://micro.example/', item_count: 2 }],
    ] as const;
    for (const [path, feed] of cases) {
      const res = await resolve(base + path);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toEqual({
        ok: true,
        source_url: base + path,
        final_url: base + path,
        resolved_via: 'direct',
        feeds: [{ url: base + path, ...feed }],
        rejected: [],
      });
    }
  });

  it('finds the feeds a page links, resolved against <base>, and says which candidates were not feeds', async () => {
    const res = await resolve(`${base}/blog/`);
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body.resolved_via).toBe('link');
    expect(body.feeds.map((f: { url: string; type: string }) => [f.url, f.type])).toEqual([
      [`${base}/blog/feed/`, 'rss'],
      [`${base}/releases.atom`, 'atom'],
    ]);
    expect(body.rejected).toEqual([{ url: `${base}/gone.xml`, reason: `${base}/gone.xml: HTTP 404` }]);
  });

  it('falls back to common feed paths at the site root, and follows redirects', async () => {
    const plain = (await resolve(`${base}/plain/page.html`)).json();
    expect(plain).toMatchObject({ resolved_via: 'common_path', feeds: [{ url: `${base}/rss`, type: 'rss', item_count: 3 }] });
    expect(hits).toContain('/feed'); // tried first, 404, not reported as a rejection
    expect(plain.rejected).toEqual([]);
    const moved = (await resolve(`${base}/moved`)).json();
    expect(moved).toMatchObject({ resolved_via: 'direct', final_url: `${base}/blog/feed/`, feeds: [{ url: `${base}/blog/feed/`, type: 'rss' }] });
  });

  it('a broken feed is not a feed; nothing found is 200 with resolved_via none', async () => {
    // The site root's own feeds are taken away for this one.
    const saved = { rss: routes['/rss']!, json: routes['/feed.json']! };
    delete routes['/rss'];
    delete routes['/feed.json'];
    try {
      const res = await resolve(`${base}/broken.xml`);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toMatchObject({ resolved_via: 'none', feeds: [] });
    } finally {
      routes['/rss'] = saved.rss;
      routes['/feed.json'] = saved.json;
    }
  });

  it('the source’s own failures: 4xx, too large or refused by the address policy are 422; 5xx and unreachable are 502', async () => {
    const missing = await resolve(`${base}/missing`);
    expect(missing.statusCode).toBe(422);
    expect(missing.json()).toMatchObject({ ok: false, reason: 'validation_failed', errors: { url: [`${base}/missing: HTTP 404`] } });
    const huge = await resolve(`${base}/huge.xml`);
    expect(huge.statusCode).toBe(422);
    expect(huge.json().errors.url[0]).toMatch(/more than the 2097152 bytes allowed/);
    const error = await resolve(`${base}/error`);
    expect(error.statusCode).toBe(502);
    expect(error.json()).toMatchObject({ ok: false, reason: 'bad_gateway', message: expect.stringMatching(/HTTP 500/) });
    const unreachable = await resolve(`http://127.0.0.1:${await freePort()}/feed`);
    expect(unreachable.statusCode).toBe(502);
    expect(unreachable.json().message).toMatch(/ECONNREFUSED/);
    const privateAddress = await resolve('http://10.1.2.3/feed');
    expect(privateAddress.statusCode).toBe(422);
    expect(privateAddress.json().errors.url[0]).toMatch(/refused by the outbound policy/);
  });

  it('is JSON for programs only: a browser navigation is 406 (never a redirect); sign-in, CSRF and validation apply', async () => {
    const nav = await resolve(`${base}/blog/feed/`, { 'sec-fetch-mode': 'navigate', accept: 'text/html,application/xhtml+xml' });
    expect(nav.statusCode).toBe(406);
    expect(nav.headers.location).toBeUndefined();
    expect(nav.json()).toMatchObject({ ok: false, reason: 'not_acceptable' });
    expect((await resolve(`${base}/blog/feed/`, { accept: 'text/html' })).statusCode).toBe(406);
    const anonymous = await t.app.inject({
      method: 'POST',
      url: '/api/rss/resolve-source',
      headers: { 'content-type': 'application/json' },
      payload: '{"url":"https://a.example/"}',
    });
    expect(anonymous.statusCode).toBe(401);
    for (const url of ['not a url', 'ftp://files.example/feed', '']) {
      const bad = await resolve(url);
      expect(bad.statusCode, url).toBe(422);
      expect(bad.json().errors.url).toBeDefined();
    }
    // A browser session's fetch works with its CSRF token, not without.
    const { jar } = await browserLogin(t.app, user.name, user.password);
    const csrf = extractCsrf((await t.app.inject({ method: 'GET', url: '/account', headers: { cookie: jar.header() } })).body);
    const session = (extra: Record<string, string>) =>
      t.app.inject({
        method: 'POST',
        url: '/api/rss/resolve-source',
        headers: { cookie: jar.header(), accept: 'application/json', 'content-type': 'application/json', 'sec-fetch-mode': 'cors', ...extra },
        payload: JSON.stringify({ url: `${base}/feed.json` }),
      });
    expect((await session({})).statusCode).toBe(403);
    expect((await session({ 'x-csrf-token': csrf })).statusCode).toBe(200);
  });
});

describe('feed links in HTML', () => {
  it('reads rel=alternate links of feed types only, decoding entities, ignoring other links', () => {
    const html = `<html><head><LINK REL="Alternate" TYPE="application/atom+xml" HREF="/a.atom?x=1&amp;y=2">
      <link rel="alternate stylesheet" type="text/css" href="/alt.css"><link rel="alternate" type="application/json" href="https://x.example/f.json">
      <link rel="alternate" type="application/rss+xml" href="javascript:alert(1)"></head></html>`;
    expect(linkedFeeds(html, 'https://site.example/dir/page')).toEqual(['https://site.example/a.atom?x=1&y=2', 'https://x.example/f.json']);
  });
});
