import { parseCidr } from '@sonar/shared';
import { z } from 'zod';

/**
 * Every setting of the coordinator comes from an environment variable validated here. Each one
 * carries its description (`.describe()`, or `.meta()` with `shownDefault` where the default is
 * computed at start): docs/configuration.md is generated from them (`npm run docs:config`), and a
 * test fails when that page is stale or .env.example misses a setting.
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
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development').describe('`development`, `production` or `test`'),
  HOST: z.string().min(1).default('0.0.0.0').describe('Address the HTTP API binds to; keep `0.0.0.0` inside containers (`npm start` binds `127.0.0.1`)'),
  PORT: port.default(8080).describe('HTTP API port (0 picks a free port)'),
  PUBLIC_BASE_URL: z.url().optional().meta({
    description:
      'External base URL used in links, callbacks and the OpenAPI servers list; its origin is the one browsers may open socket.io connections from. Unset or local-only (localhost, loopback), token-API jobs with a `callback_url` are refused (422)',
    shownDefault: '`http://localhost:$PORT`',
  }),
  LOG_LEVEL: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
    .default('info')
    .describe('Pino level (`silent` … `trace`); logs never carry credentials, see [Logging](operations.md#logging)'),
  TRUST_PROXY: z.string().default('false').describe('`true`, a hop count, or a list of proxy addresses/CIDRs whose `X-Forwarded-*` headers are trusted'),

  DATABASE_URL: z
    .url()
    .refine((u) => /^postgres(ql)?:/.test(u), 'must be a postgres:// URL')
    .describe('`postgres://…`'),
  DATABASE_POOL_MAX: z.coerce.number().int().min(1).max(200).default(10).describe('Connection pool size'),
  DATABASE_WAIT_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(500)
    .max(600_000)
    .default(10_000)
    .describe(
      'Longest wait for a pooled connection, a new connection or a statement; past it the request answers 503 (a frozen or hung PostgreSQL). Migrations and the CLI (imports, recounts) are not bounded',
    ),
  DATABASE_MIGRATE_ON_START: bool.default(true).describe('Apply committed migrations at start'),

  REDIS_URL: z
    .url()
    .refine((u) => /^rediss?:/.test(u), 'must be a redis:// or rediss:// URL')
    .describe('`redis://…` or `rediss://…`'),
  REDIS_KEY_PREFIX: z.string().default('sonar:').describe('Prefix of every key (queues, rate limits, worker sessions)'),

  GRPC_HOST: z
    .string()
    .min(1)
    .default('0.0.0.0')
    .describe('Address the worker gRPC server binds to; keep `0.0.0.0` inside containers (`npm start` binds `127.0.0.1`)'),
  GRPC_PORT: port.default(50051).describe('Worker gRPC port (0 picks a free port)'),
  WORKER_HEARTBEAT_INTERVAL_MS: z.coerce.number().int().min(1000).max(300_000).default(15_000).describe('Heartbeat interval the coordinator asks workers for'),
  WORKER_PRESENCE_TTL_MS: z.coerce.number().int().min(2000).max(900_000).default(45_000).describe('How long after its last call a worker counts as present'),

  SPEECH_DEFAULT_MODEL: z.string().min(1).max(60).default('small').describe('Model used when a job names none'),
  SPEECH_LOCAL_MODELS: z
    .string()
    .default('small')
    .transform((v) =>
      v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    )
    .describe("Comma-separated models the coordinator host's own (local) runner may take automatically"),
  SPEECH_MEDIA_DIR: z.string().min(1).default('.data/media').describe('Folder for retained source media (uploads, staged downloads)'),
  SPEECH_UPLOAD_MAX_MB: z.coerce
    .number()
    .int()
    .min(1)
    .max(1024 * 1024)
    .default(2048)
    .describe("Upload size cap in MB (the host's own limits may be lower; see /api/speech/status)"),
  SPEECH_LEASE_TTL_SECONDS: z.coerce
    .number()
    .int()
    .min(5)
    .max(86_400)
    .default(180)
    .describe('Seconds a worker lease lasts without a heartbeat before the job is recovered'),
  SPEECH_UNRESPONSIVE_AFTER_SECONDS: z.coerce
    .number()
    .int()
    .min(5)
    .max(86_400)
    .default(90)
    .describe('Seconds without a heartbeat before a running job shows as `unresponsive`'),
  SPEECH_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(20).default(3).describe('Attempts per job before stale recovery gives up and fails it'),
  SPEECH_STALE_SWEEP_SECONDS: z.coerce.number().int().min(1).max(3600).default(30).describe('How often the stale-lease sweep runs (BullMQ), seconds'),
  SPEECH_UPLOAD_EXPIRY_HOURS: z.coerce
    .number()
    .int()
    .min(1)
    .max(24 * 90)
    .default(24)
    .describe('Unfinished resumable (tus) uploads older than this are removed'),
  SPEECH_DOWNLOAD_PROXY: z
    .url()
    .refine((u) => /^https?:\/\/[^/]+(\/)?$/i.test(u), 'must be http(s)://host:port')
    .optional()
    .describe(
      '`http(s)://host:port` proxy for URL-source downloads on the coordinator (direct media and yt-dlp); set, every URL job is downloaded by the coordinator',
    ),
  SPEECH_DOWNLOAD_PROXY_STRICT: bool.default(false).describe('`true`: when the proxy cannot be resolved or reached the job fails instead of retrying directly'),
  SPEECH_YTDLP_PATH: z
    .string()
    .min(1)
    .max(500)
    .optional()
    .meta({ description: 'Yt-dlp executable (path or name) for page URLs; `off` disables it', shownDefault: '`yt-dlp` on `PATH` if installed' }),
  OUTBOUND_ALLOW_RANGES: cidrList
    .default([])
    .describe('CIDRs that server-side requests (source downloads, callbacks) may reach although private, loopback or link-local (SSRF guard)'),
  SPEECH_MEDIA_RETENTION_DAYS: z.coerce
    .number()
    .int()
    .min(0)
    .max(3650)
    .default(30)
    .describe('Days retained source media is kept for re-transcription (0 = no deadline)'),
  SPEECH_CALLBACK_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(300).default(10).describe('Timeout of one terminal-callback request (all redirect hops)'),
  SPEECH_CALLBACK_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(50).default(8).describe('Attempts per terminal callback before it ends `failed`'),
  SPEECH_CALLBACK_BACKOFF_MS: z.coerce
    .number()
    .int()
    .min(10)
    .max(3_600_000)
    .default(5000)
    .describe('Base of the callback retry backoff (exponential, full jitter, capped at 1 h)'),
  SMTP_URL: z
    .url()
    .refine((u) => /^smtps?:/.test(u), 'must be an smtp:// or smtps:// URL')
    .optional()
    .describe('`smtp://user:pass@host:587` or `smtps://…:465`; sends completion report e-mails (unset: reports off)'),
  MAIL_FROM: z
    .string()
    .min(3)
    .max(320)
    .optional()
    .meta({ description: 'Sender of completion report e-mails', shownDefault: '`Sonar <no-reply@<PUBLIC_BASE_URL host>>`' }),

  OPENAI_BASE_URL: z
    .url()
    .optional()
    .describe(
      'Base URL (`…/v1`) of an OpenAI-compatible chat-completions API; with `OPENAI_MODEL` it enables [analysis, translations and titles](speech.md#ai-analysis-translations-and-titles) (unset: unavailable)',
    ),
  OPENAI_API_KEY: z.string().min(1).max(500).optional().describe('API key (`Authorization: Bearer`); local servers may need none'),
  OPENAI_MODEL: z.string().min(1).max(200).optional().describe('Model name of every request'),
  OPENAI_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(3600).default(120).describe('Timeout of one upstream request (each retry gets its own)'),
  OPENAI_MAX_RETRIES: z.coerce
    .number()
    .int()
    .min(0)
    .max(10)
    .default(3)
    .describe('Retries of 408/409/429/5xx answers and connection failures (exponential backoff, `Retry-After` honoured)'),
  OPENAI_CONTEXT_TOKENS: z.coerce
    .number()
    .int()
    .min(512)
    .max(10_000_000)
    .default(16_384)
    .describe("The model's context window; longer transcripts are chunked (map-reduce)"),
  OPENAI_MAX_OUTPUT_TOKENS: z.coerce.number().int().min(64).max(1_000_000).default(2048).describe('`max_tokens` of each request (reserved in the context)'),
  OPENAI_JSON_MODE: bool.default(true).describe('Send `response_format: {"type": "json_object"}` (replies are validated either way)'),
  OPENAI_STREAM: bool.default(false).describe('Stream replies (`stream: true`, server-sent events)'),
  SPEECH_AI_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(2).describe('AI tasks in parallel per coordinator (BullMQ queue `speech-ai`)'),
  SPEECH_AI_NOTIFY_WAIT_SECONDS: z.coerce
    .number()
    .int()
    .min(0)
    .max(86_400)
    .default(900)
    .describe("How long a completed job's callback and report wait for its analysis, translations and title"),

  SPAMD_HOST: z.string().min(1).default('127.0.0.1').describe("SpamAssassin's spamd that POST /api/spam/analyze asks (SPAMC over TCP)"),
  SPAMD_PORT: port.default(783).describe("Port of SpamAssassin's spamd"),
  SPAMD_TIMEOUT_MS: z.coerce.number().int().min(500).max(120_000).default(15_000).describe('How long one scoring may take, milliseconds'),
  SPAMD_NETWORK_TESTS: bool
    .default(false)
    .describe('Say true when spamd runs its network tests (not started with -L); otherwise every answer is reported as `degraded` (local rules only)'),

  DYNDNS_TTL: z.coerce
    .number()
    .int()
    .min(1)
    .max(86_400)
    .default(60)
    .describe('TTL of the A/AAAA records [dynamic DNS](platform.md#dynamic-dns-dyndns2) writes'),
  DYNDNS_RATE_LIMIT_PER_MINUTE: z.coerce
    .number()
    .int()
    .min(1)
    .max(10_000_000)
    .default(30)
    .describe('Dynamic-DNS update requests (all three update paths together) per client address and minute; over it 429 `abuse`'),
  DYNDNS_NOCHG_LIMIT: z.coerce
    .number()
    .int()
    .min(1)
    .max(1000)
    .default(5)
    .describe(
      "Identical updates in a row (each within `DYNDNS_NOCHG_WINDOW_SECONDS` of the host's previous update) answered `nochg` before the host is blocked",
    ),
  DYNDNS_NOCHG_WINDOW_SECONDS: z.coerce
    .number()
    .int()
    .min(1)
    .max(86_400)
    .default(600)
    .describe('Identical updates further apart do not count towards the abuse streak'),
  DYNDNS_ABUSE_BLOCK_SECONDS: z.coerce
    .number()
    .int()
    .min(1)
    .max(30 * 86_400)
    .default(3600)
    .describe('How long a blocked host answers `abuse`'),

  REPUTATION_DNSBLS: z
    .string()
    .max(2000)
    .regex(/^\s*(?:[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?\.?:(?:domain|ip)\s*(?:,\s*|$))*$/i, 'comma-separated zone:domain or zone:ip entries')
    .default('')
    .describe(
      'DNS blocklists for [reputation](platform.md#reputation) lookups: comma-separated `zone:domain` (asked `<domain>.<zone>`) or `zone:ip` (reversed octets / IPv6 nibbles), e.g. `dbl.example.net:domain,zen.example.net:ip`; empty: community reports only',
    ),
  REPUTATION_DNS_RESOLVER: z
    .string()
    .max(200)
    .default('')
    .meta({ description: 'The resolver blocklists are asked through: `host` or `host:port` (`[v6]:port`)', shownDefault: 'system resolvers' }),
  REPUTATION_DNS_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .max(30_000)
    .default(2000)
    .describe('How long one blocklist may take; later it is reported `unavailable`'),
  REPUTATION_REPORT_HALF_LIFE_DAYS: z.coerce
    .number()
    .min(0.01)
    .max(3650)
    .default(30)
    .describe('Age at which a community report counts half (exponential decay)'),
  REPUTATION_REPORTS_PER_HOUR: z.coerce.number().int().min(1).max(100_000).default(30).describe('Reports per user and hour (429 beyond)'),

  SESSION_SECRET: secret.describe('≥ 32 characters; signs the session cookie'),
  AUTH_CACHE_SECONDS: z.coerce
    .number()
    .min(0)
    .max(60)
    .default(5)
    .describe(
      'How long a coordinator reuses a user (JWT and session checks) or a DNS API key it looked up; a disable, password or permission change or a key revocation made through this coordinator applies at once, one made through another coordinator or the admin CLI as soon as its news arrives over Redis pub/sub (`<REDIS_KEY_PREFIX>auth:credentials-changed`), one Redis did not carry (SQL by hand, Redis unreachable) within this time; 0 reads PostgreSQL on every request',
    ),
  LIVE_ACCESS_RECHECK_SECONDS: z.coerce
    .number()
    .min(0.1)
    .max(3600)
    .default(5)
    .describe('How often each coordinator disconnects live (socket.io) clients whose user was disabled, changed password or lost `speech.use`'),
  SESSION_TTL_SECONDS: z.coerce
    .number()
    .int()
    .min(60)
    .default(12 * 3600)
    .describe('Browser session lifetime'),
  COOKIE_SECURE: z.enum(['auto', 'true', 'false']).default('auto').describe('`auto` (Secure over HTTPS), `true` or `false`'),
  JWT_SECRET: secret.describe('≥ 32 characters; signs API JWTs (HS256)'),
  JWT_TTL_SECONDS: z.coerce
    .number()
    .int()
    .min(60)
    .max(30 * 86400)
    .default(3600)
    .describe('JWT lifetime'),
  SPEECH_RATE_LIMIT_PER_MINUTE: z.coerce
    .number()
    .int()
    .min(1)
    .default(120)
    .describe('Speech API requests (`/api/speech/*`, every route together; upload chunks apart) per client address and minute'),
  LOGIN_RATE_LIMIT_PER_MINUTE: z.coerce
    .number()
    .int()
    .min(1)
    .default(10)
    .describe('Sign-in attempts per client address and minute, `POST /login` and `POST /api/account/login` together (one budget)'),
  TOKEN_RATE_LIMIT_PER_MINUTE: z.coerce
    .number()
    .int()
    .min(1)
    .max(1_000_000)
    .default(30)
    .describe('Personal-token management requests (`/api/account/tokens*`, `/account/tokens*`) per client address and minute, together'),
  ADMIN_RATE_LIMIT_PER_MINUTE: z.coerce
    .number()
    .int()
    .min(1)
    .max(1_000_000)
    .default(120)
    .describe('Chat-log admin requests (`/irc/api/admin/*`) per client address and minute'),

  METRICS_ENABLED: bool.default(true).describe('Serve `GET /metrics`'),
  METRICS_TOKEN: z
    .string()
    .min(16, 'must be at least 16 characters')
    .optional()
    .describe('Bearer token (≥ 16 characters) that unlocks `/metrics` from any address'),
  METRICS_ALLOW: cidrList.default(['127.0.0.0/8', '::1/128']).describe('Addresses/CIDRs that may read `/metrics` without the token'),

  OPENAPI_ENABLED: bool.default(true).describe('Serve `/openapi.json` and the browsable `/docs`'),

  // DNS API
  DNS_CACHE_TTL_SECONDS: z.coerce
    .number()
    .int()
    .min(0)
    .max(30 * 86400)
    .default(300)
    .describe(
      'Default zone cache TTL; an older cache is served as `from_database_stale` and refreshed by a zone read (per-zone override: `dns:zone:add --cache-ttl`)',
    ),
  DNS_DEFAULT_TTL: z.coerce
    .number()
    .int()
    .min(0)
    .max(2147483647)
    .default(3600)
    .describe('Record TTL for add/update/bulk when the request omits `ttl` and the RRset is new (an existing RRset keeps its TTL)'),
  DNS_ACME_TTL: z.coerce.number().int().min(0).max(86400).default(60).describe('TTL of ACME challenge TXT records when `ttl` is omitted'),
  DNS_PAGE_SIZE_DEFAULT: z.coerce.number().int().min(1).max(10_000).default(100).describe('`limit` of zone reads and searches when omitted'),
  DNS_PAGE_SIZE_MAX: z.coerce.number().int().min(1).max(100_000).default(1000).describe('Largest accepted `limit` (400 `validation_failed` above)'),
  DNS_WHITELIST_WRITE: bool.default(false).describe('`true`: whitelisted IPs may also write (records, ACME, cache clear); otherwise they only read'),
  DNS_TIMEOUT_MS: z.coerce.number().int().min(100).max(300_000).default(10_000).describe('Per-message timeout towards the master DNS server'),
  DNS_RATE_LIMIT_PER_MINUTE: z.coerce
    .number()
    .int()
    .min(1)
    .max(1_000_000)
    .default(300)
    .describe('DNS API requests (every `/api/dns/*` route together) per client address and minute'),
  DNS_CLOUDFLARE_API_URL: z
    .url({ protocol: /^https?$/ })
    .default('https://api.cloudflare.com/client/v4')
    .describe('Cloudflare v4 API base URL (provider zones; tests point it at a local stand-in)'),
  DNS_CLOUDFLARE_TOKEN_REF: z
    .string()
    .min(5)
    .max(1100)
    .default('env:CLOUDFLARE_API_TOKEN')
    .describe(
      'Where the Cloudflare token for NS-detected zones is read from: `env:NAME`, `file:/path` or `file:/path#KEY`; when it does not resolve, no NS detection is done',
    ),
  DNS_PROVIDER_LEGACY_FILE: z
    .string()
    .min(1)
    .optional()
    .describe(
      "Older host-side provider config (`KEY=value` lines: `CLOUDFLARE_API_TOKEN`/`CF_API_TOKEN`/`CF_DNS_API_TOKEN`, `CLOUDFLARE_ZONE_ID`/`CF_ZONE_ID`, optional `CLOUDFLARE_ZONE`), imported as a fallback mapping; the same variables in the coordinator's environment count too",
    ),
  DNS_PROVIDER_DETECT_TTL_SECONDS: z.coerce
    .number()
    .int()
    .min(0)
    .max(86400)
    .default(300)
    .describe('How long an NS detection, a looked-up provider zone id and the legacy config are remembered'),

  // Organization assistant connector
  ASSISTANT_SECRET_KEY: secret
    .optional()
    .describe(
      '≥ 32 characters; encrypts tenant-setup credentials, MSAL token caches and PKCE verifiers at rest (AES-256-GCM, key derived with HKDF). Unset: setups cannot be saved (409 `not_configured`). Changing it makes stored secrets and connections unreadable',
    ),
  ASSISTANT_EXTRA_CA_FILE: z
    .string()
    .min(1)
    .max(4096)
    .optional()
    .describe(
      "PEM file of extra CA certificates trusted (besides Node's list) for the identity provider and the graph API; TLS verification is never turned off",
    ),
  ASSISTANT_UPSTREAM_TIMEOUT_SECONDS: z.coerce
    .number()
    .int()
    .min(1)
    .max(600)
    .default(60)
    .describe('One request to the identity provider or the graph API; past it the request counts as unreachable (502 `upstream_timeout`)'),
  ASSISTANT_RATE_LIMIT_PER_MINUTE: z.coerce
    .number()
    .int()
    .min(1)
    .max(1_000_000)
    .default(20)
    .describe('`POST /api/ai/assistant/respond` requests per user and minute (429 with `Retry-After`)'),

  // Chat-log archive
  IRC_API_RATE_LIMIT_MAX: z.coerce
    .number()
    .int()
    .min(1)
    .max(1_000_000)
    .default(60)
    .describe('Requests per minute per client across the public chat-log routes (`/irc/api` and the `/irc` reader pages together)'),
  IRC_QUERY_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .max(600_000)
    .default(5000)
    .describe('A chat-log search running longer than this (milliseconds) is stopped (`statement_timeout`) and answered 503'),
  IRC_SEARCH_CACHE_MB: z.coerce
    .number()
    .int()
    .min(0)
    .max(4096)
    .default(32)
    .describe(
      'Memory for cached chat-log search answers per coordinator (MB of JSON; least recently used out first); any write to the archive empties it ([Search cache](chat-logs.md#search-cache)); 0: no cache',
    ),
  IRC_SEARCH_CACHE_TTL_SECONDS: z.coerce
    .number()
    .int()
    .min(1)
    .max(86_400)
    .default(300)
    .describe('A cached chat-log search answer is dropped this long after it was computed, even if no change was announced'),
  IRC_LOGGER_CONFIG: z
    .string()
    .min(1)
    .max(4096)
    .optional()
    .describe('JSON file of the live IRC logger ([Live logger](chat-logs.md#live-logger)); unset: the logger does not run'),
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
