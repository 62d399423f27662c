import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import { accessJwtPayload } from '../../coordinator/src/accounts/auth-plugin.js';
import type { AuthUser } from '../../coordinator/src/accounts/types.js';
import { loadConfig } from '../../coordinator/src/config.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { launchBrowser, watchContext } from '../support/browser.js';
import { createTestDatabase, randomName, testEnv, type TestDatabase } from '../support/harness.js';
import { SimWorker } from '../support/sim-worker.js';

/**
 * The job page as the place to read and listen (issue 38), in Chromium on a desktop and a 390 px
 * phone: the transcript first (speaker turns in their colours, the rest in a side column or in
 * collapsed sections after it), search with a count and next/previous, the player tied to the
 * words (a click on a word seeks, playing highlights the word at currentTime, the keyboard), the
 * waveform with the speaker turns, the media route's byte ranges and who may read it, the released
 * media, and playback on the share page (off by default). Screenshots of both viewports go to a
 * temporary folder, or to SCREENSHOT_DIR when set (`SCREENSHOT_DIR=docs/screenshots` refreshes the
 * committed ones; SCREENSHOT_TAG names them, `after` by default): a test run changes no tracked file.
 */
const dir = mkdtempSync(path.join(tmpdir(), 'sonar-reading-'));
const SHOTS = process.env.SCREENSHOT_DIR ? path.resolve(process.env.SCREENSHOT_DIR) : path.join(dir, 'screenshots');
const TAG = process.env.SCREENSHOT_TAG ?? 'after';
let db: TestDatabase;
let svc: RunningCoordinator;
let browser: Browser;
let sim: SimWorker;
let alice: AuthUser;
const password = 'a-long-password-1';
const names = { alice: randomName('reader'), bob: randomName('other'), carol: randomName('nospeech') };
const sessions: Record<string, Awaited<ReturnType<BrowserContext['storageState']>>> = {};
let clip = '';
let jobId = 0;

const VIEWPORTS = { desktop: { width: 1280, height: 900 }, phone: { width: 390, height: 844 } } as const;

/** Six 4-second segments, a word a second; "budget" three times; speakers 0,0,1,1,0,2. */
const TEXTS = ['the budget is tight', 'so we plan ahead', 'budget talks go on', 'until the evening ends', 'a budget for all', 'thank you very much'];
const SPEAKERS = [0, 0, 1, 1, 0, 2];
const timed = TEXTS.map((text, i) => ({
  start: i * 4,
  end: i * 4 + 4,
  text,
  words: text.split(' ').map((w, j) => ({ start: i * 4 + j, end: i * 4 + j + 1, text: w })),
}));

