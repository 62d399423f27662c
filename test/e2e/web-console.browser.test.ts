import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse as parseSubtitles } from '@plussub/srt-vtt-parser';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIARIZATION_CONTRACT_VERSION } from '@sonar/shared';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import { accessJwtPayload } from '../../coordinator/src/accounts/auth-plugin.js';
import { loadConfig } from '../../coordinator/src/config.js';
import { ZoneRegistry } from '../../coordinator/src/dns/zone-registry.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { CoordinatorClient } from '../../worker/src/coordinator-client.js';
import { launchBrowser } from '../support/browser.js';
import { createTestDatabase, randomName, testEnv, type TestDatabase } from '../support/harness.js';
import { SimWorker } from '../support/sim-worker.js';

/**
 * The web console in Debian's chromium: every page for the users who may see it (and the refusal
 * for the others), the CSP header and no CSP violation on any page, the job page's worker card and
 * liveness warning on the page's controllable clock (playwright's page.clock), the execution-target
 * rule, the no-script form, transcript downloads checked with a subtitle parser, and screenshots of
 * every page under test-artifacts/screenshots/ for review.
 */
const SHOTS = path.resolve(import.meta.dirname, '../../test-artifacts/screenshots');
const dir = mkdtempSync(path.join(tmpdir(), 'sonar-console-'));
let db: TestDatabase;
let svc: RunningCoordinator;
let browser: Browser;
let sim: SimWorker;
const password = 'a-long-password-1';
const names = { admin: randomName('admin'), alice: randomName('alice'), bob: randomName('bob'), plain: randomName('plain') };
const ids = { completed: 0, running: 0, failed: 0 };
let shareUrl = '';

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  db = await createTestDatabase();
  svc = await startCoordinator(loadConfig(testEnv(db, { SPEECH_MEDIA_DIR: path.join(dir, 'media'), SPEECH_LEASE_TTL_SECONDS: '600' })));
  const accounts = new AccountService(svc.orm);
  await accounts.createUser({ username: names.admin, password, isAdmin: true });
  const alice = (await accounts.createUser({ username: names.alice, password, permissions: ['speech.use'] })).user;
  await accounts.createUser({ username: names.bob, password, permissions: ['speech.use'] });
  await accounts.createUser({ username: names.plain, password });
  sim = await SimWorker.start(svc, 'sim-small');
  const url = (n: number) => ({ type: 'url' as const, url: `https://media.example.org/${n}.mp3` });

  // A completed job with two speakers, shared.
  ids.completed = (await svc.speech.jobs.create(alice, { channel: 'web', source: url(1), label: 'Board meeting', note: 'Quarterly review' })).id;
  await sim.run(ids.completed, { segments: ['Welcome to the board meeting.', 'Thank you, let us begin.', 'First item: the budget.'], speakers: [0, 1, 0] });
  shareUrl = await enableShare(alice.id, ids.completed);

  // A failed job whose attempt left segments.
  ids.failed = (await svc.speech.jobs.create(alice, { channel: 'web', source: url(2), label: 'Broken upload' })).id;
  await sim.run(ids.failed, { success: false, error: 'simulated engine crash', segments: ['Half a sentence from attempt one'] });

  // A job that a worker claimed, reported one segment for, and then went silent (no heartbeats).
  ids.running = (await svc.speech.jobs.create(alice, { channel: 'web', source: url(3), label: 'Long interview' })).id;
  const claim = await sim.client.claim({ session_id: (sim as unknown as { session: string }).session, wait_ms: 2000 });
  const lease = claim.has_job ? claim.job?.lease : undefined;
  if (!lease || lease.job_id !== ids.running) throw new Error('expected to claim the running job');
  const stream = sim.client.progress(lease);
  stream.send({
    stage: 'transcribing',
    stage_detail: '',
    audio_position_seconds: 30,
    segments: [{ seq: 0, start: 0, end: 30, text: 'So tell me how it started.' }],
    duration_seconds: 120,
    engine: 'test',
    engine_model: 'small',
  });
  await stream.end();
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  sim?.close();
  await svc?.close();
  await db?.drop();
});

