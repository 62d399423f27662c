import path from 'node:path';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import type { Redis } from 'ioredis';
import type { Config } from '../../config.js';
import type { Orm } from '../../db/orm.js';
import type { WorkAvailable } from './job-events.js';
import { MediaTooLargeError, type MediaStore } from './media-store.js';
import { probeMedia } from './probe.js';

/**
 * Downloads a URL job's source onto the coordinator for workers that may not fetch external URLs:
 * the file is streamed to disk with its SHA-256, checked with ffprobe, kept with the job, and the
 * job goes back to the queue, where such a worker gets it through the lease-bound FetchMedia stream.
 * A Redis lock makes sure only one coordinator stages a given job.
 */
export class MediaStager {
  private readonly running = new Set<number>();

  constructor(
    private readonly orm: Orm,
    private readonly redis: Redis,
    private readonly config: Config,
    private readonly media: MediaStore,
    private readonly work: WorkAvailable,
  ) {}

  private get knex() {
    return this.orm.em.getConnection().getKnex();
  }

  /** Stages queued URL jobs this worker could run but cannot download itself. */
  async stageFor(worker: { id: number; models: string[] }): Promise<void> {
    const { rows } = await this.knex.raw<{ rows: Array<{ id: number }> }>(
      `select id from speech_jobs
        where status = 'queued' and source_type = 'url' and media_path is null and cancel_requested_at is null
          and ((execution_target = 'worker' and target_worker_id = ?) or (execution_target = 'auto' and model = any(?::text[])))
        order by created_at limit 3`,
      [worker.id, worker.models],
    );
    for (const { id } of rows) void this.stage(id);
  }

  async stage(jobId: number): Promise<void> {
    if (this.running.has(jobId)) return;
    const lock = `${this.config.REDIS_KEY_PREFIX}speech:staging:${jobId}`;
    if ((await this.redis.set(lock, '1', 'EX', 3600, 'NX')) !== 'OK') return;
    this.running.add(jobId);
    try {
      const { rows } = await this.knex.raw<{ rows: Array<{ source_url: string }> }>(
        `update speech_jobs set stage_label = 'Downloading the source to the coordinator', updated_at = now()
          where id = ? and status = 'queued' and media_path is null returning source_url`,
        [jobId],
      );
      const url = rows[0]?.source_url;
      if (!url) return;
      await this.log(jobId, 'staging', `Downloading ${url} for a worker that cannot fetch URLs.`);
      try {
        const res = await fetch(url, { redirect: 'follow', signal: AbortSignal.timeout(30 * 60_000) });
        if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
        const temp = await this.media.writeTemp(Readable.fromWeb(res.body as WebReadableStream), this.config.SPEECH_UPLOAD_MAX_MB * 1024 * 1024);
        let probe;
        try {
          probe = await probeMedia(temp.path);
          if (!probe.hasAudio) throw new Error('the download has no audio stream');
        } catch (err) {
          await this.media.discard(temp.path);
          throw err;
        }
        const file = await this.media.adopt(jobId, temp.path, path.extname(new URL(url).pathname));
        await this.knex.raw(
          `update speech_jobs set media_path = ?, media_sha256 = ?, source_size_bytes = ?, source_mime = coalesce(?, source_mime),
              source_duration_seconds = coalesce(?, source_duration_seconds), media_retained_until = ?,
              stage_label = 'Waiting for a worker', updated_at = now() where id = ?`,
          [file, temp.sha256, temp.sizeBytes, probe.mime, probe.durationSeconds, this.retention(), jobId],
        );
        await this.log(jobId, 'staged', `Source stored on the coordinator (${temp.sizeBytes} bytes, sha256 ${temp.sha256.slice(0, 12)}…).`);
        this.work.notify();
      } catch (err) {
        const reason = err instanceof MediaTooLargeError ? `the source is larger than ${this.config.SPEECH_UPLOAD_MAX_MB} MB` : (err as Error).message;
        await this.knex.raw(
          `update speech_jobs set status = 'failed', stage_label = 'Failed', failure_error = ?, finished_at = now(), updated_at = now() where id = ? and status = 'queued'`,
          [`Could not download the source: ${reason}`.slice(0, 2000), jobId],
        );
        await this.log(jobId, 'staging_failed', `Could not download the source: ${reason}`, 'error');
      }
    } finally {
      this.running.delete(jobId);
      await this.redis.del(lock);
    }
  }

  private retention(): Date | null {
    const days = this.config.SPEECH_MEDIA_RETENTION_DAYS;
    return days > 0 ? new Date(Date.now() + days * 86400_000) : null;
  }

  private async log(jobId: number, event: string, message: string, level = 'info') {
    await this.knex.raw('insert into speech_job_events (job_id, event, message, level) values (?, ?, ?, ?)', [jobId, event, message, level]);
  }
}
