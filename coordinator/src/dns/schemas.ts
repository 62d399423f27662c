/** Zod schemas of the DNS API answers: they serialize the responses and document them in OpenAPI. */
import { z } from 'zod';
import { errorBodySchema } from '@sonar/shared';

/** Error bodies (`{ok:false, reason, message, errors?}`) of the DNS routes. */
export const dnsErrors = {
  400: errorBodySchema,
  401: errorBodySchema,
  403: errorBodySchema,
  404: errorBodySchema,
  409: errorBodySchema,
  429: errorBodySchema,
  503: errorBodySchema,
};

export const cachePolicySchema = z.object({
  invalidate_enabled: z.boolean(),
  invalidate_interval_seconds: z.number(),
  last_invalidated_at: z.string().nullable(),
  protect_from_clear: z.boolean(),
});

export const dnsRecordSchema = z.object({ name: z.string(), ttl: z.number(), class: z.string(), type: z.string(), rdata: z.string() });

export const zoneListResponseSchema = z.object({
  ok: z.literal(true),
  count: z.number(),
  zones: z.array(
    z.object({
      zone: z.string(),
      file: z.string().nullable().optional().describe('zone file path on the server: administrators only (local zones); null for external (provider) zones'),
      key: z.string().optional().describe('TSIG key file path on the server: administrators only (local zones)'),
      server: z.string().optional().describe('master server (local zones)'),
      port: z.number().optional().describe('master server port (local zones)'),
      can_write: z.boolean(),
      provider: z.string().optional().describe('external zones: provider key (`cloudflare`)'),
      provider_label: z.string().optional().describe('external zones: provider name'),
      is_external: z.boolean().optional().describe('external zones: true'),
      provider_zone_id: z.string().optional().describe('external zones: the zone id at the provider (empty when the token cannot find the zone)'),
      provider_ready: z.boolean().optional().describe('external zones: whether the provider path is usable (token readable, zone id known)'),
      provider_source: z
        .enum(['mapping', 'imported', 'detected'])
        .optional()
        .describe('external zones: a mapping row, the imported older host-side config, or NS auto-detection'),
      provider_problem: z.string().optional().describe('external zones, administrators only: why the provider path is not usable'),
    }),
  ),
  is_admin: z.boolean(),
  access_type: z.enum(['authenticated', 'api_key_global', 'ip_whitelist']),
});

/** One page of zone rows. */
const pageFields = {
  zone: z.string(),
  zoneData: z.array(dnsRecordSchema),
  record_count: z.number(),
  page: z.number(),
  per_page: z.number(),
  has_more: z.boolean(),
  display_signature: z.string(),
};

/** Age and policy of the zone cache. */
const cacheFields = {
  cached_at: z.string(),
  cache_age: z.number(),
  cache_is_stale: z.boolean(),
  cache_ttl_seconds: z.number(),
  cache_policy: cachePolicySchema,
};

const cacheSource = z.enum(['from_database', 'from_database_stale']);

/** Present when the zone is routed through an external provider. */
const providerFields = {
  provider: z.string().optional(),
  provider_label: z.string().optional(),
  source_method: z.string().optional().describe('provider zones served from the cache: the upstream source (upper-cased provider name)'),
};

/** `GET /api/dns/zones/:zone` (`method=cache|axfr|file`) and `/axfr`. */
export const zoneReadResponseSchema = z.union([
  z.object({
    ok: z.literal(true),
    method: z
      .string()
      .describe(
        '`CACHE`, `AXFR` (a transfer from the master), `SOA` (the master’s SOA serial equals the cached one: nothing was transferred, `cached_at` says when the cache was last confirmed current), or the upper-cased provider name (`CLOUDFLARE`) for a live provider fetch',
      ),
    ...pageFields,
    serial: z.number().describe('SOA serial of the cached zone (0 for provider zones)'),
    ...cacheFields,
    ...providerFields,
  }),
  z.object({ ok: z.literal(true), method: z.literal('FILE'), ...pageFields, cache_ttl_seconds: z.number(), cache_policy: cachePolicySchema }),
]);

/** `GET /api/dns/zones/:zone/cache`: a cached page, or `source: needs_axfr` when there is none (or it expired). */
export const zoneCacheResponseSchema = z.union([
  z.object({ ok: z.literal(true), method: z.literal('CACHE'), source: cacheSource, ...pageFields, serial: z.number(), ...cacheFields, ...providerFields }),
  z.object({
    ok: z.literal(true),
    source: z.literal('needs_axfr'),
    zone: z.string(),
    message: z.string(),
    cache_ttl_seconds: z.number(),
    cache_policy: cachePolicySchema,
    provider: z.string().optional().describe('a provider zone: its refresh (/axfr) fetches it from this provider'),
    provider_label: z.string().optional(),
  }),
]);

export const zoneSearchResponseSchema = z.object({
  ok: z.literal(true),
  method: z.literal('CACHE'),
  source: cacheSource,
  ...pageFields,
  ...cacheFields,
  query: z.string(),
  search_mode: z.enum(['ip', 'type', 'name', 'data']),
  ...providerFields,
});

export const cacheClearResponseSchema = z.object({ ok: z.literal(true), zone: z.string(), message: z.string(), cache_policy: cachePolicySchema });

const verified = z
  .boolean()
  .describe(
    'true: the change was read back from the master. false: the master acknowledged it (NOERROR) but the read-back could not be done; the message says why.',
  );
export const recordWriteResponseSchema = z.object({ ok: z.literal(true), message: z.string(), zone: z.string(), record: dnsRecordSchema, verified });
export const recordDeleteResponseSchema = z.object({
  ok: z.literal(true),
  message: z.string(),
  zone: z.string(),
  record: dnsRecordSchema.omit({ ttl: true }),
  verified,
});
export const recordUpdateResponseSchema = recordWriteResponseSchema.extend({
  old_rdata: z.string().optional().describe('With old_target: the replaced value (otherwise the whole RRset was replaced)'),
});

export const bulkResponseSchema = z.object({
  ok: z.boolean().describe('false when at least one operation failed'),
  message: z.string(),
  results: z.array(
    z.object({
      index: z.number(),
      action: z.enum(['ADD', 'DELETE']),
      domain: z.string(),
      type: z.string(),
      target: z.string(),
      ok: z.boolean(),
      reason: z.string().optional(),
      message: z.string().optional(),
    }),
  ),
  operation_count: z.number(),
  update_messages: z.number(),
});

const acmeFields = {
  ok: z.literal(true),
  message: z.string(),
  owner: z.string(),
  fqdn: z.string(),
  zone: z.string(),
  value: z.string(),
  challenge: z.string(),
  verified,
};
export const acmePresentResponseSchema = z.object({ ...acmeFields, ttl: z.number() });
export const acmeCleanupResponseSchema = z.object({ ...acmeFields, removed: z.boolean() });
export const acmeCleanupStaleResponseSchema = z.object({
  ok: z.boolean(),
  owner: z.string(),
  zone: z.string(),
  dry_run: z.boolean(),
  removed: z.array(z.string()),
  removed_count: z.number(),
  kept: z.array(z.string()),
  errors: z.array(z.string()),
});
