import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import { accessJwtPayload } from '../../coordinator/src/accounts/auth-plugin.js';
import { loadConfig } from '../../coordinator/src/config.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { launchBrowser } from '../support/browser.js';
import { createTestDatabase, randomName, testEnv, type TestDatabase } from '../support/harness.js';
import { SimWorker } from '../support/sim-worker.js';
import { STYLE_GUIDE_LIMITS, cueViolations, cueWords, readCues, spokenWords, type ReadCue } from '../support/subtitles.js';

/**
 * Subtitles checked by the programs that consume them: a three-speaker interview with a minute-long
 * monologue, quick exchanges and word times, completed over the real worker protocol, downloaded as
 * SRT and WebVTT from the API and the share page; ffmpeg reads every file without a warning and
 * converts it to the same cues, Debian's chromium loads the WebVTT as the `<track>` of an `<audio>`
 * element and its TextTrack cues equal the file's, and every cue keeps the limits of docs/speech.md
 * (computed here from the files, test/support/subtitles.ts).
 */
const dir = mkdtempSync(path.join(tmpdir(), 'sonar-subtitles-'));
let db: TestDatabase;
let svc: RunningCoordinator;
let sim: SimWorker;
let browser: Browser;
let page: Server;
let jwt = '';
let jobId = 0;
let sharePath = '';
/** Who says each word: a speaker's words start with their letter (a, b, c). */
const LETTER = ['a', 'b', 'c'];

/** The interview: A reads for a minute, then B and C answer briefly, then A and C alternate. */
function interview() {
  const parts: Array<{ speaker: number; words: Array<{ start: number; end: number; text: string }> }> = [];
  let t = 0.5;
  const say = (speaker: number, seconds: number, seed: number) => {
    const words = spokenWords(seed, seconds, t, LETTER[speaker]);
    parts.push({ speaker, words });
    t = words.at(-1)!.end + 0.35;
  };
  say(0, 62, 1);
  say(1, 0.4, 2); // one word
  say(2, 9, 3);
  for (let i = 0; i < 6; i++) say(i % 2 === 0 ? 0 : 2, 3 + i, 10 + i);
  return parts;
}

beforeAll(async () => {
  db = await createTestDatabase();
  svc = await startCoordinator(loadConfig(testEnv(db, { SPEECH_MEDIA_DIR: path.join(dir, 'media'), SPEECH_LEASE_TTL_SECONDS: '600' })));
  const accounts = new AccountService(svc.orm);
  const owner = (await accounts.createUser({ username: randomName('subs'), password: 'a-long-password-1', permissions: ['speech.use'] })).user;
  jwt = svc.app.jwt.sign(await accessJwtPayload(accounts, owner.id));
  sim = await SimWorker.start(svc, 'sim-subtitles');
  jobId = (await svc.speech.jobs.create(owner, { channel: 'web', source: { type: 'url', url: 'https://media.example.org/interview.mp3' }, label: 'Interview' }))
    .id;
  const parts = interview();
  await sim.run(jobId, {
    timed: parts.map((p) => ({ start: p.words[0]!.start, end: p.words.at(-1)!.end, text: p.words.map((w) => w.text).join(' '), words: p.words })),
    turns: parts.map((p) => ({ start: p.words[0]!.start - 0.1, end: p.words.at(-1)!.end + 0.1, speaker: p.speaker })),
  });
  const share = await svc.app.inject({ method: 'POST', url: `/api/speech/jobs/${jobId}/share`, headers: { authorization: `Bearer ${jwt}` } });
  sharePath = new URL(share.json<{ share: { url: string } }>().share.url).pathname;
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await new Promise((r) => (page ? page.close(r) : r(null)));
  sim?.close();
  await svc?.close();
  await db?.drop();
});

async function download(format: 'srt' | 'vtt', door: 'api' | 'share', query = ''): Promise<string> {
  const url = door === 'api' ? `/api/speech/jobs/${jobId}/transcript.${format}${query}` : `${sharePath}.${format}${query}`;
  const res = await svc.app.inject({ method: 'GET', url, headers: door === 'api' ? { authorization: `Bearer ${jwt}` } : {} });
  expect(res.statusCode, url).toBe(200);
  return res.body;
}

