import type {} from '@fastify/jwt';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveYtdlp } from '../../coordinator/src/speech/host-limits.js';
import { createTestApp, randomName } from '../support/harness.js';
import { registerModelWorker } from '../support/model-workers.js';

/**
 * URL sources on the coordinator: the outbound policy at submission, staging of direct media with
 * the SSRF guard on every hop, the download proxy (used when reachable, direct fallback when it is
 * not, none in strict mode), page URLs through yt-dlp, the claim rule that keeps such jobs from
 * workers that would fetch the URL themselves, and the release of retained media.
 */

const dir = mkdtempSync(path.join(tmpdir(), 'sonar-sources-'));
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const ytdlp = await resolveYtdlp();

interface Hit {
  method: string;
  url: string;
}

/** A media site on loopback: direct files, redirects and an HTML page with an <audio> element. */
interface MediaSite {
  base: string;
  port: number;
  hits: Hit[];
  close(): Promise<void>;
}

let clip: Buffer;

async function startMediaSite(): Promise<MediaSite> {
  const hits: Hit[] = [];
  const server = http.createServer((req, res) => {
    hits.push({ method: req.method ?? '', url: req.url ?? '' });
    const url = req.url ?? '';
    if (url === '/talk.wav' || url === '/clip.wav') return res.writeHead(200, { 'content-type': 'audio/wav', 'content-length': clip.length }).end(clip);
    if (url === '/podcast/episode-7') return res.writeHead(200, { 'content-type': 'audio/wav' }).end(clip);
    if (url === '/to-talk') return res.writeHead(302, { location: '/talk.wav' }).end();
    if (url === '/to-metadata') return res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' }).end();
    if (url === '/to-private') return res.writeHead(301, { location: 'http://10.20.30.40/internal.wav' }).end();
    if (url === '/page.html' || url === '/episode') {
      return res
        .writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
        .end('<!doctype html><html><head><title>Episode 7</title></head><body><h1>Episode 7</h1><audio controls src="/clip.wav"></audio></body></html>');
    }
    if (url === '/evil.html') {
      return res
        .writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
        .end('<!doctype html><html><head><title>Evil</title></head><body><audio controls src="http://10.20.30.40/secret.wav"></audio></body></html>');
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  return { base: `http://127.0.0.1:${port}`, port, hits, close: () => new Promise((r) => server.close(() => r())) };
}

/** A tiny forward proxy: CONNECT tunnels and absolute-form http requests; records what it saw. */
async function startForwardProxy(): Promise<{ url: string; seen: string[]; close(): Promise<void> }> {
  const seen: string[] = [];
  const sockets = new Set<net.Socket>();
  const server = http.createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    const target = new URL(req.url ?? '');
    const upstream = http.request(
      {
        host: target.hostname,
        port: target.port || 80,
        method: req.method,
        path: `${target.pathname}${target.search}`,
        headers: { ...req.headers, host: target.host },
      },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    upstream.on('error', () => res.writeHead(502).end());
    req.pipe(upstream);
  });
  server.on('connection', (s: net.Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  server.on('connect', (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    seen.push(`CONNECT ${req.url}`);
    const [host, port] = (req.url ?? '').split(':');
    const upstream = net.connect(Number(port), host, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    sockets.add(upstream);
    upstream.on('error', () => client.end('HTTP/1.1 502 Bad Gateway\r\n\r\n'));
    client.on('error', () => upstream.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () =>
      new Promise((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/** A port nothing listens on (a proxy that refuses connections). */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

async function app(env: Record<string, string>) {
  const t = await createTestApp({ env: { SPEECH_MEDIA_DIR: path.join(dir, `media-${randomName('m')}`), WORKER_PRESENCE_TTL_MS: '900000', ...env } });
  // Jobs are only accepted for models a registered worker serves; this one stays connected for the file.
  await registerModelWorker(t.orm, randomName('models'), ['small', 'large', 'turbo'], { present: true });
  const { user } = await t.accounts.createUser({ username: randomName('alice'), permissions: ['speech.use'] });
  const token = t.app.jwt.sign({ sub: String(user.id), typ: 'access' });
  return { t, user, auth: { authorization: `Bearer ${token}` }, speech: t.app.deps.speech };
}
type App = Awaited<ReturnType<typeof app>>;

async function submit(a: App, body: Record<string, unknown>) {
  return a.t.app.inject({ method: 'POST', url: '/api/speech/jobs', headers: a.auth, payload: body });
}

async function urlJob(a: App, url: string, extra: Record<string, unknown> = {}): Promise<number> {
  const res = await submit(a, { source_url: url, ...extra });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().job.id as number;
}

interface Row {
  status: string;
  failure_error: string | null;
  media_path: string | null;
  media_sha256: string | null;
  source_size_bytes: string | null;
  source_duration_seconds: number | null;
  stage_label: string | null;
}

async function row(a: App, id: number): Promise<Row> {
  const rows = await a.t.orm.em
    .getConnection()
    .execute<Row[]>(
      'select status, failure_error, media_path, media_sha256, source_size_bytes, source_duration_seconds, stage_label from speech_jobs where id = ?',
      [id],
    );
  return rows[0]!;
}

async function events(a: App, id: number) {
  return a.t.orm.em
    .getConnection()
    .execute<Array<{ event: string; level: string; message: string; data: Record<string, unknown> | null }>>(
      'select event, level, message, data from speech_job_events where job_id = ? order by id',
      [id],
    );
}

const eventNames = async (a: App, id: number) => (await events(a, id)).map((e) => e.event);

function audioStreams(file: string): number {
  const out = execFileSync('ffprobe', ['-v', 'error', '-select_streams', 'a', '-show_entries', 'stream=codec_type', '-of', 'csv=p=0', file]).toString();
  return out.split('\n').filter((l) => l.trim() === 'audio').length;
}

let site: MediaSite;
const apps: App[] = [];

beforeAll(async () => {
  const wav = path.join(dir, 'clip.wav');
  execFileSync('ffmpeg', ['-loglevel', 'error', '-f', 'lavfi', '-i', 'sine=frequency=330:duration=2', '-ac', '1', '-ar', '16000', wav]);
  clip = readFileSync(wav);
  site = await startMediaSite();
}, 30_000);
afterAll(async () => {
  for (const a of apps) await a.t.close();
  await site?.close();
});

async function tracked(env: Record<string, string>) {
  const a = await app(env);
  apps.push(a);
  return a;
}

describe('submission: the outbound policy (SSRF guard)', () => {
  it('refuses loopback, private, link-local and metadata addresses with 422 errors.source_url, queuing nothing', async () => {
    const a = await tracked({});
    const count = async () => Number((await a.t.orm.em.getConnection().execute<Array<{ n: string }>>('select count(*) as n from speech_jobs'))[0]!.n);
    const before = await count();
    const refused: Array<[string, RegExp]> = [
      [`${site.base}/talk.wav`, /the address 127\.0\.0\.1 is not allowed/],
      ['http://169.254.169.254/latest/meta-data/', /169\.254\.169\.254 is not allowed/],
      ['http://10.1.2.3/a.mp3', /10\.1\.2\.3 is not allowed/],
      ['http://192.168.1.10:8080/a.mp3', /192\.168\.1\.10 is not allowed/],
      ['http://[::1]/a.mp3', /::1 is not allowed/],
      ['http://[fd00::5]/a.mp3', /fd00::5 is not allowed/],
      ['http://localhost:9000/a.mp3', /localhost is not allowed/],
      ['http://user:secret@media.example.org/a.mp3', /credentials/],
    ];
    for (const [url, reason] of refused) {
      const res = await submit(a, { source_url: url });
      expect(res.statusCode, url).toBe(422);
      const body = res.json();
      expect(body).toMatchObject({ ok: false, reason: 'validation_failed' });
      expect(body.errors.source_url[0], url).toMatch(/^the URL is not allowed: /);
      expect(body.errors.source_url[0], url).toMatch(reason);
    }
    expect(await count()).toBe(before);
    // A public name (here one that does not resolve in this sandbox) is accepted; it is checked again when downloaded.
    expect((await submit(a, { source_url: 'https://media.example.org/talk.mp3' })).statusCode).toBe(201);
    // The callback URL of a token-API job is checked the same way.
    const err = await a.speech.jobs
      .create(a.user, { channel: 'api', source: { type: 'url', url: 'https://media.example.org/x.mp3' }, callbackUrl: 'http://169.254.169.254/hook' })
      .then(
        () => null,
        (e: unknown) => e as { details?: { errors?: Record<string, string[]> } },
      );
    expect(err?.details?.errors?.callback_url?.[0]).toMatch(/not allowed: the address 169\.254\.169\.254/);
  });

  it('a download without OUTBOUND_ALLOW_RANGES cannot reach loopback either (connect-time check)', async () => {
    const a = await tracked({});
    // Past the submission check on purpose (as if the name had resolved to a public address then).
    const id = await urlJob(a, 'https://media.example.org/talk.wav');
    await a.t.orm.em.getConnection().execute('update speech_jobs set source_url = ? where id = ?', [`${site.base}/talk.wav`, id]);
    const before = site.hits.length;
    await a.speech.stager.stage(id);
    const r = await row(a, id);
    expect(r.status).toBe('failed');
    expect(r.failure_error).toMatch(/refused by the outbound policy: the address 127\.0\.0\.1 is not allowed/);
    expect(site.hits.length).toBe(before);
  });
});

describe('staging direct media (OUTBOUND_ALLOW_RANGES=127.0.0.0/8)', () => {
  let a: App;
  beforeAll(async () => {
    a = await tracked({ OUTBOUND_ALLOW_RANGES: '127.0.0.0/8' });
  });

  it('downloads a direct media URL onto the coordinator with its checksum and probe', async () => {
    const id = await urlJob(a, `${site.base}/talk.wav`, { source_label: 'Talk' });
    await a.speech.stager.stage(id);
    const r = await row(a, id);
    expect(r.status).toBe('queued');
    expect(r.stage_label).toBe('Waiting for a worker');
    expect(r.media_path).toBe(path.join(a.speech.media.jobDir(id), 'source.wav'));
    expect(readFileSync(r.media_path!).equals(clip)).toBe(true);
    expect(r.media_sha256).toBe(sha256(clip));
    expect(Number(r.source_size_bytes)).toBe(clip.length);
    expect(r.source_duration_seconds).toBeCloseTo(2, 0);
    expect(await eventNames(a, id)).toEqual(['queued', 'staging', 'staged']);
  });

  it('follows a redirect within the policy', async () => {
    const id = await urlJob(a, `${site.base}/to-talk`);
    await a.speech.stager.stage(id);
    const r = await row(a, id);
    expect(r.status).toBe('queued');
    expect(r.media_sha256).toBe(sha256(clip));
  });

  it('fails the job when a redirect points at a blocked address, without following it', async () => {
    for (const [p, address] of [
      ['/to-metadata', '169.254.169.254'],
      ['/to-private', '10.20.30.40'],
    ] as const) {
      const id = await urlJob(a, `${site.base}${p}`);
      await a.speech.stager.stage(id);
      const r = await row(a, id);
      expect(r.status, p).toBe('failed');
      expect(r.failure_error, p).toBe(`Could not download the source: refused by the outbound policy: the address ${address} is not allowed`);
      expect(r.media_path).toBeNull();
      const log = await events(a, id);
      expect(log.at(-1)).toMatchObject({ event: 'staging_failed', level: 'error' });
    }
    expect(a.speech.media.root).toBeTruthy();
  });

  it('fails a missing file with the HTTP status', async () => {
    const id = await urlJob(a, `${site.base}/gone.wav`);
    await a.speech.stager.stage(id);
    expect((await row(a, id)).failure_error).toBe(
      `Could not download the source: there is nothing at this address (${new URL(site.base).host} answered HTTP 404 Not Found)`,
    );
    // The code underneath stays in the runtime log.
    expect(await events(a, id)).toContainEqual(expect.objectContaining({ event: 'download_failed', message: 'Download failed: HTTP 404 Not Found' }));
  });
});

describe('download proxy (SPEECH_DOWNLOAD_PROXY)', () => {
  it('falls back to a direct download when the proxy refuses connections, and logs both attempts', async () => {
    const port = await closedPort();
    const a = await tracked({ OUTBOUND_ALLOW_RANGES: '127.0.0.0/8', SPEECH_DOWNLOAD_PROXY: `http://127.0.0.1:${port}` });
    const id = await urlJob(a, `${site.base}/talk.wav`);
    await a.speech.stager.stage(id);
    const r = await row(a, id);
    expect(r.status).toBe('queued');
    expect(r.media_sha256).toBe(sha256(clip));
    const log = await events(a, id);
    expect(log.map((e) => e.event)).toEqual(['queued', 'staging', 'download_attempt', 'download_proxy_unreachable', 'download_attempt', 'staged']);
    expect(log[2]).toMatchObject({ level: 'info', data: { via: 'proxy', proxy: `http://127.0.0.1:${port}` } });
    expect(log[3]).toMatchObject({ level: 'warn', data: { strict: false } });
    expect(log[3]!.message).toBe(`The download proxy http://127.0.0.1:${port} could not be reached (connection refused); retrying directly.`);
    expect(log[4]).toMatchObject({ level: 'info', data: { via: 'direct' } });
  });

  it('falls back when the proxy host name does not resolve', async () => {
    const a = await tracked({ OUTBOUND_ALLOW_RANGES: '127.0.0.0/8', SPEECH_DOWNLOAD_PROXY: 'http://proxy.invalid:3128' });
    const id = await urlJob(a, `${site.base}/talk.wav`);
    await a.speech.stager.stage(id);
    expect((await row(a, id)).status).toBe('queued');
    const unreachable = (await events(a, id)).find((e) => e.event === 'download_proxy_unreachable');
    expect(unreachable?.message).toMatch(/^The download proxy http:\/\/proxy\.invalid:3128 could not be reached \(its host name/);
  });

  it('in strict mode fails the job with the reason and does not download directly', async () => {
    const port = await closedPort();
    const a = await tracked({ OUTBOUND_ALLOW_RANGES: '127.0.0.0/8', SPEECH_DOWNLOAD_PROXY: `http://127.0.0.1:${port}`, SPEECH_DOWNLOAD_PROXY_STRICT: 'true' });
    const before = site.hits.length;
    const id = await urlJob(a, `${site.base}/talk.wav`);
    await a.speech.stager.stage(id);
    const r = await row(a, id);
    expect(r.status).toBe('failed');
    expect(r.failure_error).toBe(
      `Could not download the source: the download proxy http://127.0.0.1:${port} could not be reached (connection refused) and strict proxy mode allows no direct download`,
    );
    expect(r.media_path).toBeNull();
    expect(site.hits.length).toBe(before); // never fetched directly
    const log = await events(a, id);
    expect(log.map((e) => e.event)).toEqual(['queued', 'staging', 'download_attempt', 'download_proxy_unreachable', 'staging_failed']);
    expect(log[3]).toMatchObject({ level: 'error', data: { strict: true } });
  });

  it('uses a reachable proxy (the proxy sees the request), and workers never fetch URL jobs themselves', async () => {
    const proxy = await startForwardProxy();
    try {
      const a = await tracked({ OUTBOUND_ALLOW_RANGES: '127.0.0.0/8', SPEECH_DOWNLOAD_PROXY: proxy.url, SPEECH_YTDLP_PATH: 'off' });
      const id = await urlJob(a, `${site.base}/talk.wav`, { model: 'turbo' });

      // A worker that may fetch URLs does not get the job before the coordinator staged it through the proxy.
      const w = await a.t.app.deps.workers.createWorker(randomName('w'));
      const fetcher = {
        id: w.id,
        name: 'fetcher',
        sessionId: null,
        local: false,
        models: ['turbo'],
        canFetchUrls: true,
        diarization: true,
        diarizeTasks: true,
        speakerCounts: true,
      };
      expect(await a.speech.leases.claim(fetcher)).toBeNull();

      await a.speech.stager.stage(id);
      expect(proxy.seen).toContain(`CONNECT 127.0.0.1:${site.port}`);
      const r = await row(a, id);
      expect(r.status).toBe('queued');
      expect(r.media_sha256).toBe(sha256(clip));
      expect(await eventNames(a, id)).toEqual(['queued', 'staging', 'download_attempt', 'staged']);

      const claimed = await a.speech.leases.claim(fetcher);
      expect(claimed?.lease.job_id).toBe(id);
      expect(claimed?.media_from_coordinator).toBe(true);
      expect(claimed?.source_url).toBe('');
    } finally {
      await proxy.close();
    }
  });

  it('keeps the SSRF check on the target when going through the proxy', async () => {
    const proxy = await startForwardProxy();
    try {
      const a = await tracked({ OUTBOUND_ALLOW_RANGES: '127.0.0.0/8', SPEECH_DOWNLOAD_PROXY: proxy.url });
      const id = await urlJob(a, `${site.base}/to-metadata`);
      await a.speech.stager.stage(id);
      const r = await row(a, id);
      expect(r.status).toBe('failed');
      expect(r.failure_error).toBe('Could not download the source: refused by the outbound policy: the address 169.254.169.254 is not allowed');
      expect(proxy.seen.some((s) => s.includes('169.254.169.254'))).toBe(false);
    } finally {
      await proxy.close();
    }
  });
});

describe.skipIf(!ytdlp)('page URLs through yt-dlp', () => {
  let a: App;
  beforeAll(async () => {
    a = await tracked({ OUTBOUND_ALLOW_RANGES: '127.0.0.0/8' });
  });

  it('reports ytdlp_configured in the status and follows SPEECH_YTDLP_PATH', async () => {
    const status = await a.t.app.inject({ method: 'GET', url: '/api/speech/status', headers: a.auth });
    expect(status.json().config.ytdlp_configured).toBe(true);
    const off = await tracked({ SPEECH_YTDLP_PATH: 'off' });
    expect((await off.t.app.inject({ method: 'GET', url: '/api/speech/status', headers: off.auth })).json().config.ytdlp_configured).toBe(false);
    const missing = await tracked({ SPEECH_YTDLP_PATH: path.join(dir, 'no-such-yt-dlp') });
    expect((await missing.t.app.inject({ method: 'GET', url: '/api/speech/status', headers: missing.auth })).json().config.ytdlp_configured).toBe(false);
    const explicit = await tracked({ SPEECH_YTDLP_PATH: ytdlp! });
    expect((await explicit.t.app.inject({ method: 'GET', url: '/api/speech/status', headers: explicit.auth })).json().config.ytdlp_configured).toBe(true);
  });

  it('extracts the audio of an HTML page with yt-dlp; such jobs are never handed to a URL-fetching worker', async () => {
    const pageJob = await urlJob(a, `${site.base}/episode`, { model: 'turbo' });
    const directJob = await urlJob(a, `${site.base}/clip.wav`, { model: 'turbo' });
    const w = await a.t.app.deps.workers.createWorker(randomName('w'));
    const fetcher = {
      id: w.id,
      name: 'fetcher',
      sessionId: null,
      local: false,
      models: ['turbo'],
      canFetchUrls: true,
      diarization: true,
      diarizeTasks: true,
      speakerCounts: true,
    };
    // The direct file may be fetched by the worker; the page may not.
    const first = await a.speech.leases.claim(fetcher);
    expect(first?.lease.job_id).toBe(directJob);
    expect(first?.source_url).toBe(`${site.base}/clip.wav`);
    expect(await a.speech.leases.claim(fetcher)).toBeNull();

    const before = site.hits.length;
    await a.speech.stager.stage(pageJob);
    const r = await row(a, pageJob);
    expect(r.failure_error).toBeNull();
    expect(r.status).toBe('queued');
    expect(r.media_path).toBeTruthy();
    expect(audioStreams(r.media_path!)).toBe(1);
    expect(r.source_duration_seconds).toBeCloseTo(2, 0);
    expect(r.media_sha256).toBe(sha256(readFileSync(r.media_path!)));
    const names = await eventNames(a, pageJob);
    expect(names).toEqual(['queued', 'staging', 'page_detected', 'ytdlp', 'staged']);
    const paths = site.hits.slice(before).map((h) => h.url);
    expect(paths).toContain('/episode');
    expect(paths).toContain('/clip.wav');
    const staging = path.join(a.speech.media.root, 'staging');
    expect(existsSync(staging) ? readdirSync(staging) : []).toEqual([]); // yt-dlp's working folder is gone

    const claimed = await a.speech.leases.claim(fetcher);
    expect(claimed?.lease.job_id).toBe(pageJob);
    expect(claimed?.media_from_coordinator).toBe(true);
  }, 60_000);

  it('a page cannot make yt-dlp reach a blocked address (guard proxy)', async () => {
    const id = await urlJob(a, `${site.base}/evil.html`);
    await a.speech.stager.stage(id);
    const r = await row(a, id);
    expect(r.status).toBe('failed');
    expect(r.failure_error).toMatch(/^Could not download the source: yt-dlp/);
    expect(r.failure_error).toMatch(/HTTP Error 403.*refused by the outbound policy: 10\.20\.30\.40: the address 10\.20\.30\.40 is not allowed/);
  }, 60_000);

  it('runs yt-dlp through a configured proxy', async () => {
    const proxy = await startForwardProxy();
    try {
      const p = await tracked({ OUTBOUND_ALLOW_RANGES: '127.0.0.0/8', SPEECH_DOWNLOAD_PROXY: proxy.url });
      const id = await urlJob(p, `${site.base}/page.html`);
      await p.speech.stager.stage(id);
      const r = await row(p, id);
      expect(r.failure_error).toBeNull();
      expect(audioStreams(r.media_path!)).toBe(1);
      expect(await eventNames(p, id)).toEqual(['queued', 'staging', 'download_attempt', 'page_detected', 'ytdlp', 'staged']);
      // The page request of the coordinator (tunnelled) and yt-dlp's requests (plain http through the proxy).
      expect(proxy.seen).toContain(`CONNECT 127.0.0.1:${site.port}`);
      expect(proxy.seen).toContain(`GET ${site.base}/clip.wav`);
    } finally {
      await proxy.close();
    }
  }, 60_000);
});

describe('retained media release', () => {
  it('removes the media folder and media_path of finished jobs past media_retained_until; the job stays', async () => {
    const a = await tracked({ OUTBOUND_ALLOW_RANGES: '127.0.0.0/8' });
    const temp = (name: string) => {
      const p = path.join(dir, `${randomName(name)}.part`);
      writeFileSync(p, clip);
      return { type: 'upload' as const, tempPath: p, filename: `${name}.wav`, sizeBytes: clip.length, sha256: sha256(clip) };
    };
    const expired = await a.speech.jobs.create(a.user, { channel: 'web', source: temp('expired') });
    const fresh = await a.speech.jobs.create(a.user, { channel: 'web', source: temp('fresh') });
    const queued = await a.speech.jobs.create(a.user, { channel: 'web', source: temp('queued') });
    const sql = (q: string, p: unknown[]) => a.t.orm.em.getConnection().execute(q, p);
    await sql(`update speech_jobs set status = 'completed', media_retained_until = now() - interval '1 day' where id = ?`, [expired.id]);
    await sql(`update speech_jobs set status = 'completed', media_retained_until = now() + interval '1 day' where id = ?`, [fresh.id]);
    await sql(`update speech_jobs set media_retained_until = now() - interval '1 day' where id = ?`, [queued.id]);
    const dirOf = (id: number) => a.speech.media.jobDir(id);
    expect(existsSync(dirOf(expired.id))).toBe(true);

    expect(await a.speech.retention.releaseExpired()).toEqual([expired.id]);
    expect(existsSync(dirOf(expired.id))).toBe(false);
    const released = await row(a, expired.id);
    expect(released.media_path).toBeNull();
    expect(released.status).toBe('completed');
    const log = await events(a, expired.id);
    expect(log.at(-1)).toMatchObject({ event: 'media_released', level: 'info' });

    // Not yet due, or still waiting to run: untouched.
    expect(existsSync(dirOf(fresh.id))).toBe(true);
    expect((await row(a, fresh.id)).media_path).toBeTruthy();
    expect(existsSync(dirOf(queued.id))).toBe(true);
    expect((await row(a, queued.id)).media_path).toBeTruthy();
    // A second pass has nothing to do.
    expect(await a.speech.retention.releaseExpired()).toEqual([]);
    const detail = await a.t.app.inject({ method: 'GET', url: `/api/speech/jobs/${expired.id}`, headers: a.auth });
    expect(detail.statusCode).toBe(200);
    expect(detail.json().job.runtime_log.map((e: { event: string }) => e.event)).toContain('media_released');
  });
});
