import { stat, unlink } from 'node:fs/promises';
import path from 'node:path';
import { ffprobe, MediaToolAborted, MediaToolError, runFfmpeg, stderrLines } from '@sonar/shared';
import { TranscriptionCancelled } from '../engines/types.js';

/** What every engine here reads. */
export const SPEECH_SAMPLE_RATE = 16000;

export interface MediaProbe {
  durationSeconds: number;
  /** ffprobe's format name, e.g. "wav", "mov,mp4,m4a,3gp,3g2,mj2", "ogg", "matroska,webm". */
  formatName: string;
  /** Best guess of the MIME type from the container, its streams and the file name. */
  mime: string;
  sizeBytes: number;
  audioStreams: number;
  videoStreams: number;
}

/**
 * The meaningful part of ffmpeg/ffprobe's stderr: its last line (where it states the failure),
 * preceded by up to two earlier lines that read like errors.
 */
function ffmpegMessage(err: unknown): string {
  const lines = err instanceof MediaToolError ? stderrLines(err.stderr) : [];
  const last = lines.at(-1);
  if (!last) return err instanceof Error ? err.message : String(err);
  const before = lines
    .slice(0, -1)
    .filter((l) => /error|invalid|failed|unable|cannot|could not|not found|unsupported/i.test(l))
    .slice(-2);
  return [...before, last].join(' | ');
}

/**
 * ffprobe a media file: duration, container, MIME guess, size. Throws a readable Error naming the
 * file, or TranscriptionCancelled when `signal` fires.
 */
export async function probeMedia(file: string, opts: { signal?: AbortSignal | undefined } = {}): Promise<MediaProbe> {
  let probe;
  try {
    probe = await ffprobe(file, { signal: opts.signal });
  } catch (err) {
    if (err instanceof MediaToolAborted) throw new TranscriptionCancelled('decoding cancelled');
    throw new Error(`Cannot read media file ${file}: ${ffmpegMessage(err)}`, { cause: err });
  }
  return {
    durationSeconds: probe.durationSeconds ?? 0,
    formatName: probe.formatName || 'unknown',
    mime: probe.mime ?? 'application/octet-stream',
    sizeBytes: probe.sizeBytes ?? (await stat(file)).size,
    audioStreams: probe.audioStreams,
    videoStreams: probe.videoStreams,
  };
}

/**
 * Decodes any audio or video file ffmpeg can read into a 16 kHz mono 16-bit PCM WAV with a plain
 * 44-byte header (no metadata chunks), which is what the engines read. Resolves with the duration of
 * the decoded audio as ffprobe reports it. Aborting kills ffmpeg, removes the partial output and
 * rejects with TranscriptionCancelled (once ffmpeg has exited).
 */
export async function decodeToWav(inputPath: string, outPath: string, opts: { signal?: AbortSignal } = {}): Promise<{ durationSeconds: number }> {
  const { signal } = opts;
  if (signal?.aborted) throw new TranscriptionCancelled('decoding cancelled');
  const input = await probeMedia(inputPath, { signal });
  if (input.audioStreams === 0) throw new Error(`Cannot decode ${inputPath}: it has no audio stream (${input.formatName})`);
  try {
    await runFfmpeg(
      [
        '-v',
        'error',
        '-y',
        // Only local files: a downloaded playlist (HLS, concat) must not make ffmpeg open URLs or other files.
        '-protocol_whitelist',
        'file',
        '-i',
        path.resolve(inputPath),
        '-map',
        '0:a:0',
        '-vn',
        '-sn',
        '-dn',
        '-ac',
        '1',
        '-ar',
        String(SPEECH_SAMPLE_RATE),
        '-c:a',
        'pcm_s16le',
        '-map_metadata',
        '-1',
        '-fflags',
        '+bitexact',
        '-flags:a',
        '+bitexact',
        '-f',
        'wav',
        outPath,
      ],
      { signal },
    );
  } catch (err) {
    await unlink(outPath).catch(() => undefined);
    if (err instanceof MediaToolAborted) throw new TranscriptionCancelled('decoding cancelled');
    throw new Error(`Cannot decode ${inputPath}: ${ffmpegMessage(err)}`, { cause: err });
  }
  const out = await probeMedia(outPath);
  return { durationSeconds: out.durationSeconds };
}
