// The job page on a long recording (`BENCH_ONLY=page`, issue 38): a generated three-hour pass of
// BENCH_PAGE_SEGMENTS (3,200) segments of ten timed words each and four speakers, over a generated
// 3-hour WAV (8 kHz, 8-bit mono, 82 MiB) as the job's retained media.
// - server time for the page: GET /speech/jobs/{id} with a session, the whole answer read, median
//   and worst of BENCH_PAGE_REQUESTS (10) after one warm-up;
// - the waveform's peaks: the first request (ffmpeg decodes the file once) and a cached one;
// - the media route: the whole file read over HTTP while the coordinator's resident memory is
//   sampled every 10 ms (the file streams from disk: its growth stays far below the file's size);
// - Debian's chromium at a 390 × 844 phone viewport with 4× CPU throttling (CDP
//   Emulation.setCPUThrottlingRate): first contentful paint of the page, then the media played at 2×
//   from the middle of the recording for BENCH_PAGE_PLAY_SECONDS (10) while the page highlights the
//   words and follows them, with a PerformanceObserver counting long tasks in that window.
import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { chromium } from 'playwright-core';
import { log, median, ms, type PhaseContext } from './lib.js';

const num = (name: string, fallback: number): number => {
  const v = Number(process.env[name]);
  return Number.isFinite(v) && v > 0 ? v : fallback;
};

export interface PageContext extends Omit<PhaseContext, 'load'> {
  tmp: string;
  mediaDir: string;
}

const WORDS = ['budget', 'meeting', 'schedule', 'venue', 'coffee', 'tomorrow', 'morning', 'plan', 'agenda', 'minutes', 'question', 'answer', 'team'];

