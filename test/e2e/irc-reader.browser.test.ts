import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../coordinator/src/config.js';
import { IrcImportService } from '../../coordinator/src/irc/import-service.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { launchBrowser } from '../support/browser.js';
import { createTestDatabase, testEnv, type TestDatabase } from '../support/harness.js';

/**
 * The chat-log reader in Debian's chromium, read the way a visitor does: without JavaScript,
 * network → channel → calendar → day, the joins/parts toggle, a permalink, the search with its
 * highlights and a nick page; then the same pages with JavaScript on, checking that nothing in
 * the logs runs (no dialog) and that no CSP rule is broken. Screenshots go to
 * test-artifacts/screenshots/ for review.
 */
const SHOTS = path.resolve(import.meta.dirname, '../../test-artifacts/screenshots');
const DAY1 = [
  '[10:00:00] *** Joins: alice (~a@host)',
  '[10:00:05] <alice> hello world, the docs are at https://example.org/docs',
  '[10:00:10] <bob> alice: <script>alert("xss")</script> <img src=x onerror=alert(2)>',
  '[10:00:20] * alice waves at bob',
  '[10:01:00] *** alice is now known as alice_away',
  '[10:02:00] <alice_away> still here, reading the world news',
  '[10:03:00] *** Quits: carol (~c@h) (*.net *.split)',
  '[10:03:01] *** Quits: dave (~d@h) (*.net *.split)',
  '[10:03:02] *** Quits: erin (~e@h) (*.net *.split)',
  '[10:04:00] *** Parts: frank (~f@h) (bye now)',
  '[10:05:00] <bob> try javascript:alert(3) if you dare',
].join('\n');
const DAY2 = ['[09:00:00] <alice_away> good morning world', '[09:30:00] <bob> release notes are out'].join('\n');

const dir = mkdtempSync(path.join(tmpdir(), 'sonar-irc-reader-'));
let db: TestDatabase;
let svc: RunningCoordinator;
let browser: Browser;

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  db = await createTestDatabase();
  svc = await startCoordinator(loadConfig(testEnv(db, { IRC_API_RATE_LIMIT_MAX: '100000' })));
  mkdirSync(path.join(dir, 'logs'));
  writeFileSync(path.join(dir, 'logs', '#lab_20240310.log'), DAY1);
  writeFileSync(path.join(dir, 'logs', '#lab_20240311.log'), DAY2);
  await new IrcImportService(svc.orm).importPaths([path.join(dir, 'logs')], { network: 'testnet', source: 'production' });
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await svc?.close();
  await db?.drop();
  rmSync(dir, { recursive: true, force: true });
});

const shot = (page: Page, name: string) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
const visibleText = (page: Page) => page.innerText('main');

async function context(javaScriptEnabled: boolean): Promise<{ context: BrowserContext; problems: string[] }> {
  const ctx = await browser.newContext({ javaScriptEnabled, viewport: { width: 1280, height: 900 } });
  const problems: string[] = [];
  await ctx.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (e) => console.error(`CSP violation: ${e.violatedDirective} ${e.blockedURI}`));
  });
  ctx.on('console', (m) => {
    // The 404 page's own status is reported as a failed load; anything else (a broken CSP rule, an image from a log) counts.
    if (m.type() === 'error' && !/status of 404/.test(m.text())) problems.push(m.text());
  });
  ctx.on('page', (p) => p.on('dialog', (d) => void (problems.push(`dialog: ${d.message()}`), d.dismiss())));
  return { context: ctx, problems };
}

