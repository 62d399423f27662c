/**
 * DNS API behaviour over the registry, the cache and the master client: zone reads, search, cache
 * clear, record writes (add/delete/update/bulk, each one signed UPDATE with prerequisites and a
 * read-back), and the ACME DNS-01 helpers. Used by the HTTP routes and by the CLI.
 */
import type { Config } from '../config.js';
import type { Orm } from '../db/orm.js';
import { AppError, validationFailed } from '../http/errors.js';
import {
  DnsConnectionError,
  DnsOutcomeUnknownError,
  DnsRcodeError,
  DnsTimeoutError,
  UpdateNotAppliedError,
  InvalidUpdateError,
  isInZone,
  fieldErrorsToRecord,
  mismatchesIn,
  readBackQuestions,
  noCname,
  normalizeName,
  recordsAt,
  validateRecord,
  type DnsMasterClient,
  type DnsRecord,
  type FieldError,
  type Prerequisite,
  type UpdateOperation,
  type ValidRecord,
} from './wire/index.js';
import { cnameProblem, type CnameContext } from './cname-rules.js';
import { masterUnavailable, outcomeUnknown, refusedForData } from './master-errors.js';
import { ZoneCache, detectSearch, displaySignature, type CacheState, type Page } from './zone-cache.js';
import { ZoneRegistry, cachePolicyOf, checkPaths, type MappingRow, type ZoneRow } from './zone-registry.js';
import { ProviderDirectory, type ProviderConfig } from './providers/directory.js';
import { ProviderZones, providerFields, providerMethod } from './providers/provider-zones.js';

