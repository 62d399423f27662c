import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser } from '../support/browser.js';
import { createTestApp, randomName, type TestApp } from '../support/harness.js';

/** The sign-in and token pages in a real browser against a listening coordinator. */
let t: TestApp;
let browser: Browser;
let base: string;
let user: { name: string; password: string };

beforeAll(async () => {
  t = await createTestApp();
  base = await t.app.listen({ host: '127.0.0.1', port: 0 });
  const name = randomName('web');
  const { password } = await t.accounts.createUser({ username: name, permissions: ['speech.use', 'speech.api'] });
  user = { name, password };
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await t?.close();
});

describe('browser sign-in', () => {
  it('rejects a wrong password with a message and keeps the username', async () => {
    const page = await browser.newPage();
    await page.goto(`${base}/login`);
    await page.fill('#username', user.name);
    await page.fill('#password', 'wrong-password');
    await page.click('button[type=submit]');
    await expect.poll(() => page.textContent('[role=alert]')).toBe('Invalid username or password.');
    expect(await page.inputValue('#username')).toBe(user.name);
    await page.close();
  });

  it('signs in, creates and revokes a token, and signs out', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    // An anonymous visit to a protected page lands on the sign-in form and returns there afterwards.
    await page.goto(`${base}/account`);
    expect(new URL(page.url()).pathname).toBe('/login');
    await page.fill('#username', user.name);
    await page.fill('#password', user.password);
    await page.click('button[type=submit]');
    await page.waitForURL(`${base}/account`);

    const cookie = (await context.cookies()).find((c) => c.name === 'sonar_session');
    expect(cookie?.httpOnly).toBe(true);
    expect(cookie?.sameSite).toBe('Lax');

    await page.fill('#name', 'laptop');
    await page.check('input[name=scopes][value="speech.api"]');
    await page.click('form[action="/account/tokens"] button[type=submit]');
    const token = (await page.textContent('[data-testid=new-token]'))?.trim() ?? '';
    expect(token).toMatch(/^sonar_pat_/);
    expect(await t.accounts.verifyPersonalToken(token)).toMatchObject({ scopes: ['speech.api'] });

    // Shown once: a reload lists the token without its secret.
    await page.goto(`${base}/account`);
    expect(await page.content()).not.toContain(token);
    await page.click('form[action^="/account/tokens/"] button');
    await page.waitForURL(`${base}/account`);
    expect(await page.textContent('tbody')).toContain('revoked');
    expect(await t.accounts.verifyPersonalToken(token)).toBeNull();

    await page.click('header form[action="/logout"] button');
    await page.waitForURL(`${base}/login`);
    await page.goto(`${base}/`);
    expect(new URL(page.url()).pathname).toBe('/login');
    await context.close();
  });

  it('a forged cross-site form post is refused (CSRF)', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${base}/login`);
    await page.fill('#username', user.name);
    await page.fill('#password', user.password);
    await page.click('button[type=submit]');
    await page.waitForURL(`${base}/`);
    // Same browser, same cookies, but a form without the page's CSRF token.
    const status = await page.evaluate(async () => {
      const res = await fetch('/account/tokens', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'name=evil&scopes=speech.api',
      });
      return res.status;
    });
    expect(status).toBe(403);
    expect(await t.accounts.listPersonalTokens((await t.accounts.findUser(user.name))!.id)).toHaveLength(1);
    await context.close();
  });
});