/** ffmpeg reads the file: no warning or error at all, and its SubRip conversion of it (ffmpeg ends a cue's inner lines with CRLF). */
function ffmpegRead(file: string): string {
  const r = spawnSync('ffmpeg', ['-nostdin', '-hide_banner', '-v', 'warning', '-i', file, '-f', 'srt', '-'], { encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
  expect(r.stderr, `ffmpeg on ${path.basename(file)}`).toBe('');
  return r.stdout.replace(/\r\n/g, '\n');
}

const times = (cues: ReadCue[]) => cues.map((c) => [c.start, c.end]);

describe('subtitles as their consumers read them', () => {
  it('SRT and WebVTT keep every limit, never cross a change of speaker, and are the same from the API and the share page', async () => {
    for (const format of ['srt', 'vtt'] as const) {
      const api = await download(format, 'api');
      expect(await download(format, 'share')).toBe(api);
      const cues = readCues(api);
      expect(cues.length).toBeGreaterThan(20);
      expect(cueViolations(cues)).toEqual([]);
      for (const c of cues) expect(new Set(cueWords(c).map((w) => w[0])).size, c.text).toBe(1);
      // every word once, in order
      const words = interview().flatMap((p) => p.words.map((w) => w.text));
      expect(cues.flatMap(cueWords)).toEqual(words);
    }
    // the speaker is marked at each change: SRT names the first cue of a turn, WebVTT every cue
    const srt = readCues(await download('srt', 'api'));
    const turns = interview().length;
    expect(srt.filter((c) => /^Speaker \d: /.test(c.lines[0]!))).toHaveLength(turns);
    const vtt = readCues(await download('vtt', 'api'));
    expect(vtt.every((c) => /^<v Speaker \d>/.test(c.lines[0]!))).toBe(true);
  });

  it('ffmpeg reads every SRT and WebVTT without a warning and converts them to the same cues', async () => {
    for (const door of ['api', 'share'] as const) {
      for (const format of ['srt', 'vtt'] as const) {
        const file = path.join(dir, `${door}.${format}`);
        const body = await download(format, door);
        writeFileSync(file, body);
        const converted = readCues(ffmpegRead(file));
        expect(times(converted)).toEqual(times(readCues(body)));
        expect(converted.flatMap(cueWords)).toEqual(readCues(body).flatMap(cueWords));
      }
    }
  });

  it('limits set per download hold, and nonsense is refused with 422 under the parameter', async () => {
    const limits = { ...STYLE_GUIDE_LIMITS, maxChars: 32, maxLines: 1, maxSeconds: 4 };
    for (const door of ['api', 'share'] as const) {
      const body = await download('srt', door, '?max_chars=32&max_lines=1&max_seconds=4');
      expect(cueViolations(readCues(body), limits)).toEqual([]);
      expect(readCues(body).length).toBeGreaterThan(readCues(await download('srt', door)).length);
      writeFileSync(path.join(dir, 'narrow.srt'), body);
      ffmpegRead(path.join(dir, 'narrow.srt'));
    }
    for (const [query, field] of [
      ['max_chars=5', 'max_chars'],
      ['max_chars=abc', 'max_chars'],
      ['max_lines=0', 'max_lines'],
      ['max_lines=1.5', 'max_lines'],
      ['max_seconds=-1', 'max_seconds'],
      ['max_seconds=1000', 'max_seconds'],
    ]) {
      const res = await svc.app.inject({
        method: 'GET',
        url: `/api/speech/jobs/${jobId}/transcript.srt?${query}`,
        headers: { authorization: `Bearer ${jwt}` },
      });
      expect(res.statusCode, query).toBe(422);
      expect(JSON.stringify(res.json()), query).toContain(field);
      const shared = await svc.app.inject({ method: 'GET', url: `${sharePath}.vtt?${query}` });
      expect(shared.statusCode, query).toBe(422);
    }
  });

  it('Chromium loads the WebVTT as the track of an <audio> element, and its TextTrack cues equal the file', async () => {
    const vtt = await download('vtt', 'share');
    const wav = path.join(dir, 'silence.wav');
    const seconds = Math.ceil(readCues(vtt).at(-1)!.end) + 1;
    execFileSync('sox', ['-n', '-r', '8000', '-c', '1', '-b', '16', wav, 'trim', '0', String(seconds)]);
    const files: Record<string, [string, Buffer]> = {
      '/': [
        'text/html',
        Buffer.from(
          '<!doctype html><audio id="a" src="/audio.wav" preload="auto"><track id="t" kind="subtitles" srclang="en" src="/subs.vtt" default></audio>',
        ),
      ],
      '/audio.wav': ['audio/wav', readFileSync(wav)],
      '/subs.vtt': ['text/vtt', Buffer.from(vtt)],
    };
    page = createServer((req, res) => {
      const f = files[req.url ?? ''];
      if (!f) return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': f[0] }).end(f[1]);
    });
    await new Promise<void>((r) => page.listen(0, '127.0.0.1', r));
    const context = await browser.newContext();
    const tab = await context.newPage();
    await tab.goto(`http://127.0.0.1:${(page.address() as AddressInfo).port}/`);
    const cues = await tab.evaluate(async () => {
      const el = document.getElementById('t') as HTMLTrackElement;
      el.track.mode = 'hidden';
      if (el.readyState !== HTMLTrackElement.LOADED) {
        await new Promise((resolve, reject) => {
          el.addEventListener('load', resolve);
          el.addEventListener('error', () => reject(new Error('the track did not load')));
        });
      }
      return Array.from(el.track.cues ?? [], (c) => ({ start: c.startTime, end: c.endTime, text: (c as VTTCue).text }));
    });
    const file = readCues(vtt);
    expect(cues.length).toBe(file.length);
    expect(cues.map((c) => [c.start, c.end])).toEqual(times(file));
    expect(cues.map((c) => c.text)).toEqual(file.map((c) => c.text));
    await context.close();
  });
});
