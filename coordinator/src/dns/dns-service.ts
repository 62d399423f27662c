/**
 * DNS API behaviour over the registry, the cache and the master client: zone reads, search, cache
 * clear, record writes (add/delete/update here; the bulk in bulk.ts; each one signed UPDATE with
 * prerequisites and a read-back, master-writes.ts), and the ACME DNS-01 helpers (acme.ts). Used by
 * the HTTP routes and by the CLI.
 */
import type { Config } from '../config.js';
import type { Orm } from '../db/orm.js';
import { AppError, validationFailed } from '../http/errors.js';
import { fieldErrorsToRecord, noCname, normalizeName, validateRecord, type FieldError, type UpdateOperation, type ValidRecord } from './wire/index.js';
import { acmeCleanup, acmeCleanupStale, acmePresent, type AcmeContext } from './acme.js';
import { bulkWrite, type BulkContext, type WriteOp } from './bulk.js';
import { addPrereqs, inZoneTarget, MasterWrites, rrsetTtl, validRecord, type SendResult } from './master-writes.js';
import type { CacheState } from './cache-repository.js';
import { ZoneCache, detectSearch, displaySignature, type Page } from './zone-cache.js';
import { ZoneRegistry, cachePolicyOf, checkPaths, type MappingRow, type ZoneRow } from './zone-registry.js';
import { ProviderDirectory, type ProviderConfig } from './providers/directory.js';
import { ProviderZones, providerFields, providerMethod } from './providers/provider-zones.js';

type DnsConfig = Pick<Config, 'DNS_CACHE_TTL_SECONDS' | 'DNS_DEFAULT_TTL' | 'DNS_ACME_TTL' | 'DNS_TIMEOUT_MS'> & ProviderConfig;

export class DnsService {
  readonly zones: ZoneRegistry;
  readonly cache: ZoneCache;
  /** Provider zones (providers/): their reads and writes go through the provider's API. */
  readonly providers: ProviderZones;
  private readonly writes: MasterWrites;

  constructor(
    orm: Orm,
    private readonly config: DnsConfig,
  ) {
    this.zones = new ZoneRegistry(orm);
    this.cache = new ZoneCache(() => this.zones.knex(), config.DNS_TIMEOUT_MS);
    this.providers = new ProviderZones(new ProviderDirectory(this.zones, config), this.cache);
    this.writes = new MasterWrites(this.cache, config.DNS_TIMEOUT_MS);
  }

  ttlOf(z: ZoneRow) {
    return z.cacheTtlSeconds ?? this.config.DNS_CACHE_TTL_SECONDS;
  }

  /** Cache state read together with the zone row by zone(), taken by the read that follows (one query less per read). */
  private readonly prefetched = new WeakMap<ZoneRow, CacheState | null>();

  /** Registered zone (older provider config imported first) bound to its provider, or with readable paths; else 404. */
  async zone(name: string): Promise<ZoneRow> {
    let found = await this.zones.getWithState(name);
    if (!found && (await this.providers.directory.importLegacy()).length) found = await this.zones.getWithState(name);
    if (!found) throw new AppError('not_found', `zone ${normalizeName(name)} is not managed here`);
    const z = await this.bind(found.zone, found.mapping);
    this.prefetched.set(z, found.state);
    return z;
  }

  /**
   * A provider zone gets its binding; a local zone must have readable paths (404 otherwise).
   * `mapping`: the zone's mapping row when already read (null: it has none), else it is read here.
   */
  async bind(z: ZoneRow, mapping?: MappingRow | null): Promise<ZoneRow> {
    const provider = await this.providers.directory.binding(z, mapping === undefined ? undefined : mapping ? [mapping] : []);
    if (provider) return { ...z, provider };
    await checkPaths(z);
    return z;
  }

  private async stateOf(z: ZoneRow): Promise<CacheState | null> {
    const held = this.prefetched.get(z);
    if (held !== undefined) {
      this.prefetched.delete(z);
      return held;
    }
    return this.cache.state(z.id);
  }

  /** Cache metadata common to the read responses. */
  private meta(z: ZoneRow, cachedAt: Date) {
    const ttl = this.ttlOf(z);
    const age = Math.max(0, Math.floor((Date.now() - cachedAt.getTime()) / 1000));
    return { cached_at: cachedAt.toISOString(), cache_age: age, cache_is_stale: age > ttl, cache_ttl_seconds: ttl, cache_policy: cachePolicyOf(z) };
  }

