import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
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
 * The job page follows the job to its end: a page opened before the change (on a desktop and on a
 * 390 px phone) shows it live, and then every card reads exactly as on a fresh load of the same
 * page (the liveness and worker cards excepted: they hold relative times). For a job that
 * completes, one whose download fails on the coordinator, one cancelled while it runs, a speaker
 * diarization rerun of a completed job and a re-transcription with another model; no console
 * error, CSP violation or failed request on the way.
 */
const dir = mkdtempSync(path.join(tmpdir(), 'sonar-job-live-'));
let db: TestDatabase;
let svc: RunningCoordinator;
let browser: Browser;
let sim: SimWorker;
let alice: AuthUser;
const password = 'a-long-password-1';
const name = randomName('follower');
let session: Awaited<ReturnType<BrowserContext['storageState']>>;
let clip = '';

beforeAll(async () => {
  db = await createTestDatabase();
  // Loopback is allowed so the coordinator's staging reaches (and fails on) a local address.
  svc = await startCoordinator(loadConfig(testEnv(db, { SPEECH_MEDIA_DIR: path.join(dir, 'media'), OUTBOUND_ALLOW_RANGES: '127.0.0.0/8' })));
  alice = (await new AccountService(svc.orm).createUser({ username: name, password, permissions: ['speech.use'] })).user;
  // Two models served, so a completed job can be re-transcribed with the other one.
  sim = await SimWorker.start(svc, 'sim-live', ['small', 'medium']);
  clip = path.join(dir, 'clip.wav');
  execFileSync('sox', ['-n', '-r', '16000', '-c', '1', '-b', '16', clip, 'synth', '8', 'sine', '300']);
  browser = await launchBrowser();
  const login = await browser.newContext();
  const page = await login.newPage();
  await page.goto(`${svc.url}/login`);
  await page.fill('#username', name);
  await page.fill('#password', password);
  await page.click('button[type=submit]');
  await page.waitForURL(`${svc.url}/`);
  session = await login.storageState();
  await login.close();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  sim?.close();
  await svc?.close();
  await db?.drop();
});

const VIEWPORTS = { desktop: { width: 1280, height: 900 }, phone: { width: 390, height: 844 } } as const;

/** A signed-in page on `viewport` that records console errors, CSP violations and failed requests. */
async function watchedPage(viewport: { width: number; height: number }) {
  const context = await browser.newContext({ viewport, storageState: session, ...(viewport.width < 500 ? { isMobile: true, hasTouch: true } : {}) });
  const { problems, cspViolations } = await watchContext(context);
  const page = await context.newPage();
  return { context, page, problems, cspViolations };
}

/** Every card's text and field values by slot (liveness and worker left out), and the transcript, as a reader sees them. */
function cardTexts(page: Page): Promise<Record<string, string>> {
  return page.evaluate(() => {
    const norm = (s: string) => s.replace(/\s+/g, ' ').trim();
    const out: Record<string, string> = {};
    for (const slot of document.querySelectorAll<HTMLElement>('.slot[data-card]')) {
      const card = slot.dataset.card!;
      if (card === 'liveness' || card === 'worker') continue;
      // Form fields count by their values (speaker names, title, the model picker), which innerText leaves out.
      const fields = [...slot.querySelectorAll<HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement>('input:not([type=hidden]), textarea, select')];
      out[card] = norm(
        `${slot.innerText} ${fields.map((f) => (f instanceof HTMLInputElement && (f.type === 'checkbox' || f.type === 'radio') ? String(f.checked) : f.value)).join(' | ')}`,
      );
    }
    out.segments = norm(document.getElementById('segments')?.innerText ?? '');
    return out;
  });
}

const synced = (page: Page) => page.waitForSelector('html[data-cards="synced"]');

/**
 * Opens the job on both viewports, runs `change`, waits until both pages show `status` live, then
 * compares each with a fresh load of the same page.
 */