beforeAll(async () => {
  db = await createTestDatabase();
  svc = await startCoordinator(loadConfig(testEnv(db, { SPEECH_MEDIA_DIR: path.join(dir, 'media') })));
  const accounts = new AccountService(svc.orm);
  alice = (await accounts.createUser({ username: names.alice, password, permissions: ['speech.use'] })).user;
  await accounts.createUser({ username: names.bob, password, permissions: ['speech.use'] });
  await accounts.createUser({ username: names.carol, password, permissions: [] });
  sim = await SimWorker.start(svc, 'sim-reading', ['small']);
  clip = path.join(dir, 'talk.wav');
  // 24 s of a tone whose loudness changes every 4 s (so the waveform has a shape).
  execFileSync('sox', ['-n', '-r', '16000', '-c', '1', '-b', '16', clip, 'synth', '24', 'sine', '300', 'tremolo', '0.25', '80']);
  const bytes = readFileSync(clip);
  const temp = path.join(dir, 'upload.part');
  writeFileSync(temp, bytes);
  jobId = (
    await svc.speech.jobs.create(alice, {
      channel: 'web',
      model: 'small',
      source: { type: 'upload', tempPath: temp, filename: 'talk.wav', sizeBytes: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') },
    })
  ).id;
  await sim.run(jobId, { timed, turns: timed.map((s, i) => ({ start: s.start, end: s.end, speaker: SPEAKERS[i]! })) });
  browser = await launchBrowser();
  for (const who of Object.values(names)) {
    const login = await browser.newContext();
    const page = await login.newPage();
    await page.goto(`${svc.url}/login`);
    await page.fill('#username', who);
    await page.fill('#password', password);
    await page.click('button[type=submit]');
    await page.waitForURL(`${svc.url}/`);
    sessions[who] = await login.storageState();
    await login.close();
  }
}, 120_000);

afterAll(async () => {
  await browser?.close();
  sim?.close();
  await svc?.close();
  await db?.drop();
});

async function watchedPage(viewport: { width: number; height: number }, who = names.alice) {
  const context = await browser.newContext({ viewport, storageState: sessions[who], ...(viewport.width < 500 ? { isMobile: true, hasTouch: true } : {}) });
  const { problems, cspViolations } = await watchContext(context);
  const page = await context.newPage();
  return { context, page, problems, cspViolations };
}

/**
 * The problems a page recorded, less the player's cancelled media requests: Chromium aborts a
 * streamed byte range when the media seeks (and asks for a new one), which is how it plays.
 */
const real = (problems: string[]) => problems.filter((p) => !/^failed: \S+(\/media|\.media) net::ERR_ABORTED$/.test(p));

/** Clicks the middle of a word of segment `seq` (the text has no element per word: the word's place comes from a range over it). */
async function clickWord(page: Page, seq: number, word: string) {
  const box = await page.$eval(
    `#seg-${seq}`,
    (seg, w) => {
      const node = seg.firstChild as Text;
      const at = ` ${node.data} `.indexOf(` ${w} `);
      const range = document.createRange();
      range.setStart(node, at);
      range.setEnd(node, at + w.length);
      const r = range.getBoundingClientRect();
      return { x: r.x + r.width / 2, y: r.y + r.height / 2 };
    },
    word,
  );
  await page.mouse.click(box.x, box.y);
}

const mediaTime = (page: Page) => page.$eval('#media', (m) => (m as HTMLMediaElement).currentTime);

async function api(method: 'POST' | 'PATCH', url: string, payload?: Record<string, unknown>) {
  const token = svc.app.jwt.sign(await accessJwtPayload(new AccountService(svc.orm), alice.id));
  return svc.app.inject({ method, url, headers: { authorization: `Bearer ${token}` }, ...(payload ? { payload } : {}) });
}

describe('the job page: read, search, listen', { timeout: 120_000 }, () => {
  it('screenshots of both viewports', async () => {
    mkdirSync(SHOTS, { recursive: true });
    for (const [name, viewport] of Object.entries(VIEWPORTS)) {
      const { context, page } = await watchedPage(viewport);
      await page.goto(`${svc.url}/speech/jobs/${jobId}`);
      await page.waitForSelector('html[data-cards="synced"]');
      // With a player (not before issue 38), once its waveform is drawn.
      if (await page.locator('#media').count()) await page.waitForSelector('#waveform[data-ready="1"]');
      const file = path.join(SHOTS, `job-page-${name}-${TAG}.png`);
      await page.screenshot({ path: file, fullPage: false });
      // A PNG of the viewport's width (IHDR: width at byte 16).
      const png = readFileSync(file);
      expect(png.subarray(1, 4).toString()).toBe('PNG');
      expect(png.readUInt32BE(16)).toBe(viewport.width);
      await context.close();
    }
  });

  for (const [name, viewport] of Object.entries(VIEWPORTS)) {
    it(`${name}: the transcript comes first, in speaker turns with their colours`, async () => {
      const { context, page, problems, cspViolations } = await watchedPage(viewport);
      await page.goto(`${svc.url}/speech/jobs/${jobId}`);
      await page.waitForSelector('html[data-cards="synced"]');
      const turns = await page.$$eval('#segments .turn', (ps) =>
        ps.map((p) => [p.querySelector('.who')?.textContent, p.querySelector('.who')?.getAttribute('class'), p.querySelector('.ts')?.textContent]),
      );
      expect(turns).toEqual([
        ['Speaker 1', 'who spk-1', '0:00'],
        ['Speaker 2', 'who spk-2', '0:08'],
        ['Speaker 1', 'who spk-1', '0:16'],
        ['Speaker 3', 'who spk-3', '0:20'],
      ]);
      // The same colour for the same speaker in the speakers card.
      expect(await page.$$eval('#speakers .who', (els) => els.map((e) => e.getAttribute('class')))).toEqual(['who spk-1', 'who spk-2', 'who spk-3']);
      const box = async (sel: string) => (await page.locator(sel).boundingBox())!;
      const transcript = await box('#transcript');
      const side = await box('.job-side');
      if (name === 'phone') {
        // After the transcript, collapsed (the share-and-manage section open: its buttons are the page's actions).
        expect(side.y).toBeGreaterThan(transcript.y + transcript.height - 1);
        expect(await page.isVisible('#facts')).toBe(false);
        await page.click('details[data-section="facts"] > summary');
        expect(await page.isVisible('#facts')).toBe(true);
        expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
      } else {
        expect(side.x).toBeGreaterThan(transcript.x + transcript.width - 1);
        expect(await page.isVisible('#facts')).toBe(true);
        expect(await page.isVisible('details[data-section="facts"] > summary')).toBe(false);
      }
      expect(await cspViolations(page)).toEqual([]);
      expect(real(problems)).toEqual([]);
      await context.close();
    });

    it(`${name}: search finds and counts, next and previous go round`, async () => {
      const { context, page, problems } = await watchedPage(viewport);
      await page.goto(`${svc.url}/speech/jobs/${jobId}`);
      await page.fill('#search-input', 'budget');
      await expect.poll(() => page.textContent('#search-count')).toBe('1 of 3');
      await page.click('#search-next');
      expect(await page.textContent('#search-count')).toBe('2 of 3');
      await page.click('#search-next');
      await page.click('#search-next');
      expect(await page.textContent('#search-count')).toBe('1 of 3');
      await page.click('#search-prev');
      expect(await page.textContent('#search-count')).toBe('3 of 3');
      // A query across words (each word is its own element) is found too.
      await page.fill('#search-input', 'talks go');
      await expect.poll(() => page.textContent('#search-count')).toBe('1 of 1');
      await page.fill('#search-input', 'nothing like this');
      await expect.poll(() => page.textContent('#search-count')).toBe('no matches');
      expect(await page.evaluate(() => CSS.highlights.get('transcript-match')?.size ?? 0)).toBe(0);
      expect(real(problems)).toEqual([]);
      await context.close();
    });

    it(`${name}: a click on a word or a timestamp seeks the media; playing highlights the word at currentTime`, async () => {
      const { context, page, problems, cspViolations } = await watchedPage(viewport);
      await page.goto(`${svc.url}/speech/jobs/${jobId}`);
      await page.waitForSelector('html[data-cards="synced"]');
      await page.waitForSelector('#media');
      await clickWord(page, 2, 'talks');
      await expect.poll(() => mediaTime(page)).toBeCloseTo(9, 1);
      expect(await page.getAttribute('#segments', 'data-now-word')).toBe('talks');
      await page.click('#segments .turn:nth-of-type(3) .ts');
      await expect.poll(() => mediaTime(page)).toBeCloseTo(16, 1);
      expect(await page.getAttribute('#segments', 'data-now-word')).toBe('a');

      // The keyboard: → moves 5 s, ← back; space plays and pauses; > speeds up.
      await page.locator('#segments').click({ position: { x: 1, y: 1 } }); // focus the page, not a field
      await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
      await clickWord(page, 0, 'the');
      await expect.poll(() => mediaTime(page)).toBeCloseTo(0, 1);
      await page.keyboard.press('ArrowRight');
      await expect.poll(() => mediaTime(page)).toBeCloseTo(5, 1);
      await page.keyboard.press('ArrowLeft');
      await expect.poll(() => mediaTime(page)).toBeCloseTo(0, 1);
      await page.keyboard.press('>');
      expect(await page.$eval('#media', (m) => (m as HTMLMediaElement).playbackRate)).toBe(1.25);
      await page.selectOption('#speed', '2');
      expect(await page.$eval('#media', (m) => (m as HTMLMediaElement).playbackRate)).toBe(2);
      await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
      await page.keyboard.press(' ');
      await expect.poll(() => page.$eval('#media', (m) => (m as HTMLMediaElement).paused)).toBe(false);
      // While it plays, the highlighted word is the one spoken at currentTime (a word a second).
      await expect.poll(() => mediaTime(page), { timeout: 10_000 }).toBeGreaterThan(3);
      const sample = await page.evaluate(() => {
        const m = document.getElementById('media') as HTMLMediaElement;
        return { t: m.currentTime, word: Number(document.getElementById('segments')?.dataset.nowT) };
      });
      // The highlight moves on the next animation frame: within one word of currentTime.
      expect(sample.word).toBeLessThanOrEqual(sample.t + 0.1);
      expect(sample.t - sample.word).toBeLessThan(1.5);
      await page.keyboard.press(' ');
      await expect.poll(() => page.$eval('#media', (m) => (m as HTMLMediaElement).paused)).toBe(true);
      const paused = await mediaTime(page);
      await expect.poll(async () => Number(await page.getAttribute('#segments', 'data-now-t'))).toBe(Math.floor(paused));

      // The waveform: the coordinator's peaks, the speaker turns as regions.
      await page.waitForSelector('#waveform[data-ready="1"]');
      expect(await cspViolations(page)).toEqual([]);
      expect(real(problems)).toEqual([]);
      await context.close();
    });
  }

  it('the waveform peaks are computed once on the coordinator and cached next to the media', async () => {
    const { context, page } = await watchedPage(VIEWPORTS.desktop);
    const first = await page.request.get(`${svc.url}/api/speech/jobs/${jobId}/peaks`);
    expect(first.status()).toBe(200);
    const body = (await first.json()) as { peaks: number[]; duration: number; seconds_per_peak: number };
    expect(body.duration).toBeCloseTo(24, 0);
    expect(body.peaks.length).toBeGreaterThan(100);
    expect(Math.max(...body.peaks)).toBeGreaterThan(0.3);
    const media = (await svc.speech.jobs.getVisible(alice, jobId)).mediaPath!;
    expect(JSON.parse(readFileSync(path.join(path.dirname(media), 'peaks.json'), 'utf8')).peaks).toEqual(body.peaks);
    await context.close();
  });

  it('the media route answers byte ranges with the right bytes, and only to who may see the job', async () => {
    const bytes = readFileSync(clip);
    const { context, page } = await watchedPage(VIEWPORTS.desktop);
    const url = `${svc.url}/api/speech/jobs/${jobId}/media`;
    const whole = await page.request.get(url);
    expect(whole.status()).toBe(200);
    expect(whole.headers()['accept-ranges']).toBe('bytes');
    expect(whole.headers()['content-type']).toMatch(/^audio\//);
    expect(Buffer.compare(await whole.body(), bytes)).toBe(0);
    const part = await page.request.get(url, { headers: { range: 'bytes=100-1099' } });
    expect(part.status()).toBe(206);
    expect(part.headers()['content-range']).toBe(`bytes 100-1099/${bytes.length}`);
    expect(Buffer.compare(await part.body(), bytes.subarray(100, 1100))).toBe(0);
    const open = await page.request.get(url, { headers: { range: `bytes=${bytes.length - 10}-` } });
    expect(open.status()).toBe(206);
    expect(Buffer.compare(await open.body(), bytes.subarray(bytes.length - 10))).toBe(0);
    const suffix = await page.request.get(url, { headers: { range: 'bytes=-7' } });
    expect(Buffer.compare(await suffix.body(), bytes.subarray(bytes.length - 7))).toBe(0);
    const past = await page.request.get(url, { headers: { range: `bytes=${bytes.length + 5}-` } });
    expect(past.status()).toBe(416);
    expect(past.headers()['content-range']).toBe(`bytes */${bytes.length}`);
    await context.close();

    // Another user: 404 (the job does not exist for them); no speech permission: 403; nobody: 401.
    const bob = await watchedPage(VIEWPORTS.desktop, names.bob);
    expect((await bob.page.request.get(url)).status()).toBe(404);
    expect((await bob.page.request.get(`${svc.url}/api/speech/jobs/${jobId}/peaks`)).status()).toBe(404);
    await bob.context.close();
    const carol = await watchedPage(VIEWPORTS.desktop, names.carol);
    expect((await carol.page.request.get(url)).status()).toBe(403);
    await carol.context.close();
    expect((await fetch(url)).status).toBe(401);
  });

  it('the share page plays only when the owner allows it (off by default)', async () => {
    const created = await api('POST', `/api/speech/jobs/${jobId}/share`);
    expect(created.statusCode).toBe(200);
    expect(created.json().share.playback).toBe(false);
    const shareUrl = created.json().share.url as string;
    const sharePath = new URL(shareUrl).pathname;
    const anon = await browser.newContext({ viewport: VIEWPORTS.phone, isMobile: true, hasTouch: true });
    const { problems, cspViolations } = await watchContext(anon);
    const page = await anon.newPage();
    expect((await page.request.get(`${svc.url}${sharePath}.media`)).status()).toBe(404);
    await page.goto(`${svc.url}${sharePath}?full`);
    expect(await page.locator('#media').count()).toBe(0);
    // Read-only: the same reading view, search works.
    await page.fill('#search-input', 'budget');
    await expect.poll(() => page.textContent('#search-count')).toBe('1 of 3');
    problems.length = 0;

    const allowed = await api('PATCH', `/api/speech/jobs/${jobId}/share`, { playback: true });
    expect(allowed.statusCode).toBe(200);
    expect(allowed.json().share.playback).toBe(true);
    expect((await api('PATCH', `/api/speech/jobs/${jobId}/share`, { playback: 'yes' })).statusCode).toBe(422);
    await page.goto(`${svc.url}${sharePath}?full`);
    await page.waitForSelector('#media');
    await clickWord(page, 4, 'budget');
    await expect.poll(() => mediaTime(page)).toBeCloseTo(17, 1);
    await page.waitForSelector('#waveform[data-ready="1"]');
    const range = await page.request.get(`${svc.url}${sharePath}.media`, { headers: { range: 'bytes=0-9' } });
    expect(range.status()).toBe(206);
    expect(Buffer.compare(await range.body(), readFileSync(clip).subarray(0, 10))).toBe(0);
    expect(await cspViolations(page)).toEqual([]);
    expect(real(problems)).toEqual([]);
    await anon.close();

    // The owner turns it off again from the job page's form (no script needed).
    const owner = await browser.newContext({ storageState: sessions[names.alice], javaScriptEnabled: false });
    const jobPage = await owner.newPage();
    await jobPage.goto(`${svc.url}/speech/jobs/${jobId}`);
    expect(await jobPage.getAttribute('#share-playback-state', 'data-playback')).toBe('1');
    await jobPage.click('#share-playback-toggle');
    await jobPage.waitForURL(/notice=share-playback/);
    expect(await jobPage.getAttribute('#share-playback-state', 'data-playback')).toBe('0');
    await owner.close();
    expect((await fetch(`${svc.url}${sharePath}.media`)).status).toBe(404);
  });

  it('released media: the page says so and shows no player; the media route answers 404', async () => {
    const { context, page } = await watchedPage(VIEWPORTS.desktop);
    await svc.orm.em.fork().getConnection().execute('update speech_jobs set media_path = null where id = ?', [jobId]);
    await page.goto(`${svc.url}/speech/jobs/${jobId}`);
    expect(await page.textContent('#media-released')).toContain('released');
    expect(await page.locator('#media').count()).toBe(0);
    expect((await page.request.get(`${svc.url}/api/speech/jobs/${jobId}/media`)).status()).toBe(404);
    await context.close();
  });
});
