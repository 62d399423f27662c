import type {} from '@fastify/jwt';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser } from '../support/browser.js';
import { browserLogin, createJwtUser, createTestApp, extractCsrf, type TestApp, type TestUser } from '../support/harness.js';
import { registerModelWorker } from '../support/model-workers.js';

/**
 * Public transcript shares: creating, disabling and re-creating the share of a
 * completed job through the signed-in API, and the public page — reading layout without JavaScript
 * in a real browser, `?full` with segment times and speakers, `.txt`, 404 for unknown or disabled
 * links — against a listening coordinator.
 */

const PUBLIC_BASE = 'https://transcripts.example.org';
const SHARE_PREFIX = `${PUBLIC_BASE}/shared/speech/transcript/`;
const SECRET_SOURCE = 'https://private-media.example.org/board/2026-01-15.mp4?sig=do-not-leak';

let t: TestApp;
let base: string;
let browser: Browser;
let alice: TestUser; // owner
let bob: TestUser; // another speech user
let carol: TestUser; // no permissions
let manager: TestUser; // speech.manage

const mkUser = (permissions: string[]) => createJwtUser(t, permissions, { prefix: 'share' });

const SEGMENTS: Array<[number, number, string, string | null]> = [
  [0, 4.2, 'Good morning and welcome to the meeting.', 'SPEAKER_00'],
  [4.2, 8, 'Today we discuss the <budget> & the plan.', 'SPEAKER_00'],
  [8.4, 12, 'Thank you. I have three points.', 'SPEAKER_01'],
  [16, 21.5, 'First, the schedule.', 'SPEAKER_01'], // a pause of four seconds: a new paragraph
  [21.6, 75, 'Second, the venue is booked.', 'SPEAKER_01'],
];
const TRANSCRIPT = SEGMENTS.map((s) => s[2]).join(' ');

async function sql<T>(query: string, params: unknown[] = []): Promise<T[]> {
  return t.orm.em.getConnection().execute<T[]>(query, params);
}

async function queuedJob(owner: TestUser, label = 'Board meeting') {
  const res = await t.app.inject({ method: 'POST', url: '/api/speech/jobs', headers: owner.auth, payload: { source_url: SECRET_SOURCE, source_label: label } });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().job.id as number;
}

/** Completes a job the way a worker's completion leaves it: status, transcript and the pass's segments. */
async function completedJob(owner: TestUser, label = 'Board meeting') {
  const id = await queuedJob(owner, label);
  await sql(
    `update speech_jobs set status = 'completed', stage_label = 'Completed', transcript_text = ?, source_duration_seconds = 75,
       started_at = '2026-01-15T12:00:00Z', finished_at = '2026-01-15T12:30:00Z', diarization_state = 'completed' where id = ?`,
    [TRANSCRIPT, id],
  );
  for (const [seq, [start, end, text, speaker]] of SEGMENTS.entries()) {
    await sql('insert into speech_segments (job_id, pass, seq, start_seconds, end_seconds, text, speaker) values (?, 1, ?, ?, ?, ?, ?)', [
      id,
      seq,
      start,
      end,
      text,
      speaker,
    ]);
  }
  return id;
}

function share(user: TestUser | Record<string, string>, id: number, method: 'POST' | 'DELETE' = 'POST') {
  const headers = 'auth' in user ? user.auth : user;
  return t.app.inject({ method, url: `/api/speech/jobs/${id}/share`, headers: headers as Record<string, string> });
}

const pathOf = (url: string) => new URL(url).pathname;
const tokenOf = (url: string) => url.slice(SHARE_PREFIX.length);
const page = (pathAndQuery: string) => t.app.inject({ method: 'GET', url: pathAndQuery });

beforeAll(async () => {
  t = await createTestApp({ env: { PUBLIC_BASE_URL: PUBLIC_BASE } });
  // Jobs are only accepted for models a registered worker serves.
  await registerModelWorker(t.orm, 'models', ['small', 'large', 'turbo']);
  base = await t.app.listen({ host: '127.0.0.1', port: 0 });
  alice = await mkUser(['speech.use']);
  bob = await mkUser(['speech.use']);
  carol = await mkUser([]);
  manager = await mkUser(['speech.use', 'speech.manage']);
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await t?.close();
});

