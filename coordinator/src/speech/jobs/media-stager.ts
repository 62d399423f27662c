import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { OutboundPolicy, fetchDownloadFailure, httpDownloadFailure, notMediaFailure, type DownloadFailure } from '@sonar/shared';
import type { Redis } from 'ioredis';
import type { Config } from '../../config.js';
import type { Orm } from '../../db/orm.js';
import { startGuardProxy, type GuardProxy } from '../../http/guard-proxy.js';
import { ensureProxyReachable, proxyConnectFailure, ProxyUnreachable } from './download-proxy.js';
import type { WorkAvailable } from './job-events.js';
import type { EventLevel, JobRepository } from './job-repository.js';
import { MediaTooLargeError, type MediaStore } from './media-store.js';
import { probeMedia } from './probe.js';
import { isKnownPageHost, isPageContentType, proxyLabel, sourceRouting, type SourceRouting } from './url-sources.js';

const DOWNLOAD_TIMEOUT_MS = 30 * 60_000;
/** Deletes the lock only while it still holds this owner's token. */
const RELEASE_LOCK = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`;

/** A downloaded source on the coordinator's disk, before it is adopted by the job. */
interface Downloaded {
  path: string;
  sizeBytes: number;
  sha256: string;
  extension: string;
  /** Removes whatever is left of the download (after adoption only an empty working folder). */
  cleanup(): Promise<void>;
}

/**
 * Downloads a URL job's source onto the coordinator: for workers that may not fetch external URLs,
 * and for every URL that needs the download proxy or yt-dlp (see url-sources.ts). The file is
 * streamed to disk with its SHA-256, checked with ffprobe, kept with the job, and the job goes back
 * to the queue, where a worker gets it through the lease-bound FetchMedia stream. A Redis lock makes
 * sure only one coordinator stages a given job.
 *
 * Every request goes through the outbound policy (SSRF guard): direct downloads check each hop and
 * the address actually connected to; through the download proxy each hop's target is checked before
 * it is requested; yt-dlp runs behind a loopback guard proxy that checks every connection it makes
 * (or behind the download proxy). When the download proxy cannot be resolved or reached the same
 * download is retried directly, unless SPEECH_DOWNLOAD_PROXY_STRICT is set; the runtime log records
 * each attempt.
 */
export class MediaStager {
  private readonly running = new Set<number>();

  constructor(
    private readonly orm: Orm,
    private readonly redis: Redis,
    private readonly config: Config,
    private readonly media: MediaStore,
    private readonly work: WorkAvailable,
    private readonly repo: JobRepository,
    private readonly outbound: OutboundPolicy = new OutboundPolicy(config.OUTBOUND_ALLOW_RANGES),
  ) {}

  private get knex() {
    return this.orm.em.getConnection().getKnex();
  }

  /**
   * Stages queued URL jobs this worker could run but may not download itself: all of them for a
   * worker without `can_fetch_urls`, and those that need the proxy or yt-dlp for one with it.
   */
  async stageFor(worker: { id: number; models: string[]; local?: boolean; canFetch?: boolean }): Promise<void> {
    const { rows } = await this.knex.raw<{ rows: Array<{ id: number }> }>(
      `select id from speech_jobs
        where status = 'queued' and source_type = 'url' and media_path is null and cancel_requested_at is null
          and ((execution_target = 'worker' and target_worker_id = :wid) or (execution_target = 'local' and :isLocal)
               or (execution_target = 'auto' and model = any(:models::text[])))
          and not (:canFetch and worker_fetchable)
        order by created_at limit 3`,
      { wid: worker.id, isLocal: worker.local === true, models: worker.models, canFetch: worker.canFetch === true },
    );
    for (const { id } of rows) void this.stage(id);
  }

  async stage(jobId: number): Promise<void> {
    if (this.running.has(jobId)) return;
    // The lock names its holder: only the holder frees it (compare-and-delete), so a holder slower
    // than the lock's hour cannot free the lock of the coordinator that took over.
    const lock = `${this.config.REDIS_KEY_PREFIX}speech:staging:${jobId}`;
    const owner = randomUUID();
    if ((await this.redis.set(lock, owner, 'EX', 3600, 'NX')) !== 'OK') return;
    this.running.add(jobId);
    try {
      const url = await this.repo.stagingStarted(jobId);
      if (!url) return;
      await this.log(jobId, 'staging', `Downloading ${url} on the coordinator.`);
      let got: Downloaded | null = null;
      try {
        got = await this.download(jobId, url);
        let probe;
        try {
          probe = await probeMedia(got.path);
        } catch (err) {
          throw new DownloadFailed(notMediaFailure((err as Error).message), err);
        }
        if (!probe.hasAudio) throw new DownloadFailed({ message: 'it has no sound (no audio stream to transcribe)', code: 'no audio stream' });
        const file = await this.media.adopt(jobId, got.path, got.extension);
        const kept = await this.repo.staged(jobId, {
          path: file,
          sha256: got.sha256,
          sizeBytes: got.sizeBytes,
          mime: probe.mime,
          durationSeconds: probe.durationSeconds,
          retainedUntil: this.retention(),
        });
        if (!kept) {
          // The job was deleted while its source downloaded.
          await this.media.removeJob(jobId);
          return;
        }
        await this.log(jobId, 'staged', `Source stored on the coordinator (${got.sizeBytes} bytes, sha256 ${got.sha256.slice(0, 12)}…).`);
        this.work.notify();
      } catch (err) {
        // The page says why in words; the code underneath (ENOTFOUND, HTTP 404, ffprobe's message) goes to the runtime log.
        if (err instanceof DownloadFailed) await this.log(jobId, 'download_failed', `Download failed: ${err.code}`, 'warn', { code: err.code });
        const reason = err instanceof MediaTooLargeError ? `the source is larger than ${this.config.SPEECH_UPLOAD_MAX_MB} MB` : (err as Error).message;
        // Failed with its notification (callback and report) in one statement.
        await this.repo.stagingFailed(jobId, reason);
      } finally {
        await got?.cleanup();
      }
    } finally {
      this.running.delete(jobId);
      await this.redis.eval(RELEASE_LOCK, 1, lock, owner).catch(() => undefined);
    }
  }

  /** The download proxy first (when configured), then directly if the proxy cannot be reached and strict mode is off. */
  private async download(jobId: number, url: string): Promise<Downloaded> {
    const routing = await sourceRouting(this.config);
    if (!routing.proxy) return this.attempt(jobId, url, routing, null);
    const label = proxyLabel(routing.proxy);
    await this.log(jobId, 'download_attempt', `Attempt 1: downloading through the proxy ${label}.`, 'info', { via: 'proxy', proxy: label });
    try {
      return await this.attempt(jobId, url, routing, routing.proxy);
    } catch (err) {
      if (!(err instanceof ProxyUnreachable)) throw err;
      if (this.config.SPEECH_DOWNLOAD_PROXY_STRICT) {
        const message = `The download proxy ${label} could not be reached (${err.reason}); strict proxy mode allows no direct download.`;
        await this.log(jobId, 'download_proxy_unreachable', message, 'error', { via: 'proxy', proxy: label, strict: true });
        throw new Error(`the download proxy ${label} could not be reached (${err.reason}) and strict proxy mode allows no direct download`, {
          cause: err,
        });
      }
      await this.log(jobId, 'download_proxy_unreachable', `The download proxy ${label} could not be reached (${err.reason}); retrying directly.`, 'warn', {
        via: 'proxy',
        proxy: label,
        strict: false,
      });
      await this.log(jobId, 'download_attempt', 'Attempt 2: downloading directly, without the proxy.', 'info', { via: 'direct' });
      return this.attempt(jobId, url, routing, null);
    }
  }

  /** One download: direct media with fetch, pages (by host or by response type) with yt-dlp. */
  private async attempt(jobId: number, url: string, routing: SourceRouting, proxy: string | null): Promise<Downloaded> {
    if (proxy) await ensureProxyReachable(proxy);
    if (routing.ytdlp && isKnownPageHost(url)) return this.ytdlp(jobId, url, routing.ytdlp, proxy);
    let res;
    try {
      res = await this.outbound.fetch(url, { signal: AbortSignal.timeout(DOWNLOAD_TIMEOUT_MS) }, 5, { proxy: proxy ?? undefined });
    } catch (err) {
      const unreachable = proxy ? proxyConnectFailure(err) : null;
      if (unreachable) throw unreachable;
      throw describeFetchError(url, err);
    }
    if (!res.ok || !res.body) {
      await res.body?.cancel().catch(() => undefined);
      throw new DownloadFailed(httpDownloadFailure(url, res.status));
    }
    const type = res.headers.get('content-type');
    if (isPageContentType(type)) {
      await res.body.cancel().catch(() => undefined);
      if (!routing.ytdlp) throw new Error(`the URL is a web page (${type}), not a media file, and yt-dlp is not configured on the coordinator`);
      await this.log(jobId, 'page_detected', `The URL is a web page (${type}); extracting its media with yt-dlp.`);
      return this.ytdlp(jobId, url, routing.ytdlp, proxy);
    }
    const temp = await this.media.writeTemp(Readable.fromWeb(res.body), this.maxBytes());
    let extension = path.extname(new URL(url).pathname);
    try {
      extension = path.extname(new URL(res.url || url).pathname) || extension;
    } catch {
      // keep the submitted URL's extension
    }
    return { path: temp.path, sizeBytes: temp.sizeBytes, sha256: temp.sha256, extension, cleanup: () => this.media.discard(temp.path) };
  }

  /**
   * yt-dlp extracts the best audio into a private working folder under the media root, through the
   * download proxy or, without one, through a loopback guard proxy that applies the outbound policy
   * to every connection yt-dlp makes.
   */
  private async ytdlp(jobId: number, url: string, exe: string, proxy: string | null): Promise<Downloaded> {
    await this.outbound.assertPublic(url, { allowUnresolved: true });
    const dir = await this.media.workDir('staging');
    let guard: GuardProxy | null = null;
    try {
      if (!proxy) guard = await startGuardProxy(this.outbound);
      const via = proxy ?? guard!.url;
      await this.log(jobId, 'ytdlp', `Extracting the audio with yt-dlp${proxy ? ` through the proxy ${proxyLabel(proxy)}` : ''}.`, 'info', {
        via: proxy ? 'proxy' : 'direct',
      });
      const maxBytes = this.maxBytes();
      const args = [
        '--ignore-config',
        '--no-playlist',
        '--no-progress',
        '--no-mtime',
        '--no-cache-dir',
        '--newline',
        '--socket-timeout',
        '30',
        '--max-filesize',
        String(maxBytes),
        '--proxy',
        via,
        '-f',
        'bestaudio/best',
        '-o',
        path.join(dir, 'source.%(ext)s'),
        '--',
        url,
      ];
      const result = await run(exe, args, DOWNLOAD_TIMEOUT_MS);
      const refused = guard?.refusals.length ? ` (refused by the outbound policy: ${guard.refusals.slice(0, 3).join('; ')})` : '';
      if (result.code !== 0) throw new Error(`yt-dlp failed: ${lastLines(result.stderr || result.stdout)}${refused}`);
      const files = (await readdir(dir)).filter((f) => !/\.(part|ytdl|temp)$/i.test(f) && !f.startsWith('.'));
      if (files.length === 0) throw new Error(`yt-dlp produced no file: ${lastLines(result.stderr || result.stdout)}${refused}`);
      const file = path.join(dir, files[0]!);
      const { sizeBytes, sha256 } = await this.media.hashFile(file);
      if (sizeBytes > maxBytes) throw new MediaTooLargeError(`larger than ${maxBytes} bytes`);
      if (sizeBytes === 0) throw new Error('yt-dlp produced an empty file');
      return { path: file, sizeBytes, sha256, extension: path.extname(file), cleanup: () => this.media.removeDir(dir) };
    } catch (err) {
      await this.media.removeDir(dir);
      throw err;
    } finally {
      await guard?.close();
    }
  }

  private maxBytes() {
    return this.config.SPEECH_UPLOAD_MAX_MB * 1024 * 1024;
  }

  private retention(): Date | null {
    const days = this.config.SPEECH_MEDIA_RETENTION_DAYS;
    return days > 0 ? new Date(Date.now() + days * 86400_000) : null;
  }

  private log(jobId: number, event: string, message: string, level: EventLevel = 'info', data: Record<string, unknown> | null = null) {
    return this.repo.log(jobId, event, message, level, data);
  }
}

/** fetch's "fetch failed" with the reason underneath (refusals of the outbound policy come through as they are). */
function describeFetchError(url: string, err: unknown): Error {
  const e = err as Error;
  if (e?.name === 'OutboundRefused') return new Error(`refused by the outbound policy: ${e.message}`);
  return new DownloadFailed(fetchDownloadFailure(url, err), err);
}

/** A failed download: its message is for the page, its code for the runtime log. */
class DownloadFailed extends Error {
  readonly code: string;
  constructor(failure: DownloadFailure, cause?: unknown) {
    super(failure.message, { cause });
    this.code = failure.code;
  }
}

function lastLines(text: string, max = 600): string {
  const lines = text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  const tail = lines.slice(-3).join(' | ');
  return (tail.length > max ? `…${tail.slice(-max)}` : tail) || 'no output';
}

function run(exe: string, args: string[], timeoutMs: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    // Proxy variables of the environment (no_proxy above all) must not route around --proxy.
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(https?|all|no|ftp)_proxy$/i.test(k)));
    const child = spawn(exe, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
    let stdout = '';
    let stderr = '';
    const cap = (s: string, chunk: Buffer) => (s + chunk.toString('utf8')).slice(-16_000);
    child.stdout.on('data', (c: Buffer) => (stdout = cap(stdout, c)));
    child.stderr.on('data', (c: Buffer) => (stderr = cap(stderr, c)));
    const timer = setTimeout(() => {
      stderr += `\nkilled after ${Math.round(timeoutMs / 1000)} s`;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`yt-dlp could not be started: ${err.message}`));
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