async function followToEnd(jobId: number, change: () => Promise<unknown>, status: string, extra: (page: Page) => Promise<void> = async () => undefined) {
  const open = await Promise.all(
    Object.values(VIEWPORTS).map(async (viewport) => {
      const watched = await watchedPage(viewport);
      await watched.page.goto(`${svc.url}/speech/jobs/${jobId}`);
      await synced(watched.page);
      // Scrolled down a little: the swap keeps the reader where they were.
      await watched.page.evaluate(() => window.scrollTo(0, 200));
      return watched;
    }),
  );
  await change();
  for (const { page, context, problems, cspViolations } of open) {
    await expect.poll(() => page.getAttribute('#job-status', 'data-status'), { timeout: 15_000 }).toBe(status);
    await expect.poll(() => page.getAttribute('html', 'data-cards'), { timeout: 15_000 }).toBe('synced');
    await extra(page);
    if ((page.viewportSize()?.width ?? 1280) < 500) {
      // On a phone the runtime log's rows stack (no header row) and every button is a 40 px target.
      expect(await page.isHidden('.runtime-log thead')).toBe(true);
      const small = await page.$$eval('main button, main .button', (els) =>
        els.filter((e) => (e as HTMLElement).offsetParent !== null && e.getBoundingClientRect().height < 40).map((e) => e.textContent),
      );
      expect(small).toEqual([]);
    }
    const live = await cardTexts(page);
    const fresh = await context.newPage();
    await fresh.goto(`${svc.url}/speech/jobs/${jobId}`);
    await synced(fresh);
    expect(await cardTexts(fresh)).toEqual(live);
    expect(await page.evaluate(() => window.scrollY)).toBeGreaterThan(0);
    expect(await cspViolations(page)).toEqual([]);
    expect(problems).toEqual([]);
    await context.close();
  }
}