describe('share endpoints', () => {
  it('creates, keeps, disables and re-creates a share with a new token', async () => {
    const id = await completedJob(alice);
    const created = await share(alice, id);
    expect(created.statusCode, created.body).toBe(200);
    const body = created.json();
    expect(body).toMatchObject({ ok: true, message: expect.any(String) });
    expect(Object.keys(body.share).sort()).toEqual(['created_at', 'playback', 'url']);
    expect(body.share.url.startsWith(SHARE_PREFIX)).toBe(true);
    expect(tokenOf(body.share.url)).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(Date.parse(body.share.created_at)).toBeGreaterThan(Date.now() - 60_000);

    // The job shows the share in the detail and the list (base job).
    const detail = (await t.app.inject({ method: 'GET', url: `/api/speech/jobs/${id}`, headers: alice.auth })).json().job;
    expect(detail.share).toEqual(body.share);
    expect(detail.runtime_log.map((e: { event: string }) => e.event)).toContain('share_created');
    const listed = (await t.app.inject({ method: 'GET', url: '/api/speech/jobs', headers: alice.auth })).json().jobs.find((j: { id: number }) => j.id === id);
    expect(listed.share).toEqual(body.share);

    // Asking again keeps the active share.
    const again = await share(alice, id);
    expect(again.json().share).toEqual(body.share);
    expect((await page(pathOf(body.share.url))).statusCode).toBe(200);

    const disabled = await share(alice, id, 'DELETE');
    expect(disabled.statusCode).toBe(200);
    expect(disabled.json()).toMatchObject({ ok: true, share: null });
    expect((await t.app.inject({ method: 'GET', url: `/api/speech/jobs/${id}`, headers: alice.auth })).json().job.share).toBeNull();
    const dead = await page(pathOf(body.share.url));
    expect(dead.statusCode).toBe(404);
    expect(dead.headers['content-type']).toMatch(/text\/html/);
    expect(dead.body).toContain('Transcript not found');
    expect(dead.body).not.toContain('Good morning');
    expect((await page(`${pathOf(body.share.url)}.txt`)).statusCode).toBe(404);
    expect((await page(`${pathOf(body.share.url)}?full`)).statusCode).toBe(404);
    // Disabling twice is fine.
    expect((await share(alice, id, 'DELETE')).statusCode).toBe(200);

    const recreated = await share(alice, id);
    expect(recreated.statusCode).toBe(200);
    const newUrl = recreated.json().share.url as string;
    expect(newUrl.startsWith(SHARE_PREFIX)).toBe(true);
    expect(newUrl).not.toBe(body.share.url);
    expect((await page(pathOf(body.share.url))).statusCode).toBe(404);
    expect((await page(pathOf(newUrl))).statusCode).toBe(200);
  });

  it('answers 422 for a job whose transcript is not completed', async () => {
    const id = await queuedJob(alice);
    for (const status of ['queued', 'transcribing', 'failed']) {
      await sql('update speech_jobs set status = ? where id = ?', [status, id]);
      const res = await share(alice, id);
      expect(res.statusCode, status).toBe(422);
      expect(res.json()).toMatchObject({ ok: false, reason: 'validation_failed' });
      expect(res.json().errors.status[0]).toContain(status);
    }
    const rows = await sql<{ share_token: string | null }>('select share_token from speech_jobs where id = ?', [id]);
    expect(rows[0]!.share_token).toBeNull();
  });

  it('strangers get 404, managers may act, others 401/403; sessions need CSRF', async () => {
    const id = await completedJob(alice);
    for (const method of ['POST', 'DELETE'] as const) {
      const res = await share(bob, id, method);
      expect(res.statusCode, method).toBe(404);
      expect(res.json()).toMatchObject({ ok: false, reason: 'not_found' });
      expect((await share(carol, id, method)).statusCode).toBe(403);
      expect((await share({}, id, method)).statusCode).toBe(401);
      expect((await share(alice, 99999999, method)).statusCode).toBe(404);
    }
    expect((await sql<{ share_token: string | null }>('select share_token from speech_jobs where id = ?', [id]))[0]!.share_token).toBeNull();
    const byManager = await share(manager, id);
    expect(byManager.statusCode).toBe(200);
    expect((await share(alice, id)).json().share.url).toBe(byManager.json().share.url);

    const { jar } = await browserLogin(t.app, alice.name, alice.password);
    const cookie = jar.header();
    const noCsrf = await t.app.inject({ method: 'DELETE', url: `/api/speech/jobs/${id}/share`, headers: { cookie } });
    expect(noCsrf.statusCode).toBe(403);
    expect(noCsrf.json().reason).toBe('csrf_invalid');
    const csrf = extractCsrf((await t.app.inject({ method: 'GET', url: '/account', headers: { cookie } })).body);
    const ok = await t.app.inject({ method: 'DELETE', url: `/api/speech/jobs/${id}/share`, headers: { cookie, 'x-csrf-token': csrf } });
    expect(ok.statusCode).toBe(200);
    expect((await page(pathOf(byManager.json().share.url))).statusCode).toBe(404);
  });

  it('API-queue jobs show the share the completion created', async () => {
    const id = await completedJob(alice);
    await sql(`update speech_jobs set queue_channel = 'api', share_token = 'AutoShareToken_0123456789abcdef', share_created_at = now() where id = ?`, [id]);
    const detail = (await t.app.inject({ method: 'GET', url: `/api/speech/jobs/${id}`, headers: alice.auth })).json().job;
    expect(detail.share).toEqual({ url: `${SHARE_PREFIX}AutoShareToken_0123456789abcdef`, created_at: expect.any(String), playback: false });
    expect((await page('/shared/speech/transcript/AutoShareToken_0123456789abcdef')).statusCode).toBe(200);
  });
});

