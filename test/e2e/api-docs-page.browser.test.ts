import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../coordinator/src/config.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { launchBrowser, watchContext } from '../support/browser.js';
import { createTestDatabase, testEnv, type TestDatabase } from '../support/harness.js';

/**
 * The API reference (/docs, Swagger UI) works under the coordinator's CSP and lays out on a phone:
 * opened at 390 px it renders the operations with no console error, no CSP violation and no
 * failed request, and the document is no wider than the screen.
 */
let db: TestDatabase;
let svc: RunningCoordinator;
let browser: Browser;

beforeAll(async () => {
  db = await createTestDatabase();
  svc = await startCoordinator(loadConfig(testEnv(db)));
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await svc?.close();
  await db?.drop();
});

describe('the API reference page', { timeout: 90_000 }, () => {
  it('renders at 390 px with no console error, CSP violation or failed request, no wider than the screen', async () => {
    const context = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
    const { problems, cspViolations } = await watchContext(context);
    const page = await context.newPage();
    const res = await page.goto(`${svc.url}/docs`);
    expect(res?.status()).toBe(200);
    const csp = res?.headers()['content-security-policy'] ?? '';
    expect(csp).toMatch(/script-src 'self'/);
    expect(csp).not.toContain('unsafe-inline');
    // Swagger UI's one inline style (the logo's) is allowed by its hash.
    expect(csp).toMatch(/style-src 'self'[^;]* 'sha256-[A-Za-z0-9+/=]+'/);
    // Swagger UI has fetched the document and drawn the operations.
    await expect.poll(() => page.locator('.opblock').count(), { timeout: 30_000 }).toBeGreaterThan(10);
    expect(await page.textContent('.info .title')).toContain('Sonar coordinator API');
    expect(await cspViolations(page)).toEqual([]);
    expect(problems).toEqual([]);
    expect(await page.evaluate(() => window.innerWidth)).toBe(390);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await page.screenshot({ path: path.resolve(import.meta.dirname, '../../test-artifacts/screenshots/phone-docs.png') });
    await context.close();
  });
});
