import { createHash, randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

export class MediaTooLargeError extends Error {}

/**
 * Retained source media on the coordinator's disk: one folder per job. Writes stream through a
 * SHA-256 and a size guard into a temporary file that is renamed only when complete, so a failed
 * or oversized upload never leaves a partial file behind.
 */
export class MediaStore {
  readonly root: string;

  constructor(root: string) {
    this.root = path.resolve(root);
  }

  jobDir(jobId: number) {
    return path.join(this.root, 'jobs', String(jobId));
  }

  /** The TXT copy of a completed job's transcript (transcript-file.ts): apart from the job's media folder, which retention empties. */
  transcriptFile(jobId: number) {
    return path.join(this.root, 'transcripts', `${jobId}.txt`);
  }

  /** Streams `source` into a temporary file; rejects with MediaTooLargeError past `maxBytes`. */
  async writeTemp(source: Readable, maxBytes: number): Promise<{ path: string; sizeBytes: number; sha256: string }> {
    const dir = path.join(this.root, 'incoming');
    await mkdir(dir, { recursive: true });
    const tmp = path.join(dir, `${randomUUID()}.part`);
    const hash = createHash('sha256');
    let size = 0;
    const guard = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        size += chunk.length;
        if (size > maxBytes) {
          cb(new MediaTooLargeError(`larger than ${maxBytes} bytes`));
          return;
        }
        hash.update(chunk);
        cb(null, chunk);
      },
    });
    try {
      await pipeline(source, guard, createWriteStream(tmp, { flags: 'wx' }));
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
    return { path: tmp, sizeBytes: size, sha256: hash.digest('hex') };
  }

  /** Moves a completed temporary file into the job's folder. */
  async adopt(jobId: number, tempPath: string, extension: string): Promise<string> {
    const dir = this.jobDir(jobId);
    await mkdir(dir, { recursive: true });
    const safeExt = /^\.[A-Za-z0-9]{1,8}$/.test(extension) ? extension.toLowerCase() : '';
    const target = path.join(dir, `source${safeExt}`);
    await rename(tempPath, target);
    return target;
  }

  /** SHA-256 and size of a file already on disk (a finished resumable upload, a yt-dlp download). */
  async hashFile(filePath: string): Promise<{ sizeBytes: number; sha256: string }> {
    const hash = createHash('sha256');
    let size = 0;
    for await (const chunk of createReadStream(filePath, { highWaterMark: 1024 * 1024 }) as AsyncIterable<Buffer>) {
      size += chunk.length;
      hash.update(chunk);
    }
    return { sizeBytes: size, sha256: hash.digest('hex') };
  }

  /** A fresh private working folder under the media root (same file system, so results can be renamed). */
  async workDir(kind: string): Promise<string> {
    const dir = path.join(this.root, kind);
    await mkdir(dir, { recursive: true });
    return mkdtemp(path.join(dir, 'w-'));
  }

  async removeDir(dir: string) {
    await rm(dir, { recursive: true, force: true });
  }

  async removeJob(jobId: number) {
    await rm(this.jobDir(jobId), { recursive: true, force: true });
  }

  async discard(tempPath: string) {
    await rm(tempPath, { force: true });
  }

  async size(filePath: string) {
    return (await stat(filePath)).size;
  }

  open(filePath: string, start = 0) {
    return createReadStream(filePath, { start, highWaterMark: 256 * 1024 });
  }
}