type DnsConfig = Pick<Config, 'DNS_CACHE_TTL_SECONDS' | 'DNS_DEFAULT_TTL' | 'DNS_ACME_TTL' | 'DNS_TIMEOUT_MS'> & ProviderConfig;

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
  /** Provider zones (providers/): their reads and writes go through the provider's API. */
  readonly providers: ProviderZones;

  constructor(
    orm: Orm,
    private readonly config: DnsConfig,
  ) {
    this.zones = new ZoneRegistry(orm);
    this.cache = new ZoneCache(() => this.zones.knex(), config.DNS_TIMEOUT_MS);
    this.providers = new ProviderZones(new ProviderDirectory(this.zones, config), this.cache);
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

  async read(z: ZoneRow, method: 'cache' | 'axfr' | 'file', page: number, perPage: number) {
    if (method === 'file' && z.provider) throw validationFailed({ method: [`zone ${z.zone} is a ${z.provider.label} zone: it has no zone file here`] });
    if (method === 'file') {
      const p = await this.cache.fromFile(z, page, perPage);
      return { ok: true as const, method: 'FILE' as const, ...this.pageBody(z, p), cache_ttl_seconds: this.ttlOf(z), cache_policy: cachePolicyOf(z) };
    }
    const cached = await this.stateOf(z);
    let state: CacheState;
    let used: string = 'CACHE';
    if (method === 'axfr' || !cached || this.meta(z, cached.cachedAt).cache_is_stale || this.expired(z, cached.cachedAt)) {
      // A provider zone's refresh is a provider fetch (method: the provider's name), not a transfer.
      state = z.provider ? await this.providers.refresh(z) : (await this.cache.refresh(z)).state;
      used = z.provider ? providerMethod(z.provider) : 'AXFR';
    } else state = cached;
    const p = await this.cache.page(z.id, state, page, perPage);
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

  private validate(z: ZoneRow, input: { domain?: unknown; type?: unknown; target?: unknown; ttl?: unknown }, prefix = '', forDelete = false): ValidRecord {
    const f = (n: string) => `${prefix}${n}`;
    const v = validateRecord(
      { domain: input.domain, type: input.type, target: input.target, ttl: forDelete ? undefined : input.ttl },
      { zone: z.zone, fields: { domain: f('domain'), type: f('type'), target: f('target'), ttl: f('ttl') } },
    );
    if (!v.ok) throw validationFailed(fieldErrorsToRecord(v.errors));
    return v.value;
  }

  /**
   * One write request's master I/O, bounded by DNS_TIMEOUT_MS in total: the pre-checks and the
   * UPDATE must be over by 70 % of it, the rest is kept for the read-back (which is what tells an
   * unanswered UPDATE's outcome) and the cache sync.
   */
  private async writer(z: ZoneRow): Promise<Writer> {
    const base = await this.cache.client(z);
    const start = Date.now();
    const total = this.config.DNS_TIMEOUT_MS;
    return { early: base.withDeadline(start + Math.floor(total * 0.7)), late: base.withDeadline(start + total) };
  }

  /**
   * What the master has now at each name (every type, one pipelined ANY query per name) and at the
   * in-zone targets of MX/apex NS adds (A and AAAA): the facts the pre-checks decide on.
   */
  private async facts(z: ZoneRow, client: DnsMasterClient, names: string[], targets: string[]): Promise<Facts> {
    const uniqueNames = [...new Set(names)];
    const uniqueTargets = [...new Set(targets)];
    const questions = [
      ...uniqueNames.map((name) => ({ name, type: 'ANY' })),
      ...uniqueTargets.flatMap((name) => [
        { name, type: 'A' },
        { name, type: 'AAAA' },
      ]),
    ];
    let answers;
    try {
      answers = await client.queryMany(questions);
    } catch (err) {
      throw masterUnavailable(err, `zone ${z.zone}: the master DNS server could not be asked before the change, so nothing was sent`);
    }
    const at = new Map<string, DnsRecord[]>();
    uniqueNames.forEach((name, i) =>
      at.set(
        name,
        recordsAt(answers[i]!, name, 'ANY').filter((r) => !DNSSEC_TYPES.has(r.type)),
      ),
    );
    const addressed = new Set<string>();
    uniqueTargets.forEach((name, i) => {
      const base = uniqueNames.length + i * 2;
      if ([answers[base]!, answers[base + 1]!].some((a) => a.answers.some((r) => r.name === name && (r.type === 'A' || r.type === 'AAAA'))))
        addressed.add(name);
    });
    return { at: (name) => at.get(name) ?? [], addressed };
  }

  /**
   * The pre-checks of one add (or the add half of an update) against the master's data; null when
   * it may be sent. BIND acknowledges and then ignores data beside a CNAME (RFC 1034 §3.6.2), so
   * those are refused here with the types in the way; it REFUSES an MX or apex NS whose in-zone
   * target has no address, which is the caller's data, so that is a 400 naming the target.
   */
  private addProblem(z: ZoneRow, r: ValidRecord, facts: Facts, ctx: AddContext = {}): AppError | null {
    const conflict = cnameProblem(r, facts.at(r.name), ctx);
    if (conflict) return conflict;
    const target = inZoneTarget(z, r);
    if (target && !facts.addressed.has(target) && !ctx.addedAddresses?.has(target)) {
      const what = r.type === 'MX' ? 'an MX' : 'a zone apex NS';
      return validationFailed({
        [ctx.field ?? 'target']: [
          `${target} has no A or AAAA record in zone ${z.zone}; add its address first (the master refuses ${what} whose in-zone target has none)`,
        ],
      });
    }
    return null;
  }

  /**
   * One signed UPDATE, read back, and the touched cache rows made the master's. Unanswered (the
   * connection dropped after sending, or no answer in time): the read-back decides; a change it
   * shows in the zone is a success, anything else is `outcome_unknown`, never "not applied", since
   * a stopped master may still apply what it has received. A change the master acknowledged is a
   * success even when the read-back cannot be done (then `verified: false`).
   */
  private async send(
    z: ZoneRow,
    w: Writer,
    ops: UpdateOperation[],
    prereqs: Prerequisite[],
    pairs: Array<{ name: string; type: string }>,
    serialBefore?: Promise<number | null>,
  ): Promise<SendResult> {
    // The cache sync takes the zone row lock while the serial is read and the UPDATE is under way.
    const sync = this.cache.beginSync(z.id);
    try {
      const before = await (serialBefore ?? w.early.soaSerial(z.zone).catch(() => null));
      let result: SendResult = { verified: true };
      let synced = false;
      try {
        await w.early.update(z.zone, ops, prereqs);
        // After an acknowledged UPDATE the cache sync asks the master for the touched pairs and, in
        // the same pipelined exchange, the read-back's questions: one round of queries serves both
        // (the read-back asks on its own when the sync did not ask: no cache, or a failure).
        const readBack = await sync.finish(w.late, z.zone, pairs, before, readBackQuestions(ops));
        synced = true;
        try {
          const mismatches = readBack ? mismatchesIn(ops, readBack) : await w.late.verifyUpdate(ops);
          if (mismatches.length) throw new AppError('conflict', new UpdateNotAppliedError(mismatches).message);
        } catch (err) {
          if (err instanceof AppError) throw err;
          result = {
            verified: false,
            note: `The master acknowledged the change (NOERROR); reading it back failed: ${(err as Error).message}.`,
          };
        }
      } catch (err) {
        if (!(err instanceof DnsOutcomeUnknownError)) throw mapWriteError(err, ops);
        let mismatches;
        try {
          mismatches = await w.late.verifyUpdate(ops);
        } catch (again) {
          throw outcomeUnknown(err, `asking the master again failed too (${(again as Error).message})`);
        }
        if (mismatches.length) throw outcomeUnknown(err, 'a read-back right after does not show the change, but the master may still apply what it received');
        result = { verified: true, note: 'The master did not answer the UPDATE; a read-back shows the change in the zone.' };
      }
      if (!synced) await sync.finish(w.late, z.zone, pairs, before);
      return result;
    } finally {
      await sync.cancel();
    }
  }

  async add(body: { domain?: unknown; type?: unknown; target?: unknown; ttl?: unknown; zone: ZoneRow }) {
    const z = body.zone;
    const r = this.validate(z, body);
    let ttl = r.ttl ?? this.config.DNS_DEFAULT_TTL;
    let ttlNote = '';
    let sent: SendResult;
    if (z.provider) sent = await this.providers.add(z, r, ttl);
    else {
      const w = await this.writer(z);
      const target = inZoneTarget(z, r);
      const facts = await this.facts(z, w.early, [r.name], target ? [target] : []);
      const problem = this.addProblem(z, r, facts);
      if (problem) throw problem;
      // An RRset has one TTL (RFC 2181 §5.2): without `ttl` the add takes the RRset's own.
      const rrset = rrsetTtl(r, facts.at(r.name), this.config.DNS_DEFAULT_TTL);
      ttl = rrset.ttl;
      ttlNote = rrset.note;
      sent = await this.send(z, w, [{ op: 'add', name: r.name, type: r.type, ttl, rdata: r.data }], addPrereqs(r), [{ name: r.name, type: r.type }]);
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
    const r = this.validate(z, body, '', true);
    let sent: SendResult;
    if (z.provider) sent = await this.providers.delete(z, r);
    else {
      const w = await this.writer(z);
      const facts = await this.facts(z, w.early, [r.name], []);
      if (!facts.at(r.name).some((a) => a.type === r.type && a.rdata === r.rdata))
        throw new AppError('not_found', `${r.name} ${r.type} ${r.rdata} does not exist.`);
      sent = await this.send(z, w, [{ op: 'delete', name: r.name, type: r.type, rdata: r.data }], [], [{ name: r.name, type: r.type }]);
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
    const next = this.validate(z, { domain: body.domain, type: body.type, target: body.new_target, ttl: body.ttl });
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
    const w = await this.writer(z);
    const target = inZoneTarget(z, next);
    const facts = await this.facts(z, w.early, [next.name], target ? [target] : []);
    const current = facts.at(next.name).filter((a) => a.type === next.type);
    const problem = this.addProblem(z, next, facts, { replacing: true, field: 'new_target' });
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
    const sent = await this.send(z, w, ops, prereqs, [{ name: next.name, type: next.type }]);
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

  /**
   * 1..100 operations in ONE UPDATE message per zone (atomic on the master). The pre-checks are one
   * pipelined batch of queries per zone; operations that fail them are reported and left out. When
   * the master refuses the combined message (an RCODE) or its read-back disagrees, each remaining
   * operation is sent on its own so every result says what happened to it. A master that cannot be
   * reached, or an unanswered message, fails the whole request (503), never a per-operation guess.
   */
  async bulk(operations: WriteOp[], allowedZone: (z: ZoneRow) => void) {
    const errors: FieldError[] = [];
    const valid: Array<{ i: number; action: 'ADD' | 'DELETE'; r: ValidRecord; z: ZoneRow }> = [];
    await this.providers.directory.importLegacy(); // zones of the older provider config are registered on first use
    const zoneOf = await this.zones.zonesFor(operations.map((op) => (typeof op.domain === 'string' ? op.domain : '')));
    for (const [i, op] of operations.entries()) {
      const z = zoneOf[i];
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
      zones.set(z.id, await this.bind(z));
    }

    const results: OpResult[] = operations.map((_, i) => {
      const v = valid.find((x) => x.i === i)!;
      return { index: i, action: v.action, domain: v.r.name, type: v.r.type, target: v.r.rdata, ok: false };
    });
    let messages = 0;
    for (const z of zones.values()) {
      const mine = valid.filter((v) => v.z.id === z.id);
      if (z.provider) {
        messages += await this.providers.bulk(z, mine, results, this.config.DNS_DEFAULT_TTL);
        continue;
      }
      const w = await this.writer(z);
      const deletedTypes = new Map<string, Set<string>>();
      for (const v of mine) if (v.action === 'DELETE') (deletedTypes.get(v.r.name) ?? deletedTypes.set(v.r.name, new Set()).get(v.r.name)!).add(v.r.type);
      const addedAddresses = new Set(mine.filter((v) => v.action === 'ADD' && (v.r.type === 'A' || v.r.type === 'AAAA')).map((v) => v.r.name));
      const adds = mine.filter((v) => v.action === 'ADD');
      // The serial before the change (for the cache sync) is read while the pre-check reads run.
      const serialBefore = w.early.soaSerial(z.zone).catch(() => null);
      // An RRset has one TTL (RFC 2181 §5.2): each add takes the TTL its RRset ends up with, so the
      // RRsets the adds join are read first (the existing TTL, or the explicit one an add gives).
      const ttls = await this.bulkTtls(z, w, adds);
      const toOp = (v: (typeof mine)[number]): UpdateOperation =>
        v.action === 'ADD'
          ? { op: 'add', name: v.r.name, type: v.r.type, ttl: ttls.get(v.i)!.ttl, rdata: v.r.data }
          : { op: 'delete', name: v.r.name, type: v.r.type, rdata: v.r.data };
      const prereqOf = (v: (typeof mine)[number]): Prerequisite[] => (v.action === 'ADD' && !deletedTypes.has(v.r.name) ? addPrereqs(v.r) : []);
      const targets = adds.map((v) => inZoneTarget(z, v.r)).filter((t): t is string => t !== null);
      // The pre-checks against the master's data: the in-zone targets' addresses, and with
      // `names` what each added name holds now (for the CNAME rules).
      const preCheck = async (names: boolean) => {
        const facts = await this.facts(z, w.early, names ? adds.map((v) => v.r.name) : [], targets);
        const sendable: typeof mine = [];
        for (const v of mine) {
          if (v.action === 'ADD') {
            const problem = this.addProblem(z, v.r, facts, {
              deletedTypes: deletedTypes.get(v.r.name),
              addedAddresses,
              field: `operations.${v.i}.target`,
            });
            if (problem) {
              Object.assign(results[v.i]!, { ok: false, reason: problem.reason, message: problem.message });
              continue;
            }
          }
          sendable.push(v);
        }
        return sendable;
      };
      const sendAll = async (list: typeof mine) => {
        messages++;
        await this.send(
          z,
          w,
          list.map(toOp),
          list.flatMap(prereqOf),
          list.map((v) => ({ name: v.r.name, type: v.r.type })),
          serialBefore,
        );
        for (const v of list) Object.assign(results[v.i]!, { ok: true }, okNote(ttls.get(v.i)));
      };
      // Every add carries its CNAME rule as an UPDATE prerequisite, so when each add has one (no
      // add at a name the same bulk deletes from), the message goes out without reading what the
      // names hold: a conflict fails the whole message with nothing changed, and only then are
      // those pre-checks read to say which operations are in the way. Only the addresses of
      // in-zone MX / apex NS targets are read first (the master would refuse the whole message).
      const optimistic = adds.every((v) => !deletedTypes.has(v.r.name));
      let sendable = optimistic && !targets.length ? mine : await preCheck(!optimistic);
      if (!sendable.length) continue;
      try {
        try {
          await sendAll(sendable);
        } catch (err) {
          // A failed prerequisite (or a read-back showing an add ignored): the pre-checks say which.
          // Anything else the master refused goes one operation at a time below.
          if (!optimistic || !(err instanceof AppError && (err.reason === 'cname_conflict' || err.reason === 'conflict'))) throw err;
          sendable = await preCheck(true);
          if (!sendable.length) continue;
          await sendAll(sendable);
        }
      } catch (err) {
        if (!isPerOperation(err)) throw err;
        // One at a time, each with a budget of its own: the combined message was refused as a whole.
        for (const v of sendable) {
          try {
            messages++;
            await this.send(z, await this.writer(z), [toOp(v)], prereqOf(v), [{ name: v.r.name, type: v.r.type }]);
            Object.assign(results[v.i]!, { ok: true }, okNote(ttls.get(v.i)));
          } catch (e) {
            if (!isPerOperation(e)) throw e;
            const a = e instanceof AppError ? e : mapWriteError(e, [toOp(v)]);
            Object.assign(results[v.i]!, { ok: false, reason: a.reason, message: a.message });
          }
        }
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

  /**
   * The TTL of each bulk add (by operation index): the explicit `ttl`, else the one another add of
   * the same bulk gives that RRset, else the RRset's TTL on the master, else DNS_DEFAULT_TTL (a new
   * RRset). One pipelined query per added name; with a note where an explicit TTL changes an
   * existing RRset's.
   */
  private async bulkTtls(z: ZoneRow, w: Writer, adds: Array<{ i: number; r: ValidRecord }>): Promise<Map<number, RrsetTtl>> {
    const out = new Map<number, RrsetTtl>();
    if (!adds.length) return out;
    const facts = await this.facts(
      z,
      w.early,
      adds.map((v) => v.r.name),
      [],
    );
    const given = new Map<string, number>();
    for (const v of adds) if (v.r.ttl !== undefined) given.set(`${v.r.name} ${v.r.type}`, v.r.ttl);
    for (const v of adds) {
      const explicit = v.r.ttl ?? given.get(`${v.r.name} ${v.r.type}`);
      out.set(v.i, rrsetTtl({ ...v.r, ttl: explicit }, facts.at(v.r.name), this.config.DNS_DEFAULT_TTL));
    }
    return out;
  }

  // ---- ACME DNS-01 ----------------------------------------------------------------------------

  async acmePresent(domain: string, value: string, ttl: number | undefined, z: ZoneRow) {
    const owner = acmeOwner(domain);
    const t = ttl ?? this.config.DNS_ACME_TTL;
    const r = this.validate(z, { domain: owner, type: 'TXT', target: txtOf(value), ttl: t });
    let sent: SendResult;
    if (z.provider) sent = await this.providers.add(z, r, t);
    else {
      const w = await this.writer(z);
      const problem = this.addProblem(z, r, await this.facts(z, w.early, [owner], []));
      if (problem) throw problem;
      sent = await this.send(z, w, [{ op: 'add', name: owner, type: 'TXT', ttl: t, rdata: r.data }], addPrereqs(r), [{ name: owner, type: 'TXT' }]);
    }
    return {
      ok: true as const,
      message: `Challenge published at ${owner}.${sent.note ? ` ${sent.note}` : ''}`,
      owner,
      fqdn: `${owner}.`,
      zone: z.zone,
      value,
      challenge: value,
      ttl: t,
      verified: sent.verified,
    };
  }

  async acmeCleanup(domain: string, value: string, z: ZoneRow) {
    const owner = acmeOwner(domain);
    const r = this.validate(z, { domain: owner, type: 'TXT', target: txtOf(value) }, '', true);
    let present: boolean;
    let sent: SendResult | null = null;
    if (z.provider) {
      present = (await this.providers.txtAt(z, owner)).some((a) => a.rdata === r.rdata);
      if (present) sent = await this.providers.delete(z, r);
    } else {
      const w = await this.writer(z);
      present = (await this.facts(z, w.early, [owner], [])).at(owner).some((a) => a.type === 'TXT' && a.rdata === r.rdata);
      if (present) sent = await this.send(z, w, [{ op: 'delete', name: owner, type: 'TXT', rdata: r.data }], [], [{ name: owner, type: 'TXT' }]);
    }
    return {
      ok: true as const,
      message: present ? `Challenge removed from ${owner}.${sent?.note ? ` ${sent.note}` : ''}` : `No such challenge at ${owner}; nothing to remove.`,
      owner,
      fqdn: `${owner}.`,
      zone: z.zone,
      value,
      challenge: value,
      removed: present,
      verified: sent?.verified ?? true,
    };
  }

  /** Removes every `_acme-challenge` TXT value at the owner except `keep`. */
  async acmeCleanupStale(domain: string, opts: { keep?: string[]; dryRun?: boolean; refreshZoneCache?: boolean }, z: ZoneRow) {
    const owner = acmeOwner(domain);
    const w = z.provider ? null : await this.writer(z);
    const keepRdata = new Set((opts.keep ?? []).map((k) => txtOf(k)));
    const rows = w ? (await this.facts(z, w.early, [owner], [])).at(owner).filter((a) => a.type === 'TXT') : await this.providers.txtAt(z, owner);
    const value = (rdata: string) => rdata.replace(/^"|"$/g, '').replace(/\\(.)/g, '$1');
    const removed = rows.filter((r) => !keepRdata.has(r.rdata)).map((r) => value(r.rdata));
    const kept = rows.filter((r) => keepRdata.has(r.rdata)).map((r) => value(r.rdata));
    const errors: string[] = [];
    const dryRun = opts.dryRun === true;
    if (!dryRun && removed.length) {
      try {
        const ops = rows.filter((r) => !keepRdata.has(r.rdata)).map((r): UpdateOperation => ({ op: 'delete', name: owner, type: 'TXT', rdata: r.rdata }));
        if (w) await this.send(z, w, ops, [], [{ name: owner, type: 'TXT' }]);
        else
          await this.providers.deleteTxt(
            z,
            owner,
            rows.filter((r) => !keepRdata.has(r.rdata)).map((r) => r.rdata),
          );
      } catch (err) {
        // Unreachable or unanswered: the request fails as a whole (503), it is not a per-value error.
        if (!isPerOperation(err)) throw err;
        errors.push((err as Error).message);
      }
    }
    if (!dryRun && opts.refreshZoneCache) {
      try {
        if (z.provider) await this.providers.refresh(z);
        else await this.cache.refresh(z);
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

interface Writer {
  /** Pre-checks and the UPDATE. */
  early: DnsMasterClient;
  /** Read-back and cache sync. */
  late: DnsMasterClient;
}

interface Facts {
  /** The master's records at a name (DNSSEC types left out). */
  at: (name: string) => DnsRecord[];
  /** Asked-about targets that have an A or AAAA record. */
  addressed: Set<string>;
}

interface AddContext extends CnameContext {
  /** Names the same bulk gives an A/AAAA. */
  addedAddresses?: Set<string>;
  /** The field a 400 names. */
  field?: string;
}

interface SendResult {
  /** The change was read back from the master. */
  verified: boolean;
  note?: string;
}

const DNSSEC_TYPES = new Set(['RRSIG', 'NSEC', 'NSEC3', 'NSEC3PARAM', 'DNSKEY', 'CDS', 'CDNSKEY', 'TYPE65534']);

/** The in-zone target an MX, or an NS at the zone apex, points at (BIND refuses the add when it has no address), else null. */
function inZoneTarget(z: ZoneRow, r: ValidRecord): string | null {
  let target: string | null = null;
  if (r.data.type === 'MX') target = r.data.exchange;
  else if (r.data.type === 'NS' && r.name === z.zone) target = r.data.target;
  if (!target) return null;
  const t = normalizeName(target);
  return t !== '' && isInZone(t, z.zone) ? t : null;
}

interface RrsetTtl {
  ttl: number;
  /** Empty, or a sentence saying the add changed the TTL of the records already in the RRset. */
  note: string;
}

/**
 * The TTL an add sends (RFC 2181 §5.2: an RRset has one TTL, and the master applies an add's TTL to
 * the whole RRset): the explicit one, else the RRset's existing TTL, else `defaultTtl` (a new RRset).
 */
function rrsetTtl(r: Pick<ValidRecord, 'name' | 'type' | 'ttl'>, at: DnsRecord[], defaultTtl: number): RrsetTtl {
  const existing = at.filter((a) => a.type === r.type);
  const had = existing[0]?.ttl;
  const ttl = r.ttl ?? had ?? defaultTtl;
  if (had === undefined || had === ttl) return { ttl, note: '' };
  return {
    ttl,
    note: ` An RRset has one TTL (RFC 2181): the ${existing.length} record(s) already in ${r.name} ${r.type} now have TTL ${ttl} too (was ${had}).`,
  };
}

/** A bulk result's note about the RRset's TTL, when the add changed it. */
function okNote(t: RrsetTtl | undefined): { message?: string } {
  return t?.note ? { message: t.note.trim() } : {};
}

/** Prerequisites that make the master refuse (instead of silently ignore) an add that raced a conflicting one. */
function addPrereqs(r: ValidRecord): Prerequisite[] {
  return r.type === 'CNAME' ? [{ require: 'nameNotInUse', name: r.name }] : [noCname(r.name)];
}

/** A failure that concerns one operation (the bulk then tries each on its own), not an unreachable master or an unknown outcome. */
function isPerOperation(err: unknown): boolean {
  if (err instanceof AppError) return err.reason !== 'outcome_unknown' && !(err.reason === 'service_unavailable' && err.details.headers !== undefined);
  return err instanceof DnsRcodeError || err instanceof UpdateNotAppliedError || err instanceof InvalidUpdateError;
}

/** Master answers → documented reasons. */
function mapWriteError(err: unknown, ops: UpdateOperation[]): AppError {
  if (err instanceof AppError) return err;
  if (err instanceof InvalidUpdateError) return validationFailed(fieldErrorsToRecord(err.errors));
  if (err instanceof DnsRcodeError && err.prerequisiteFailed) {
    const add = ops.find((o) => o.op === 'add');
    if ((err.code === 'YXRRSET' || err.code === 'YXDOMAIN') && add)
      return new AppError(
        'cname_conflict',
        add.type === 'CNAME'
          ? `${add.name} got other data concurrently; a CNAME cannot coexist with it. Nothing was changed.`
          : `${add.name} has a CNAME (added concurrently); remove that CNAME first. Nothing was changed.`,
      );
    return new AppError('conflict', `The zone changed concurrently: ${err.message}. Nothing was changed.`);
  }
  if (err instanceof UpdateNotAppliedError) return new AppError('conflict', err.message);
  const dataRefused = refusedForData(err, ops);
  if (dataRefused) return validationFailed({ domain: [dataRefused] });
  if (err instanceof DnsConnectionError || err instanceof DnsTimeoutError)
    return masterUnavailable(err, 'The master DNS server could not be reached, so the change was not sent');
  return masterUnavailable(err, 'The master DNS server refused the change');
}
