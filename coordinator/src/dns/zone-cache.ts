/**
 * Row-based zone cache in PostgreSQL: one row per record plus per-zone state (SOA serial, time).
 * A refresh asks the master for the SOA serial first and transfers the zone only when the serial
 * differs from the cached one (so changes made outside the API, e.g. by nsupdate, are noticed);
 * writes through the API replace only the rows of the name/type pairs they touched (write-sync.ts).
 * Its SQL is in cache-repository.ts (state, pages, searches) and cache-loader-repository.ts (the
 * full replace by a transfer).
 */
import { createHash } from 'node:crypto';
import { isIPv4, isIPv6 } from 'node:net';
import type { Knex } from '@mikro-orm/postgresql';
import { escapeLike } from '../db/like.js';
import { AppError } from '../http/errors.js';
import { DnsError, DnsMasterClient, normalizeName, readZoneFile, type DnsRecord } from './wire/index.js';
import { masterUnavailable } from './master-errors.js';
import { compareRecords, sortKey, type RowKey } from './cache-order.js';
import { CacheRows, cacheStateOf, clearCache, dropDetachedPartition, stateOf, type CacheState } from './cache-repository.js';
import { loadByTransfer, type TransferRows } from './cache-loader-repository.js';
import { WriteSync } from './write-sync.js';
import { loadKey, withStateOfRow, type ZoneRow, type ZoneWithState } from './zone-registry.js';

/** Every ANCHOR_STEP-th row's key is kept per zone and generation: a deep page walks at most this many index entries. */
const ANCHOR_STEP = 1000;
/** Zones whose anchors a coordinator keeps (the most recently used). */
const ANCHOR_ZONES = 64;
/** How the next page of a zone read before is read with its zone row (foldedRead). */
interface FoldPlan {
  zoneId: number;
  generation: string;
  after: RowKey | null;
  skip: number;
}

export interface Page {
  rows: DnsRecord[];
  recordCount: number;
  page: number;
  perPage: number;
  hasMore: boolean;
}

/** Hash of the visible rows plus the paging state: changes exactly when the rendered page would. */
export function displaySignature(p: Page): string {
  const h = createHash('sha256');
  h.update(JSON.stringify([p.page, p.perPage, p.recordCount, p.hasMore]));
  for (const r of p.rows) h.update(`\n${r.name}\t${r.ttl}\t${r.class}\t${r.type}\t${r.rdata}`);
  return h.digest('hex');
}

export type SearchMode = 'ip' | 'type' | 'name' | 'data';

const TYPES = new Set(['A', 'AAAA', 'CNAME', 'NS', 'TXT', 'MX', 'SRV', 'CAA', 'PTR', 'SOA', 'DNAME', 'SPF']);

/** Detects what `q` is: an address (or address prefix), a record type, a name fragment, or record data. `mode:` prefixes force one. */
export function detectSearch(q: string): { mode: SearchMode; term: string } {
  const t = q.trim();
  const forced = /^(ip|type|name|data):(.*)$/i.exec(t);
  if (forced) return { mode: forced[1]!.toLowerCase() as SearchMode, term: forced[2]!.trim() };
  // Addresses and address prefixes: `10.1`, `10.1.2.`, `2001:db8`, `2001:db8::`, `fe80:`.
  if (isIPv4(t) || isIPv6(t) || /^\d{1,3}(\.\d{1,3}){1,2}\.?$/.test(t) || /^[0-9a-f]{1,4}(:[0-9a-f]{0,4}){1,7}:?$/i.test(t))
    return { mode: 'ip', term: t.toLowerCase() };
  if (TYPES.has(t.toUpperCase()) && /^[A-Za-z]+$/.test(t)) return { mode: 'type', term: t.toUpperCase() };
  if (/^[A-Za-z0-9_*.-]+$/.test(t)) return { mode: 'name', term: normalizeName(t) || t.toLowerCase() };
  return { mode: 'data', term: t };
}

export class ZoneCache {
  constructor(
    private readonly knex: () => Knex,
    private readonly timeoutMs: number,
  ) {}

