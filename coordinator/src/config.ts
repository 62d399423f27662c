import { parseCidr } from '@sonar/shared';
import { z } from 'zod';

/**
 * Every setting of the coordinator comes from an environment variable validated here.
 * README.md and .env.example document each one; keep the three in step.
 */

const bool = z.enum(['true', 'false', '1', '0', 'yes', 'no']).transform((v) => v === 'true' || v === '1' || v === 'yes');

const port = z.coerce.number().int().min(0).max(65535);

const cidrList = z
  .string()
  .transform((v) =>
    v
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  )
  .pipe(z.array(z.string().refine((s) => parseCidr(s) !== null, { message: 'must be an IPv4/IPv6 address or CIDR range' })));

const secret = z.string().min(32, 'must be at least 32 characters');

export const envSchema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  HOST: z.string().min(1).default('0.0.0.0'),
  PORT: port.default(8080),
  PUBLIC_BASE_URL: z.url().optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  TRUST_PROXY: z.string().default('false'),

  DATABASE_URL: z.url().refine((u) => /^postgres(ql)?:/.test(u), 'must be a postgres:// URL'),
  DATABASE_POOL_MAX: z.coerce.number().int().min(1).max(200).default(10),
  /** Longest wait for a pooled connection, a new connection or a statement (ms); migrations and the CLI are not bounded. */
  DATABASE_WAIT_TIMEOUT_MS: z.coerce.number().int().min(500).max(600_000).default(10_000),
  DATABASE_MIGRATE_ON_START: bool.default(true),

  REDIS_URL: z.url().refine((u) => /^rediss?:/.test(u), 'must be a redis:// or rediss:// URL'),
  REDIS_KEY_PREFIX: z.string().default('sonar:'),

  GRPC_HOST: z.string().min(1).default('0.0.0.0'),
  GRPC_PORT: port.default(50051),
  WORKER_HEARTBEAT_INTERVAL_MS: z.coerce.number().int().min(1000).max(300_000).default(15_000),
  WORKER_PRESENCE_TTL_MS: z.coerce.number().int().min(2000).max(900_000).default(45_000),

  SPEECH_DEFAULT_MODEL: z.string().min(1).max(60).default('small'),
  SPEECH_LOCAL_MODELS: z
    .string()
    .default('small')
    .transform((v) =>
      v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    ),
  SPEECH_MEDIA_DIR: z.string().min(1).default('.data/media'),
  SPEECH_UPLOAD_MAX_MB: z.coerce
    .number()
    .int()
    .min(1)
    .max(1024 * 1024)
    .default(2048),
  SPEECH_LEASE_TTL_SECONDS: z.coerce.number().int().min(5).max(86_400).default(180),
  SPEECH_UNRESPONSIVE_AFTER_SECONDS: z.coerce.number().int().min(5).max(86_400).default(90),
  SPEECH_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(20).default(3),
  SPEECH_STALE_SWEEP_SECONDS: z.coerce.number().int().min(1).max(3600).default(30),
  /** Hours an unfinished resumable (tus) upload is kept before the maintenance task removes it. */
  SPEECH_UPLOAD_EXPIRY_HOURS: z.coerce
    .number()
    .int()
    .min(1)
    .max(24 * 90)
    .default(24),
  /** HTTP(S) proxy for URL-source downloads on the coordinator (direct media and yt-dlp). */
  SPEECH_DOWNLOAD_PROXY: z
    .url()
    .refine((u) => /^https?:\/\/[^/]+(\/)?$/i.test(u), 'must be http(s)://host:port')
    .optional(),
  /** With a download proxy: never fall back to a direct download when the proxy cannot be reached. */
  SPEECH_DOWNLOAD_PROXY_STRICT: bool.default(false),
  /** yt-dlp executable for page URLs: a path or a name on PATH (default yt-dlp if installed); "off" disables it. */
  SPEECH_YTDLP_PATH: z.string().min(1).max(500).optional(),
  /** Ranges that server-side requests (callbacks, source downloads) may reach despite being private. */
  OUTBOUND_ALLOW_RANGES: cidrList.default([]),
  SPEECH_MEDIA_RETENTION_DAYS: z.coerce.number().int().min(0).max(3650).default(30),
  /** Terminal callbacks of API-queue jobs (BullMQ queue speech-callbacks). */
  SPEECH_CALLBACK_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(300).default(10),
  SPEECH_CALLBACK_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(50).default(8),
  SPEECH_CALLBACK_BACKOFF_MS: z.coerce.number().int().min(10).max(3_600_000).default(5000),
  /** Completion report e-mails (BullMQ queue speech-reports); unset SMTP_URL disables them. */
  SMTP_URL: z
    .url()
    .refine((u) => /^smtps?:/.test(u), 'must be an smtp:// or smtps:// URL')
    .optional(),
  MAIL_FROM: z.string().min(3).max(320).optional(),

  /**
   * OpenAI-compatible provider of transcript analysis, translations and titles (the official
   * `openai` client). Unset OPENAI_BASE_URL or OPENAI_MODEL: that work is reported unavailable.
   */
  OPENAI_BASE_URL: z.url().optional(),
  OPENAI_API_KEY: z.string().min(1).max(500).optional(),
  OPENAI_MODEL: z.string().min(1).max(200).optional(),
  /** Seconds one upstream request may take (each retry gets its own). */
  OPENAI_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(3600).default(120),
  /** Retries of a request the upstream answered 408/409/429/5xx or that failed to connect (exponential backoff, Retry-After honoured). */
  OPENAI_MAX_RETRIES: z.coerce.number().int().min(0).max(10).default(3),
  /** The model's context window in tokens: longer transcripts are analysed and translated in chunks (map-reduce). */
  OPENAI_CONTEXT_TOKENS: z.coerce.number().int().min(512).max(10_000_000).default(16_384),
  /** Tokens reserved for each reply (max_tokens of every request). */
  OPENAI_MAX_OUTPUT_TOKENS: z.coerce.number().int().min(64).max(1_000_000).default(2048),
  /** Ask for `response_format: {type: "json_object"}` (turn off for endpoints that reject it; replies are validated either way). */
  OPENAI_JSON_MODE: bool.default(true),
  /** Stream replies (`stream: true`, server-sent events) instead of waiting for the whole body. */
  OPENAI_STREAM: bool.default(false),
  /** Parallel AI tasks per coordinator (BullMQ queue speech-ai). */
  SPEECH_AI_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(2),
  /** How long the callback and report of a completed job wait for its analysis, translations and title, seconds. */
  SPEECH_AI_NOTIFY_WAIT_SECONDS: z.coerce.number().int().min(0).max(86_400).default(900),

  /** SpamAssassin's spamd for POST /api/spam/analyze (SPAMC protocol over TCP). */
  SPAMD_HOST: z.string().min(1).default('127.0.0.1'),
  SPAMD_PORT: port.default(783),
  SPAMD_TIMEOUT_MS: z.coerce.number().int().min(500).max(120_000).default(15_000),
  /** Whether spamd runs its network tests (DNS blocklists, URIBL, Razor…); without them answers are `degraded`. */
  SPAMD_NETWORK_TESTS: bool.default(false),

  /** Dynamic DNS (`/api/dyndns/update`, `/nic/update`): TTL of the A/AAAA records it writes, seconds. */
  DYNDNS_TTL: z.coerce.number().int().min(1).max(86_400).default(60),
  /** Update requests per minute per client address (over it: 429 `abuse`). */
  DYNDNS_RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).max(10_000_000).default(30),
  /** Identical updates in a row (each within DYNDNS_NOCHG_WINDOW_SECONDS of the last) answered `nochg` before a host is blocked (`abuse`). */
  DYNDNS_NOCHG_LIMIT: z.coerce.number().int().min(1).max(1000).default(5),
  DYNDNS_NOCHG_WINDOW_SECONDS: z.coerce.number().int().min(1).max(86_400).default(600),
  /** How long a host blocked for abuse answers `abuse`, seconds. */
  DYNDNS_ABUSE_BLOCK_SECONDS: z.coerce
    .number()
    .int()
    .min(1)
    .max(30 * 86_400)
    .default(3600),

  /**
   * Reputation (`/api/reputation`): DNS blocklists queried the RFC 5782 way, comma-separated
   * `name:kind` with kind `domain` (<domain>.<list>) or `ip` (reversed octets / nibbles), e.g.
   * `dbl.example.net:domain,zen.example.net:ip`. Empty: community reports only.
   */
  REPUTATION_DNSBLS: z
    .string()
    .max(2000)
    .regex(/^\s*(?:[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?\.?:(?:domain|ip)\s*(?:,\s*|$))*$/i, 'comma-separated zone:domain or zone:ip entries')
    .default(''),
  /** Resolver the blocklists are asked through, `host` or `host:port` (IPv6 in brackets); empty: the system's resolvers. */
  REPUTATION_DNS_RESOLVER: z.string().max(200).default(''),
  /** How long one blocklist may take before it is reported `unavailable`, milliseconds. */
  REPUTATION_DNS_TIMEOUT_MS: z.coerce.number().int().min(100).max(30_000).default(2000),
  /** Age at which a community report counts half, days (exponential decay). */
  REPUTATION_REPORT_HALF_LIFE_DAYS: z.coerce.number().min(0.01).max(3650).default(30),
  /** Reports per hour per user. */
  REPUTATION_REPORTS_PER_HOUR: z.coerce.number().int().min(1).max(100_000).default(30),

  SESSION_SECRET: secret,
  /** How often each coordinator checks that its live sockets' users are still active, with an unchanged password. */
  LIVE_ACCESS_RECHECK_SECONDS: z.coerce.number().min(0.1).max(3600).default(5),
  SESSION_TTL_SECONDS: z.coerce
    .number()
    .int()
    .min(60)
    .default(12 * 3600),
  COOKIE_SECURE: z.enum(['auto', 'true', 'false']).default('auto'),
  JWT_SECRET: secret,
  JWT_TTL_SECONDS: z.coerce
    .number()
    .int()
    .min(60)
    .max(30 * 86400)
    .default(3600),
  /** Sign-in attempts per minute per client, POST /login and POST /api/account/login together. */
  LOGIN_RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).default(10),
  /** Personal-token management (list, create, revoke, rotate; API and pages together) per minute per client. */
  TOKEN_RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).max(1_000_000).default(30),
  /** Administrator-only routes of the chat-log archive per minute per client. */
  ADMIN_RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).max(1_000_000).default(120),

  METRICS_ENABLED: bool.default(true),
  METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  METRICS_ALLOW: cidrList.default(['127.0.0.0/8', '::1/128']),

  OPENAPI_ENABLED: bool.default(true),

  // DNS API
  DNS_CACHE_TTL_SECONDS: z.coerce
    .number()
    .int()
    .min(0)
    .max(30 * 86400)
    .default(300),
  DNS_DEFAULT_TTL: z.coerce.number().int().min(0).max(2147483647).default(3600),
  DNS_ACME_TTL: z.coerce.number().int().min(0).max(86400).default(60),
  DNS_PAGE_SIZE_DEFAULT: z.coerce.number().int().min(1).max(10_000).default(100),
  DNS_PAGE_SIZE_MAX: z.coerce.number().int().min(1).max(100_000).default(1000),
  DNS_WHITELIST_WRITE: bool.default(false),
  DNS_TIMEOUT_MS: z.coerce.number().int().min(100).max(300_000).default(10_000),
  /** DNS API requests per minute per client, all /api/dns routes together. */
  DNS_RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).max(1_000_000).default(300),
  /** Cloudflare v4 API base URL (tests point it at a local stand-in). */
  DNS_CLOUDFLARE_API_URL: z.url({ protocol: /^https?$/ }).default('https://api.cloudflare.com/client/v4'),
  /** Where the Cloudflare token for NS-detected zones is read from: env:NAME, file:/path or file:/path#KEY. */
  DNS_CLOUDFLARE_TOKEN_REF: z.string().min(5).max(1100).default('env:CLOUDFLARE_API_TOKEN'),
  /** Older host-side provider config (KEY=value lines: CLOUDFLARE_API_TOKEN, CLOUDFLARE_ZONE_ID, CLOUDFLARE_ZONE); imported as a fallback. */
  DNS_PROVIDER_LEGACY_FILE: z.string().min(1).optional(),
  /** How long an NS detection, a looked-up provider zone id and the legacy config are remembered. */
  DNS_PROVIDER_DETECT_TTL_SECONDS: z.coerce.number().int().min(0).max(86400).default(300),

  // Organization assistant connector
  /** Key that encrypts tenant-setup credentials and token caches at rest (AES-256-GCM; ≥ 32 characters, HKDF-derived). Unset: setups cannot be saved. */
  ASSISTANT_SECRET_KEY: secret.optional(),
  /** PEM file of extra CA certificates trusted for the identity provider and the upstream graph API (added to Node's default list; verification stays on). */
  ASSISTANT_EXTRA_CA_FILE: z.string().min(1).max(4096).optional(),
  /** Seconds one upstream request (identity provider or graph API) may take before it counts as unreachable (502). */
  ASSISTANT_UPSTREAM_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(600).default(60),
  /** POST /api/ai/assistant/respond requests per user and minute (after authentication). */
  ASSISTANT_RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).max(1_000_000).default(20),

  // Chat-log archive
  /** Chat-log API: requests per minute per client (the spec's typical value is 60). */
  IRC_API_RATE_LIMIT_MAX: z.coerce.number().int().min(1).max(1_000_000).default(60),
  /** Chat-log API: a search running longer than this (ms) is stopped (statement_timeout) and answered 503. */
  IRC_QUERY_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(5000),
  /** JSON file configuring the live IRC logger (networks, channels); unset: the logger does not run. */
  IRC_LOGGER_CONFIG: z.string().min(1).max(4096).optional(),
});