describe('the job page follows the job to its end', { timeout: 120_000 }, () => {
  it('has an icon: /favicon.svg, linked by every page, and /favicon.ico answers too (no 404)', async () => {
    for (const url of ['/favicon.svg', '/favicon.ico']) {
      const res = await fetch(`${svc.url}${url}`);
      expect(res.status, url).toBe(200);
      expect(res.headers.get('content-type'), url).toMatch(/^image\/svg\+xml/);
    }
  });

  it('a job that completes: progress, actions, re-transcription, speakers and the runtime log follow', async () => {
    const id = (await svc.speech.jobs.create(alice, { channel: 'web', model: 'small', source: { type: 'url', url: 'https://media.example.org/meeting.mp3' } }))
      .id;
    await followToEnd(
      id,
      () => sim.run(id, { segments: ['Welcome, everyone.', 'Let us begin with the budget.'], speakers: [0, 1] }),
      'completed',
      async (page) => {
        expect(await page.textContent('#job-progress')).toMatch(/^100 %/);
        expect(await page.isVisible('#job-cancel')).toBe(false);
        expect(await page.isVisible('#share-create')).toBe(true);
        expect(await page.textContent('#speakers')).not.toMatch(/reload the page/);
        expect(await page.textContent('#runtime-log')).toMatch(/completed/i);
        expect(await page.textContent('#segments')).toContain('Let us begin with the budget.');
      },
    );
  });

  it('a URL whose download fails on the coordinator: the reason appears live, in words', async () => {
    // Port 1 is closed (and on fetch's list of blocked ports): the download cannot start.
    const id = (await svc.speech.jobs.create(alice, { channel: 'web', model: 'small', source: { type: 'url', url: 'http://127.0.0.1:1/talk.mp3' } })).id;
    await followToEnd(
      id,
      () => svc.speech.stager.stage(id),
      'failed',
      async (page) => {
        expect(await page.textContent('#failure')).toBe(
          'Could not download the source: port 1 is not allowed for web downloads (it belongs to another protocol)',
        );
        expect(await page.textContent('#runtime-log')).toContain('Download failed: bad port');
        expect(await page.isVisible('#job-restart')).toBe(true);
        // Nothing was transcribed: the model is the one asked for, not one that ran.
        expect(await page.textContent('#job-model')).toBe('small (requested; no engine ran)');
        expect(await page.isVisible('#job-cancel')).toBe(false);
      },
    );
  });

  it('a job cancelled while it runs: the request, then the end, reach the open page', async () => {
    const id = (await svc.speech.jobs.create(alice, { channel: 'web', model: 'small', source: { type: 'url', url: 'https://media.example.org/long.mp3' } })).id;
    const job = await sim.claim();
    if (!job || job.lease.job_id !== id) throw new Error(`expected to claim job ${id}`);
    const stream = sim.client.progress(job.lease);
    stream.send({
      stage: 'transcribing',
      stage_detail: '',
      audio_position_seconds: 10,
      segments: [{ seq: 0, start: 0, end: 10, text: 'This will take a while.' }],
      duration_seconds: 600,
      engine: 'test',
      engine_model: 'small',
    });
    await stream.end();
    await followToEnd(
      id,
      async () => {
        await svc.speech.jobs.cancel(alice, id);
        await sim.client.complete({
          lease: job.lease,
          success: false,
          error: 'cancelled on request',
          cancelled: true,
          segment_count: 1,
          duration_seconds: 600,
          engine: 'test',
          engine_model: 'small',
        });
      },
      // A cancelled attempt ends the job as failed, with the outcome "Cancelled".
      'failed',
      async (page) => {
        expect(await page.textContent('#job-stage')).toBe('Cancelled');
        expect(await page.textContent('#failure')).toBe('Cancelled on request.');
        expect(await page.isVisible('#job-cancel')).toBe(false);
        expect(await page.isVisible('#cancel-requested')).toBe(false);
        expect(await page.textContent('#runtime-log')).toContain('Cancellation requested');
      },
    );
  });

  it('a speaker diarization rerun of a completed job: the new speakers and their names reach the open page', async () => {
    const id = await completedUpload(['Good morning.', 'Hello there.', 'How was the trip?', 'Long but fine.'], [0, 0, 0, 0]);
    await followToEnd(
      id,
      async () => {
        const res = await api('POST', `/api/speech/jobs/${id}/diarization`);
        expect(res.statusCode, res.body).toBe(200);
        const task = await sim.claim();
        if (!task || task.lease.job_id !== id || task.task !== 'diarize') throw new Error(`expected the diarization rerun of job ${id}`);
        await sim.client.complete({
          lease: task.lease,
          success: true,
          error: '',
          cancelled: false,
          segment_count: 0,
          duration_seconds: 8,
          engine: 'test',
          engine_model: task.model,
          diarization: {
            state: 'completed',
            engine: 'test-diarizer',
            speaker_count: 3,
            turns: [0, 1, 0, 2].map((speaker, i) => ({ start: i * 2, end: i * 2 + 2, speaker })),
            error: '',
          },
        });
      },
      'completed',
      async (page) => {
        await expect.poll(() => page.textContent('#speakers'), { timeout: 15_000 }).toContain('3 speakers (test-diarizer)');
        expect(await page.textContent('#runtime-log')).toMatch(/diarization/i);
      },
    );
  });

  it('a re-transcription with another model: the new pass, queued, reaches the open page', async () => {
    const id = await completedUpload(['First pass, small model.'], [0]);
    await followToEnd(
      id,
      async () => {
        const res = await api('POST', `/api/speech/jobs/${id}/retranscribe`, { model: 'medium' });
        expect(res.statusCode, res.body).toBe(200);
      },
      'queued',
      async (page) => {
        expect(await page.textContent('#job-model')).toMatch(/medium/);
        expect(await page.textContent('#segments')).not.toContain('First pass, small model.');
        expect(await page.textContent('#runtime-log')).toMatch(/re-transcri/i);
      },
    );
  });
});

/** Alice's upload (its media retained, so reruns may use it), completed by the simulated worker with `segments` labelled by `speakers`. */
async function completedUpload(segments: string[], speakers: number[]): Promise<number> {
  const bytes = readFileSync(clip);
  const temp = path.join(dir, `${randomName('up')}.part`);
  writeFileSync(temp, bytes);
  const { id } = await svc.speech.jobs.create(alice, {
    channel: 'web',
    model: 'small',
    source: { type: 'upload', tempPath: temp, filename: 'talk.wav', sizeBytes: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') },
  });
  await sim.run(id, { segments, speakers });
  return id;
}

/** Alice's API call with a JWT bearer (the routes the job page's forms mirror). */
async function api(method: 'POST', url: string, payload?: Record<string, unknown>) {
  const token = svc.app.jwt.sign(await accessJwtPayload(new AccountService(svc.orm), alice.id));
  return svc.app.inject({ method, url, headers: { authorization: `Bearer ${token}` }, ...(payload ? { payload } : {}) });
}