  /** Per zone: the generation the anchors were read at and the keys of rows ANCHOR_STEP-1, 2·ANCHOR_STEP-1, … */
  private readonly anchors = new Map<number, { generation: string; keys: Promise<RowKey[]>; settled?: RowKey[] }>();
  /** Per zone name (normalised): the zone id, cache generation and record count its last page read saw (the most recent ANCHOR_ZONES). */
  private readonly seen = new Map<string, { zoneId: number; generation: string; recordCount: number }>();
  /** Background drops of replaced partitions (dropDetached). */
  private readonly drops = new Set<Promise<void>>();

  async client(z: ZoneRow): Promise<DnsMasterClient> {
    return new DnsMasterClient({ server: z.server, port: z.port, key: await loadKey(z), timeoutMs: this.timeoutMs });
  }

  async state(zoneId: number): Promise<CacheState | null> {
    return cacheStateOf(this.knex(), zoneId);
  }

  /**
   * The refresh path (`/axfr`, `method=axfr`, and a cache miss): SOA serial first; a transfer only
   * when it differs from the cached serial (or `force`). Returns whether rows were replaced.
   */
  async refresh(z: ZoneRow, opts: { force?: boolean } = {}): Promise<{ transferred: boolean; serial: number; state: CacheState }> {
    const client = await this.client(z);
    // The cached state and the master's serial are asked at the same time (the serial is only
    // used, and its failure only reported, when there is a cache to compare it with).
    const [current, soa] = await Promise.all([
      this.state(z.id),
      opts.force
        ? null
        : client.soaSerial(z.zone).then(
            (serial) => ({ serial }),
            (error: unknown) => ({ error }),
          ),
    ]);
    if (current && soa) {
      const serial = 'error' in soa ? upstream(soa.error, z) : soa.serial;
      if (serial === current.serial) {
        const touched = await CacheRows.touch.first(this.knex(), { zoneId: z.id });
        return { transferred: false, serial, state: touched ? stateOf(touched) : current };
      }
    }
    const state = await this.replaceByTransfer(z.id, (rows) => client.axfrWire(z.zone, (msg, records, count) => rows.wire(msg, records, count))).catch(
      (e: unknown) => (e instanceof DnsError ? upstream(e, z) : Promise.reject(e as Error)),
    );
    return { transferred: true, serial: state.serial, state };
  }

  /**
   * A full replace fed by a running zone transfer (cache-loader-repository.ts), then the drop of
   * the partition it replaced, in the background. Returns the cache state it wrote.
   */
  async replaceByTransfer(zoneId: number, transfer: (rows: TransferRows) => Promise<{ serial: number }>): Promise<CacheState> {
    const state = await loadByTransfer(this.knex(), zoneId, transfer);
    this.dropDetached(Math.trunc(zoneId));
    return state;
  }

  /** Drops, in the background, the partition a refresh replaced; a failure leaves it to the zone's next refresh, clear or removal. */
  private dropDetached(zoneId: number): void {
    const drop: Promise<void> = dropDetachedPartition(this.knex(), zoneId)
      .then(
        () => undefined,
        () => undefined,
      )
      .finally(() => this.drops.delete(drop));
    this.drops.add(drop);
  }

  /** Resolves when the background drops started so far are over (tests, the bench, shutdown). */
  async settled(): Promise<void> {
    await Promise.all([...this.drops]);
  }

  /**
   * The cache sync of one write, opened before its UPDATE goes out: a connection of its own takes
   * the zone row lock (FOR UPDATE, the lock a full replace takes too) while the UPDATE is on its
   * way, so the sync after it costs the master's answers and one PostgreSQL round trip. WriteSync
   * says what the sync does; `finish` or `cancel` must follow (both never throw).
   */
  beginSync(zoneId: number): WriteSync {
    return new WriteSync(this.knex(), zoneId, () => this.markStale(zoneId));
  }

