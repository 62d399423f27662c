/**
 * DNS API behaviour over the registry, the cache and the master client: zone reads, search, cache
 * clear, record writes (add/delete/update/bulk, each one signed UPDATE with prerequisites and a
 * read-back), and the ACME DNS-01 helpers. Used by the HTTP routes and by the CLI.
 */
import type { Config } from '../config.js';
import type { Orm } from '../db/orm.js';
import { AppError, validationFailed } from '../http/errors.js';
import {
  DnsRcodeError,
  UpdateNotAppliedError,
  InvalidUpdateError,
  fieldErrorsToRecord,
  noCname,
  normalizeName,
  validateRecord,
  type DnsMasterClient,
  type FieldError,
  type Prerequisite,
  type UpdateOperation,
  type ValidRecord,
} from './wire/index.js';
import { masterUnavailable } from './master-errors.js';
import { ZoneCache, detectSearch, displaySignature, type Page } from './zone-cache.js';
import { ZoneRegistry, cachePolicyOf, checkPaths, type ZoneRow } from './zone-registry.js';

type DnsConfig = Pick<Config, 'DNS_CACHE_TTL_SECONDS' | 'DNS_DEFAULT_TTL' | 'DNS_ACME_TTL' | 'DNS_TIMEOUT_MS'>;

export interface WriteOp {
  action: 'ADD' | 'DELETE';
  domain: unknown;
  type: unknown;
  target: unknown;
  ttl?: unknown;
}

export interface OpResult {
  index: number;
  action: 'ADD' | 'DELETE';
  domain: string;
  type: string;
  target: string;
  ok: boolean;
  reason?: string;
  message?: string;
}

export const ACME_PREFIX = '_acme-challenge.';

/** `example.com`, `*.example.com`, `_acme-challenge.example.com.` → `_acme-challenge.example.com`. */
export function acmeOwner(domain: string): string {
  let d = normalizeName(domain);
  if (d.startsWith('*.')) d = d.slice(2);
  return d.startsWith(ACME_PREFIX) ? d : `${ACME_PREFIX}${d}`;
}

/** A challenge value as one TXT character-string. */
export const txtOf = (value: string) => `"${value.replace(/[\\"]/g, (c) => `\\${c}`)}"`;

export class DnsService {
  readonly zones: ZoneRegistry;
  readonly cache: ZoneCache;

  constructor(
    orm: Orm,
    private readonly config: DnsConfig,
  ) {
    this.zones = new ZoneRegistry(orm);
    this.cache = new ZoneCache(() => this.zones.knex(), config.DNS_TIMEOUT_MS);
  }

  ttlOf(z: ZoneRow) {
    return z.cacheTtlSeconds ?? this.config.DNS_CACHE_TTL_SECONDS;
  }