async function enableShare(userId: number, jobId: number): Promise<string> {
  const res = await svc.app.inject({ method: 'POST', url: `/api/speech/jobs/${jobId}/share`, headers: { authorization: `Bearer ${await jwt(userId)}` } });
  return res.json<{ share: { url: string } }>().share.url;
}
async function jwt(userId: number): Promise<string> {
  return svc.app.jwt.sign(await accessJwtPayload(new AccountService(svc.orm), userId));
}

/** Each user signs in once (the sign-in rate limit counts per client); later contexts reuse the session cookie. */
const sessions = new Map<string, Awaited<ReturnType<BrowserContext['storageState']>>>();

/** A signed-in context that records CSP violations (an init script runs before the page's own). */
async function signedIn(name: string | null, opts: { javaScriptEnabled?: boolean; viewport?: { width: number; height: number } } = {}) {
  if (name && !sessions.has(name)) {
    const login = await browser.newContext();
    const page = await login.newPage();
    await page.goto(`${svc.url}/login`);
    await page.fill('#username', name);
    await page.fill('#password', password);
    await page.click('button[type=submit]');
    await page.waitForURL(`${svc.url}/`);
    sessions.set(name, await login.storageState());
    await login.close();
  }
  const context = await browser.newContext({
    javaScriptEnabled: opts.javaScriptEnabled ?? true,
    viewport: opts.viewport ?? { width: 1280, height: 900 },
    ...(name ? { storageState: sessions.get(name) } : {}),
  });
  await context.addInitScript(() => {
    const w = window as unknown as { cspViolations: string[] };
    w.cspViolations = [];
    document.addEventListener('securitypolicyviolation', (e) => w.cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`));
  });
  const consoleErrors: string[] = [];
  context.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) consoleErrors.push(m.text());
  });
  return { context, consoleErrors };
}

async function expectNoCspViolations(page: Page, consoleErrors: string[]) {
  const violations = await page.evaluate(() => (window as unknown as { cspViolations?: string[] }).cspViolations ?? []);
  expect(violations).toEqual([]);
  expect(consoleErrors).toEqual([]);
}

interface Cue {
  from: number;
  to: number;
  text: string;
}

const shot = (page: Page, name: string) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });

// Generous limits: chromium and the coordinator share a small machine with the other test files.
describe('web console pages', { timeout: 90_000 }, () => {
  it('renders every page for the users who may see it, with the CSP header and no CSP violation; screenshots', async () => {
    const pages: Array<{ path: string; name: string; who: keyof typeof names; text: string }> = [
      { path: '/', name: 'home-admin', who: 'admin', text: 'Welcome' },
      { path: '/', name: 'home-user', who: 'alice', text: 'Recent jobs' },
      { path: '/speech', name: 'speech-queue', who: 'alice', text: 'Transcribe' },
      { path: `/speech/jobs/${ids.completed}`, name: 'job-completed', who: 'alice', text: 'Board meeting' },
      { path: `/speech/jobs/${ids.running}`, name: 'job-running-admin', who: 'admin', text: 'Execution target' },
      { path: `/speech/jobs/${ids.failed}`, name: 'job-failed', who: 'alice', text: 'simulated engine crash' },
      { path: '/dns', name: 'dns', who: 'alice', text: 'DNS zones' },
      { path: '/irc', name: 'irc', who: 'plain', text: 'Chat logs' },
      { path: '/admin', name: 'admin', who: 'admin', text: 'Local model allowlist' },
      { path: '/admin/workers', name: 'admin-workers', who: 'admin', text: 'sim-small' },
      { path: '/account', name: 'account', who: 'plain', text: 'Personal access tokens' },
    ];
    const contexts = new Map<string, Awaited<ReturnType<typeof signedIn>>>();
    for (const p of pages) {
      if (!contexts.has(p.who)) contexts.set(p.who, await signedIn(names[p.who]));
      const { context, consoleErrors } = contexts.get(p.who)!;
      const page = await context.newPage();
      const res = await page.goto(`${svc.url}${p.path}`);
      expect(res?.status(), p.path).toBe(200);
      const csp = res?.headers()['content-security-policy'] ?? '';
      expect(csp).toMatch(/script-src 'self' 'nonce-[A-Za-z0-9+/=]+'/);
      expect(csp).toContain("frame-ancestors 'none'");
      expect(res?.headers()['referrer-policy']).toBe('same-origin');
      expect(await page.textContent('main'), p.path).toContain(p.text);
      // The navigation names the user and links to the parts they may use.
      expect(await page.textContent('header nav.account')).toContain(names[p.who]);
      const nav = await page.$$eval('header nav.main a', (as) => as.map((a) => a.textContent));
      expect(nav.includes('Admin')).toBe(p.who === 'admin');
      expect(nav.includes('Speech')).toBe(p.who !== 'plain');
      await page.waitForLoadState('networkidle');
      await shot(page, p.name);
      await expectNoCspViolations(page, consoleErrors);
      await page.close();
    }
    // A phone-sized screen (390 px): no page scrolls sideways. The list tables (queue, workers,
    // tokens, zones) stack their rows, each cell after its column's name, so status, capabilities
    // and Revoke are on screen; a long zone name wraps at its dots.
    const accounts = new AccountService(svc.orm);
    await accounts.createPersonalToken((await accounts.findUser(names.alice))!.id, { name: 'phone-check', scopes: ['speech.api'] });
    const longZone = 'customer-facing-services.stockholm-datacenter.internal.example-organisation.org';
    await accounts.grantZone(names.alice, longZone, { read: true, write: false });
    await new ZoneRegistry(svc.orm).upsert({
      zone: longZone,
      file: path.join(dir, 'long.zone'),
      keyFile: path.join(dir, 'long.key'),
      server: '127.0.0.1',
      port: 53,
    });
    const phones = new Map<string, Awaited<ReturnType<typeof signedIn>>>();
    for (const [who, p, name] of [
      ['alice', '/speech', 'phone-speech-queue'],
      ['alice', `/speech/jobs/${ids.completed}`, 'phone-job'],
      ['alice', '/', 'phone-home'],
      ['admin', '/admin/workers', 'phone-admin-workers'],
      ['alice', '/account', 'phone-tokens'],
      ['alice', '/dns', 'phone-dns'],
    ] as const) {
      if (!phones.has(who)) phones.set(who, await signedIn(names[who], { viewport: { width: 390, height: 844 } }));
      const phone = phones.get(who)!;
      const page = await phone.context.newPage();
      await page.goto(`${svc.url}${p}`);
      await page.waitForLoadState('networkidle');
      expect(await page.evaluate(() => document.documentElement.scrollWidth), p).toBeLessThanOrEqual(390);
      expect(await page.evaluate(() => window.innerWidth)).toBe(390);
      const table = await page.$('.stack table');
      if (table) {
        // Stacked: no header row, and every labelled cell lies inside the screen.
        expect(await page.isHidden('.stack thead'), p).toBe(true);
        const outside = await page.$$eval('.stack td', (tds) =>
          tds
            .filter((td) => td.getBoundingClientRect().width > 0 && (td.getBoundingClientRect().left < 0 || td.getBoundingClientRect().right > 390))
            .map((td) => td.dataset.label ?? td.getAttribute('class')),
        );
        expect(outside, p).toEqual([]);
      }
      if (p === '/admin/workers' || p === '/account') {
        const revoke = page.getByRole('button', { name: 'Revoke' }).first();
        expect(await revoke.isVisible(), p).toBe(true);
        const box = await revoke.boundingBox();
        expect(box && box.x >= 0 && box.x + box.width <= 390, p).toBe(true);
      }
      if (p === '/admin/workers') {
        expect(await page.isVisible('#worker-table td[data-label="Presence"] .badge')).toBe(true);
        expect(await page.isVisible('#worker-table td[data-label="Capabilities"]')).toBe(true);
      }
      if (p === '/speech') expect(await page.isVisible('#queue-table td[data-label="Status"] .badge')).toBe(true);
      if (p === '/dns') {
        // The zone name breaks after its dots (<wbr>), its text unchanged.
        const link = page.locator('#zone-table a', { hasText: 'customer-facing-services' });
        expect(await link.textContent()).toBe(longZone);
        expect(await link.evaluate((a) => a.querySelectorAll('wbr').length)).toBe(4);
        expect(await link.evaluate((a) => a.getClientRects().length > 1 || a.getBoundingClientRect().height > 30)).toBe(true);
      }
      await shot(page, name);
      await expectNoCspViolations(page, phone.consoleErrors);
      await page.close();
    }
    // The public share page (no sign-in) and the login page.
    const anon = await signedIn(null);
    for (const [url, name] of [
      [shareUrl, 'share-reading'],
      [`${shareUrl}?full`, 'share-full'],
      [`${svc.url}/login`, 'login'],
      [`${svc.url}/nowhere`, 'not-found'],
    ] as const) {
      const page = await anon.context.newPage();
      const res = await page.goto(url.replace(/^https?:\/\/[^/]+/, svc.url));
      expect(res?.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
      await shot(page, name);
      await expectNoCspViolations(page, anon.consoleErrors);
      await page.close();
    }
    for (const c of [...contexts.values(), ...phones.values(), anon]) await c.context.close();
  }, 180_000);

  it('refuses the pages to others: sign-in for anonymous visitors, 403 without the permission, 404 for other people’s jobs', async () => {
    const anon = await signedIn(null);
    const page = await anon.context.newPage();
    for (const p of ['/', '/speech', `/speech/jobs/${ids.completed}`, '/dns', '/admin', '/admin/workers']) {
      await page.goto(`${svc.url}${p}`);
      expect(new URL(page.url()).pathname, p).toBe('/login');
    }
    await anon.context.close();

    const cases: Array<[keyof typeof names, string, number, string]> = [
      ['plain', '/speech', 403, 'speech.use'],
      ['plain', `/speech/jobs/${ids.completed}`, 403, 'speech.use'],
      ['alice', '/admin', 403, 'Administrator'],
      ['alice', '/admin/workers', 403, 'Administrator'],
      ['bob', `/speech/jobs/${ids.completed}`, 404, 'Job not found'],
    ];
    for (const who of ['plain', 'alice', 'bob'] as const) {
      const { context, consoleErrors } = await signedIn(names[who]);
      const tab = await context.newPage();
      for (const [, p, status, text] of cases.filter((c) => c[0] === who)) {
        const res = await tab.goto(`${svc.url}${p}`);
        expect(res?.status(), `${who} ${p}`).toBe(status);
        // The one error page: layout with navigation and the user.
        expect(await tab.textContent('.error-page')).toContain(text);
        expect(await tab.textContent('header nav.account')).toContain(names[who]);
        await expectNoCspViolations(tab, consoleErrors);
      }
      if (who === 'bob') await shot(tab, 'error-404');
      await context.close();
    }
  });

  it('the worker card refreshes every 15 s, keeps the last snapshot when a refresh fails, and the liveness warning appears after 90 s of silence', async () => {
    const { context, consoleErrors } = await signedIn(names.alice);
    const page = await context.newPage();
    // The page's clock is controlled by the test: timers fire only when the test moves it.
    await page.clock.install();
    // The worker card's refresh: the liveness and worker cards from the cards route.
    const tick = (url: URL) => url.pathname === `/speech/jobs/${ids.running}/cards` && url.searchParams.get('only') === 'liveness,worker';
    let requests = 0;
    let fail = false;
    await page.route(tick, async (route) => {
      requests += 1;
      if (fail)
        await route.fulfill({
          status: 503,
          contentType: 'application/json',
          body: JSON.stringify({ ok: false, reason: 'service_unavailable', message: 'Try again' }),
        });
      else await route.continue();
    });
    // The claim's heartbeat is as of now: the tests before this one may have taken longer than 90 s
    // on a loaded machine, and the silence is to be measured on the page's clock from here.
    await svc.orm.em.getConnection().execute('update speech_leases set last_heartbeat_at = now() where job_id = ? and ended_at is null', [ids.running]);
    await page.goto(`${svc.url}/speech/jobs/${ids.running}`);
    expect(await page.textContent('#worker-name')).toBe('sim-small');
    expect(await page.isHidden('#liveness-warning')).toBe(true);
    expect(await page.textContent('#segments')).toContain('So tell me how it started.');
    // Estimated finish from the completed segment: 30 s of 120 s done.
    expect(await page.getAttribute('#job-eta time', 'datetime')).toMatch(/^\d{4}-/);

    await page.clock.runFor(15_000);
    await expect.poll(() => requests).toBe(1);
    await expect.poll(() => page.getAttribute('#worker-refreshed', 'data-state')).toBe('ok');

    fail = true;
    await page.clock.runFor(15_000);
    await expect.poll(() => requests).toBe(2);
    await expect.poll(() => page.getAttribute('#worker-refreshed', 'data-state')).toBe('failed');
    expect(await page.textContent('#worker-refreshed')).toContain('Refresh failed');
    expect(await page.textContent('#worker-name')).toBe('sim-small'); // the last valid snapshot stays
    expect(await page.isHidden('#liveness-warning')).toBe(true);

    // No heartbeat since the claim: once the page's clock has moved past 90 s the warning shows.
    fail = false;
    await page.clock.runFor(61_000);
    await expect.poll(() => page.isVisible('#liveness-warning')).toBe(true);
    expect(Number(await page.textContent('#silence-seconds'))).toBeGreaterThanOrEqual(90);
    expect(await page.textContent('#liveness-state')).toBe('No heartbeat for 90 seconds or more.');
    await shot(page, 'job-liveness-warning');
    await expectNoCspViolations(page, consoleErrors);
    await context.close();
  });

  it('the target selector shows a fresh incompatible worker with its reason and refuses it (page and API)', async () => {
    // A fresh worker on a contract older than diarization's: it cannot claim every pinned job.
    const { secret } = await svc.workers.createWorker('old-contract');
    const client = new CoordinatorClient(`127.0.0.1:${svc.grpcPort}`, secret);
    await client.hello({
      contract_version: DIARIZATION_CONTRACT_VERSION - 1,
      agent_version: 'old',
      hostname: 'old',
      capabilities: { models: ['small'], engines: ['test'], diarization: false, can_fetch_urls: true, device: 'cpu' },
      local: false,
    });
    await svc.workers.createWorker('offline-one'); // never said Hello: may be chosen in advance
    const { context, consoleErrors } = await signedIn(names.admin);
    const page = await context.newPage();
    await page.goto(`${svc.url}/speech/jobs/${ids.failed}`);
    // The page fetches its cards once after subscribing; the forged choice below goes into the card that stays.
    await page.waitForSelector('html[data-cards="synced"]');
    const option = page.locator('#target-select option[value="worker:old-contract"]');
    expect(await option.isDisabled()).toBe(true);
    expect(await option.textContent()).toContain('incompatible');
    expect(await page.textContent('#incompatible-workers')).toMatch(/old-contract: incompatible — it speaks worker contract \d/);
    expect(await page.locator('#target-select option[value="worker:offline-one"]').isDisabled()).toBe(false);

    // A forged post of the disabled choice is refused with the reason; a permitted one is saved.
    await page.evaluate(() => {
      const o = document.querySelector<HTMLOptionElement>('#target-select option[value="worker:old-contract"]')!;
      o.disabled = false;
      o.selected = true;
    });
    await page.click('#target button[type=submit]');
    await expect.poll(() => page.textContent('#target-error')).toMatch(/incompatible/);
    await shot(page, 'job-target-refused');
    await page.selectOption('#target-select', 'worker:offline-one');
    await page.click('#target button[type=submit]');
    await page.waitForURL(/notice=target-saved/);
    expect(
      (await svc.speech.jobs.getVisible({ id: 0, username: names.admin, email: null, isAdmin: true, permissions: [] }, ids.failed)).targetWorker?.name,
    ).toBe('offline-one');
    await expectNoCspViolations(page, consoleErrors);

    const token = await jwt((await svc.orm.em.getConnection().execute<Array<{ id: number }>>('select id from users where username = ?', [names.admin]))[0]!.id);
    const res = await svc.app.inject({
      method: 'PUT',
      url: `/api/speech/jobs/${ids.failed}/target`,
      headers: { authorization: `Bearer ${token}` },
      payload: { mode: 'worker', worker: 'old-contract' },
    });
    expect(res.statusCode).toBe(422);
    expect(res.json()).toMatchObject({ ok: false, errors: { worker: [expect.stringMatching(/incompatible/)] } });
    client.close();
    await context.close();
  });

  it('queues a URL and a file without JavaScript, and the no-script job page shows them', async () => {
    const { context } = await signedIn(names.alice, { javaScriptEnabled: false });
    const page = await context.newPage();
    await page.goto(`${svc.url}/speech`);
    await page.fill('#source_url', 'https://media.example.org/no-script.mp3');
    await page.fill('#source_label', 'No-script URL');
    await page.fill('#source_note', 'Posted without JavaScript');
    // No AI provider here: the form offers no translations (speech-ai.test.ts has the form with one).
    expect(await page.$('#translation_target_languages')).toBeNull();
    await page.check('#disable_diarization');
    await page.click('#submit-form button[type=submit]');
    await page.waitForURL(/\/speech\/jobs\/\d+\?notice=queued$/);
    expect(await page.textContent('h1')).toBe('No-script URL');
    expect(await page.textContent('#source-note')).toBe('Posted without JavaScript');
    const urlJob = await svc.speech.jobs.getVisible(
      { id: 0, username: '', email: null, isAdmin: true, permissions: [] },
      Number(/jobs\/(\d+)/.exec(page.url())![1]),
    );
    expect(urlJob.translationTargetLanguages).toEqual([]);
    expect(urlJob.diarizationRequested).toBe(false);

    const wav = path.join(dir, 'tone.wav');
    execFileSync('sox', ['-n', '-r', '16000', '-c', '1', wav, 'synth', '1.5', 'sine', '440']);
    await page.goto(`${svc.url}/speech`);
    await page.setInputFiles('#media_file', wav);
    await page.click('#submit-form button[type=submit]');
    await page.waitForURL(/\/speech\/jobs\/\d+\?notice=queued$/);
    expect(await page.textContent('h1')).toBe('tone.wav');
    await shot(page, 'job-no-script-upload');

    // A refused submission shows the form again with the reason.
    await page.goto(`${svc.url}/speech`);
    await page.click('#submit-form button[type=submit]');
    expect(await page.textContent('#submit-error')).toMatch(/source_url|media_file/);
    await context.close();
  });

  it('offers TXT, SRT, WebVTT, JSON and DOCX downloads (API, job page, share page); a subtitle parser reads them', async () => {
    const { context } = await signedIn(names.alice);
    const page = await context.newPage();
    await page.goto(`${svc.url}/speech/jobs/${ids.completed}`);
    const links = await page.$$eval('#downloads a', (as) => as.map((a) => (a as HTMLAnchorElement).getAttribute('href')));
    // The job is diarized, so the speaker turns (RTTM) are offered too.
    expect(links).toEqual(['txt', 'srt', 'vtt', 'json', 'docx', 'rttm'].map((f) => `/api/speech/jobs/${ids.completed}/transcript.${f}`));
    const get = async (url: string) => {
      const res = await page.request.get(`${svc.url}${url}`);
      return {
        status: res.status(),
        type: res.headers()['content-type'] ?? '',
        disposition: res.headers()['content-disposition'] ?? '',
        body: await res.text(),
      };
    };
    for (const base of [`/api/speech/jobs/${ids.completed}/transcript`, new URL(shareUrl).pathname]) {
      const srt = await get(`${base}.srt`);
      expect(srt.status).toBe(200);
      expect(srt.disposition).toMatch(/^attachment; filename="Board meeting\.srt"/);
      const cues: Cue[] = parseSubtitles(srt.body).entries;
      // one cue per segment here (each fits), 80 ms apart
      expect(cues.map((c) => [c.from, c.to])).toEqual([
        [0, 1920],
        [2000, 3920],
        [4000, 6000],
      ]);
      expect(cues.map((c) => c.text)).toEqual([
        'Speaker 1: Welcome to the board meeting.',
        'Speaker 2: Thank you, let us begin.',
        'Speaker 1: First item: the budget.',
      ]);

      const vtt = await get(`${base}.vtt`);
      expect(vtt.type).toMatch(/^text\/vtt/);
      expect(vtt.body.startsWith('WEBVTT\n\n')).toBe(true);
      const vcues: Cue[] = parseSubtitles(vtt.body).entries;
      expect(vcues.map((c) => [c.from, c.to])).toEqual(cues.map((c) => [c.from, c.to]));
      expect(vcues[1]?.text).toBe('<v Speaker 2>Thank you, let us begin.');

      const json = JSON.parse((await get(`${base}.json`)).body) as {
        segments: Array<{ start: number; end: number; text: string; speaker_name: string | null }>;
      };
      expect(json.segments.map((s) => [s.start, s.end, s.speaker_name])).toEqual([
        [0, 2, 'Speaker 1'],
        [2, 4, 'Speaker 2'],
        [4, 6, 'Speaker 1'],
      ]);
      expect((await get(`${base}.txt`)).body).toContain('Thank you, let us begin.');
    }
    // The format as a query parameter; other people get 404.
    const q = await get(`/api/speech/jobs/${ids.completed}/transcript?format=vtt`);
    expect(q.body.startsWith('WEBVTT')).toBe(true);
    const bob = await signedIn(names.bob);
    const res = await bob.context.request.get(`${svc.url}/api/speech/jobs/${ids.completed}/transcript.srt`);
    expect(res.status()).toBe(404);
    await bob.context.close();
    await context.close();
  });

  it("the queue's Stage column says only what Status does not; the language hint's placeholder fits", async () => {
    const { context } = await signedIn(names.alice);
    const page = await context.newPage();
    await page.goto(`${svc.url}/speech`);
    const rows = await page.$$eval('#queue-table tbody tr[data-job]', (trs) =>
      trs.map((tr) => [tr.querySelector('.badge')?.textContent ?? '', tr.querySelector('[data-stage]')?.textContent ?? '']),
    );
    expect(rows.length).toBeGreaterThan(0);
    for (const [status, stage] of rows) expect(stage, status).not.toBe(status);
    // The placeholder is not cut off: it fits the input's width.
    const fits = await page.$eval('#language', (el) => {
      const input = el as HTMLInputElement;
      const probe = document.createElement('span');
      probe.style.font = getComputedStyle(input).font;
      probe.style.position = 'absolute';
      probe.textContent = input.placeholder;
      document.body.append(probe);
      const wide = probe.getBoundingClientRect().width;
      probe.remove();
      return wide <= input.clientWidth;
    });
    expect(fits).toBe(true);
    await context.close();
  });

  it('a restarted job does not show the previous attempt’s segments', async () => {
    const { context } = await signedIn(names.alice);
    const page = await context.newPage();
    await page.goto(`${svc.url}/speech/jobs/${ids.failed}`);
    expect(await page.textContent('#segments')).toContain('Half a sentence from attempt one');
    await page.click('#job-restart');
    await page.waitForURL(/notice=restarted/);
    expect(await page.$$eval('#segments .seg', (segs) => segs.length)).toBe(0);
    expect(await page.textContent('#new-attempt')).toContain('starts over');
    expect(await svc.speech.jobs.segments(ids.failed, 1)).toEqual([]);
    await context.close();
  });

  it('stores the local model allowlist as an admin setting (the environment only seeds it)', async () => {
    const { context } = await signedIn(names.admin);
    const page = await context.newPage();
    await page.goto(`${svc.url}/admin`);
    expect(await page.inputValue('#local_models')).toBe('small');
    expect(await page.textContent('#local-models')).toContain('SPEECH_LOCAL_MODELS');
    await page.fill('#local_models', 'small, large');
    await page.click('#local-models button[type=submit]');
    await page.waitForURL(/saved=1/);
    expect(await page.inputValue('#local_models')).toBe('small, large');
    const rows = await svc.orm.em.getConnection().execute<Array<{ value: string[] }>>(`select value from app_settings where key = 'speech.local_models'`);
    expect(rows[0]?.value).toEqual(['small', 'large']);
    await page.fill('#local_models', 'bad model!');
    await page.click('#local-models button[type=submit]');
    expect(await page.textContent('#local-models-error')).toContain('not a model name');
    await context.close();
  });
});
