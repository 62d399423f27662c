import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser } from '../support/browser.js';
import { createJwtUser, createTestApp, type TestApp, type TestUser } from '../support/harness.js';
import { startSpamd, type SpamdServer } from '../support/spamd.js';

/**
 * The public status page and the guestbook form in Debian's chromium with JavaScript turned off:
 * both read and work without scripts, and the page breaks no CSP rule. Screenshots (desktop) go to
 * the git-ignored test-artifacts/screenshots/ for review.
 */
const SHOTS = path.resolve(import.meta.dirname, '../../test-artifacts/screenshots');
const shot = (page: Page, name: string) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
let spamd: SpamdServer;
let t: TestApp;
let browser: Browser;
let base: string;
let owner: TestUser;

beforeAll(async () => {
  spamd = await startSpamd();
  t = await createTestApp({ env: { SPAMD_PORT: String(spamd.port), SPAMD_TIMEOUT_MS: '60000' } });
  base = await t.app.listen({ host: '127.0.0.1', port: 0 });
  owner = await createJwtUser(t, []);
  browser = await launchBrowser();
  await mkdir(SHOTS, { recursive: true });
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await t?.close();
  await spamd?.stop();
});

const post = (url: string, payload: Record<string, unknown>) => t.app.inject({ method: 'POST', url, headers: owner.auth, payload });

describe('public platform pages without JavaScript', () => {
  it('the status page shows the overall status, grouped components and a published incident, never its notes', async () => {
    const pageId = (await post('/api/statuspages', { slug: 'shop', name: 'Shop status' })).json().page.id;
    const group = (await post(`/api/statuspages/${pageId}/components`, { name: 'Checkout', group: true })).json().component.id;
    const pay = (await post(`/api/statuspages/${pageId}/components`, { name: 'Payments', group_id: group, status: 'major_outage' })).json().component.id;
    await post(`/api/statuspages/${pageId}/incidents`, {
      name: 'Card payments failing',
      impact: 'critical',
      component_ids: [pay],
      internal_notes: 'the acquirer certificate expired',
      update: { body: 'Card payments fail; we are working with our provider.', publish: true },
    });

    const context = await browser.newContext({ javaScriptEnabled: false });
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('console', (m) => m.type() === 'error' && /Content Security Policy|Refused/i.test(m.text()) && problems.push(m.text()));
    const failed: string[] = [];
    page.on('response', (r) => r.status() >= 400 && !r.url().endsWith('/favicon.ico') && failed.push(`${r.status()} ${r.url()}`));
    const res = await page.goto(`${base}/status/shop`);
    expect(res?.status()).toBe(200);
    expect(await page.getAttribute('#status-indicator', 'data-indicator')).toBe('critical');
    expect(await page.textContent('.sp-overall')).toBe('Major Service Outage');
    expect(await page.textContent(`[data-component="${pay}"] .sp-status`)).toBe('Major outage');
    // Payments is listed inside its group.
    expect(await page.locator(`[data-component="${group}"] [data-component="${pay}"]`).count()).toBe(1);
    expect(await page.textContent('#incidents')).toContain('Card payments fail; we are working with our provider.');
    expect(await page.content()).not.toContain('acquirer certificate');
    expect(problems).toEqual([]);
    expect(failed).toEqual([]); // the stylesheet and everything else load
    await shot(page, 'status-page');
    await context.close();
  });

  it('the guestbook form signs without JavaScript; ham appears at once, the honeypot is out of sight', async () => {
    await post('/api/guestbooks', { slug: 'visitors', title: 'Visitors', description: 'Say hello.' });
    const context = await browser.newContext({ javaScriptEnabled: false });
    const page = await context.newPage();
    await page.goto(`${base}/guestbook/visitors`);
    expect(await page.textContent('#no-entries')).toBe('No entries yet.');
    expect(await page.isVisible('#gb-name')).toBe(true);
    // The honeypot is in the form but not where a person would see or tab to it.
    const trap = await page.locator('#gb-website').boundingBox();
    expect(trap === null || trap.x + trap.width <= 0).toBe(true);
    await page.fill('#gb-name', 'Maja');
    await page.fill('#gb-message', 'Thanks for the lovely guided tour of the old town last weekend; the children still talk about it.');
    await page.click('#guestbook-form button[type=submit]');
    await page.waitForURL(/\/guestbook\/visitors\?submitted=published/);
    expect(await page.textContent('#notice')).toContain('your entry is published');
    expect(await page.textContent('#entries')).toContain('the children still talk about it');
    expect(await page.textContent('#entries')).toContain('Maja');
    await shot(page, 'guestbook');
    await context.close();
  });
});