  private pageBody(z: ZoneRow, p: Page) {
    return {
      zone: z.zone,
      zoneData: p.rows,
      record_count: p.recordCount,
      page: p.page,
      per_page: p.perPage,
      has_more: p.hasMore,
      display_signature: displaySignature(p),
    };
  }

  /** Automatic invalidation: with a policy interval, a cache older than it counts as gone. */
  private expired(z: ZoneRow, cachedAt: Date) {
    return z.invalidateEnabled && z.invalidateIntervalSeconds > 0 && Date.now() - cachedAt.getTime() > z.invalidateIntervalSeconds * 1000;
  }

  /**
   * A page of a zone by name (the caller checked read access): zone() and read() in one, where a
   * cache read of a zone read before takes one statement for the zone row, its cache state and the
   * page (ZoneCache.foldedRead).
   */
  async readZone(name: string, method: 'cache' | 'axfr' | 'file', page: number, perPage: number) {
    const found = method === 'cache' ? await this.cache.foldedRead(name, page, perPage) : null;
    // Not registered (maybe a legacy provider zone not yet imported), or another method: as zone() does.
    if (!found) return this.read(await this.zone(name), method, page, perPage);
    return this.read(await this.bind(found.zone, found.mapping), method, page, perPage, found);
  }

  /** `read`: the zone's cache state (and maybe the page) when already read with its row. */
  async read(z: ZoneRow, method: 'cache' | 'axfr' | 'file', page: number, perPage: number, read?: { state: CacheState | null; page: Page | null }) {
    if (method === 'file' && z.provider) throw validationFailed({ method: [`zone ${z.zone} is a ${z.provider.label} zone: it has no zone file here`] });
    if (method === 'file') {
      const p = await this.cache.fromFile(z, page, perPage);
      return { ok: true as const, method: 'FILE' as const, ...this.pageBody(z, p), cache_ttl_seconds: this.ttlOf(z), cache_policy: cachePolicyOf(z) };
    }
    const cached = read ? read.state : await this.stateOf(z);
    let state: CacheState;
    let used: string = 'CACHE';
    const gone = !cached || this.expired(z, cached.cachedAt);
    if (method === 'axfr' || gone || this.meta(z, cached.cachedAt).cache_is_stale) {
      if (z.provider) {
        // A provider zone's refresh is a provider fetch (method: the provider's name), not a transfer.
        state = await this.providers.refresh(z);
        used = providerMethod(z.provider);
      } else {
        // A cache that counts as gone (none, or past the zone's invalidation interval) is transferred;
        // otherwise the master's SOA serial is compared first and the zone transferred only when it
        // moved (method SOA: nothing transferred, the cache confirmed current as of cached_at).
        const refreshed = await this.cache.refresh(z, { force: gone });
        state = refreshed.state;
        used = refreshed.transferred ? 'AXFR' : 'SOA';
      }
    } else state = cached;
    // The page read with the zone's row was read at this state; after a refresh it is read again.
    const p = read?.page && state === cached ? read.page : await this.cache.page(z.id, state, page, perPage, z.zone);
    return {
      ok: true as const,
      method: used,
      ...this.pageBody(z, p),
      serial: state.serial,
      ...this.meta(z, state.cachedAt),
      ...providerFields(z),
      ...(z.provider && used === 'CACHE' ? { source_method: providerMethod(z.provider) } : {}),
    };
  }

  async cacheHelper(z: ZoneRow, page: number, perPage: number) {
    const state = await this.stateOf(z);
    if (!state || this.expired(z, state.cachedAt)) {
      return {
        ok: true as const,
        source: 'needs_axfr' as const,
        zone: z.zone,
        message: state
          ? 'The cache expired under the zone policy; call the refresh endpoint (/axfr).'
          : 'No cache exists for this zone yet; call the refresh endpoint (/axfr).',
        cache_ttl_seconds: this.ttlOf(z),
        cache_policy: cachePolicyOf(z),
        ...providerFields(z),
      };
    }
    const meta = this.meta(z, state.cachedAt);
    const p = await this.cache.page(z.id, state, page, perPage);
    return {
      ok: true as const,
      method: 'CACHE' as const,
      source: meta.cache_is_stale ? ('from_database_stale' as const) : ('from_database' as const),
      ...this.pageBody(z, p),
      serial: state.serial,
      ...meta,
      ...providerFields(z),
      ...(z.provider ? { source_method: providerMethod(z.provider) } : {}),
    };
  }

