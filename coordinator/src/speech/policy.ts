import type { Config } from '../config.js';
import { uploadLimits, ytdlpConfigured } from './host-limits.js';

/**
 * The speech API's request throttle (`/api/speech/*`): SPEECH_RATE_LIMIT_PER_MINUTE (120, as the
 * specification says) requests a minute per client address, ALL its routes together (one counter:
 * `groupId`; the rate-limit store keys a group by its name instead of the route,
 * rate-limit-store.ts). Resumable-upload chunks (tus PATCH) have their own budget: one upload is
 * many of them.
 */
export function speechRateLimit(config: Pick<Config, 'SPEECH_RATE_LIMIT_PER_MINUTE'>) {
  return { max: config.SPEECH_RATE_LIMIT_PER_MINUTE, timeWindow: 60_000, groupId: 'speech-api' } as const;
}

/** The speech pages' and the public share page's throttle: 120 a minute per client and route (HTML, not the API). */
export const SPEECH_PAGE_RATE_LIMIT = { max: 120, timeWindow: 60_000 } as const;

/** The media routes' throttle: a player asks for many byte ranges (every seek is one). */
export const MEDIA_RATE_LIMIT = { max: 1200, timeWindow: 60_000 } as const;

/** `config` of the status responses (signed-in and token API). */
export async function speechStatusConfig(config: Config) {
  const limits = uploadLimits(config);
  return {
    enabled: true,
    default_model: config.SPEECH_DEFAULT_MODEL,
    upload_max_mb: limits.effective_max_mb,
    upload_limit: {
      configured_mb: limits.configured_mb,
      php_upload_max_mb: limits.php_upload_max_mb,
      php_post_max_mb: limits.php_post_max_mb,
      effective_max_mb: limits.effective_max_mb,
      effective_max_label: limits.effective_max_label,
      limited_by_php: limits.limited_by_php,
    },
    ytdlp_configured: await ytdlpConfigured(config),
  };
}