export async function pagePhases(ctx: PageContext): Promise<void> {
  const { svc, q, accounts, runId, row, target, tmp } = ctx;
  const segments = num('BENCH_PAGE_SEGMENTS', 3200);
  const requests = num('BENCH_PAGE_REQUESTS', 10);
  const playSeconds = num('BENCH_PAGE_PLAY_SECONDS', 10);
  const duration = 3 * 3600;

  // The media: three hours of a tone whose loudness changes, as the job's retained upload.
  log('page: generating a 3-hour WAV (8 kHz, 8-bit mono)');
  const wav = path.join(tmp, 'page-3h.wav');
  execFileSync('ffmpeg', [
    '-v',
    'error',
    '-f',
    'lavfi',
    '-i',
    `sine=frequency=300:sample_rate=8000:duration=${duration}`,
    '-af',
    'tremolo=f=0.2:d=0.7',
    '-ac',
    '1',
    '-c:a',
    'pcm_u8',
    '-y',
    wav,
  ]);
  const size = statSync(wav).size;

  const password = 'bench-page-password-1';
  const username = `page_${runId}`;
  const owner = (await accounts.createUser({ username, password, permissions: ['speech.use'] })).user;
  const perSegment = duration / segments;
  const turns: Array<[number, number, number]> = [];
  const seg = { seqs: [] as number[], starts: [] as number[], ends: [] as number[], texts: [] as string[], speakers: [] as string[], words: [] as string[] };
  let speaker = 0;
  let wordCount = 0;
  for (let i = 0; i < segments; i++) {
    if (i % 3 === 0) speaker = (speaker + 1 + (i % 7 === 0 ? 1 : 0)) % 4;
    const start = i * perSegment;
    const words = Array.from({ length: 10 }, (_, j) => ({
      start: Math.round((start + (j * perSegment) / 10) * 100) / 100,
      end: Math.round((start + ((j + 1) * perSegment) / 10) * 100) / 100,
      text: WORDS[(i * 7 + j * 3) % WORDS.length]!,
    }));
    wordCount += words.length;
    seg.seqs.push(i);
    seg.starts.push(start);
    seg.ends.push(start + perSegment);
    seg.texts.push(words.map((w) => w.text).join(' '));
    seg.speakers.push(`S${speaker + 1}`);
    seg.words.push(JSON.stringify(words.map((w) => ({ ...w, speaker: `S${speaker + 1}` }))));
    const last = turns.at(-1);
    if (last && last[2] === speaker) last[1] = start + perSegment;
    else turns.push([start, start + perSegment, speaker]);
  }
  const sha = createHash('sha256').update(`${size}`).digest('hex');
  const [job] = await q<{ id: number }>(
    `insert into speech_jobs (owner_id, status, queue_channel, source_type, source_label, source_filename, source_mime, source_size_bytes,
       source_duration_seconds, media_sha256, model, diarization_state, diarization_engine, diarization_speaker_count, diarization_turns,
       attempt, engine, engine_model, started_at, finished_at, audio_position_seconds, transcript_text)
     values (?, 'completed', 'web', 'upload', 'Three-hour meeting', 'meeting.wav', 'audio/wav', ?, ?, ?, 'small', 'completed', 'bench', 4, ?::jsonb,
       1, 'bench', 'small', now(), now(), ?, ?) returning id`,
    [owner.id, size, duration, sha, JSON.stringify(turns), duration, seg.texts.join(' ')],
  );
  const jobId = job!.id;
  const jobDir = path.join(ctx.mediaDir, 'jobs', String(jobId));
  mkdirSync(jobDir, { recursive: true });
  const mediaPath = path.join(jobDir, 'source.wav');
  execFileSync('mv', [wav, mediaPath]);
  await q(`update speech_jobs set media_path = ? where id = ?`, [mediaPath, jobId]);
  await svc.orm.em
    .getConnection()
    .getKnex()
    .raw(
      `insert into speech_segments (job_id, pass, seq, start_seconds, end_seconds, text, speaker, words)
       select ?, 1, v.seq, v.st, v.en, v.tx, v.spk, v.wd::jsonb
         from unnest(?::int[], ?::float8[], ?::float8[], ?::text[], ?::text[], ?::text[]) as v(seq, st, en, tx, spk, wd)`,
      [jobId, seg.seqs, seg.starts, seg.ends, seg.texts, seg.speakers, seg.words],
    );
  row(
    'page: the pass',
    `${segments.toLocaleString('en')} segments, ${wordCount.toLocaleString('en')} words, 4 speakers, ${duration / 3600} h; media ${(size / 2 ** 20).toFixed(0)} MiB WAV`,
  );

  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  try {
    const context = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
    const login = await context.newPage();
    await login.goto(`${svc.url}/login`);
    await login.fill('#username', username);
    await login.fill('#password', password);
    await login.click('button[type=submit]');
    await login.waitForURL(`${svc.url}/`);
    await login.close();
    const cookie = (await context.cookies()).map((c) => `${c.name}=${c.value}`).join('; ');

    // Server time for the page (the whole answer read), after a warm-up.
    const url = `${svc.url}/speech/jobs/${jobId}`;
    const fetchPage = async () => {
      const t0 = performance.now();
      const res = await fetch(url, { headers: { cookie } });
      const body = await res.text();
      if (!res.ok) throw new Error(`job page: HTTP ${res.status}`);
      return { ms: performance.now() - t0, bytes: Buffer.byteLength(body) };
    };
    const warm = await fetchPage();
    const times: number[] = [];
    for (let i = 0; i < requests; i++) times.push((await fetchPage()).ms);
    const p50 = median(times);
    const worst = Math.max(...times);
    row(
      'page: HTML',
      `${(warm.bytes / 2 ** 20).toFixed(2)} MiB (${segments.toLocaleString('en')} segment spans, the start times of ${wordCount.toLocaleString('en')} words in data-w); first request ${ms(warm.ms)}`,
    );
    target('job page server time ≤ 300 ms (3-hour pass, median)', p50 <= 300, `median ${ms(p50)}, worst ${ms(worst)} of ${requests}`);

    // The waveform's peaks: computed once, then from the cache.
    const peaksAt = async () => {
      const t0 = performance.now();
      const res = await fetch(`${svc.url}/api/speech/jobs/${jobId}/peaks`, { headers: { cookie } });
      const body = (await res.json()) as { peaks?: number[] };
      return { ms: performance.now() - t0, n: body.peaks?.length ?? 0, ok: res.ok };
    };
    const first = await peaksAt();
    const cached = await peaksAt();
    row('page: waveform peaks', `first ${ms(first.ms)} (ffmpeg decodes the 3 h once), cached ${ms(cached.ms)}; ${first.n} values`);

    // The media route: the whole file over HTTP (curl, another process, so only the coordinator's
    // side counts), the coordinator's resident memory sampled meanwhile.
    const rss0 = process.memoryUsage().rss;
    let peak = rss0;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().rss);
    }, 10);
    const t0 = performance.now();
    const streamed = await new Promise<number>((resolve, reject) => {
      execFile(
        'curl',
        ['-s', '-o', '/dev/null', '-w', '%{size_download}', '-H', `cookie: ${cookie}`, `${svc.url}/api/speech/jobs/${jobId}/media`],
        (err, out) => (err ? reject(new Error(`curl: ${err.message}`)) : resolve(Number(out))),
      );
    });
    clearInterval(sampler);
    const growth = peak - rss0;
    const range = await fetch(`${svc.url}/api/speech/jobs/${jobId}/media`, { headers: { cookie, range: 'bytes=1000-1999' } });
    const rangeBytes = (await range.arrayBuffer()).byteLength;
    row(
      'page: media route',
      `${(streamed / 2 ** 20).toFixed(0)} MiB in ${ms(performance.now() - t0)}; bytes=1000-1999 answers ${range.status} with ${rangeBytes} bytes`,
    );
    target(
      `media route streams: resident memory grows ≤ 32 MiB while sending the ${(size / 2 ** 20).toFixed(0)} MiB file`,
      streamed === size && growth <= 32 * 2 ** 20,
      `${(growth / 2 ** 20).toFixed(1)} MiB growth for ${(size / 2 ** 20).toFixed(0)} MiB sent`,
    );

    // Chromium, phone viewport, 4× CPU throttling: first contentful paint, then long tasks while playing.
    const page = await context.newPage();
    // Browser code as text: the bench is compiled without the DOM's types.
    await page.addInitScript({
      content: `window.longTasks = [];
        new PerformanceObserver((list) => { for (const e of list.getEntries()) window.longTasks.push({ start: e.startTime, duration: e.duration }); })
          .observe({ type: 'longtask', buffered: true });`,
    });
    const cdp = await context.newCDPSession(page);
    await cdp.send('Emulation.setCPUThrottlingRate', { rate: 4 });
    await page.goto(url, { waitUntil: 'load' });
    const fcp = await page.evaluate<number>(`performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? NaN`);
    target('first contentful paint ≤ 1.5 s (phone, 4× CPU throttling)', fcp <= 1500, ms(fcp));
    await page.waitForSelector('html[data-cards="synced"]', { timeout: 60_000 });
    await page.waitForSelector('#waveform[data-ready="1"]', { timeout: 60_000 });
    const loadTasks = await page.evaluate<number>('window.longTasks.length');
    // Play from the middle at 2×: the highlight moves through about six words a second and follows them.
    // BENCH_PAGE_PROFILE=1 logs where the page's CPU time went meanwhile (CDP Profiler, top functions by self time).
    const profile = process.env.BENCH_PAGE_PROFILE === '1';
    if (profile) {
      await cdp.send('Profiler.enable');
      await cdp.send('Profiler.start');
    }
    const window10s = (play: boolean) =>
      page.evaluate<{ played: number; words: number; longest: number; count: number }>(`(async () => {
      const media = document.getElementById('media');
      media.currentTime = 5400;
      media.playbackRate = 2;
      media.muted = true;
      if (${play}) await media.play();
      const from = performance.now();
      const t0 = media.currentTime;
      const seen = new Set();
      await new Promise((resolve) => {
        const tick = () => {
          const now = document.getElementById('segments').dataset.nowT;
          if (now) seen.add(now);
          if (performance.now() - from >= ${playSeconds * 1000}) resolve();
          else requestAnimationFrame(tick);
        };
        requestAnimationFrame(tick);
      });
      media.pause();
      const during = window.longTasks.filter((t) => t.start >= from);
      return { played: media.currentTime - t0, words: seen.size, longest: Math.max(0, ...during.map((t) => t.duration)), count: during.length };
    })()`);
    // The same window with the media paused: what the machine's load alone makes of the page (the baseline).
    const idle = await window10s(false);
    const playing = await window10s(true);

    if (profile) {
      const { profile: prof } = await cdp.send('Profiler.stop');
      const self = new Map<string, number>();
      const byId = new Map(prof.nodes.map((n) => [n.id, n]));
      const dt = prof.timeDeltas ?? [];
      (prof.samples ?? []).forEach((id, i) => {
        const n = byId.get(id);
        if (!n) return;
        const key = `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url.split('/').pop()}:${n.callFrame.lineNumber}`;
        self.set(key, (self.get(key) ?? 0) + (dt[i] ?? 0) / 1000);
      });
      for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 15)) log(`profile: ${v.toFixed(0)} ms ${k}`);
    }
    row(
      'page: playing',
      `${playing.played.toFixed(1)} s of media in ${playSeconds} s at 2×, ${playing.words} words highlighted in turn; ${loadTasks} long tasks during the load`,
    );
    row(
      'page: the same window paused (baseline)',
      `${idle.count} long tasks, longest ${ms(idle.longest)}: the machine's load average ${os.loadavg()[0]?.toFixed(2) ?? '?'}`,
    );
    target(
      'no long task over 50 ms while playing and highlighting (phone, 4× CPU throttling)',
      playing.longest <= 50 && playing.words > 5,
      `${playing.count} long tasks, longest ${ms(playing.longest)}`,
    );
    await context.close();
  } finally {
    await browser.close();
  }
}