  /**
   * A provider zone's write: the rows of the touched name/type pairs become `rows` (the provider's
   * read-back), under the same zone row lock and with the same exact count arithmetic as a
   * write's sync. Never fails the write it follows: on an error the cache is marked stale.
   */
  async replacePairs(zoneId: number, pairs: Array<{ name: string; type: string }>, rows: DnsRecord[]): Promise<void> {
    await this.beginSync(zoneId).replace(pairs, rows);
  }

  /** The next read transfers (or fetches) the zone again. */
  async markStale(zoneId: number): Promise<void> {
    await CacheRows.markStale.run(this.knex(), { zoneId }).catch(() => undefined);
  }

  async clear(zoneId: number): Promise<void> {
    await clearCache(this.knex(), zoneId);
  }

  /**
   * One page in cache order. The documented contract is page numbers, so deep pages are found by
   * keyset from the nearest anchor (the key of every 1,000th row, kept per zone and cache
   * generation) plus an OFFSET of less than 1,000 index entries: page 1,000 of a 100,000-row zone
   * costs what page 10 does. Anchors are read once per generation (one index-only scan) and only
   * when a page beyond the first anchor is asked for. `record_count` comes from the cache state (no count).
   */
  async page(zoneId: number, state: CacheState, page: number, perPage: number, zone?: string): Promise<Page> {
    if (zone !== undefined) this.remember(zone, zoneId, state);
    const recordCount = state.recordCount;
    const offset = (page - 1) * perPage;
    let after: RowKey | null = null;
    let skip = offset;
    if (offset >= ANCHOR_STEP && offset < recordCount) {
      const keys = await this.anchorKeys(zoneId, state.generation);
      const i = Math.min(Math.floor(offset / ANCHOR_STEP), keys.length) - 1;
      if (i >= 0) {
        after = keys[i]!;
        skip = offset - (i + 1) * ANCHOR_STEP;
      }
    }
    const params = { zoneId, limit: perPage, skip };
    const found = after
      ? await CacheRows.pageAfter.rows(this.knex(), { ...params, a_key: after[0], a_rank: after[1], a_type: after[2], a_rdata: after[3], a_id: after[4] })
      : await CacheRows.page.rows(this.knex(), params);
    const rows = found.map((r) => ({ name: sortKey(r.sort_key), ttl: Number(r.ttl), class: r.class, type: r.type, rdata: r.rdata }));
    return { rows, recordCount, page, perPage, hasMore: page * perPage < recordCount };
  }

  private remember(zone: string, zoneId: number, state: CacheState) {
    const key = normalizeName(zone);
    const held = this.seen.get(key);
    if (held?.zoneId === zoneId && held.generation === state.generation) return;
    this.seen.delete(key);
    this.seen.set(key, { zoneId, generation: state.generation, recordCount: state.recordCount });
    while (this.seen.size > ANCHOR_ZONES) this.seen.delete(this.seen.keys().next().value!);
  }

  /**
   * How page(zone, …) would read this page if the zone is still what its last page read saw:
   * null when no page of the zone was read, or when the page needs anchors not yet read.
   */
  private foldPlan(zone: string, page: number, perPage: number): FoldPlan | null {
    const seen = this.seen.get(zone);
    if (!seen) return null;
    const offset = (page - 1) * perPage;
    if (offset < ANCHOR_STEP || offset >= seen.recordCount) return { zoneId: seen.zoneId, generation: seen.generation, after: null, skip: offset };
    const anchors = this.anchors.get(seen.zoneId);
    if (anchors?.generation !== seen.generation || !anchors.settled) return null;
    const i = Math.min(Math.floor(offset / ANCHOR_STEP), anchors.settled.length) - 1;
    if (i < 0) return { zoneId: seen.zoneId, generation: seen.generation, after: null, skip: offset };
    return { zoneId: seen.zoneId, generation: seen.generation, after: anchors.settled[i]!, skip: offset - (i + 1) * ANCHOR_STEP };
  }

