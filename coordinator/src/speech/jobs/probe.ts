import path from 'node:path';
import { ffprobe, MediaToolError, stderrLines } from '@sonar/shared';

export interface ProbeResult {
  durationSeconds: number | null;
  mime: string | null;
  hasAudio: boolean;
}

/** ffprobe could not read the file; `reason` is its own explanation, without the file's path. */
export class ProbeError extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'ProbeError';
  }
}

/**
 * The first meaningful line of ffprobe's stderr: no banner or build lines, `[mp3 @ 0x…]` shortened
 * to `mp3:`, and the probed path (a temporary file people never named) left out.
 */
export function ffprobeReason(stderr: string, file: string): string {
  const base = path.basename(file);
  for (let line of stderrLines(stderr)) {
    if (/^ffprobe (exited|version)|^(built with|configuration:|lib[a-z]+\s+\d)/.test(line)) continue;
    for (const p of [file, path.resolve(file), base]) line = line.split(`${p}: `).join('').split(p).join('the file');
    if (line) return line;
  }
  return 'ffprobe could not read it';
}

/** ffprobe: duration and a MIME type from the real container, not the file name. */
export async function probeMedia(file: string): Promise<ProbeResult> {
  try {
    // The probed path is a temporary name: only the container decides the MIME type.
    const probe = await ffprobe(file, { fileName: '' });
    return { durationSeconds: probe.durationSeconds, mime: probe.mime, hasAudio: probe.audioStreams > 0 };
  } catch (err) {
    if (err instanceof MediaToolError) throw new ProbeError(ffprobeReason(err.stderr || err.message, file));
    throw err;
  }
}
