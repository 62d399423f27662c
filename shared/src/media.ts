/**
 * ffprobe and ffmpeg, run as child processes: the probe of a media file (container, duration,
 * streams, MIME type) and an ffmpeg runner that kills ffmpeg when its AbortSignal fires or its time
 * is up. Used by the coordinator (upload and download probing) and the worker (decoding).
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { z } from 'zod';

export type MediaTool = 'ffmpeg' | 'ffprobe';

export interface MediaToolOptions {
  /** Aborting kills the process (SIGKILL); the call then rejects with MediaToolAborted. */
  signal?: AbortSignal | undefined;
  /** The process is killed (SIGKILL) and the call rejects with a MediaToolError once it runs this long. */
  timeoutMs?: number | undefined;
}

/** ffmpeg or ffprobe failed: it exited non-zero, died of a signal, ran out of time or could not start. */
export class MediaToolError extends Error {
  override readonly name = 'MediaToolError';

  constructor(
    readonly tool: MediaTool,
    message: string,
    /** The last part of what the process wrote to stderr (see stderrLines). */
    readonly stderr: string,
    readonly exitCode: number | null,
    readonly timedOut = false,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The call's AbortSignal fired; the process, if it had started, has exited. */
export class MediaToolAborted extends Error {
  override readonly name = 'AbortError';

  constructor(
    readonly tool: MediaTool,
    reason: unknown,
  ) {
    super(`${tool} was aborted`, { cause: reason });
  }
}

/** How much of stderr is kept for error messages (the end of it). */
const STDERR_TAIL_CHARS = 16 * 1024;
/** ffprobe's JSON is a few KiB; far more than this is not a media file anyone submits. */
const MAX_STDOUT_BYTES = 16 * 1024 * 1024;
/** ffprobe reads headers only; a probe that takes this long is stuck (a pipe, a stalled mount). */
const DEFAULT_PROBE_TIMEOUT_MS = 60_000;

/**
 * The lines of ffmpeg/ffprobe stderr worth showing, in order: trimmed, empty and progress lines
 * dropped, and the `[mp3 @ 0x55d…]` prefix of a component's log line shortened to `mp3:`.
 */
export function stderrLines(stderr: string): string[] {
  return stderr
    .split(/\r?\n|\r/)
    .map((l) => l.trim().replace(/^\[([^\s\]@]+) @ 0x[0-9a-f]+\]\s*/i, '$1: '))
    .filter((l) => l && !/^(size=|frame=|video:|\[out#|Press \[q\])/.test(l));
}

/** Runs ffmpeg or ffprobe; resolves with its stdout (when collected) and the tail of its stderr. */
function runTool(tool: MediaTool, args: string[], opts: MediaToolOptions & { collectStdout?: boolean }): Promise<{ stdout: string; stderr: string }> {
  const { signal, timeoutMs } = opts;
  return new Promise((resolve, reject) => {
    // Nothing is started for a signal that has already fired.
    if (signal?.aborted) {
      reject(new MediaToolAborted(tool, signal.reason));
      return;
    }
    let stderr = '';
    const stdout: Buffer[] = [];
    let stdoutBytes = 0;
    let failure: Error | null = null;
    let timer: NodeJS.Timeout | undefined;
    let settled = false;

    const child = spawn(tool, args, { stdio: ['ignore', opts.collectStdout ? 'pipe' : 'ignore', 'pipe'] });
    // spawn() has created the process by the time it returns (or will report 'error'), so a kill
    // here reaches it however early the abort comes.
    const stop = (err: Error) => {
      failure ??= err;
      child.kill('SIGKILL');
    };
    const onAbort = () => stop(new MediaToolAborted(tool, signal?.reason));
    signal?.addEventListener('abort', onAbort, { once: true });
    if (timeoutMs !== undefined) {
      timer = setTimeout(() => stop(new MediaToolError(tool, `${tool} took longer than ${timeoutMs} ms and was stopped`, stderr, null, true)), timeoutMs);
    }
    const finish = (err: Error | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      if (err) reject(err);
      else resolve({ stdout: Buffer.concat(stdout).toString('utf8'), stderr });
    };

    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (chunk: string) => {
      stderr += chunk;
      if (stderr.length > 2 * STDERR_TAIL_CHARS) stderr = stderr.slice(-STDERR_TAIL_CHARS);
    });
    child.stdout?.on('data', (chunk: Buffer) => {
      stdoutBytes += chunk.length;
      if (stdoutBytes > MAX_STDOUT_BYTES) stop(new MediaToolError(tool, `${tool} wrote more than ${MAX_STDOUT_BYTES} bytes`, stderr, null));
      else stdout.push(chunk);
    });
    child.on('error', (err: NodeJS.ErrnoException) => {
      // Not started at all (no pid): 'close' may never come.
      const message = err.code === 'ENOENT' ? `${tool} is not installed (not found on PATH)` : `${tool} could not be started: ${err.message}`;
      if (child.pid === undefined) finish(failure ?? new MediaToolError(tool, message, stderr, null, false, { cause: err }));
      else failure ??= new MediaToolError(tool, message, stderr, null, false, { cause: err });
    });
    // 'close': the process has exited and its stdio is drained.
    child.on('close', (code, sig) => {
      if (failure) {
        finish(failure);
        return;
      }
      if (code === 0) {
        finish(null);
        return;
      }
      stderr = stderr.slice(-STDERR_TAIL_CHARS);
      const how = code !== null ? `exited with code ${code}` : `was killed by ${sig}`;
      const last = stderrLines(stderr).at(-1);
      finish(new MediaToolError(tool, `${tool} ${how}${last ? `: ${last}` : ''}`, stderr, code));
    });
  });
}

/**
 * Runs ffmpeg with `args` (`-hide_banner -nostdin -nostats` are put first). Resolves with the tail
 * of its stderr once it exits 0. Rejects with MediaToolError when it fails or runs past `timeoutMs`,
 * and with MediaToolAborted when `signal` fires; either way only once the process has exited, so a
 * caller may remove ffmpeg's output files right away.
 */
export async function runFfmpeg(args: string[], opts: MediaToolOptions = {}): Promise<{ stderr: string }> {
  const { stderr } = await runTool('ffmpeg', ['-hide_banner', '-nostdin', '-nostats', ...args], opts);
  return { stderr };
}

// ffprobe -print_format json: numbers of the format and stream sections come as strings.
const numeric = z
  .union([z.string(), z.number()])
  .optional()
  .transform((v) => {
    const n = v === undefined || v === '' ? NaN : Number(v);
    return Number.isFinite(n) ? n : null;
  });
const ffprobeJson = z.object({
  format: z
    .object({
      format_name: z.string().optional(),
      duration: numeric,
      size: numeric,
    })
    .optional(),
  streams: z
    .array(
      z.object({
        index: z.number(),
        codec_type: z.string().optional(),
        codec_name: z.string().optional(),
        duration: numeric,
        sample_rate: numeric,
        channels: z.number().optional(),
        disposition: z.object({ attached_pic: z.number().optional() }).optional(),
      }),
    )
    .optional(),
});

export interface ProbedStream {
  index: number;
  /** "audio", "video", "subtitle", "data", "attachment"; "" when ffprobe does not say. */
  codecType: string;
  codecName: string | null;
  durationSeconds: number | null;
  sampleRate: number | null;
  channels: number | null;
  /** Cover art of an audio file: a one-frame "video" stream that is not video. */
  attachedPicture: boolean;
}

export interface MediaProbe {
  /** ffprobe's format name, e.g. "wav", "mov,mp4,m4a,3gp,3g2,mj2", "ogg", "matroska,webm". */
  formatName: string;
  /** The container's duration, else the longest stream's; null when neither is known. */
  durationSeconds: number | null;
  /** The size ffprobe read, when it reports one. */
  sizeBytes: number | null;
  streams: ProbedStream[];
  audioStreams: number;
  /** Video streams, cover art not counted. */
  videoStreams: number;
  /** From the container, whether there is video, and the file name's extension (see mediaMimeType). */
  mime: string | null;
}

/**
 * `ffprobe -v error -print_format json -show_format -show_streams` of a file. `fileName` (default:
 * the file's own name) only refines the MIME type. Rejects with MediaToolError when ffprobe cannot
 * read the file (its reason is in `stderr`; see stderrLines), or with MediaToolAborted.
 */
export async function ffprobe(file: string, opts: MediaToolOptions & { fileName?: string } = {}): Promise<MediaProbe> {
  const { stdout, stderr } = await runTool(
    'ffprobe',
    // Only local files: an uploaded playlist (HLS, concat) must not make ffprobe open URLs or other files.
    ['-v', 'error', '-protocol_whitelist', 'file', '-print_format', 'json', '-show_format', '-show_streams', '-i', path.resolve(file)],
    { signal: opts.signal, timeoutMs: opts.timeoutMs ?? DEFAULT_PROBE_TIMEOUT_MS, collectStdout: true },
  );
  let data: z.infer<typeof ffprobeJson>;
  try {
    data = ffprobeJson.parse(JSON.parse(stdout));
  } catch (err) {
    throw new MediaToolError('ffprobe', `ffprobe printed output that is not its JSON report: ${(err as Error).message}`, stderr, 0, false, { cause: err });
  }
  const streams: ProbedStream[] = (data.streams ?? []).map((s) => ({
    index: s.index,
    codecType: s.codec_type ?? '',
    codecName: s.codec_name ?? null,
    durationSeconds: s.duration,
    sampleRate: s.sample_rate,
    channels: s.channels ?? null,
    attachedPicture: s.disposition?.attached_pic === 1,
  }));
  const audioStreams = streams.filter((s) => s.codecType === 'audio').length;
  const videoStreams = streams.filter((s) => s.codecType === 'video' && !s.attachedPicture).length;
  const streamDurations = streams.map((s) => s.durationSeconds).filter((d): d is number => d !== null);
  const formatName = data.format?.format_name ?? '';
  return {
    formatName,
    durationSeconds: data.format?.duration ?? (streamDurations.length ? Math.max(...streamDurations) : null),
    sizeBytes: data.format?.size ?? null,
    streams,
    audioStreams,
    videoStreams,
    mime: mediaMimeType(formatName, videoStreams > 0, opts.fileName ?? file),
  };
}

/**
 * The MIME type people expect for a file, from ffprobe's format name, whether it has video, and
 * (where a container has several) the file name's extension. Null for formats not listed here.
 */
export function mediaMimeType(formatName: string, hasVideo: boolean, fileName = ''): string | null {
  const ext = path.extname(fileName).toLowerCase();
  const names = formatName.split(',');
  const has = (n: string) => names.includes(n);
  const av = (audio: string, video: string) => (hasVideo ? video : audio);
  if (has('wav')) return 'audio/wav';
  if (has('mp3')) return 'audio/mpeg';
  if (has('flac')) return 'audio/flac';
  if (has('ogg')) return ext === '.opus' && !hasVideo ? 'audio/opus' : av('audio/ogg', 'video/ogg');
  if (has('mov') || has('mp4')) {
    if (ext === '.mov') return 'video/quicktime';
    if (ext === '.3gp') return av('audio/3gpp', 'video/3gpp');
    return av('audio/mp4', 'video/mp4');
  }
  if (has('webm') || has('matroska')) {
    return ext === '.mkv' || ext === '.mka' ? av('audio/x-matroska', 'video/x-matroska') : av('audio/webm', 'video/webm');
  }
  if (has('aac')) return 'audio/aac';
  if (has('avi')) return 'video/x-msvideo';
  if (has('asf')) return av('audio/x-ms-wma', 'video/x-ms-asf');
  if (has('aiff')) return 'audio/aiff';
  if (has('amr')) return 'audio/amr';
  if (has('mpegts')) return 'video/mp2t';
  if (has('mpeg')) return av('audio/mpeg', 'video/mpeg');
  if (has('flv')) return 'video/x-flv';
  return null;
}
