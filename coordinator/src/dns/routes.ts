import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { safeString } from '@sonar/shared';
import { principalOf } from '../accounts/auth-plugin.js';
import type { AuthRequirement } from '../accounts/types.js';
import type { AccountService } from '../accounts/account-service.js';
import type { Config } from '../config.js';
import { validationFailed } from '../http/errors.js';
import { canRead, canWrite, requireRead, requireWrite, zoneAccess, type ZoneAccess } from './access.js';
import { acmeOwner } from './acme.js';
import type { DnsService } from './dns-service.js';
import type { ZoneRow } from './zone-registry.js';
import {
  acmeCleanupResponseSchema,
  acmeCleanupStaleResponseSchema,
  acmePresentResponseSchema,
  bulkResponseSchema,
  cacheClearResponseSchema,
  dnsErrors,
  recordDeleteResponseSchema,
  recordUpdateResponseSchema,
  recordWriteResponseSchema,
  zoneCacheResponseSchema,
  zoneListResponseSchema,
  zoneReadResponseSchema,
  zoneSearchResponseSchema,
} from './schemas.js';
import { WRITABLE_TYPES, fieldErrorsToRecord, validateName } from './wire/index.js';

const AUTH: AuthRequirement = { accept: ['session', 'dns_api_key', 'ip_whitelist'] };
/** OpenAPI: a session or a DNS API key (a whitelisted client address needs neither). */
const security: Array<Record<string, string[]>> = [{ session: [] }, { dnsApiKey: [] }];
const doc = { tags: ['dns'], security };
/** The ACME helpers also take the key as an HTTP Basic password: what lego's httpreq provider can send. */
const ACME_AUTH: AuthRequirement = { ...AUTH, basicAuthApiKey: true };
const acmeDoc = { tags: ['dns'], security: [...security, { dnsApiKeyBasic: [] }] };
const ok = <T>(schema: T) => ({ 200: schema, ...dnsErrors });