describe('public transcript page', () => {
  let url: string;
  let id: number;
  beforeAll(async () => {
    id = await completedJob(alice, 'Board meeting 15 January');
    url = (await share(alice, id)).json().share.url;
  });

  it('serves the reading layout to anyone, noindex, without the owner or internal references', async () => {
    const res = await page(pathOf(url));
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.headers['x-robots-tag']).toBe('noindex');
    expect(res.body).toContain('<meta name="robots" content="noindex">');
    expect(res.body).toContain('<h1>Board meeting 15 January</h1>');
    expect(res.body).toContain('data-layout="reading"');
    expect(res.body).not.toContain('<table');
    // Escaped transcript text, no owner, no source URL, no job id or internal link.
    expect(res.body).toContain('Today we discuss the &lt;budget&gt; &amp; the plan.');
    expect(res.body).not.toContain(alice.name);
    expect(res.body).not.toContain('private-media.example.org');
    expect(res.body).not.toContain(`/speech/jobs/${id}`);
    expect(res.body).not.toContain('<script');
  });

  it('is readable without JavaScript: paragraphs grouped by speaker and pauses, Stockholm time', async () => {
    const context = await browser.newContext({ javaScriptEnabled: false });
    const tab = await context.newPage();
    const res = await tab.goto(`${base}${pathOf(url)}`);
    expect(res?.status()).toBe(200);
    expect(await tab.textContent('h1')).toBe('Board meeting 15 January');
    expect(await tab.getAttribute('meta[name=robots]', 'content')).toBe('noindex');
    const paragraphs = await tab.$$eval('[data-testid=transcript] p', (ps) => ps.map((p) => p.textContent?.trim() ?? ''));
    expect(paragraphs).toEqual([
      'SPEAKER_00Good morning and welcome to the meeting. Today we discuss the <budget> & the plan.',
      'SPEAKER_01Thank you. I have three points.',
      'SPEAKER_01First, the schedule. Second, the venue is booked.',
    ]);
    expect(await tab.$$eval('[data-testid=transcript] .speaker', (els) => els.map((e) => e.textContent))).toEqual(['SPEAKER_00', 'SPEAKER_01', 'SPEAKER_01']);
    expect(await tab.locator('table').count()).toBe(0);
    const facts = (await tab.textContent('article > p.muted')) ?? '';
    expect(facts).toContain('Duration 1 min 15 s');
    // 12:30 UTC on 15 January is 13:30 in Stockholm (CET).
    expect(facts).toContain('2026-01-15 13:30:00 CET');
    expect(await tab.getAttribute('time', 'datetime')).toBe('2026-01-15T12:30:00.000Z');

    // The link to the detailed layout works without JavaScript.
    await tab.click('text=Show timestamps and speakers');
    await tab.waitForURL(/\?full$/);
    // The job page's reading view, read-only: speaker turns with their start times, every segment.
    const turns = await tab.$$eval('#segments .turn', (ps) =>
      ps.map((p) => [p.querySelector('.ts')?.textContent, p.querySelector('.who')?.textContent, [...p.querySelectorAll('.seg')].map((s) => s.textContent)]),
    );
    expect(turns).toEqual([
      ['0:00', 'SPEAKER_00', ['Good morning and welcome to the meeting.', 'Today we discuss the <budget> & the plan.']],
      ['0:08', 'SPEAKER_01', ['Thank you. I have three points.']],
      ['0:16', 'SPEAKER_01', ['First, the schedule.', 'Second, the venue is booked.']],
    ]);
    // Each speaker in their own colour, the same class as on the job page.
    expect(await tab.$$eval('#segments .who', (els) => els.map((e) => e.getAttribute('class')))).toEqual(['who spk-1', 'who spk-2', 'who spk-2']);
    await tab.click('text=Reading view');
    await tab.waitForURL((u) => !u.search);
    expect(await tab.locator('[data-layout=reading]').count()).toBe(1);
    await context.close();
  });

  it('?full leaves out the speaker column when no segment has a speaker', async () => {
    const plain = await completedJob(alice, 'No speakers');
    await sql('update speech_segments set speaker = null where job_id = ?', [plain]);
    const link = (await share(alice, plain)).json().share.url as string;
    const full = await page(`${pathOf(link)}?full`);
    expect(full.statusCode).toBe(200);
    expect(full.body).toContain('data-layout="full"');
    expect(full.body).not.toContain('<th>Speaker</th>');
    expect((full.body.match(/class="seg"/g) ?? []).length).toBe(SEGMENTS.length);
    expect(full.body).not.toContain('class="who');
    const reading = await page(pathOf(link));
    expect(reading.body).not.toContain('class="speaker"');
  });

  it('serves plain text at {token}.txt, the same file as the signed-in API’s', async () => {
    const res = await page(`${pathOf(url)}.txt?inline=1`);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(res.headers['content-disposition']).toBeUndefined();
    expect(res.body).toBe(
      'SPEAKER_00:\nGood morning and welcome to the meeting.\nToday we discuss the <budget> & the plan.\n\n' +
        'SPEAKER_01:\nThank you. I have three points.\nFirst, the schedule.\nSecond, the venue is booked.\n',
    );
    const download = await page(`${pathOf(url)}.txt`);
    expect(download.headers['content-disposition']).toBe(
      `attachment; filename="Board meeting 15 January.txt"; filename*=UTF-8''Board%20meeting%2015%20January.txt`,
    );
    expect((await t.app.inject({ method: 'GET', url: `/api/speech/jobs/${id}/transcript.txt`, headers: alice.auth })).body).toBe(download.body);
    expect((await page(`${pathOf(url)}.txt?inline=2`)).statusCode).toBe(422);
  });

  it('a URL job without a title downloads as "Transcript" at both doors, never showing the source URL', async () => {
    const untitled = await completedJob(alice, 'Untitled');
    await sql(`update speech_jobs set source_label = null, diarization_turns = '[[0, 8, 0], [8.4, 75, 1]]'::jsonb where id = ?`, [untitled]);
    const link = (await share(alice, untitled)).json().share.url as string;
    for (const f of ['txt', 'srt', 'vtt', 'json', 'docx', 'rttm']) {
      const fromApi = await t.app.inject({ method: 'GET', url: `/api/speech/jobs/${untitled}/transcript.${f}`, headers: alice.auth });
      const fromShare = await page(`${pathOf(link)}.${f}`);
      expect([fromApi.statusCode, fromShare.statusCode], f).toEqual([200, 200]);
      for (const res of [fromApi, fromShare]) {
        expect(res.headers['content-disposition'], f).toBe(`attachment; filename="Transcript.${f}"; filename*=UTF-8''Transcript.${f}`);
        expect(res.rawPayload.toString('latin1'), f).not.toContain('private-media');
      }
      if (f === 'json') {
        expect(fromApi.json()).toMatchObject({ job_id: untitled, title: 'Transcript' });
        expect(fromShare.json()).toMatchObject({ job_id: null, title: 'Transcript' });
        expect(fromShare.body).toBe(fromApi.body.replace(`"job_id": ${untitled},`, '"job_id": null,'));
      } else {
        expect(fromShare.rawPayload.equals(fromApi.rawPayload), f).toBe(true);
      }
    }
  });

  it('answers unknown and malformed tokens with a 404 page, in the browser too', async () => {
    for (const p of ['/shared/speech/transcript/NoSuchTokenNoSuchTokenNoSuchToken', '/shared/speech/transcript/x', "/shared/speech/transcript/'%3Cscript%3E"]) {
      const res = await page(p);
      expect(res.statusCode, p).toBe(404);
      expect(res.body).toContain('Transcript not found');
      expect(res.body).toContain('<meta name="robots" content="noindex">');
    }
    const tab = await browser.newPage();
    const res = await tab.goto(`${base}/shared/speech/transcript/NoSuchTokenNoSuchTokenNoSuchToken`);
    expect(res?.status()).toBe(404);
    expect(await tab.textContent('h1')).toBe('Transcript not found');
    await tab.close();
  });
});