describe('chat-log reader in chromium', { timeout: 120_000 }, () => {
  it('reads network → channel → calendar → day without JavaScript, toggles joins, follows a permalink, searches and opens a nick page', async () => {
    const { context: ctx } = await context(false);
    const page = await ctx.newPage();
    await page.goto(`${svc.url}/irc`);
    expect(await page.title()).toContain('Chat logs');
    await shot(page, 'irc-networks');

    await page.click('#irc-networks a:text-is("testnet")');
    expect(new URL(page.url()).pathname).toBe('/irc/net/testnet');
    await page.click('#irc-channels a:text-is("#lab")');
    expect(new URL(page.url()).pathname).toBe('/irc/net/testnet/%23lab');
    expect(await visibleText(page)).toContain('March 2024');
    await shot(page, 'irc-calendar');

    await page.click('a[data-day="2024-03-10"]');
    expect(new URL(page.url()).pathname).toBe('/irc/net/testnet/%23lab/2024-03-10');
    let text = await visibleText(page);
    expect(text).toContain('hello world');
    expect(text).not.toContain('joined');
    expect(text).not.toContain('bye now');
    // The hostile message is text on the page.
    expect(text).toContain('<script>alert("xss")</script>');
    expect(await page.$$eval('main script, main img', (els) => els.length)).toBe(0);
    // Only the http(s) URL is a link, with the safe rel.
    const links = await page.$$eval('td.msg a[rel]', (as) => as.map((a) => [a.getAttribute('href'), a.getAttribute('rel')]));
    expect(links).toEqual([['https://example.org/docs', 'nofollow noopener ugc']]);
    // The netsplit is one line that opens to the nicks.
    expect(await page.locator('tr.ev-netsplit').count()).toBe(1);
    expect(await page.locator('tr.ev-netsplit summary').innerText()).toContain('3 nicks quit');
    expect(await page.locator('tr.ev-netsplit a:text-is("dave")').isVisible()).toBe(false);
    await page.click('tr.ev-netsplit summary');
    expect(await page.locator('tr.ev-netsplit a:text-is("dave")').isVisible()).toBe(true);
    await shot(page, 'irc-day');

    await page.click('#presence-toggle');
    expect(new URL(page.url()).search).toBe('?all=1');
    text = await visibleText(page);
    expect(text).toContain('alice joined');
    expect(text).toContain('frank left (bye now)');
    await shot(page, 'irc-day-all');
    await page.click('#presence-toggle');
    expect(new URL(page.url()).search).toBe('');
    expect(await visibleText(page)).not.toContain('joined');

    // A permalink: the line's time links to its anchor, and opening the link marks that line.
    const row = page.locator('tr.ev-privmsg', { hasText: 'still here' });
    const id = await row.getAttribute('id');
    expect(id).toMatch(/^L\d+$/);
    await row.locator('td.time a').click();
    expect(new URL(page.url()).hash).toBe(`#${id}`);
    const fresh = await ctx.newPage();
    await fresh.goto(`${svc.url}/irc/net/testnet/%23lab/2024-03-10#${id}`);
    expect(await fresh.$eval(':target', (el) => el.id)).toBe(id);
    const targetBg = await fresh.$eval(':target td.msg', (el) => getComputedStyle(el).backgroundColor);
    const otherBg = await fresh.$eval('tr.ev-privmsg:not(:target) td.msg', (el) => getComputedStyle(el).backgroundColor);
    expect(targetBg).not.toBe(otherBg);
    await fresh.close();

    // Search from the channel's box, with the matches marked.
    await page.goto(`${svc.url}/irc/net/testnet/%23lab`);
    await page.fill('#q', 'world');
    await page.click('form.irc-search-box button[type=submit]');
    expect(new URL(page.url()).pathname).toBe('/irc/search');
    expect(await page.innerText('#result-count')).toBe('3 results');
    const marks = await page.$$eval('#irc-results mark', (ms) => ms.map((m) => m.textContent));
    expect(marks).toEqual(['world', 'world', 'world']);
    await shot(page, 'irc-search');
    // A result's time goes to its line on its day.
    await page.locator('#irc-results tr', { hasText: 'good morning' }).locator('td.time a').click();
    expect(new URL(page.url()).pathname).toBe('/irc/net/testnet/%23lab/2024-03-11');
    expect(await page.$eval(':target', (el) => el.textContent)).toContain('good morning world');

    // The nick page from a nick link.
    await page.click('td.who a.nick:text-is("alice_away")');
    expect(new URL(page.url()).pathname).toBe('/irc/nick/alice_away');
    expect(await page.innerText('#aliases')).toBe('alice');
    expect(await page.innerText('#first-seen')).toBe('2024-03-10 10:00:00 UTC');
    expect(await page.innerText('#last-message')).toBe('2024-03-11 09:00:00 UTC');
    expect(await page.innerText('#activity')).toContain('2024-03');
    await shot(page, 'irc-nick');
    await ctx.close();
  });

  it('with JavaScript on, nothing from the logs runs and no page breaks the CSP', async () => {
    const { context: ctx, problems } = await context(true);
    const page = await ctx.newPage();
    for (const url of [
      '/irc',
      '/irc/net/testnet',
      '/irc/net/testnet/%23lab',
      '/irc/net/testnet/%23lab/2024-03-10?all=1',
      '/irc/search?q=alert',
      '/irc/nick/bob?network=testnet',
      '/irc/net/testnet/%23lab/2024-03-12',
    ]) {
      const res = await page.goto(`${svc.url}${url}`);
      expect(res?.status(), url).toBe(url.endsWith('03-12') ? 404 : 200);
      expect(res?.headers()['content-security-policy'], url).toContain("frame-ancestors 'none'");
      await page.waitForLoadState('load');
    }
    expect(await page.innerText('main')).toContain('has no log for 2024-03-12');
    expect(problems).toEqual([]);
    await ctx.close();
  });
});