/** DNS zone editor API routes (/api/dns); the plugin sets their error shape and rate limit. */
export async function dnsRoutes(app: FastifyInstance, deps: { config: Config; accounts: AccountService; dns: DnsService }) {
  const { config, accounts, dns } = deps;
  const r = app.withTypeProvider<ZodTypeProvider>();

  const access = (req: FastifyRequest) => zoneAccess(principalOf(req), accounts, config.DNS_WHITELIST_WRITE);
  const paging = z.object({
    page: z.coerce.number().int().min(1).max(1_000_000).default(1),
    limit: z.coerce.number().int().min(1).max(config.DNS_PAGE_SIZE_MAX).default(config.DNS_PAGE_SIZE_DEFAULT),
  });
  const zoneParams = z.object({ zone: safeString().min(1).max(254) });

  /** Read access first (403 hides whether a zone exists), then the registry (404), then the paths (404). */
  async function readableZone(req: FastifyRequest, zone: string, write = false): Promise<ZoneRow> {
    const a = await access(req);
    if (write) requireWrite(a, zone);
    else requireRead(a, zone);
    return dns.zone(zone);
  }

  /** The zone of a write's owner name (400 when none), write rights (403), readable paths (404). */
  async function writableZoneOf(a: ZoneAccess, domain: unknown, field = 'domain'): Promise<ZoneRow> {
    const name = validateName(domain, 'owner', { field });
    if (!name.ok) throw validationFailed(fieldErrorsToRecord(name.errors));
    let zone = await dns.zones.zoneFor(name.value);
    if (!zone && (await dns.providers.directory.importLegacy()).length) zone = await dns.zones.zoneFor(name.value);
    if (!zone) throw validationFailed({ [field]: [`${name.value} is not inside any managed zone`] });
    requireWrite(a, zone.zone);
    return dns.bind(zone);
  }

  r.get(
    '/api/dns/zones',
    { config: { auth: AUTH }, schema: { ...doc, summary: 'Zones the caller can read', response: ok(zoneListResponseSchema) } },
    async (req) => {
      const a = await access(req);
      await dns.providers.directory.importLegacy();
      const zones = (await dns.zones.list()).filter((zone) => canRead(a, zone.zone));
      const mappings = await dns.providers.directory.listMappings();
      const bindings = await Promise.all(zones.map((zone) => dns.providers.directory.binding(zone, mappings)));
      return {
        ok: true as const,
        count: zones.length,
        zones: zones.map((zone, i) => {
          const b = bindings[i];
          if (b)
            return {
              zone: zone.zone,
              file: null,
              can_write: canWrite(a, zone.zone),
              provider: b.provider,
              provider_label: b.label,
              is_external: true,
              provider_zone_id: b.providerZoneId ?? '',
              provider_ready: b.ready,
              provider_source: b.source,
              // Which token reference fails and why is for administrators.
              ...(a.isAdmin && b.problem ? { provider_problem: b.problem } : {}),
            };
          return {
            zone: zone.zone,
            // Where the zone file and the TSIG secret lie on the server is for administrators only
            // (not readers, DNS API keys, global ones included, or whitelisted addresses).
            ...(a.isAdmin ? { file: zone.filePath } : {}),
            ...(a.isAdmin && zone.keyPath !== null ? { key: zone.keyPath } : {}),
            server: zone.server,
            port: zone.port,
            can_write: canWrite(a, zone.zone),
          };
        }),
        is_admin: a.isAdmin,
        access_type: a.accessType,
      };
    },
  );

  r.get(
    '/api/dns/zones/:zone',
    {
      config: { auth: AUTH },
      schema: {
        ...doc,
        summary: 'A page of the zone: from the cache (refreshed when missing or stale), after a refresh (`axfr`), or from the zone file',
        params: zoneParams,
        querystring: paging.extend({ method: z.enum(['cache', 'axfr', 'file']).default('cache') }),
        response: ok(zoneReadResponseSchema),
      },
    },
    async (req) => {
      // Read access first (403 hides whether a zone exists), then the zone and its page.
      requireRead(await access(req), req.params.zone);
      return dns.readZone(req.params.zone, req.query.method, req.query.page, req.query.limit);
    },
  );

  r.get(
    '/api/dns/zones/:zone/cache',
    {
      config: { auth: AUTH },
      schema: { ...doc, summary: 'A page of the zone cache, never a transfer', params: zoneParams, querystring: paging, response: ok(zoneCacheResponseSchema) },
    },
    async (req) => dns.cacheHelper(await readableZone(req, req.params.zone), req.query.page, req.query.limit),
  );

  r.get(
    '/api/dns/zones/:zone/axfr',
    {
      config: { auth: AUTH },
      schema: {
        ...doc,
        summary: 'Refresh the zone from the master (AXFR only when its SOA serial moved; a provider zone: fetch it) and answer a page',
        params: zoneParams,
        querystring: paging,
        response: ok(zoneReadResponseSchema),
      },
    },
    async (req) => dns.refresh(await readableZone(req, req.params.zone), req.query.page, req.query.limit),
  );

  r.get(
    '/api/dns/zones/:zone/search',
    {
      config: { auth: AUTH },
      schema: {
        ...doc,
        summary: 'Search the zone cache',
        params: zoneParams,
        querystring: paging.extend({ q: safeString().max(500).optional() }),
        response: ok(zoneSearchResponseSchema),
      },
    },
    async (req) => dns.search(await readableZone(req, req.params.zone), req.query.q, req.query.page, req.query.limit),
  );

  r.post(
    '/api/dns/zones/:zone/cache/clear',
    { config: { auth: AUTH }, schema: { ...doc, summary: 'Drop the zone cache', params: zoneParams, response: ok(cacheClearResponseSchema) } },
    async (req) => dns.clearCache(await readableZone(req, req.params.zone, true)),
  );

  // The record fields are checked by the DNS service (one validator for JSON, form and bulk bodies,
  // with the area's 400 `validation_failed` field errors), so the schema only documents them.
  const recordBody = z
    .looseObject({
      domain: z
        .unknown()
        .optional()
        .meta({ type: 'string' })
        .describe('Required. The record owner name, a fully qualified name inside a zone you may write (e.g. "www.example.test").'),
      type: z
        .unknown()
        .optional()
        .meta({ type: 'string' })
        .describe(`Required. One of ${WRITABLE_TYPES.join(', ')} (any case).`),
      target: z
        .unknown()
        .optional()
        .meta({ type: 'string' })
        .describe(
          'Required. The record value as a string: an address (A/AAAA), a host name (CNAME/NS/PTR), "preference exchange" (MX), "priority weight port target" (SRV), the text (TXT), flags tag "value" (CAA).',
        ),
      ttl: z
        .unknown()
        .optional()
        .meta({ type: ['integer', 'string'] })
        .describe('Optional. Seconds (an integer or a numeric string); default DNS_DEFAULT_TTL for a new RRset.'),
    })
    .meta({ example: { domain: 'www.example.test', type: 'A', target: '192.0.2.10', ttl: 300 } });

  r.post(
    '/api/dns/records/add',
    { config: { auth: AUTH }, schema: { ...doc, summary: 'Add a record', body: recordBody, response: ok(recordWriteResponseSchema) } },
    async (req) => {
      const zone = await writableZoneOf(await access(req), req.body.domain);
      return dns.add({ ...req.body, zone });
    },
  );

  r.post(
    '/api/dns/records/delete',
    {
      config: { auth: AUTH },
      schema: { ...doc, summary: 'Delete one record (name, type and value)', body: recordBody, response: ok(recordDeleteResponseSchema) },
    },
    async (req) => {
      const zone = await writableZoneOf(await access(req), req.body.domain);
      return dns.delete({ ...req.body, zone });
    },
  );

  r.post(
    '/api/dns/records/update',
    {
      config: { auth: AUTH },
      schema: {
        ...doc,
        summary: 'Replace one record (old_target) or the whole RRset',
        body: recordBody.omit({ target: true }).extend({
          old_target: z.unknown().optional().meta({ type: 'string' }).describe('Optional. The value to replace; without it the whole RRset is replaced.'),
          new_target: recordBody.shape.target.describe('Required. The new value, in the same form as `target` of an add.'),
        }),
        response: ok(recordUpdateResponseSchema),
      },
    },
    async (req) => {
      const zone = await writableZoneOf(await access(req), req.body.domain);
      return dns.update({ ...req.body, zone });
    },
  );

  const bulkOp = z.object({
    action: z
      .string()
      .transform((s) => s.toUpperCase())
      .pipe(z.enum(['ADD', 'DELETE'])),
    domain: safeString().min(1),
    type: safeString().min(1),
    target: safeString().min(1),
    ttl: z.unknown().optional(),
  });
  r.post(
    '/api/dns/records/bulk',
    {
      config: { auth: AUTH },
      schema: {
        ...doc,
        summary: '1 to 100 adds and deletes in one UPDATE per zone',
        body: z.object({ operations: z.array(bulkOp).min(1).max(100) }),
        response: ok(bulkResponseSchema),
      },
    },
    async (req) => {
      const a = await access(req);
      return dns.bulk(req.body.operations, (zone) => requireWrite(a, zone.zone));
    },
  );

  // ACME DNS-01, three body shapes: `{domain, challenge, ttl}`; `{fqdn, value}` (lego httpreq's default
  // mode and similar hooks); `{domain, token, keyAuth}` (lego httpreq HTTPREQ_MODE=RAW), whose TXT
  // value is computed here as ACME defines it (RFC 8555 §8.4: base64url of SHA-256 of the key authorization).
  const acmeBody = z.looseObject({
    domain: safeString().min(1).max(300).optional(),
    fqdn: safeString().min(1).max(300).optional(),
    challenge: safeString().min(1).max(1000).optional(),
    value: safeString().min(1).max(1000).optional(),
    token: safeString().min(1).max(1000).optional(),
    keyAuth: safeString().min(1).max(2000).optional(),
    ttl: z.coerce.number().int().min(0).max(86400).optional(),
  });
  type AcmeBody = z.infer<typeof acmeBody>;
  async function acmeTarget(req: FastifyRequest, body: AcmeBody, needValue: boolean) {
    const domain = body.domain ?? body.fqdn;
    const value = body.challenge ?? body.value ?? (body.keyAuth ? dns01Value(body.keyAuth) : undefined);
    const errors: Record<string, string[]> = {};
    if (!domain) errors.domain = ['is required (or fqdn)'];
    if (needValue && !value) errors.challenge = ['is required (or value, or keyAuth)'];
    if (Object.keys(errors).length) throw validationFailed(errors);
    const owner = acmeOwner(domain!);
    const zone = await writableZoneOf(await access(req), owner);
    return { domain: domain!, value: value ?? '', zone };
  }

  r.post(
    '/api/dns/acme/present',
    {
      config: { auth: ACME_AUTH },
      schema: { ...acmeDoc, summary: 'ACME DNS-01: publish a challenge', body: acmeBody, response: ok(acmePresentResponseSchema) },
    },
    async (req) => {
      const t = await acmeTarget(req, req.body, true);
      return { ...(await dns.acmePresent(t.domain, t.value, req.body.ttl, t.zone)), ...(req.body.fqdn ? { fqdn: req.body.fqdn } : {}) };
    },
  );

  r.post(
    '/api/dns/acme/cleanup',
    {
      config: { auth: ACME_AUTH },
      schema: { ...acmeDoc, summary: 'ACME DNS-01: remove a challenge', body: acmeBody, response: ok(acmeCleanupResponseSchema) },
    },
    async (req) => {
      const t = await acmeTarget(req, req.body, true);
      return { ...(await dns.acmeCleanup(t.domain, t.value, t.zone)), ...(req.body.fqdn ? { fqdn: req.body.fqdn } : {}) };
    },
  );

  r.post(
    '/api/dns/acme/cleanup-stale',
    {
      config: { auth: ACME_AUTH },
      schema: {
        ...acmeDoc,
        summary: 'ACME DNS-01: remove every challenge at the owner except keep_challenges',
        response: ok(acmeCleanupStaleResponseSchema),
        body: z.object({
          domain: safeString().min(1).max(300),
          keep_challenges: z.array(safeString().min(1).max(1000)).max(100).default([]),
          dry_run: z.boolean().default(false),
          refresh_zone_cache: z.boolean().default(false),
        }),
      },
    },
    async (req) => {
      const zone = await writableZoneOf(await access(req), acmeOwner(req.body.domain));
      return dns.acmeCleanupStale(
        req.body.domain,
        { keep: req.body.keep_challenges, dryRun: req.body.dry_run, refreshZoneCache: req.body.refresh_zone_cache },
        zone,
      );
    },
  );
}

/** The DNS-01 TXT value of a key authorization (RFC 8555 §8.4). */
const dns01Value = (keyAuth: string) => createHash('sha256').update(keyAuth).digest('base64url');