  async refresh(z: ZoneRow, page: number, perPage: number) {
    return this.read(z, 'axfr', page, perPage);
  }

  async search(z: ZoneRow, q: string | undefined, page: number, perPage: number) {
    if (q === undefined || q.trim() === '') throw new AppError('missing_query', 'The search text `q` is required.');
    const state = await this.stateOf(z);
    if (!state) throw new AppError('cache_unavailable', `No cache page exists for zone ${z.zone} yet; call the refresh endpoint (/axfr) first.`);
    const { mode, term } = detectSearch(q);
    const meta = this.meta(z, state.cachedAt);
    const p = await this.cache.search(z.id, mode, term, page, perPage);
    return {
      ok: true as const,
      method: 'CACHE' as const,
      source: meta.cache_is_stale ? ('from_database_stale' as const) : ('from_database' as const),
      ...this.pageBody(z, p),
      ...meta,
      query: q,
      search_mode: mode,
      ...providerFields(z),
      ...(z.provider ? { source_method: providerMethod(z.provider) } : {}),
    };
  }

  async clearCache(z: ZoneRow) {
    if (!z.invalidateEnabled) throw new AppError('cache_invalidation_disabled', `Manual cache invalidation is disabled for zone ${z.zone}.`);
    if (z.protectFromClear) throw new AppError('cache_clear_protected', `The cache of zone ${z.zone} is protected from a full clear.`);
    await this.cache.clear(z.id);
    const fresh = (await this.zones.get(z.zone))!;
    return {
      ok: true as const,
      zone: z.zone,
      message: `Cache of ${z.zone} cleared; the next read transfers the zone again.`,
      cache_policy: cachePolicyOf(fresh),
    };
  }

  // ---- writes ---------------------------------------------------------------------------------

  async add(body: { domain?: unknown; type?: unknown; target?: unknown; ttl?: unknown; zone: ZoneRow }) {
    const z = body.zone;
    const r = validRecord(z, body);
    let ttl = r.ttl ?? this.config.DNS_DEFAULT_TTL;
    let ttlNote = '';
    let sent: SendResult;
    if (z.provider) sent = await this.providers.add(z, r, ttl);
    else {
      const w = await this.writes.writer(z);
      const target = inZoneTarget(z, r);
      const facts = await this.writes.facts(z, w.early, [r.name], target ? [target] : []);
      const problem = this.writes.addProblem(z, r, facts);
      if (problem) throw problem;
      // An RRset has one TTL (RFC 2181 §5.2): without `ttl` the add takes the RRset's own.
      const rrset = rrsetTtl(r, facts.at(r.name), this.config.DNS_DEFAULT_TTL);
      ttl = rrset.ttl;
      ttlNote = rrset.note;
      sent = await this.writes.send(z, w, [{ op: 'add', name: r.name, type: r.type, ttl, rdata: r.data }], addPrereqs(r), [{ name: r.name, type: r.type }]);
    }
    return {
      ok: true as const,
      message: `Added ${r.name} ${ttl} IN ${r.type} ${r.rdata}.${ttlNote}${sent.note ? ` ${sent.note}` : ''}`,
      zone: z.zone,
      record: { name: r.name, ttl, class: 'IN', type: r.type, rdata: r.rdata },
      verified: sent.verified,
    };
  }

  async delete(body: { domain?: unknown; type?: unknown; target?: unknown; zone: ZoneRow }) {
    const z = body.zone;
    if (body.target === undefined || body.target === null || body.target === '')
      throw validationFailed({ target: ['is required (the whole RRset is never deleted implicitly)'] });
    const r = validRecord(z, body, '', true);
    let sent: SendResult;
    if (z.provider) sent = await this.providers.delete(z, r);
    else {
      const w = await this.writes.writer(z);
      const facts = await this.writes.facts(z, w.early, [r.name], []);
      if (!facts.at(r.name).some((a) => a.type === r.type && a.rdata === r.rdata))
        throw new AppError('not_found', `${r.name} ${r.type} ${r.rdata} does not exist.`);
      sent = await this.writes.send(z, w, [{ op: 'delete', name: r.name, type: r.type, rdata: r.data }], [], [{ name: r.name, type: r.type }]);
    }
    return {
      ok: true as const,
      message: `Deleted ${r.name} IN ${r.type} ${r.rdata}.${sent.note ? ` ${sent.note}` : ''}`,
      zone: z.zone,
      record: { name: r.name, class: 'IN', type: r.type, rdata: r.rdata },
      verified: sent.verified,
    };
  }

