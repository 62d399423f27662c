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
      file: z.string(),
      key: z.string().optional().describe('TSIG key file path on the server: administrators only'),
      server: z.string(),
      port: z.number(),
      can_write: z.boolean(),
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

/** `GET /api/dns/zones/:zone` (`method=cache|axfr|file`) and `/axfr`. */
export const zoneReadResponseSchema = z.union([
  z.object({ ok: z.literal(true), method: z.enum(['CACHE', 'AXFR']), ...pageFields, serial: z.number(), ...cacheFields }),
  z.object({ ok: z.literal(true), method: z.literal('FILE'), ...pageFields, cache_ttl_seconds: z.number(), cache_policy: cachePolicySchema }),
]);

/** `GET /api/dns/zones/:zone/cache`: a cached page, or `source: needs_axfr` when there is none (or it expired). */
export const zoneCacheResponseSchema = z.union([
  z.object({ ok: z.literal(true), method: z.literal('CACHE'), source: cacheSource, ...pageFields, serial: z.number(), ...cacheFields }),
  z.object({
    ok: z.literal(true),
    source: z.literal('needs_axfr'),
    zone: z.string(),
    message: z.string(),
    cache_ttl_seconds: z.number(),
    cache_policy: cachePolicySchema,
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