  /**
   * ZoneRegistry.getWithState with, when the zone's last page read tells how, the page's rows
   * read in the same statement (`page` null otherwise, or when the zone's id or cache generation
   * changed since: read it with page()). Null when the zone is not registered.
   */
  async foldedRead(zone: string, page: number, perPage: number): Promise<(ZoneWithState & { page: Page | null }) | null> {
    const name = normalizeName(zone);
    const plan = this.foldPlan(name, page, perPage);
    if (!plan) {
      const r = await CacheRows.zoneWithState.first(this.knex(), { zone: name });
      return r ? { ...withStateOfRow(r), page: null } : null;
    }
    const params = { zone: name, zone_id: plan.zoneId, generation: plan.generation, limit: perPage, skip: plan.skip };
    const a = plan.after;
    const r = a
      ? await CacheRows.foldedPageAnchored.first(this.knex(), { ...params, a_key: a[0], a_rank: a[1], a_type: a[2], a_rdata: a[3], a_id: a[4] })
      : await CacheRows.foldedPage.first(this.knex(), params);
    if (!r) return null;
    const found = withStateOfRow(r);
    if (!r.page_rows || !found.state) return { ...found, page: null };
    const recordCount = found.state.recordCount;
    const rows = r.page_rows.map(([key, ttl, cls, type, rdata]) => ({ name: sortKey(key), ttl: Number(ttl), class: cls, type, rdata }));
    return { ...found, page: { rows, recordCount, page, perPage, hasMore: page * perPage < recordCount } };
  }

  private anchorKeys(zoneId: number, generation: string): Promise<RowKey[]> {
    const held = this.anchors.get(zoneId);
    if (held?.generation === generation) {
      // Most recently used last (a Map keeps insertion order).
      this.anchors.delete(zoneId);
      this.anchors.set(zoneId, held);
      return held.keys;
    }
    const keys = CacheRows.anchors
      .rows(this.knex(), { zoneId, step: ANCHOR_STEP })
      .then((rows) => rows.map((r): RowKey => [r.sort_key, Number(r.type_rank), r.type, r.rdata, String(r.id)]));
    const entry: { generation: string; keys: Promise<RowKey[]>; settled?: RowKey[] } = { generation, keys };
    // Read once settled, so that foldPlan can use them without waiting.
    keys.then(
      (k) => (entry.settled = k),
      () => undefined,
    );
    // A failed read is not kept: the next page read tries again.
    keys.catch(() => {
      if (this.anchors.get(zoneId)?.keys === keys) this.anchors.delete(zoneId);
    });
    this.anchors.delete(zoneId);
    this.anchors.set(zoneId, entry);
    while (this.anchors.size > ANCHOR_ZONES) this.anchors.delete(this.anchors.keys().next().value!);
    return keys;
  }

  async search(zoneId: number, mode: SearchMode, term: string, page: number, perPage: number): Promise<Page> {
    const params = { zoneId, term, prefix: `${escapeLike(term)}%`, like: `%${escapeLike(term)}%` };
    const statements = CacheRows.search[mode];
    const rows = await statements.rows.rows(this.knex(), { ...params, limit: perPage, offset: (page - 1) * perPage });
    let total = rows[0] ? Number(rows[0].total) : 0;
    if (!rows.length && page > 1) total = Number((await statements.count.first(this.knex(), params))!.n);
    const out = rows.map(({ total: _t, ...r }) => ({ ...r, ttl: Number(r.ttl) }));
    return { rows: out, recordCount: total, page, perPage, hasMore: page * perPage < total };
  }

  /** `method=file`: the zone file (with its journal applied) in cache order. */
  async fromFile(z: ZoneRow, page: number, perPage: number): Promise<Page> {
    if (z.filePath === null) throw new AppError('required_paths_missing_or_unreadable', `zone ${z.zone} has no zone file here (a provider zone)`);
    const all = (await readZoneFile(z.zone, z.filePath, { journal: true }).catch((e: unknown) => upstream(e, z))).sort(compareRecords);
    const rows = all.slice((page - 1) * perPage, page * perPage);
    return { rows, recordCount: all.length, page, perPage, hasMore: page * perPage < all.length };
  }
}

/** Master unreachable or refusing: a 503 naming the zone (never a stack). */
function upstream(err: unknown, z: ZoneRow): never {
  throw masterUnavailable(err, `zone ${z.zone}: master ${z.server}:${z.port}`);
}
