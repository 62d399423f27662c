import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import { loadConfig } from '../../coordinator/src/config.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { launchBrowser } from '../support/browser.js';
import { GraphStub } from '../support/graph-stub.js';
import { createTestDatabase, randomName, testEnv, type TestDatabase } from '../support/harness.js';
import { MsIdentityStandIn } from '../support/ms-identity.js';

/**
 * /admin/assistant in Debian's chromium: an administrator creates a tenant setup, connects (signs
 * in and selects the account at the identity-provider stand-in), sees the connection ready and runs
 * the live prompt test, whose reply and diagnostics come from the graph assistant stand-in; no CSP
 * violation on the way (the connect form's redirect to the identity provider included).
 */
const SHOTS = path.resolve(import.meta.dirname, '../../test-artifacts/screenshots');
const identity = new MsIdentityStandIn();
const graph = new GraphStub(identity);
const CLIENT_ID = randomUUID();
const CLIENT_SECRET = `secret~${randomUUID()}`;
const admin = { name: randomName('admin'), password: 'a-long-password-1' };
let db: TestDatabase;
let svc: RunningCoordinator;
let browser: Browser;
let base = '';

/** A free loopback port, so PUBLIC_BASE_URL (and the redirect URI) is known before the coordinator starts. */
async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as AddressInfo;
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  await identity.start();
  await graph.start();
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  identity.addApp({ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, redirectUris: [`${base}/admin/assistant/callback`] });
  identity.addAccount({ username: 'megan@contoso.example', name: 'Megan', tid: randomUUID() });
  identity.addAccount({ username: 'lee@contoso.example', name: 'Lee', tid: randomUUID() });
  db = await createTestDatabase();
  svc = await startCoordinator(
    loadConfig(
      testEnv(db, {
        PORT: String(port),
        PUBLIC_BASE_URL: base,
        ASSISTANT_SECRET_KEY: 'browser-test-key-0123456789abcdef01234',
        ASSISTANT_EXTRA_CA_FILE: identity.caFile,
        ASSISTANT_UPSTREAM_TIMEOUT_SECONDS: '20',
      }),
    ),
  );
  await new AccountService(svc.orm).createUser({ username: admin.name, password: admin.password, isAdmin: true });
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await svc?.close();
  await db?.drop();
  await graph.stop();
  await identity.stop();
});

it('creates a setup, connects an account at the identity provider, shows it ready and runs the prompt test', async () => {
  // The identity provider's certificate comes from the test's own CA: the coordinator trusts it through
  // ASSISTANT_EXTRA_CA_FILE; this browser (a test client) is told to accept it.
  const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1280, height: 1000 } });
  await context.addInitScript(() => {
    const w = window as unknown as { cspViolations: string[] };
    w.cspViolations = [];
    document.addEventListener('securitypolicyviolation', (e) => w.cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`));
  });
  const cspErrors: string[] = [];
  context.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) cspErrors.push(m.text());
  });
  const page = await context.newPage();
  await page.goto(`${base}/login`);
  await page.fill('#username', admin.name);
  await page.fill('#password', admin.password);
  await page.click('button[type=submit]');
  await page.waitForURL(`${base}/`);

  await page.goto(`${base}/admin`);
  await page.click('a[href="/admin/assistant"]');
  await page.waitForURL(`${base}/admin/assistant`);
  await expect.poll(() => page.locator('#no-setups').textContent()).toContain('No tenant setup yet');

  const form = page.locator('#new-setup form');
  await form.locator('input[name=slug]').fill('contoso');
  await form.locator('input[name=display_name]').fill('Contoso assistant');
  await form.locator('input[name=client_id]').fill(CLIENT_ID);
  await form.locator('input[name=client_secret]').fill(CLIENT_SECRET);
  await form.locator('input[name=graph_url]').fill(graph.url);
  await form.locator('input[name=authority_host]').fill(identity.url);
  await form.locator('input[name=time_zone]').fill('Europe/Stockholm');
  expect(await form.locator('input[name=redirect_uri]').inputValue()).toBe(`${base}/admin/assistant/callback`);
  await form.locator('button[type=submit]').click();
  await page.waitForURL(/notice=saved/);
  await expect.poll(() => page.locator('#setup-contoso [data-connection-status]').getAttribute('data-connection-status')).toBe('not_connected');
  expect(await page.content()).not.toContain(CLIENT_SECRET);

  // Connect: the identity provider's account picker (prompt=select_account), sign in as Megan.
  await page.click('#connect-contoso');
  await page.waitForURL(new RegExp(`^${identity.url.replace(/[.]/g, '\\.')}/organizations/oauth2/v2\\.0/authorize`));
  await expect.poll(() => page.locator('h1').textContent()).toBe('Pick an account');
  expect(await page.locator('body').textContent()).toContain('prompt=select_account');
  const megan = page.locator('form', { has: page.locator('[data-account="megan@contoso.example"]') });
  await megan.locator('input[name=passwd]').fill(identity.accounts[0]!.password);
  await megan.locator('button[type=submit]').click();
  await page.waitForURL(/\/admin\/assistant\?notice=connected/);
  const status = page.locator('#setup-contoso [data-connection-status]');
  await expect.poll(() => status.getAttribute('data-connection-status')).toBe('ready');
  expect(await page.locator('#setup-contoso [data-account]').textContent()).toBe('megan@contoso.example');
  expect(await page.locator('#setup-contoso [data-last-validation]').getAttribute('data-last-validation')).toBe('ok');

  // The live prompt test shows the assistant's reply and the diagnostics.
  await page.fill('#prompt-contoso', 'What is on my calendar today?');
  await page.click('#test-contoso');
  await expect.poll(() => page.locator('#test-reply').textContent()).toBe('Assistant reply for megan@contoso.example: What is on my calendar today?');
  expect(await page.locator('#test-diagnostics [data-provider]').textContent()).toBe('graph_assistant');
  expect(await page.locator('#test-diagnostics').textContent()).toContain('Europe/Stockholm');
  await page.screenshot({ path: path.join(SHOTS, 'admin-assistant.png'), fullPage: true });

  expect(await page.evaluate(() => (window as unknown as { cspViolations: string[] }).cspViolations)).toEqual([]);
  expect(cspErrors).toEqual([]);
  const chat = graph.calls.filter((c) => c.path.endsWith('/chat'));
  expect(chat.at(-1)?.body).toMatchObject({
    message: { text: expect.stringContaining('What is on my calendar today?') },
    locationHint: { timeZone: 'Europe/Stockholm' },
  });
  await context.close();
}, 120_000);
