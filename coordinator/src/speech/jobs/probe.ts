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

/** ffprobe (through fluent-ffmpeg): duration and a MIME type from the real container, not the file name. */
export function probeMedia(file: string): Promise<ProbeResult> {
  return new Promise((resolve, reject) => {
    ffmpeg.ffprobe(file, (err, data) => {
      if (err) return reject(new Error(`ffprobe could not read ${path.basename(file)}: ${String(err.message ?? err).split('\n').pop()}`));
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
