import type { Config } from '../config.js';
import { uploadLimits, ytdlpConfigured } from './host-limits.js';

/** The request throttle of the speech API routes, per client address and route. */
export const SPEECH_RATE_LIMIT = { max: 120, timeWindow: 60_000 } as const;

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
