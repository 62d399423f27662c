import { findExecutable } from '@sonar/shared';
import type { Config } from '../config.js';

const MiB = 1024 * 1024;

/**
 * Limits of this host's upload transport, independent of SPEECH_UPLOAD_MAX_MB. They play the part
 * of PHP's `upload_max_filesize` and `post_max_size` in the status response's `upload_limit`.
 *
 * - `multipartFileBytes`: the per-file limit configured on @fastify/multipart (`limits.fileSize`;
 *   unconfigured it would default to Fastify's 1 MiB `bodyLimit`).
 * - `formOverheadBytes`: what the form fields and multipart framing of one upload request can add
 *   to the file: the multipart limits below allow at most 24 parts with 8 KiB of headers each and 20
 *   fields of 64 KiB, about 1.5 MiB.
 * - the request body limit of an upload is the file limit plus that overhead. JSON and urlencoded
 *   bodies (no file) keep Fastify's ordinary 1 MiB `bodyLimit`.
 */
export const HOST_UPLOAD_LIMITS = {
  multipartFileBytes: 10 * 1024 * MiB,
  formOverheadBytes: 2 * MiB,
} as const;

/** Busboy limits of the speech multipart parser (one file per request; see HOST_UPLOAD_LIMITS). */
export const MULTIPART_LIMITS = {
  fileSize: HOST_UPLOAD_LIMITS.multipartFileBytes,
  files: 1,
  fields: 20,
  fieldSize: 64 * 1024,
  parts: 24,
  headerPairs: 20,
  headerSize: 8 * 1024,
} as const;

export interface UploadLimits {
  /** The effective per-file limit in bytes: what an upload may really be. */
  effectiveBytes: number;
  /** Requests whose Content-Length is above this cannot carry an acceptable file. */
  requestBytes: number;
  configured_mb: number;
  php_upload_max_mb: number;
  php_post_max_mb: number;
  effective_max_mb: number;
  effective_max_label: string;
  limited_by_php: boolean;
}

/**
 * Effective upload limit = the lower of SPEECH_UPLOAD_MAX_MB, the multipart per-file limit and the
 * upload request body limit.
 */
export function uploadLimits(config: Pick<Config, 'SPEECH_UPLOAD_MAX_MB'>, host = HOST_UPLOAD_LIMITS): UploadLimits {
  const configuredBytes = config.SPEECH_UPLOAD_MAX_MB * MiB;
  const fileBytes = host.multipartFileBytes;
  const postBytes = host.multipartFileBytes + host.formOverheadBytes;
  const effectiveBytes = Math.min(configuredBytes, fileBytes, postBytes);
  const effectiveMb = Math.floor(effectiveBytes / MiB);
  return {
    effectiveBytes,
    requestBytes: effectiveBytes + host.formOverheadBytes,
    configured_mb: config.SPEECH_UPLOAD_MAX_MB,
    php_upload_max_mb: Math.floor(fileBytes / MiB),
    php_post_max_mb: Math.floor(postBytes / MiB),
    effective_max_mb: effectiveMb,
    effective_max_label: megabytesLabel(effectiveMb),
    limited_by_php: effectiveBytes < configuredBytes,
  };
}

/** "512 MB", "2 GB", "1.5 GB" (binary units, as the limits are configured in MiB). */
export function megabytesLabel(mb: number): string {
  if (mb < 1024) return `${mb} MB`;
  const gb = mb / 1024;
  return `${Number.isInteger(gb) ? gb : Math.round(gb * 10) / 10} GB`;
}

const ytdlpLookups = new Map<string, Promise<string | null>>();

/**
 * The yt-dlp executable page URLs are downloaded with: SPEECH_YTDLP_PATH (a path, or a name looked
 * up on PATH), by default `yt-dlp` on PATH if it is installed; null when there is none or the
 * setting is "off". Looked up once per process and setting.
 */
export function resolveYtdlp(config?: Pick<Config, 'SPEECH_YTDLP_PATH'>): Promise<string | null> {
  const setting = config?.SPEECH_YTDLP_PATH?.trim() || 'yt-dlp';
  if (/^(off|none|false|0|no)$/i.test(setting)) return Promise.resolve(null);
  let found = ytdlpLookups.get(setting);
  if (!found) {
    found = Promise.resolve(findExecutable(setting));
    ytdlpLookups.set(setting, found);
  }
  return found;
}

/** Whether a yt-dlp executable is available (see resolveYtdlp): `ytdlp_configured` of the status responses. */
export async function ytdlpConfigured(config?: Pick<Config, 'SPEECH_YTDLP_PATH'>): Promise<boolean> {
  return (await resolveYtdlp(config)) !== null;
}
