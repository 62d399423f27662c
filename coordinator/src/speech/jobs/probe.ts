import ffmpeg from 'fluent-ffmpeg';
import path from 'node:path';

export interface ProbeResult {
  durationSeconds: number | null;
  mime: string | null;
  hasAudio: boolean;
}

// ffprobe's format names to the MIME type people expect for the file.
const FORMAT_MIME: Array<[RegExp, string, string]> = [
  [/^wav$/, 'audio/wav', 'audio/wav'],
  [/^mp3$/, 'audio/mpeg', 'audio/mpeg'],
  [/^ogg$/, 'audio/ogg', 'video/ogg'],
  [/^flac$/, 'audio/flac', 'audio/flac'],
  [/^matroska,webm$/, 'audio/webm', 'video/webm'],
  [/^mov,mp4,m4a,3gp,3g2,mj2$/, 'audio/mp4', 'video/mp4'],
  [/^aac$/, 'audio/aac', 'audio/aac'],
  [/^avi$/, 'video/x-msvideo', 'video/x-msvideo'],
  [/^mpegts$/, 'video/mp2t', 'video/mp2t'],
];

/** ffprobe could not read the file; `reason` is its own explanation, without the file's path. */
export class ProbeError extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'ProbeError';
  }
}

/**
 * The first meaningful line of ffprobe's stderr (fluent-ffmpeg puts it in the error message after
 * "ffprobe exited with code N"): no banner or build lines, `[mp3 @ 0x…]` shortened to `mp3:`, and the
 * probed path (a temporary file people never named) left out.
 */
export function ffprobeReason(message: string, file: string): string {
  const base = path.basename(file);
  for (const raw of message.split('\n')) {
    let line = raw.trim();
    if (!line || /^ffprobe (exited|version)|^(built with|configuration:|lib[a-z]+\s+\d)/.test(line)) continue;
    line = line.replace(/^\[([^\s\]@]+) @ 0x[0-9a-f]+\]\s*/i, '$1: ');
    for (const p of [file, path.resolve(file), base]) line = line.split(`${p}: `).join('').split(p).join('the file');
    if (line) return line;
  }
  return 'ffprobe could not read it';
}

/** ffprobe (through fluent-ffmpeg): duration and a MIME type from the real container, not the file name. */
export function probeMedia(file: string): Promise<ProbeResult> {
  return new Promise((resolve, reject) => {
    ffmpeg.ffprobe(file, ['-hide_banner'], (err, data) => {
      if (err) return reject(new ProbeError(ffprobeReason(String((err as Error).message ?? err), file)));
      const streams = data.streams ?? [];
      const hasAudio = streams.some((s) => s.codec_type === 'audio');
      const hasVideo = streams.some((s) => s.codec_type === 'video' && s.disposition?.attached_pic !== 1);
      const format = data.format?.format_name ?? '';
      const entry = FORMAT_MIME.find(([re]) => re.test(format));
      const mime = entry ? (hasVideo ? entry[2] : entry[1]) : null;
      const duration = Number(data.format?.duration);
      resolve({ durationSeconds: Number.isFinite(duration) ? duration : null, mime, hasAudio });
    });
  });
}