export type Env = z.infer<typeof envSchema>;

export interface Config extends Omit<Env, 'PUBLIC_BASE_URL' | 'TRUST_PROXY'> {
  PUBLIC_BASE_URL: string;
  TRUST_PROXY: boolean | number | string[];
}

export class ConfigError extends Error {
  constructor(public readonly issues: string[]) {
    super(`Invalid configuration:\n${issues.map((i) => `  - ${i}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** Parses the environment; throws ConfigError naming every bad variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  // Treat empty strings as unset so `FOO=` in an env file means "use the default".
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = envSchema.safeParse(cleaned);
  if (!parsed.success) {
    throw new ConfigError(
      parsed.error.issues.map((issue) => {
        const name = issue.path.join('.') || '(environment)';
        const got = cleaned[name] === undefined ? 'it is not set' : 'got an invalid value';
        return `${name}: ${issue.message} (${got})`;
      }),
    );
  }
  const e = parsed.data;
  const publicBase = (e.PUBLIC_BASE_URL ?? `http://localhost:${e.PORT}`).replace(/\/+$/, '');
  return { ...e, PUBLIC_BASE_URL: publicBase, TRUST_PROXY: parseTrustProxy(e.TRUST_PROXY) };
}

function parseTrustProxy(value: string): boolean | number | string[] {
  if (value === 'true') return true;
  if (value === 'false') return false;
  if (/^\d+$/.test(value)) return Number(value);
  const list = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const item of list) {
    if (parseCidr(item) === null) throw new ConfigError([`TRUST_PROXY: "${item}" is not true, false, a hop count or an address/CIDR list`]);
  }
  return list;
}
