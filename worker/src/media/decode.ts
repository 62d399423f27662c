import { stat, unlink } from 'node:fs/promises';
import path from 'node:path';
import ffmpeg from 'fluent-ffmpeg';
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
 * preceded by up to two earlier lines that read like errors; banner and stream listings dropped.
 */
function ffmpegMessage(err: unknown, stderr?: string): string {
  const raw = stderr || (err instanceof Error ? err.message : String(err));
  const lines = raw
    .split('\n')
    .map((l) => l.trim().replace(/ @ 0x[0-9a-f]+\]/g, ']'))
    .filter((l) => l && !/^(size=|frame=|video:|\[out#|Press \[q\])/.test(l));
  const last = lines.at(-1);
  if (!last) return 'unknown error';
  const before = lines
    .slice(0, -1)
    .filter((l) => /error|invalid|failed|unable|cannot|could not|not found|unsupported/i.test(l) && !/^ff(mpeg|probe) exited with code/.test(l))
    .slice(-2);
  return [...before, last].join(' | ');
}

function ffprobe(file: string): Promise<ffmpeg.FfprobeData> {
  return new Promise((resolve, reject) => {
    ffmpeg.ffprobe(file, (err: unknown, data: ffmpeg.FfprobeData) => (err ? reject(err) : resolve(data)));
  });
}

function num(v: unknown): number {
  const n = typeof v === 'number' ? v : Number(v);
  return Number.isFinite(n) ? n : NaN;
}

/** MIME type from ffprobe's format name, whether there is video, and the file extension. */
export function guessMime(formatName: string, hasVideo: boolean, fileName = ''): string {
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
    return ext === '.webm' ? av('audio/webm', 'video/webm') : av('audio/x-matroska', 'video/x-matroska');
  }
  if (has('aac')) return 'audio/aac';
  if (has('avi')) return 'video/x-msvideo';
  if (has('asf')) return av('audio/x-ms-wma', 'video/x-ms-asf');
  if (has('aiff')) return 'audio/aiff';
  if (has('amr')) return 'audio/amr';
  if (has('mpegts')) return 'video/mp2t';
  if (has('mpeg')) return av('audio/mpeg', 'video/mpeg');
  if (has('flv')) return 'video/x-flv';
  return 'application/octet-stream';
}

/** ffprobe a media file: duration, container, MIME guess, size. Throws a readable Error naming the file. */
export async function probeMedia(file: string): Promise<MediaProbe> {
  let data: ffmpeg.FfprobeData;
  try {
    data = await ffprobe(file);
  } catch (err) {
    throw new Error(`Cannot read media file ${file}: ${ffmpegMessage(err)}`);
  }
  const streams = data.streams ?? [];
  // Cover art in audio files shows up as a one-frame "video" stream: not a video.
  const videoStreams = streams.filter((s) => s.codec_type === 'video' && !(s.disposition as { attached_pic?: number } | undefined)?.attached_pic).length;
  const audioStreams = streams.filter((s) => s.codec_type === 'audio').length;
  let duration = num(data.format?.duration);
  if (!Number.isFinite(duration)) {
    duration = Math.max(0, ...streams.map((s) => num(s.duration)).filter(Number.isFinite));
  }
  let sizeBytes = num(data.format?.size);
  if (!Number.isFinite(sizeBytes)) sizeBytes = (await stat(file)).size;
  const formatName = String(data.format?.format_name ?? 'unknown');
  return {
    durationSeconds: Number.isFinite(duration) ? duration : 0,
    formatName,
    mime: guessMime(formatName, videoStreams > 0, file),
    sizeBytes,
    audioStreams,
    videoStreams,
  };
}

/**
 * Decodes any audio or video file ffmpeg can read into a 16 kHz mono 16-bit PCM WAV with a plain
 * 44-byte header (no metadata chunks), which is what the engines read. Resolves with the duration of
 * the decoded audio as ffprobe reports it. Aborting kills ffmpeg, removes the partial output and
 * rejects with TranscriptionCancelled.
 */
export async function decodeToWav(inputPath: string, outPath: string, opts: { signal?: AbortSignal } = {}): Promise<{ durationSeconds: number }> {
  const { signal } = opts;
  if (signal?.aborted) throw new TranscriptionCancelled('decoding cancelled');
  const input = await probeMedia(inputPath);
  if (input.audioStreams === 0) throw new Error(`Cannot decode ${inputPath}: it has no audio stream (${input.formatName})`);
  if (signal?.aborted) throw new TranscriptionCancelled('decoding cancelled');

  await new Promise<void>((resolve, reject) => {
    let cancelled = false;
    let running = false;
    const command = ffmpeg(inputPath)
      .noVideo()
      .audioChannels(1)
      .audioFrequency(SPEECH_SAMPLE_RATE)
      .audioCodec('pcm_s16le')
      .format('wav')
      .outputOptions([
        '-map', '0:a:0',
        '-sn', '-dn',
        '-map_metadata', '-1',
        '-fflags', '+bitexact',
        '-flags:a', '+bitexact',
      ]);
    // fluent-ffmpeg cannot kill before it has spawned ffmpeg (it probes its capabilities first):
    // an abort in that window is acted on at 'start'.
    const onAbort = () => {
      cancelled = true;
      if (running) command.kill('SIGKILL');
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    const fail = (err: Error) => {
      signal?.removeEventListener('abort', onAbort);
      unlink(outPath).catch(() => {});
      reject(err);
    };
    command
      .on('start', () => {
        running = true;
        if (cancelled) command.kill('SIGKILL');
      })
      .on('error', (err: Error, _stdout: string | null, stderr: string | null) => {
        if (cancelled) fail(new TranscriptionCancelled('decoding cancelled'));
        else fail(new Error(`Cannot decode ${inputPath}: ${ffmpegMessage(err, stderr ?? undefined)}`));
      })
      .on('end', () => {
        if (cancelled) return fail(new TranscriptionCancelled('decoding cancelled'));
        signal?.removeEventListener('abort', onAbort);
        resolve();
      })
      .save(outPath);
  });

  const out = await probeMedia(outPath);
  return { durationSeconds: out.durationSeconds };
}
