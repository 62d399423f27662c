import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Browser, BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import { accessJwtPayload } from '../../coordinator/src/accounts/auth-plugin.js';
import type { AuthUser } from '../../coordinator/src/accounts/types.js';
import { loadConfig } from '../../coordinator/src/config.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { launchBrowser, watchContext } from '../support/browser.js';
import { createTestDatabase, randomName, testEnv, type TestDatabase } from '../support/harness.js';
import { parseRttm } from '../support/rttm.js';
import { SimWorker } from '../support/sim-worker.js';

/**
 * The owner's corrections of a transcript (issue 38): a segment's text, a segment or a run of its
 * words moved to another speaker, two speakers merged, undo; every reader follows — the TXT, SRT,
 * JSON and RTTM downloads, the share page, the speaker counts — and an open page in another tab
 * shows the correction live. Who may: the owner; another user gets 404, one without speech access
 * 403, nobody 401; a manager who can see the job 403. Caller mistakes are 422.
 */
const dir = mkdtempSync(path.join(tmpdir(), 'sonar-edits-'));
let db: TestDatabase;
let svc: RunningCoordinator;
let browser: Browser;
let sim: SimWorker;
const users: Record<string, AuthUser> = {};
const password = 'a-long-password-1';
const names = { alice: randomName('owner'), bob: randomName('other'), carol: randomName('nospeech'), manager: randomName('manager') };
let session: Awaited<ReturnType<BrowserContext['storageState']>>;
let jobId = 0;

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
  users.alice = (await accounts.createUser({ username: names.alice, password, permissions: ['speech.use'] })).user;
  users.bob = (await accounts.createUser({ username: names.bob, password, permissions: ['speech.use'] })).user;
  users.carol = (await accounts.createUser({ username: names.carol, password, permissions: [] })).user;
  users.manager = (await accounts.createUser({ username: names.manager, password, permissions: ['speech.use', 'speech.manage'] })).user;
  sim = await SimWorker.start(svc, 'sim-edits', ['small']);
  const clip = path.join(dir, 'talk.wav');
  execFileSync('sox', ['-n', '-r', '16000', '-c', '1', '-b', '16', clip, 'synth', '24', 'sine', '300']);
  const bytes = readFileSync(clip);
  const temp = path.join(dir, 'upload.part');
  writeFileSync(temp, bytes);
  jobId = (
    await svc.speech.jobs.create(users.alice, {
      channel: 'web',
      model: 'small',
      source: { type: 'upload', tempPath: temp, filename: 'talk.wav', sizeBytes: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') },
    })
  ).id;
  await sim.run(jobId, { timed, turns: timed.map((s, i) => ({ start: s.start, end: s.end, speaker: SPEAKERS[i]! })) });
  browser = await launchBrowser();
  const login = await browser.newContext();
  const page = await login.newPage();
  await page.goto(`${svc.url}/login`);
  await page.fill('#username', names.alice);
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

async function as(who: keyof typeof names, method: 'GET' | 'POST' | 'PATCH', url: string, payload?: Record<string, unknown>) {
  const token = svc.app.jwt.sign(await accessJwtPayload(new AccountService(svc.orm), users[who]!.id));
  return svc.app.inject({ method, url, headers: { authorization: `Bearer ${token}` }, ...(payload ? { payload } : {}) });
}
const owner = (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: Record<string, unknown>) => as('alice', method, url, payload);
const download = async (format: string) => (await owner('GET', `/api/speech/jobs/${jobId}/transcript.${format}`)).body;
const json = async () =>
  JSON.parse(await download('json')) as {
    speakers: Array<{ key: string }>;
    segments: Array<{ text: string; speaker: string | null; words?: Array<{ text: string; speaker: string }> }>;
  };
const rttmSpeakers = async () => new Set(parseRttm(await download('rttm')).map((t) => t.speaker)).size;
const speakerCount = async () => (await owner('GET', `/api/speech/jobs/${jobId}`)).json().job.diarization.speaker_count as number;

describe('corrections of a transcript', { timeout: 120_000 }, () => {
  let shareUrl = '';

  it('refuses who may not correct: 401, 403, 404; 422 for caller mistakes', async () => {
    const url = `/api/speech/jobs/${jobId}/segments/0`;
    expect((await svc.app.inject({ method: 'PATCH', url, payload: { text: 'x' } })).statusCode).toBe(401);
    expect((await as('bob', 'PATCH', url, { text: 'x' })).statusCode).toBe(404);
    expect((await as('carol', 'PATCH', url, { text: 'x' })).statusCode).toBe(403);
    // A manager sees the job but is not its owner.
    expect((await as('manager', 'PATCH', url, { text: 'x' })).statusCode).toBe(403);
    expect((await as('bob', 'POST', `/api/speech/jobs/${jobId}/speakers/merge`, { from: 'S3', into: 'S1' })).statusCode).toBe(404);
    expect((await as('bob', 'POST', `/api/speech/jobs/${jobId}/edits/undo`)).statusCode).toBe(404);
    expect((await as('bob', 'GET', `/api/speech/jobs/${jobId}/edits`)).statusCode).toBe(404);
    expect((await owner('PATCH', url, { text: '   ' })).statusCode).toBe(422);
    expect((await owner('PATCH', `/api/speech/jobs/${jobId}/segments/99`, { text: 'x' })).statusCode).toBe(404);
    expect((await owner('POST', `/api/speech/jobs/${jobId}/segments/0/speaker`, { speaker: 'S9' })).statusCode).toBe(422);
    expect((await owner('POST', `/api/speech/jobs/${jobId}/segments/0/speaker`, { speaker: 'S2', from_word: 1 })).statusCode).toBe(422);
    expect((await owner('POST', `/api/speech/jobs/${jobId}/speakers/merge`, { from: 'S1', into: 'S1' })).statusCode).toBe(422);
    expect((await owner('POST', `/api/speech/jobs/${jobId}/edits/undo`)).statusCode).toBe(422);
    const share = await owner('POST', `/api/speech/jobs/${jobId}/share`);
    shareUrl = new URL(share.json().share.url as string).pathname;
  });

  it('a text correction reaches the TXT, SRT, JSON downloads and the share page; undo restores', async () => {
    const before = await download('txt');
    const edit = await owner('PATCH', `/api/speech/jobs/${jobId}/segments/2`, { text: 'budget talks carry on' });
    expect(edit.statusCode).toBe(200);
    expect(await download('txt')).toContain('budget talks carry on');
    expect(await download('srt')).toContain('budget talks carry on');
    const seg = (await json()).segments[2]!;
    expect(seg.text).toBe('budget talks carry on');
    // As many words as before: the word times stay, with the new spellings.
    expect(seg.words?.map((w) => w.text)).toEqual(['budget', 'talks', 'carry', 'on']);
    expect((await svc.app.inject({ url: `${shareUrl}.txt` })).body).toContain('budget talks carry on');
    expect((await svc.app.inject({ url: `${shareUrl}?full` })).body).toContain('carry');
    const history = (await owner('GET', `/api/speech/jobs/${jobId}/edits`)).json().edits as Array<{ id: number; author: string; state: string; kind: string }>;
    expect(history[0]).toMatchObject({ id: edit.json().edit_id, author: names.alice, state: 'active', kind: 'text' });
    expect((await owner('POST', `/api/speech/jobs/${jobId}/edits/undo`, { edit_id: edit.json().edit_id })).statusCode).toBe(200);
    expect(await download('txt')).toBe(before);
    expect((await owner('GET', `/api/speech/jobs/${jobId}/edits`)).json().edits[0].state).toBe('undone');
  });

  it('a merge changes the speaker count everywhere: API, JSON, RTTM and the page; undo restores it', async () => {
    expect(await speakerCount()).toBe(3);
    expect(await rttmSpeakers()).toBe(3);
    const merged = await owner('POST', `/api/speech/jobs/${jobId}/speakers/merge`, { from: 'S3', into: 'S1' });
    expect(merged.statusCode).toBe(200);
    expect(await speakerCount()).toBe(2);
    expect((await json()).speakers.map((s) => s.key)).toEqual(['S1', 'S2']);
    expect(await rttmSpeakers()).toBe(2);
    expect((await svc.app.inject({ url: `${shareUrl}.txt` })).body).not.toContain('Speaker 3');
    const context = await browser.newContext({ storageState: session });
    const page = await context.newPage();
    await page.goto(`${svc.url}/speech/jobs/${jobId}`);
    expect(await page.textContent('#diarization-state')).toContain('2 speakers');
    expect(await page.$$eval('#segments .who', (els) => [...new Set(els.map((e) => e.textContent))])).toEqual(['Speaker 1', 'Speaker 2']);
    await context.close();
    await owner('POST', `/api/speech/jobs/${jobId}/edits/undo`);
    expect(await speakerCount()).toBe(3);
    expect(await rttmSpeakers()).toBe(3);
  });

  it('a run of words moves to a new speaker: the segment splits, the downloads and RTTM follow; undo joins it again', async () => {
    const before = await download('json');
    const moved = await owner('POST', `/api/speech/jobs/${jobId}/segments/0/speaker`, { speaker: 'new', name: 'Guest', from_word: 2, to_word: 3 });
    expect(moved.statusCode).toBe(200);
    const after = await json();
    expect(after.segments.slice(0, 3).map((s) => [s.text, s.speaker])).toEqual([
      ['the budget', 'S1'],
      ['is tight', 'S4'],
      ['so we plan ahead', 'S1'],
    ]);
    expect(after.segments).toHaveLength(TEXTS.length + 1);
    expect(await download('txt')).toContain('Guest:\nis tight');
    const turns = parseRttm(await download('rttm'));
    expect(turns.find((t) => t.speaker === 'S4')).toMatchObject({ start: 2, end: 4 });
    expect(await speakerCount()).toBe(4);
    await owner('POST', `/api/speech/jobs/${jobId}/edits/undo`);
    expect(await download('json')).toBe(before);
  });

  it('on the page: the owner corrects a segment; another open tab shows it live, as a fresh load does', async () => {
    const ctx = await browser.newContext({ storageState: session, viewport: { width: 1280, height: 900 } });
    const { problems, cspViolations } = await watchContext(ctx);
    const watcher = await ctx.newPage();
    await watcher.goto(`${svc.url}/speech/jobs/${jobId}`);
    await watcher.waitForSelector('html[data-cards="synced"]');
    const editor = await ctx.newPage();
    await editor.goto(`${svc.url}/speech/jobs/${jobId}`);
    await editor.waitForSelector('html[data-cards="synced"]');
    await editor.click('#edit-toggle');
    await editor.click('#seg-5');
    await editor.fill('#seg-text', 'thank you all very much');
    await editor.click('#seg-save');
    await expect.poll(() => editor.textContent('#seg-5')).toBe('thank you all very much');
    await expect.poll(() => watcher.textContent('#seg-5'), { timeout: 15_000 }).toBe('thank you all very much');
    await expect.poll(() => watcher.textContent('#edits')).toContain('Segment 5 corrected');
    // Move the whole segment to speaker 2 from the editor.
    await editor.click('#seg-4');
    await editor.selectOption('#seg-speaker', 'S2');
    await editor.click('#seg-move');
    await expect.poll(() => watcher.getAttribute('#seg-4', 'data-speaker'), { timeout: 15_000 }).toBe('S2');
    // A fresh load in a context of its own (its form post below navigates while live fetches may be in flight).
    const other = await browser.newContext({ storageState: session, viewport: { width: 1280, height: 900 } });
    const fresh = await other.newPage();
    await fresh.goto(`${svc.url}/speech/jobs/${jobId}`);
    const text = (p: typeof fresh) => p.$eval('#segments', (e) => (e as HTMLElement).innerText.replace(/\s+/g, ' ').trim());
    await expect.poll(() => text(watcher)).toBe(await text(fresh));
    // Undo from the page's form (no script needed), then the text is as before.
    await fresh.click('#edit-undo');
    await fresh.waitForURL(/notice=edit-undone/);
    expect(await fresh.getAttribute('#seg-4', 'data-speaker')).toBe('S1');
    await expect.poll(() => watcher.getAttribute('#seg-4', 'data-speaker'), { timeout: 15_000 }).toBe('S1');
    expect(await cspViolations(watcher)).toEqual([]);
    expect(await cspViolations(editor)).toEqual([]);
    expect(problems).toEqual([]);
    await other.close();
    await ctx.close();
  });

  it('merging from the speakers card changes the count on the share page', async () => {
    const ctx = await browser.newContext({ storageState: session });
    const page = await ctx.newPage();
    await page.goto(`${svc.url}/speech/jobs/${jobId}`);
    await page.selectOption('#merge-from', 'S3');
    await page.selectOption('#merge-into', 'S2');
    await page.click('#speaker-merge button[type=submit]');
    await page.waitForURL(/notice=speakers-merged/);
    expect(await page.textContent('#diarization-state')).toContain('2 speakers');
    const share = await ctx.newPage();
    await share.goto(`${svc.url}${shareUrl}?full`);
    expect(await share.$$eval('#segments .who', (els) => [...new Set(els.map((e) => e.textContent))]).then((s) => s.length)).toBe(2);
    await ctx.close();
  });

  it('a diarization rerun keeps the corrections in the history (superseded), never in the new speakers', async () => {
    expect((await owner('GET', `/api/speech/jobs/${jobId}/edits`)).json().edits[0].state).toBe('active');
    const rerun = await owner('POST', `/api/speech/jobs/${jobId}/diarization`, {});
    expect(rerun.statusCode).toBeLessThan(300);
    const edits = (await owner('GET', `/api/speech/jobs/${jobId}/edits`)).json().edits as Array<{ state: string }>;
    expect(edits[0]!.state).toBe('superseded');
    expect((await owner('PATCH', `/api/speech/jobs/${jobId}/segments/0`, { text: 'not now' })).statusCode).toBe(422);
  });
});
