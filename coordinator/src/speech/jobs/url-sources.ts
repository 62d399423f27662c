import type { Config } from '../../config.js';
import { resolveYtdlp } from '../host-limits.js';

/**
 * Which URL sources the coordinator downloads itself (MediaStager) and which a worker that may
 * fetch URLs may download on its own. Workers know nothing of the download proxy or yt-dlp, so:
 *
 * - with a download proxy (SPEECH_DOWNLOAD_PROXY) every URL job is staged on the coordinator
 *   (URL jobs use the configured proxy);
 * - with yt-dlp available, every URL that is not evidently a direct media file (a known page host,
 *   or a path without a media file extension) is staged on the coordinator, which looks at the
 *   response type and hands pages to yt-dlp;
 * - otherwise workers may fetch every URL themselves.
 */

const MEDIA_EXTENSIONS = [
  'mp3',
  'm4a',
  'm4b',
  'aac',
  'wav',
  'wave',
  'flac',
  'ogg',
  'oga',
  'opus',
  'weba',
  'wma',
  'amr',
  'aif',
  'aiff',
  'caf',
  'mka',
  'mp2',
  'mpga',
  'mp4',
  'm4v',
  'webm',
  'mkv',
  'mov',
  'avi',
  'wmv',
  'mpg',
  'mpeg',
  'ts',
  '3gp',
  'flv',
];

/** Sites whose URLs are pages yt-dlp understands, even where a path looks like a file. */
export const KNOWN_PAGE_HOSTS = [
  'youtube.com',
  'youtu.be',
  'youtube-nocookie.com',
  'vimeo.com',
  'dailymotion.com',
  'twitch.tv',
  'soundcloud.com',
  'mixcloud.com',
  'bandcamp.com',
  'tiktok.com',
  'facebook.com',
  'fb.watch',
  'instagram.com',
  'twitter.com',
  'x.com',
  'podcasts.apple.com',
  'rumble.com',
  'bilibili.com',
  'svtplay.se',
  'sverigesradio.se',
  'ted.com',
];

const escape = (s: string) => s.replace(/[.]/g, '\\.');
const PAGE_HOST = `^https?://([^/?#@]*\\.)?(${KNOWN_PAGE_HOSTS.map(escape).join('|')})(:[0-9]+)?([/?#]|$)`;
const DIRECT_MEDIA = `^https?://[^/?#]+/[^?#]*\\.(${MEDIA_EXTENSIONS.join('|')})([?#].*)?$`;

/**
 * URLs a worker may download itself when yt-dlp is available: direct media files not on a known
 * page host. Case-insensitive; the same text is a JavaScript RegExp and a PostgreSQL `~*` pattern
 * (advanced regular expressions, negative lookahead included).
 */
export const WORKER_FETCHABLE_WITH_YTDLP = `^(?!${PAGE_HOST.slice(1)})${DIRECT_MEDIA.slice(1)}`;

export function isKnownPageHost(url: string): boolean {
  return new RegExp(PAGE_HOST, 'i').test(url);
}

export interface SourceRouting {
  /** SPEECH_DOWNLOAD_PROXY, or null. */
  proxy: string | null;
  /** The yt-dlp executable, or null. */
  ytdlp: string | null;
}

export async function sourceRouting(config: Pick<Config, 'SPEECH_DOWNLOAD_PROXY' | 'SPEECH_YTDLP_PATH'>): Promise<SourceRouting> {
  return { proxy: config.SPEECH_DOWNLOAD_PROXY ?? null, ytdlp: await resolveYtdlp(config) };
}

/**
 * The claim-query form of the rule: a worker that may fetch URLs may take a URL job without staged
 * media when `workersMayFetch` and the URL matches `pattern` (`''` matches every URL).
 */
export function workerFetchRule(routing: SourceRouting): { workersMayFetch: boolean; pattern: string; everything: boolean } {
  if (routing.proxy) return { workersMayFetch: false, pattern: '', everything: false };
  if (routing.ytdlp) return { workersMayFetch: true, pattern: WORKER_FETCHABLE_WITH_YTDLP, everything: false };
  return { workersMayFetch: true, pattern: '', everything: true };
}

export function workerMayFetch(url: string, routing: SourceRouting): boolean {
  const rule = workerFetchRule(routing);
  return rule.workersMayFetch && new RegExp(rule.pattern, 'i').test(url);
}

/** Content types of web pages (not media): the coordinator hands such URLs to yt-dlp. */
export function isPageContentType(contentType: string | null): boolean {
  const type = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  return type === 'text/html' || type === 'application/xhtml+xml';
}

/** A proxy URL for logs: scheme, host and port, never credentials. */
export function proxyLabel(proxy: string): string {
  try {
    const u = new URL(proxy);
    return `${u.protocol}//${u.host}`;
  } catch {
    return 'the configured proxy';
  }
}
