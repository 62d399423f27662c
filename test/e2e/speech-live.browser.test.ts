import { execFileSync } from 'node:child_process';
import { mkdtempSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import { loadConfig } from '../../coordinator/src/config.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { launchBrowser } from '../support/browser.js';
import { createTestDatabase, randomName, testEnv, type TestDatabase } from '../support/harness.js';
import { startNode, type Proc } from '../support/processes.js';

/** A person uploads speech on /speech and watches the transcript arrive on the job page. */
let db: TestDatabase;
let svc: RunningCoordinator;
let browser: Browser;
let agent: Proc;
const dir = mkdtempSync(path.join(tmpdir(), 'sonar-live-'));
const user = { name: randomName('viewer'), password: 'a-long-password-1' };

function speechFile(): string {
  const silence = path.join(dir, 'silence.wav');
  execFileSync('sox', ['-n', '-r', '22050', '-c', '1', '-b', '16', silence, 'trim', '0', '1.0']);
  const parts = Array.from({ length: 3 }, () => ['hello world', 'i would like a cup of coffee', 'please call me tomorrow morning', 'good morning everyone'])
    .flat()
    .flatMap((sentence, i) => {
      const part = path.join(dir, `part-${i}.wav`);
      execFileSync('espeak-ng', ['-v', 'en-us', '-w', part, `${sentence}.`]);
      return [part, silence];
    });
  const file = path.join(dir, 'meeting.wav');
  execFileSync('sox', [...parts, file]);
  return file;
}

/** A page signed in as `user` (the sign-in form /speech sends an anonymous visitor to), on /speech. */
async function signedIn() {
  const page = await browser.newPage();
  await page.goto(`${svc.url}/speech`);
  await page.fill('#username', user.name);
  await page.fill('#password', user.password);
  await page.click('button[type=submit]');
  await page.waitForURL(`${svc.url}/speech`);
  return page;
}

/** A 16 kHz mono WAV of a sine tone, `seconds` long. */
function tone(name: string, seconds: number, hz = 440): string {
  const file = path.join(dir, name);
  execFileSync('sox', ['-n', '-r', '16000', '-c', '1', '-b', '16', file, 'synth', String(seconds), 'sine', String(hz)]);
  return file;
}

beforeAll(async () => {
  db = await createTestDatabase();
  svc = await startCoordinator(loadConfig(testEnv(db, { SPEECH_MEDIA_DIR: path.join(dir, 'media'), SPEECH_DEFAULT_MODEL: 'pocketsphinx-en-us' })));
  await new AccountService(svc.orm).createUser({ username: user.name, password: user.password, permissions: ['speech.use'] });
  const { secret } = await svc.workers.createWorker('browser-worker');
  agent = startNode('worker/dist/bin.js', ['--coordinator', `127.0.0.1:${svc.grpcPort}`], { WORKER_SECRET: secret });
  await agent.waitFor(/connected to coordinator/);
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await agent?.stop('SIGKILL');
  await svc?.close();
  await db?.drop();
});

describe('speech pages in a browser', () => {
  it('uploads a file on /speech and shows segments arriving live before the job completes', async () => {
    const page = await signedIn();

    await page.setInputFiles('#media_file', speechFile());
    await page.click('#submit-form button[type=submit]');
    await page.waitForURL(/\/speech\/jobs\/\d+$/);
    const jobId = Number(new URL(page.url()).pathname.split('/').pop());

    // Record, in the page, when each segment and each status change shows up.
    await page.evaluate(() => {
      const w = window as unknown as { timeline: Array<{ kind: string; at: number; value: string }> };
      w.timeline = [];
      const list = document.getElementById('segments')!;
      // The summary card is swapped as a whole when the job changes: watch its slot.
      const summary = document.querySelector('[data-card="summary"]')!;
      // Segments are spans in the speaker turns (paragraphs): a new one may start a turn or join the last.
      for (const seg of list.querySelectorAll('.seg')) w.timeline.push({ kind: 'segment', at: performance.now(), value: seg.textContent ?? '' });
      new MutationObserver((records) => {
        for (const r of records)
          r.addedNodes.forEach((n) => {
            if (!(n instanceof HTMLElement)) return;
            for (const seg of n.matches('.seg') ? [n] : n.querySelectorAll('.seg'))
              w.timeline.push({ kind: 'segment', at: performance.now(), value: seg.textContent ?? '' });
          });
      }).observe(list, { childList: true, subtree: true });
      new MutationObserver(() =>
        w.timeline.push({ kind: 'status', at: performance.now(), value: document.getElementById('job-status')?.dataset.status ?? '' }),
      ).observe(summary, { attributes: true, childList: true, subtree: true });
    });
    await page.waitForSelector('#job-status[data-status="completed"]', { timeout: 90_000 });
    // The labelled pass (split where words change speaker) replaces the live segments.
    await page.waitForSelector('#diarization-state[data-state="completed"]', { timeout: 30_000 });

    const timeline = await page.evaluate(() => (window as unknown as { timeline: Array<{ kind: string; at: number; value: string }> }).timeline);
    const segmentsShown = timeline.filter((e) => e.kind === 'segment');
    const completedAt = timeline.find((e) => e.kind === 'status' && e.value === 'completed')!.at;
    const stored = await svc.speech.jobs.segments(jobId, 1);
    expect(stored.length).toBeGreaterThan(3);
    // Every stored segment is on the page exactly once, in order; several appeared before completion.
    const items = await page.$$eval('#segments .seg', (segs) =>
      segs.map((seg) => [Number((seg as HTMLElement).dataset.seq), (seg as HTMLElement).dataset.speaker ?? '']),
    );
    expect(items).toEqual(stored.map((s) => [s.seq, s.speaker ?? '']));
    expect(stored.every((s) => s.speaker)).toBe(true);
    expect(segmentsShown.filter((e) => e.at < completedAt).length).toBeGreaterThanOrEqual(2);
    expect((await page.textContent('#segments'))!.toLowerCase()).toContain('coffee');

    // Reloading shows the finished transcript without live updates (readable without JavaScript).
    const plain = await browser.newContext({ javaScriptEnabled: false });
    await plain.addCookies((await page.context().cookies()).map((c) => ({ ...c })));
    const p2 = await plain.newPage();
    await p2.goto(`${svc.url}/speech/jobs/${jobId}`);
    expect(await p2.$$eval('#segments .seg', (segs) => segs.length)).toBe(stored.length);
    await plain.close();
  }, 120_000);

  it('states a speaker count on /speech: the script’s upload sends only the chosen mode’s inputs', async () => {
    const page = await signedIn();
    const short = path.join(dir, 'short.wav');
    execFileSync('sox', ['-n', '-r', '16000', '-c', '1', '-b', '16', short, 'trim', '0', '1.0']);
    await page.setInputFiles('#media_file', short);
    await page.check('#submit-speakers-between');
    await page.fill('#submit-num_speakers', '5');
    await page.fill('#submit-min_speakers', '2');
    await page.fill('#submit-max_speakers', '3');
    await page.click('#submit-form button[type=submit]');
    await page.waitForURL(/\/speech\/jobs\/\d+$/);
    const jobId = Number(new URL(page.url()).pathname.split('/').pop());
    const rows = await svc.orm.em
      .fork()
      .getConnection()
      .execute<Array<{ s: unknown }>>('select diarization_speakers as s from speech_jobs where id = ?', [jobId]);
    expect(rows[0]!.s).toEqual({ min_speakers: 2, max_speakers: 3 });
    expect(await page.textContent('#requested-speakers')).toBe('Speakers stated: 2 to 3.');
  });

  it('a batch of files: one job per file, titles numbered; a file that fails keeps its reason on screen beside the others’ links', async () => {
    const page = await signedIn();
    const labels = async () =>
      (
        await svc.orm.em
          .fork()
          .getConnection()
          .execute<Array<{ label: string; filename: string }>>(
            `select source_label as label, source_filename as filename from speech_jobs where source_label like 'Batch%' order by id`,
          )
      ).map((r) => `${r.label} ← ${r.filename}`);

    // Two files, a title: both queued, numbered, and the page goes to the queue.
    await page.setInputFiles('#media_file', [tone('first.wav', 1), tone('second.wav', 1.5)]);
    await page.fill('#source_label', 'Batch');
    await page.click('#submit-form button[type=submit]');
    await page.waitForURL(`${svc.url}/speech?notice=queued`);
    expect(await labels()).toEqual(['Batch (1) ← first.wav', 'Batch (2) ← second.wav']);

    // A file that is not audio among them: the others are queued, the page stays with the reason.
    const notes = path.join(dir, 'notes.txt');
    writeFileSync(notes, 'Meeting notes: not audio at all.\n'.repeat(50));
    await page.setInputFiles('#media_file', [tone('third.wav', 1), notes]);
    await page.fill('#source_label', 'Batch again');
    await page.click('#submit-form button[type=submit]');
    await expect.poll(() => page.textContent('#submit-status'), { timeout: 30_000 }).toBe('1 of 2 queued.');
    expect(new URL(page.url()).pathname).toBe('/speech');
    const items = await page.$$eval('#submit-results li', (lis) =>
      lis.map((li) => ({ text: li.textContent ?? '', error: li.classList.contains('error'), link: li.querySelector('a')?.getAttribute('href') ?? null })),
    );
    expect(items).toHaveLength(2);
    expect(items[0]).toMatchObject({ text: 'third.wav: queued', error: false, link: expect.stringMatching(/^\/speech\/jobs\/\d+$/) });
    expect(items[1]).toMatchObject({ error: true, link: null });
    expect(items[1]!.text).toMatch(/^notes\.txt: .+/);
    expect(await labels()).toEqual(['Batch (1) ← first.wav', 'Batch (2) ← second.wav', 'Batch again (1) ← third.wav']);
    await page.close();
  }, 120_000);

  it('an upload whose connection fails is retried once by itself: the server is asked for its offset and the job is queued', async () => {
    const page = await signedIn();
    const file = tone('retried.wav', 2, 330);
    // The first PATCH (the upload's bytes) fails as a dropped connection would; later ones go through.
    const seen: string[] = [];
    let dropped = false;
    await page.route('**/api/speech/uploads/**', async (route) => {
      const method = route.request().method();
      seen.push(method);
      if (method === 'PATCH' && !dropped) {
        dropped = true;
        await route.abort('connectionreset');
        return;
      }
      await route.continue();
    });
    await page.setInputFiles('#media_file', file);
    await page.fill('#source_label', 'Retried upload');
    await page.click('#submit-form button[type=submit]');
    await page.waitForURL(/\/speech\/jobs\/\d+$/, { timeout: 30_000 });
    // tus: the failed PATCH, then HEAD for the server's offset, then the PATCH with the bytes it lacks.
    expect(seen).toEqual(['PATCH', 'HEAD', 'PATCH']);
    const jobId = Number(new URL(page.url()).pathname.split('/').pop());
    const rows = await svc.orm.em
      .fork()
      .getConnection()
      .execute<Array<{ label: string; size: string }>>('select source_label as label, source_size_bytes::text as size from speech_jobs where id = ?', [jobId]);
    expect(rows[0]).toEqual({ label: 'Retried upload', size: String(statSync(file).size) });
    await page.close();
  }, 120_000);

  it('sends anonymous visitors to sign in and hides other people’s jobs', async () => {
    const page = await browser.newPage();
    await page.goto(`${svc.url}/speech/jobs/1`);
    expect(new URL(page.url()).pathname).toBe('/login');
    const other = await new AccountService(svc.orm).createUser({ username: randomName('other'), password: 'another-password-1', permissions: ['speech.use'] });
    await page.fill('#username', other.user.username);
    await page.fill('#password', 'another-password-1');
    await page.click('button[type=submit]');
    await page.waitForLoadState();
    expect(await page.textContent('h1')).toBe('Not found');
  });
});