  /** Replaces one value (`old_target`) or the whole RRset; without `ttl` the RRset keeps its TTL (the default only for a new RRset). */
  async update(body: { domain?: unknown; type?: unknown; old_target?: unknown; new_target?: unknown; ttl?: unknown; zone: ZoneRow }) {
    const z = body.zone;
    const next = validRecord(z, { domain: body.domain, type: body.type, target: body.new_target, ttl: body.ttl });
    const errors: FieldError[] = [];
    let old: ValidRecord | undefined;
    if (body.old_target !== undefined && body.old_target !== null && body.old_target !== '') {
      const v = validateRecord({ domain: body.domain, type: body.type, target: body.old_target }, { zone: z.zone, fields: { target: 'old_target' } });
      if (!v.ok) errors.push(...v.errors);
      else old = v.value;
    }
    if (errors.length) throw validationFailed(fieldErrorsToRecord(errors));
    if (z.provider) {
      const sent = await this.providers.update(z, next, old, this.config.DNS_DEFAULT_TTL);
      return this.updated(z, next, old, sent.ttl, sent);
    }
    const w = await this.writes.writer(z);
    const target = inZoneTarget(z, next);
    const facts = await this.writes.facts(z, w.early, [next.name], target ? [target] : []);
    const current = facts.at(next.name).filter((a) => a.type === next.type);
    const problem = this.writes.addProblem(z, next, facts, { replacing: true, field: 'new_target' });
    if (problem) throw problem;
    const ttl = next.ttl ?? current[0]?.ttl ?? this.config.DNS_DEFAULT_TTL;
    const ops: UpdateOperation[] = [];
    if (old) {
      const o = old;
      if (!current.some((a) => a.rdata === o.rdata)) throw new AppError('not_found', `${o.name} ${o.type} ${o.rdata} does not exist.`);
      ops.push({ op: 'delete', name: o.name, type: o.type, rdata: o.data });
    } else {
      ops.push({ op: 'deleteRRset', name: next.name, type: next.type });
    }
    ops.push({ op: 'add', name: next.name, type: next.type, ttl, rdata: next.data });
    const prereqs = next.type === 'CNAME' ? [] : [noCname(next.name)];
    const sent = await this.writes.send(z, w, ops, prereqs, [{ name: next.name, type: next.type }]);
    return this.updated(z, next, old, ttl, sent);
  }

  private updated(z: ZoneRow, next: ValidRecord, old: ValidRecord | undefined, ttl: number, sent: SendResult) {
    return {
      ok: true as const,
      message: `Updated ${next.name} ${next.type}: ${old ? old.rdata : '(whole RRset)'} → ${next.rdata}.${sent.note ? ` ${sent.note}` : ''}`,
      zone: z.zone,
      record: { name: next.name, ttl, class: 'IN', type: next.type, rdata: next.rdata },
      ...(old ? { old_rdata: old.rdata } : {}),
      verified: sent.verified,
    };
  }

  /** 1..100 operations, one UPDATE message per zone (bulk.ts). */
  async bulk(operations: WriteOp[], allowedZone: (z: ZoneRow) => void) {
    return bulkWrite(this.bulkContext(), operations, allowedZone);
  }

  private bulkContext(): BulkContext {
    return { zones: this.zones, providers: this.providers, writes: this.writes, bind: (z) => this.bind(z), defaultTtl: this.config.DNS_DEFAULT_TTL };
  }

  // ---- ACME DNS-01 (acme.ts) -----------------------------------------------------------------

  private get acme(): AcmeContext {
    return { writes: this.writes, providers: this.providers, cache: this.cache, acmeTtl: this.config.DNS_ACME_TTL };
  }

  async acmePresent(domain: string, value: string, ttl: number | undefined, z: ZoneRow) {
    return acmePresent(this.acme, domain, value, ttl, z);
  }

  async acmeCleanup(domain: string, value: string, z: ZoneRow) {
    return acmeCleanup(this.acme, domain, value, z);
  }

  /** Removes every `_acme-challenge` TXT value at the owner except `keep`. */
  async acmeCleanupStale(domain: string, opts: { keep?: string[]; dryRun?: boolean; refreshZoneCache?: boolean }, z: ZoneRow) {
    return acmeCleanupStale(this.acme, domain, opts, z);
  }
}
