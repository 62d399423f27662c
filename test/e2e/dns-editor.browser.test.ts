import { chmod, mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import { loadConfig } from '../../coordinator/src/config.js';
import { ZoneRegistry } from '../../coordinator/src/dns/zone-registry.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { startNamed, type NamedServer } from '../support/bind.js';
import { launchBrowser } from '../support/browser.js';
import { createTestDatabase, randomName, testEnv, type TestDatabase } from '../support/harness.js';

/**
 * The DNS editor (/dns) in Debian's chromium on a 5,000-record zone served by a real named: the
 * zone list, the records page rendered from the cache and refreshed from the master, paging and
 * search, the add form with the API's validation message and then a success, edit, delete, and a
 * bulk delete of a selection with its progress, each change checked with dig; a reader gets no forms.
 */
const Z = 'editor.test';
const SHOTS = path.resolve(import.meta.dirname, '../../test-artifacts/screenshots');
let ns: NamedServer;
let db: TestDatabase;
let svc: RunningCoordinator;
let browser: Browser;
const password = 'a-long-password-1';
const names = { admin: randomName('admin'), reader: randomName('reader') };
const contexts = new Map<string, BrowserContext>();

beforeAll(async () => {
  await mkdir(SHOTS, { recursive: true });
  ns = await startNamed({
    zones: [
      {
        name: Z,
        records: Array.from({ length: 5000 }, (_, i) => ({ name: `h${String(i).padStart(4, '0')}.${Z}`, type: 'A', rdata: `10.5.${i >> 8}.${i & 255}` })),
      },
    ],
  });
  await chmod(ns.keyFile, 0o644);
  db = await createTestDatabase();
  svc = await startCoordinator(loadConfig(testEnv(db, { DNS_RATE_LIMIT_PER_MINUTE: '100000' })));
  const accounts = new AccountService(svc.orm);
  await accounts.createUser({ username: names.admin, password, isAdmin: true });
  await accounts.createUser({ username: names.reader, password });
  await accounts.grantZone(names.reader, Z, { read: true, write: false });
  await new ZoneRegistry(svc.orm).upsert({ zone: Z, file: ns.zoneFile(Z), keyFile: ns.keyFile, server: '127.0.0.1', port: ns.port });
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await svc?.close();
  await db?.drop();
  await ns?.stop();
});

/** A signed-in context that records CSP violations and accepts the page's confirmations. */
async function as(name: string): Promise<Page> {
  let context = contexts.get(name);
  if (!context) {
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await context.addInitScript(() => {
      const w = window as unknown as { cspViolations: string[] };
      w.cspViolations = [];
      document.addEventListener('securitypolicyviolation', (e) => w.cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`));
    });
    const login = await context.newPage();
    await login.goto(`${svc.url}/login`);
    await login.fill('#username', name);
    await login.fill('#password', password);
    await login.click('button[type=submit]');
    await login.waitForURL(`${svc.url}/`);
    await login.close();
    contexts.set(name, context);
  }
  const page = await context.newPage();
  page.on('dialog', (d) => void d.accept());
  return page;
}

const noCspViolations = async (page: Page) =>
  expect(await page.evaluate(() => (window as unknown as { cspViolations?: string[] }).cspViolations ?? [])).toEqual([]);

/** Opens a records page and waits for its refresh from the master. */
async function open(page: Page, query: string) {
  const res = await page.goto(`${svc.url}/dns/zones/${Z}${query}`);
  expect(res?.status()).toBe(200);
  await page.waitForSelector('#dns-status[data-source="master"]', { timeout: 60_000 });
}
const rowNames = (page: Page) => page.$$eval('#record-rows tr', (trs) => trs.map((tr) => (tr as HTMLElement).dataset.name ?? ''));
const dig = async (name: string) =>
  (await ns.dig(['+short', name, 'A']))
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);

describe('DNS editor', { timeout: 180_000 }, () => {
  it('lists the zone, renders the cache at once and refreshes from the master; pages and search', async () => {
    const page = await as(names.admin);
    // No cache yet: the first visit fills it from the master before answering, so even a reader
    // without JavaScript gets the rows in the HTML.
    const first = await (await page.request.get(`${svc.url}/dns/zones/${Z}`)).text();
    expect(first).toContain('data-source="from_database"');
    expect(first).toMatch(/id="record-count"[^>]*>5003</);
    await page.goto(`${svc.url}/dns`);
    await page.click(`#zone-table a:text("${Z}")`);
    // Then the script checks the master and the table shows its answer.
    await page.waitForSelector('#dns-status[data-source="master"]', { timeout: 60_000 });
    expect(await page.textContent('#record-count')).toBe('5003');
    expect(await page.$$eval('#record-rows tr', (trs) => trs.length)).toBe(100);
    await page.screenshot({ path: path.join(SHOTS, 'dns-records.png') });

    // A second visit renders the cached rows in the HTML itself (no script needed), then checks the master: unchanged.
    const html = await (await page.request.get(`${svc.url}/dns/zones/${Z}?page=2&limit=100`)).text();
    expect(html).toContain('data-source="from_database"');
    expect(html).toContain(`data-name="h0098.${Z}"`);
    await open(page, '?page=2&limit=100');
    expect(await page.textContent('#dns-status')).toContain('Up to date');
    const second = await rowNames(page);
    expect(second[0]).toBe(`h0098.${Z}`); // SOA, NS, h0000…h0096, ns1 sorts after h…: see the order below
    await page.click('#next-page');
    await page.waitForSelector('#dns-status[data-source="master"]');
    expect(new URL(page.url()).searchParams.get('page')).toBe('3');
    expect((await rowNames(page))[0]).toBe(`h0198.${Z}`);
    // A deep page, through the page-number form.
    await page.fill('#goto-page', '50');
    await page.click('form.goto-page button[type=submit]');
    await page.waitForURL(/page=50/);
    await page.waitForSelector('#dns-status[data-source="master"]');
    expect(await rowNames(page)).toEqual(Array.from({ length: 100 }, (_, i) => `h${String(4898 + i).padStart(4, '0')}.${Z}`));
    expect(await page.textContent('#page-info')).toContain('Page 50 of 51');

    // Search (name mode).
    await page.fill('#dns-q', 'h0420');
    await page.click('form.dns-search button[type=submit]');
    await page.waitForSelector('#dns-status[data-source="master"]');
    expect(await rowNames(page)).toEqual([`h0420.${Z}`]);
    expect(await page.textContent('#record-count')).toBe('1');
    await noCspViolations(page);
    await page.close();
  });

  it('add shows the API validation message, then adds; edit and delete go to the master', async () => {
    const page = await as(names.admin);
    await open(page, '?q=new-host');
    expect(await page.$$eval('#record-rows tr', (trs) => trs.length)).toBe(0);

    await page.fill('#add-domain', `new-host.${Z}`);
    await page.selectOption('#add-type', 'A');
    await page.fill('#add-target', '10.999.0.1');
    await page.click('#add-form button[type=submit]');
    await page.waitForSelector('#add-target-error:not([hidden])');
    expect((await page.textContent('#add-target-error'))!.length).toBeGreaterThan(5);
    expect(await page.textContent('#add-error')).toMatch(/\S/);
    expect(await dig(`new-host.${Z}`)).toEqual([]);

    await page.fill('#add-target', '10.77.0.1');
    await page.fill('#add-ttl', '600');
    await page.click('#add-form button[type=submit]');
    await page.waitForSelector(`#record-rows tr[data-name="new-host.${Z}"]`);
    expect(await page.isHidden('#add-target-error')).toBe(true);
    expect(await dig(`new-host.${Z}`)).toEqual(['10.77.0.1']);
    expect(await page.getAttribute(`#record-rows tr[data-name="new-host.${Z}"]`, 'data-ttl')).toBe('600');

    // Edit: a new value, the TTL kept.
    await page.click(`#record-rows tr[data-name="new-host.${Z}"] .edit-row`);
    await page.fill('#edit-new_target', '10.77.0.2');
    await page.click('#edit-form button[type=submit]');
    await page.waitForSelector(`#record-rows tr[data-name="new-host.${Z}"][data-rdata="10.77.0.2"]`);
    expect(await dig(`new-host.${Z}`)).toEqual(['10.77.0.2']);
    expect(await page.getAttribute(`#record-rows tr[data-name="new-host.${Z}"]`, 'data-ttl')).toBe('600');

    // Delete (the confirmation is accepted).
    await page.click(`#record-rows tr[data-name="new-host.${Z}"] .delete-row`);
    await page.waitForSelector('#no-records:not([hidden])');
    expect(await dig(`new-host.${Z}`)).toEqual([]);
    await noCspViolations(page);
    await page.close();
  });

  it('bulk-deletes a selection of 250 with progress; the records are gone from named', async () => {
    const page = await as(names.admin);
    await open(page, '?page=3&limit=250');
    const chosen = await rowNames(page);
    expect(chosen).toHaveLength(250);
    // Every value the progress fields take, recorded as the page sets them.
    await page.evaluate(() => {
      const seen: Record<string, string[]> = {};
      (window as unknown as { progressSeen: typeof seen }).progressSeen = seen;
      for (const id of ['bulk-percent', 'bulk-processed', 'bulk-remaining', 'bulk-batch', 'bulk-deleted', 'bulk-failed', 'bulk-elapsed', 'bulk-eta']) {
        const node = document.getElementById(id)!;
        seen[id] = [];
        new MutationObserver(() => seen[id]!.push(node.textContent ?? '')).observe(node, { childList: true, characterData: true, subtree: true });
      }
    });
    await page.check('#select-all');
    expect(await page.textContent('#selected-count')).toBe('250 selected');
    await page.click('#bulk-delete');
    await page.waitForSelector('#bulk-card[data-state="done"]', { timeout: 120_000 });
    expect(await page.textContent('#bulk-percent')).toBe('100 %');
    expect(await page.textContent('#bulk-processed')).toBe('250 of 250');
    expect(await page.textContent('#bulk-remaining')).toBe('0');
    expect(await page.textContent('#bulk-deleted')).toBe('250');
    expect(await page.textContent('#bulk-failed')).toBe('0');
    expect(await page.textContent('#bulk-batch')).toBe('10 of 10 (up to 25 records each)');
    const seen = await page.evaluate(() => (window as unknown as { progressSeen: Record<string, string[]> }).progressSeen);
    // The progress moved through the batches: intermediate percentages, counts and an estimate.
    expect(seen['bulk-percent']).toEqual(expect.arrayContaining(['10 %', '50 %', '90 %', '100 %']));
    expect(seen['bulk-remaining']).toEqual(expect.arrayContaining(['225', '125']));
    expect(seen['bulk-batch']).toEqual(expect.arrayContaining(['5 of 10 (up to 25 records each)']));
    expect(seen['bulk-deleted']).toEqual(expect.arrayContaining(['25', '125']));
    expect(seen['bulk-eta']!.some((v) => /\d s$/.test(v))).toBe(true);
    expect(seen['bulk-elapsed']!.length).toBeGreaterThan(5);
    await page.screenshot({ path: path.join(SHOTS, 'dns-bulk-delete.png') });

    // Gone from named (every one asked), and the page now shows the next rows.
    for (const name of chosen) expect(await dig(name), name).toEqual([]);
    await page.waitForFunction((first) => document.querySelector('#record-rows tr')?.getAttribute('data-name') !== first, chosen[0]);
    expect(await page.textContent('#record-count')).toBe('4753');
    // The fresh rows are unticked, and so is "select all".
    expect(await page.isChecked('#select-all')).toBe(false);
    expect(await page.textContent('#selected-count')).toBe('0 selected');
    await noCspViolations(page);
    await page.close();
  });

  it('on a phone (390 px) the records stack: nothing scrolls sideways, Edit and Delete stay on screen', async () => {
    const context = await browser.newContext({ viewport: { width: 390, height: 844 } });
    try {
      const login = await context.newPage();
      await login.goto(`${svc.url}/login`);
      await login.fill('#username', names.admin);
      await login.fill('#password', password);
      await login.click('button[type=submit]');
      await login.waitForURL(`${svc.url}/`);
      const page = await context.newPage();
      await open(page, '');
      const layout = await page.evaluate(() => {
        const rows = [...document.querySelectorAll<HTMLTableRowElement>('#record-rows tr')];
        const soa = rows.find((tr) => tr.dataset.type === 'SOA');
        const buttons = [...document.querySelectorAll<HTMLElement>('#record-rows .edit-row, #record-rows .delete-row')].slice(0, 20);
        return {
          pageWidth: document.documentElement.scrollWidth,
          tableWidth: document.getElementById('record-table')!.getBoundingClientRect().width,
          soaHeight: soa?.getBoundingClientRect().height ?? 0,
          buttonsRight: Math.max(...buttons.map((b) => b.getBoundingClientRect().right)),
          buttons: buttons.length,
        };
      });
      expect(layout.pageWidth).toBeLessThanOrEqual(390);
      expect(layout.tableWidth).toBeLessThanOrEqual(390);
      expect(layout.buttons).toBeGreaterThan(0);
      expect(layout.buttonsRight).toBeLessThanOrEqual(390);
      // An SOA row reads as a few lines, not a 54 px column hundreds of pixels tall.
      expect(layout.soaHeight).toBeGreaterThan(0);
      expect(layout.soaHeight).toBeLessThan(250);
      // Each value follows its column's name.
      expect(await page.$eval('#record-rows tr td[data-label="Type"]', (td) => getComputedStyle(td, '::before').content)).toBe('"Type: "');
    } finally {
      await context.close();
    }
  });

  it('a reader browses and searches without forms', async () => {
    const page = await as(names.reader);
    await open(page, '?page=1&limit=50');
    expect(await page.$$eval('#record-rows tr', (trs) => trs.length)).toBe(50);
    for (const sel of ['#add-form', '#edit-form', '#bulk-delete', '#select-all', '.select-row', '.edit-row', '.delete-row'])
      expect(await page.$(sel), sel).toBeNull();
    await noCspViolations(page);
    await page.screenshot({ path: path.join(SHOTS, 'dns-reader.png'), fullPage: true });
    // A zone the reader has no row for: 403, whether or not it is registered (its existence is not shown).
    expect((await page.goto(`${svc.url}/dns/zones/other.test`))?.status()).toBe(403);
    await page.close();
    // An administrator asking for an unregistered zone: 404.
    const adminPage = await as(names.admin);
    expect((await adminPage.goto(`${svc.url}/dns/zones/other.test`))?.status()).toBe(404);
    await adminPage.close();
  });
});
