import { spawn } from 'node:child_process';
import { createReadStream } from 'node:fs';
import { mkdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { AppError } from '../../http/errors.js';

/**
 * Playing a job's retained media on the job page (and, when its owner allows it, on the share
 * page): byte ranges of the file on disk, streamed (never read whole into memory), and the
 * waveform's peaks, computed once with ffmpeg and cached next to the media.
 */

/** A byte range of a file (inclusive ends, as HTTP counts them). */
export interface ByteRange {
  start: number;
  end: number;
}

/**
 * The range a `Range` header asks for, of a file of `size` bytes: null for the whole file (no
 * header, or a header this server ignores: several ranges, another unit), `'unsatisfiable'` for
 * a range that starts past the end (416). `bytes=a-b`, `bytes=a-` and `bytes=-n` (the last n bytes).
 */
export function parseRange(header: string | undefined, size: number): ByteRange | null | 'unsatisfiable' {
  if (!header) return null;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return null;
  if (m[1] === '') {
    const suffix = Number(m[2]);
    if (suffix === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size || end < start) return 'unsatisfiable';
  return { start, end };
}

/** The media a page may play: where it is, how big, what type. */
export interface PlayableMedia {
  path: string;
  size: number;
  mime: string;
  video: boolean;
}

/** The media type a browser plays the file as: the probed one, else one from the file's extension. */
export function playbackMime(sourceMime: string | null, file: string): string {
  if (sourceMime) return sourceMime;
  const ext = path.extname(file).toLowerCase();
  const byExt: Record<string, string> = {
    '.wav': 'audio/wav',
    '.mp3': 'audio/mpeg',
    '.ogg': 'audio/ogg',
    '.opus': 'audio/ogg',
    '.flac': 'audio/flac',
    '.m4a': 'audio/mp4',
    '.mp4': 'video/mp4',
    '.webm': 'video/webm',
    '.mkv': 'video/x-matroska',
  };
  return byExt[ext] ?? 'application/octet-stream';
}

/** The job's retained media, or a 404 saying it was released. */
export async function playableMedia(job: { mediaPath: string | null; sourceMime: string | null }): Promise<PlayableMedia> {
  const released = () => new AppError('not_found', 'The recording has been released: it is no longer kept, so it cannot be played.');
  if (!job.mediaPath) throw released();
  let size: number;
  try {
    size = (await stat(job.mediaPath)).size;
  } catch {
    throw released();
  }
  const mime = playbackMime(job.sourceMime, job.mediaPath);
  return { path: job.mediaPath, size, mime, video: mime.startsWith('video/') };
}

/** A stream of the file's bytes in `range` (all of it without one). */
export function mediaStream(media: PlayableMedia, range: ByteRange | null): Readable {
  return createReadStream(media.path, range ? { start: range.start, end: range.end, highWaterMark: 64 * 1024 } : { highWaterMark: 64 * 1024 });
}

// ---- waveform peaks ------------------------------------------------------------------------

/** Peaks per file: about this many values, at most, whatever the recording's length. */
export const MAX_PEAKS = 6000;
/** ffmpeg decodes to this rate (mono) for the peaks: enough for a picture, cheap to read. */
const PEAK_RATE = 2000;

export interface Peaks {
  /** Seconds of audio each value covers. */
  seconds_per_peak: number;
  /** The recording's length as decoded (seconds). */
  duration: number;
  /** Loudest absolute sample per window, 0..1, three decimals. */
  peaks: number[];
}

const inflight = new Map<string, Promise<Peaks>>();

/**
 * The waveform's peaks of a job's media: read from `peaks.json` next to the media when it was
 * computed for this file (same size and modification time), else computed by streaming ffmpeg's
 * decoded samples through a running maximum (the decoded audio is never held whole) and written
 * there. Concurrent requests for the same file share one ffmpeg.
 */
export async function mediaPeaks(mediaPath: string, durationHint: number | null): Promise<Peaks> {
  const info = await stat(mediaPath);
  const key = `${info.size}:${info.mtimeMs}`;
  const cacheFile = path.join(path.dirname(mediaPath), 'peaks.json');
  try {
    const cached = JSON.parse(await readFile(cacheFile, 'utf8')) as Peaks & { key?: string };
    if (cached.key === key) return { seconds_per_peak: cached.seconds_per_peak, duration: cached.duration, peaks: cached.peaks };
  } catch {
    // not computed yet (or unreadable): compute below
  }
  const running = inflight.get(cacheFile);
  if (running) return running;
  const work = computePeaks(mediaPath, durationHint)
    .then(async (peaks) => {
      await mkdir(path.dirname(cacheFile), { recursive: true });
      const tmp = `${cacheFile}.${process.pid}.tmp`;
      await writeFile(tmp, JSON.stringify({ key, ...peaks }));
      await rename(tmp, cacheFile);
      return peaks;
    })
    .finally(() => inflight.delete(cacheFile));
  inflight.set(cacheFile, work);
  return work;
}

function computePeaks(file: string, durationHint: number | null): Promise<Peaks> {
  const secondsPerPeak = Math.max(0.05, (durationHint ?? 0) / MAX_PEAKS);
  const window = Math.max(1, Math.round(secondsPerPeak * PEAK_RATE));
  return new Promise((resolve, reject) => {
    const child = spawn(
      'ffmpeg',
      [
        '-hide_banner',
        '-nostdin',
        '-v',
        'error',
        '-protocol_whitelist',
        'file',
        '-i',
        path.resolve(file),
        '-vn',
        '-ac',
        '1',
        '-ar',
        String(PEAK_RATE),
        '-f',
        's16le',
        '-',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const peaks: number[] = [];
    let max = 0;
    let inWindow = 0;
    let samples = 0;
    let carry: Buffer | null = null;
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => {
      if (stderr.length < 4000) stderr += d.toString();
    });
    child.stdout.on('data', (chunk: Buffer) => {
      let buf = carry ? Buffer.concat([carry, chunk]) : chunk;
      const usable = buf.length - (buf.length % 2);
      carry = usable < buf.length ? buf.subarray(usable) : null;
      buf = buf.subarray(0, usable);
      for (let i = 0; i < buf.length; i += 2) {
        const v = Math.abs(buf.readInt16LE(i));
        if (v > max) max = v;
        if (++inWindow === window) {
          peaks.push(Math.round((max / 32768) * 1000) / 1000);
          max = 0;
          inWindow = 0;
        }
      }
      samples += buf.length / 2;
    });
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) {
        reject(new Error(`ffmpeg could not decode the media for its waveform (exit ${code}): ${stderr.trim().split('\n')[0] ?? ''}`));
        return;
      }
      if (inWindow > 0) peaks.push(Math.round((max / 32768) * 1000) / 1000);
      resolve({ seconds_per_peak: window / PEAK_RATE, duration: samples / PEAK_RATE, peaks });
    });
  });
}