  /** Registered zone with readable paths, else 404. */
  async zone(name: string): Promise<ZoneRow> {
    const z = await this.zones.get(name);
    if (!z) throw new AppError('not_found', `zone ${normalizeName(name)} is not managed here`);
    await checkPaths(z);
    return z;
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

  async read(z: ZoneRow, method: 'cache' | 'axfr' | 'file', page: number, perPage: number) {
    if (method === 'file') {
      const p = await this.cache.fromFile(z, page, perPage);
      return { ok: true as const, method: 'FILE' as const, ...this.pageBody(z, p), cache_ttl_seconds: this.ttlOf(z), cache_policy: cachePolicyOf(z) };
    }
    let state = await this.cache.state(z.id);
    let used: 'CACHE' | 'AXFR' = 'CACHE';
    if (method === 'axfr' || !state || this.meta(z, state.cachedAt).cache_is_stale || this.expired(z, state.cachedAt)) {
      await this.cache.refresh(z);
      state = (await this.cache.state(z.id))!;
      used = 'AXFR';
    }
    const p = await this.cache.page(z.id, state.recordCount, page, perPage);
    return { ok: true as const, method: used, ...this.pageBody(z, p), serial: state.serial, ...this.meta(z, state.cachedAt) };
  }

  async cacheHelper(z: ZoneRow, page: number, perPage: number) {
    const state = await this.cache.state(z.id);
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
      };
    }
    const meta = this.meta(z, state.cachedAt);
    const p = await this.cache.page(z.id, state.recordCount, page, perPage);
    return {
      ok: true as const,
      method: 'CACHE' as const,
      source: meta.cache_is_stale ? ('from_database_stale' as const) : ('from_database' as const),
      ...this.pageBody(z, p),
      serial: state.serial,
      ...meta,
    };
  }

  async refresh(z: ZoneRow, page: number, perPage: number) {
    return this.read(z, 'axfr', page, perPage);
  }

  async search(z: ZoneRow, q: string | undefined, page: number, perPage: number) {
    if (q === undefined || q.trim() === '') throw new AppError('missing_query', 'The search text `q` is required.');
    const state = await this.cache.state(z.id);
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

  private validate(z: ZoneRow, input: { domain?: unknown; type?: unknown; target?: unknown; ttl?: unknown }, prefix = '', forDelete = false): ValidRecord {
    const f = (n: string) => `${prefix}${n}`;
    const v = validateRecord(
      { domain: input.domain, type: input.type, target: input.target, ttl: forDelete ? undefined : input.ttl },
      { zone: z.zone, fields: { domain: f('domain'), type: f('type'), target: f('target'), ttl: f('ttl') } },
    );
    if (!v.ok) throw validationFailed(fieldErrorsToRecord(v.errors));
    return v.value;
  }

  /** 409 cname_conflict when an address record would be added beside an existing CNAME (nothing is sent). */
  private async assertNoCname(client: DnsMasterClient, r: ValidRecord) {
    if (r.type !== 'A' && r.type !== 'AAAA') return;
    const res = await client.query(r.name, 'CNAME');
    const cname = res.answers.find((a) => a.type === 'CNAME' && a.name === r.name);
    if (cname) throw cnameConflict(r.name, cname.rdata);
  }

  /** One signed UPDATE, read back; the touched cache rows follow the master. */
  private async send(z: ZoneRow, client: DnsMasterClient, ops: UpdateOperation[], prereqs: Prerequisite[], pairs: Array<{ name: string; type: string }>) {
    const before = await client.soaSerial(z.zone).catch(() => null);
    try {
      await client.update(z.zone, ops, prereqs, { verify: true });
    } catch (err) {
      throw mapWriteError(err, ops);
    }
    await this.cache.syncPairs(z, client, pairs, before);
  }

  async add(body: { domain?: unknown; type?: unknown; target?: unknown; ttl?: unknown; zone: ZoneRow }) {
    const z = body.zone;
    const r = this.validate(z, body);
    const ttl = r.ttl ?? this.config.DNS_DEFAULT_TTL;
    const client = await this.cache.client(z);
    await this.assertNoCname(client, r);
    const prereqs = r.type === 'A' || r.type === 'AAAA' ? [noCname(r.name)] : [];
    await this.send(z, client, [{ op: 'add', name: r.name, type: r.type, ttl, rdata: r.data }], prereqs, [{ name: r.name, type: r.type }]);
    return {
      ok: true as const,
      message: `Added ${r.name} ${ttl} IN ${r.type} ${r.rdata}.`,
      zone: z.zone,
      record: { name: r.name, ttl, class: 'IN', type: r.type, rdata: r.rdata },
    };
  }

  async delete(body: { domain?: unknown; type?: unknown; target?: unknown; zone: ZoneRow }) {
    const z = body.zone;
    if (body.target === undefined || body.target === null || body.target === '')
      throw validationFailed({ target: ['is required (the whole RRset is never deleted implicitly)'] });
    const r = this.validate(z, body, '', true);
    const client = await this.cache.client(z);
    const existing = (await client.query(r.name, r.type)).answers.some((a) => a.name === r.name && a.type === r.type && a.rdata === r.rdata);
    if (!existing) throw new AppError('not_found', `${r.name} ${r.type} ${r.rdata} does not exist.`);
    await this.send(z, client, [{ op: 'delete', name: r.name, type: r.type, rdata: r.data }], [], [{ name: r.name, type: r.type }]);
    return {
      ok: true as const,
      message: `Deleted ${r.name} IN ${r.type} ${r.rdata}.`,
      zone: z.zone,
      record: { name: r.name, class: 'IN', type: r.type, rdata: r.rdata },
    };
  }

  async update(body: { domain?: unknown; type?: unknown; old_target?: unknown; new_target?: unknown; ttl?: unknown; zone: ZoneRow }) {
    const z = body.zone;
    const next = this.validate(z, { domain: body.domain, type: body.type, target: body.new_target, ttl: body.ttl });
    const errors: FieldError[] = [];
    let old: ValidRecord | undefined;
    if (body.old_target !== undefined && body.old_target !== null && body.old_target !== '') {
      const v = validateRecord({ domain: body.domain, type: body.type, target: body.old_target }, { zone: z.zone, fields: { target: 'old_target' } });
      if (!v.ok) errors.push(...v.errors);
      else old = v.value;
    }
    if (errors.length) throw validationFailed(fieldErrorsToRecord(errors));
    const ttl = next.ttl ?? this.config.DNS_DEFAULT_TTL;
    const client = await this.cache.client(z);
    await this.assertNoCname(client, next);
    const ops: UpdateOperation[] = [];
    const prereqs: Prerequisite[] = next.type === 'A' || next.type === 'AAAA' ? [noCname(next.name)] : [];
    if (old) {
      const exists = (await client.query(old.name, old.type)).answers.some((a) => a.name === old.name && a.type === old.type && a.rdata === old.rdata);
      if (!exists) throw new AppError('not_found', `${old.name} ${old.type} ${old.rdata} does not exist.`);
      ops.push({ op: 'delete', name: old.name, type: old.type, rdata: old.data });
    } else {
      ops.push({ op: 'deleteRRset', name: next.name, type: next.type });
    }
    ops.push({ op: 'add', name: next.name, type: next.type, ttl, rdata: next.data });
    await this.send(z, client, ops, prereqs, [{ name: next.name, type: next.type }]);
    return {
      ok: true as const,
      message: `Updated ${next.name} ${next.type}: ${old ? old.rdata : '(whole RRset)'} → ${next.rdata}.`,
      zone: z.zone,
      record: { name: next.name, ttl, class: 'IN', type: next.type, rdata: next.rdata },
      ...(old ? { old_rdata: old.rdata } : {}),
    };
  }

  /**
   * 1..100 operations of one zone in ONE UPDATE message (atomic on the master). Operations that
   * fail the pre-checks (CNAME conflict) are reported and left out; when the combined message is
   * refused or its read-back disagrees, each remaining operation is sent on its own so every
   * result says what happened to it.
   */
  async bulk(operations: WriteOp[], allowedZone: (z: ZoneRow) => void) {
    const errors: FieldError[] = [];
    const valid: Array<{ i: number; action: 'ADD' | 'DELETE'; r: ValidRecord; z: ZoneRow }> = [];
    for (const [i, op] of operations.entries()) {
      const z = typeof op.domain === 'string' ? await this.zones.zoneFor(op.domain) : null;
      if (!z) {
        errors.push({ field: `operations.${i}.domain`, message: 'is not inside any managed zone' });
        continue;
      }
      const v = validateRecord(
        { domain: op.domain, type: op.type, target: op.target, ttl: op.action === 'ADD' ? op.ttl : undefined },
        {
          zone: z.zone,
          fields: { domain: `operations.${i}.domain`, type: `operations.${i}.type`, target: `operations.${i}.target`, ttl: `operations.${i}.ttl` },
        },
      );
      if (!v.ok) errors.push(...v.errors);
      else valid.push({ i, action: op.action, r: v.value, z });
    }
    if (errors.length) throw validationFailed(fieldErrorsToRecord(errors));
    const zones = new Map(valid.map((v) => [v.z.id, v.z]));
    for (const z of zones.values()) {
      allowedZone(z);
      await checkPaths(z);
    }

    const results: OpResult[] = operations.map((_, i) => {
      const v = valid.find((x) => x.i === i)!;
      return { index: i, action: v.action, domain: v.r.name, type: v.r.type, target: v.r.rdata, ok: false };
    });
    let messages = 0;
    for (const z of zones.values()) {
      const client = await this.cache.client(z);
      const mine = valid.filter((v) => v.z.id === z.id);
      const deletedCnames = new Set(mine.filter((v) => v.action === 'DELETE' && v.r.type === 'CNAME').map((v) => v.r.name));
      const sendable: typeof mine = [];
      for (const v of mine) {
        if (v.action === 'ADD' && (v.r.type === 'A' || v.r.type === 'AAAA') && !deletedCnames.has(v.r.name)) {
          const cname = (await client.query(v.r.name, 'CNAME')).answers.find((a) => a.type === 'CNAME' && a.name === v.r.name);
          if (cname) {
            Object.assign(results[v.i]!, { ok: false, reason: 'cname_conflict', message: cnameConflict(v.r.name, cname.rdata).message });
            continue;
          }
        }
        sendable.push(v);
      }
      if (!sendable.length) continue;
      const toOp = (v: (typeof mine)[number]): UpdateOperation =>
        v.action === 'ADD'
          ? { op: 'add', name: v.r.name, type: v.r.type, ttl: v.r.ttl ?? this.config.DNS_DEFAULT_TTL, rdata: v.r.data }
          : { op: 'delete', name: v.r.name, type: v.r.type, rdata: v.r.data };
      const prereqOf = (v: (typeof mine)[number]): Prerequisite[] =>
        v.action === 'ADD' && (v.r.type === 'A' || v.r.type === 'AAAA') && !deletedCnames.has(v.r.name) ? [noCname(v.r.name)] : [];
      const pairs = sendable.map((v) => ({ name: v.r.name, type: v.r.type }));
      try {
        messages++;
        await this.send(z, client, sendable.map(toOp), sendable.flatMap(prereqOf), pairs);
        for (const v of sendable) Object.assign(results[v.i]!, { ok: true });
      } catch {
        for (const v of sendable) {
          try {
            messages++;
            await this.send(z, client, [toOp(v)], prereqOf(v), [{ name: v.r.name, type: v.r.type }]);
            Object.assign(results[v.i]!, { ok: true });
          } catch (err) {
            const e = err instanceof AppError ? err : mapWriteError(err, [toOp(v)]);
            Object.assign(results[v.i]!, { ok: false, reason: e.reason, message: e.message });
          }
        }
        await this.cache.syncPairs(z, client, pairs, null);
      }
    }
    const failed = results.filter((r) => !r.ok).length;
    return {
      ok: failed === 0,
      message:
        failed === 0 ? `${results.length} operation(s) applied.` : `${results.length - failed} of ${results.length} operation(s) applied; ${failed} failed.`,
      results,
      operation_count: results.length,
      update_messages: messages,
    };
  }

  // ---- ACME DNS-01 ----------------------------------------------------------------------------

  async acmePresent(domain: string, value: string, ttl: number | undefined, z: ZoneRow) {
    const owner = acmeOwner(domain);
    const t = ttl ?? this.config.DNS_ACME_TTL;
    const client = await this.cache.client(z);
    const r = this.validate(z, { domain: owner, type: 'TXT', target: txtOf(value), ttl: t });
    await this.send(z, client, [{ op: 'add', name: owner, type: 'TXT', ttl: t, rdata: r.data }], [], [{ name: owner, type: 'TXT' }]);
    return { ok: true as const, message: `Challenge published at ${owner}.`, owner, fqdn: `${owner}.`, zone: z.zone, value, challenge: value, ttl: t };
  }

  async acmeCleanup(domain: string, value: string, z: ZoneRow) {
    const owner = acmeOwner(domain);
    const client = await this.cache.client(z);
    const r = this.validate(z, { domain: owner, type: 'TXT', target: txtOf(value) }, '', true);
    const present = (await client.query(owner, 'TXT')).answers.some((a) => a.name === owner && a.type === 'TXT' && a.rdata === r.rdata);
    if (present) await this.send(z, client, [{ op: 'delete', name: owner, type: 'TXT', rdata: r.data }], [], [{ name: owner, type: 'TXT' }]);
    return {
      ok: true as const,
      message: present ? `Challenge removed from ${owner}.` : `No such challenge at ${owner}; nothing to remove.`,
      owner,
      fqdn: `${owner}.`,
      zone: z.zone,
      value,
      challenge: value,
      removed: present,
    };
  }

  /** Removes every `_acme-challenge` TXT value at the owner except `keep`. */
  async acmeCleanupStale(domain: string, opts: { keep?: string[]; dryRun?: boolean; refreshZoneCache?: boolean }, z: ZoneRow) {
    const owner = acmeOwner(domain);
    const client = await this.cache.client(z);
    const keepRdata = new Set((opts.keep ?? []).map((k) => txtOf(k)));
    const rows = (await client.query(owner, 'TXT')).answers.filter((a) => a.name === owner && a.type === 'TXT');
    const value = (rdata: string) => rdata.replace(/^"|"$/g, '').replace(/\\(.)/g, '$1');
    const removed = rows.filter((r) => !keepRdata.has(r.rdata)).map((r) => value(r.rdata));
    const kept = rows.filter((r) => keepRdata.has(r.rdata)).map((r) => value(r.rdata));
    const errors: string[] = [];
    const dryRun = opts.dryRun === true;
    if (!dryRun && removed.length) {
      try {
        const ops = rows.filter((r) => !keepRdata.has(r.rdata)).map((r): UpdateOperation => ({ op: 'delete', name: owner, type: 'TXT', rdata: r.rdata }));
        await this.send(z, client, ops, [], [{ name: owner, type: 'TXT' }]);
      } catch (err) {
        errors.push((err as Error).message);
      }
    }
    if (!dryRun && opts.refreshZoneCache) {
      try {
        await this.cache.refresh(z);
      } catch (err) {
        errors.push(`cache refresh: ${(err as Error).message}`);
      }
    }
    return {
      ok: errors.length === 0,
      owner,
      zone: z.zone,
      dry_run: dryRun,
      removed: errors.length && !dryRun ? [] : removed,
      removed_count: errors.length && !dryRun ? 0 : removed.length,
      kept,
      errors,
    };
  }
}

function cnameConflict(name: string, target: string) {
  return new AppError('cname_conflict', `${name} has a CNAME to ${target}; remove that CNAME first, a CNAME cannot coexist with address records.`);
}

/** Master answers → documented reasons. */
function mapWriteError(err: unknown, ops: UpdateOperation[]): AppError {
  if (err instanceof AppError) return err;
  if (err instanceof InvalidUpdateError) return validationFailed(fieldErrorsToRecord(err.errors));
  if (err instanceof DnsRcodeError && err.prerequisiteFailed) {
    const add = ops.find((o) => o.op === 'add' && (o.type === 'A' || o.type === 'AAAA'));
    if (err.code === 'YXRRSET' && add)
      return new AppError('cname_conflict', `${add.name} has a CNAME (added concurrently); remove that CNAME first. Nothing was changed.`);
    return new AppError('conflict', `The zone changed concurrently: ${err.message}. Nothing was changed.`);
  }
  if (err instanceof UpdateNotAppliedError) return new AppError('conflict', err.message);
  return masterUnavailable(err, 'The master DNS server did not apply the change');
}
