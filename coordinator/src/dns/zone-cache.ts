/**
 * Row-based zone cache in PostgreSQL: one row per record plus per-zone state (SOA serial, time).
 * A refresh asks the master for the SOA serial first and transfers the zone only when the serial
 * differs from the cached one (so changes made outside the API, e.g. by nsupdate, are noticed);
 * writes through the API replace only the rows of the name/type pairs they touched.
 */
import { createHash } from 'node:crypto';
import { finished } from 'node:stream/promises';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { isIPv4, isIPv6 } from 'node:net';
import type { Knex } from '@mikro-orm/postgresql';
import { escapeLike } from '../db/like.js';
import { AppError } from '../http/errors.js';
import { DnsError, DnsMasterClient, normalizeName, readZoneFile, recordsAt, type DnsRecord, type QueryResult } from './wire/index.js';
import { CACHE_COPY_COLUMNS, CacheRowWriter } from './cache-rows.js';
import { masterUnavailable } from './master-errors.js';
import { sql } from '../db/sql.js';
import {
  cacheEmptied,
  detachedPartitionOf,
  loadKey,
  partitionOf,
  WITH_STATE_COLUMNS,
  WITH_STATE_FROM,
  withStateOfRow,
  type ZoneRow,
  type ZoneWithState,
} from './zone-registry.js';

const { escapeLiteral } = pg;

/** The columns of dns_zone_cache_state a CacheState is made of, and the row they come in. */
const STATE_COLUMNS = 'serial, record_count, cached_at, generation';
interface StateRow {
  serial: string;
  record_count: number;
  cached_at: Date;
  generation: string;
}
const stateOf = (r: StateRow): CacheState => ({
  serial: Number(r.serial),
  recordCount: Number(r.record_count),
  cachedAt: new Date(r.cached_at),
  generation: String(r.generation),
});

export interface CacheState {
  serial: number;
  recordCount: number;
  cachedAt: Date;
  /** Changes whenever the zone's cached rows change (migration 0020): what page anchors are valid for. */
  generation: string;
}

/** Where a refresh's transfer puts the zone's records: as records, or as a transfer message's parsed records. */
export interface TransferRows {
  records(records: DnsRecord[]): void;
  /** The first `count` records of a transfer message's RecordTable fields (wire/message.ts). */
  wire(msg: Buffer, records: Uint32Array, count: number): void;
}

/** The ordering key of a cached row (the columns of index dns_record_cache_order after zone_id). */
type RowKey = [sortKey: string, typeRank: number, type: string, rdata: string, id: string];

/** Every ANCHOR_STEP-th row's key is kept per zone and generation: a deep page walks at most this many index entries. */
const ANCHOR_STEP = 1000;
/** Zones whose anchors a coordinator keeps (the most recently used). */
const ANCHOR_ZONES = 64;
const ORDER = 'sort_key, type_rank, type, rdata, id';
/** The columns of dns_record_cache as migration 0022 makes them (a partition must have exactly these). */
const CACHE_COLUMNS = `id bigint not null default nextval('dns_record_cache_id_seq'), zone_id integer not null, sort_key text collate "C" not null,
  type_rank smallint not null, name text not null, type varchar(16) not null, class varchar(8) not null default 'IN', ttl integer not null,
  rdata text collate "C" not null`;

/**
 * A zone's row, cache state and mapping (ZoneRegistry.getWithState) with one page of its cached
 * rows, in one statement: the page of a zone read before, planned from what that read saw (zone id,
 * cache generation, anchor). The rows come only while the zone still has that id and generation
 * (null otherwise, and the page is read on its own): a page planned for an older generation is
 * never answered. Named prepared statements, one without an anchor and one from an anchor.
 */
const foldedPage = (anchored: boolean, name: string) =>
  sql<
    { zone: string; zone_id: number; generation: string; limit: number; skip: number } & Partial<
      Record<'a_key' | 'a_rank' | 'a_type' | 'a_rdata' | 'a_id', unknown>
    >,
    Record<string, unknown> & { page_rows: Array<[sortKey: string, ttl: number, cls: string, type: string, rdata: string]> | null }
  >(
    `select ${WITH_STATE_COLUMNS},
            case when z.id = :zone_id and s.generation::text = :generation then
              (select coalesce(json_agg(json_build_array(p.sort_key, p.ttl, p.class, p.type, p.rdata) order by ${ORDER}), '[]'::json)
                 from (select ${ORDER}, ttl, class from dns_record_cache where zone_id = :zone_id${
                   anchored ? ` and (${ORDER}) > (:a_key::text, :a_rank::smallint, :a_type::varchar, :a_rdata::text, :a_id::bigint)` : ''
                 }
                        order by ${ORDER} limit :limit offset :skip) p)
            end as page_rows
       ${WITH_STATE_FROM} where z.zone = :zone`,
    name,
  );
const FOLDED_PAGE = foldedPage(false, 'dns_zone_folded_page');
const FOLDED_PAGE_ANCHORED = foldedPage(true, 'dns_zone_folded_page_anchored');

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

/**
 * Owner labels reversed: canonical DNS order with the apex first. Its own inverse: the sort key of
 * a sort key is the name. (A loop, not split/reverse/join: a refresh computes 100,000 of them.)
 */
export function sortKey(name: string): string {
  const n = normalizeName(name);
  let end = n.length;
  let out = '';
  for (let i = end - 1; i >= 0; i--) {
    if (n.charCodeAt(i) !== 46) continue;
    out += `${n.slice(i + 1, end)}.`;
    end = i;
  }
  return out + n.slice(0, end);
}
export const typeRank = (type: string) => (type === 'SOA' ? 0 : type === 'NS' ? 1 : 2);

export function compareRecords(a: DnsRecord, b: DnsRecord): number {
  const k = (r: DnsRecord) => [sortKey(r.name), typeRank(r.type), r.type, r.rdata] as const;
  const x = k(a);
  const y = k(b);
  for (let i = 0; i < x.length; i++) {
    if (x[i]! < y[i]!) return -1;
    if (x[i]! > y[i]!) return 1;
  }
  return 0;
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
    const res = await this.knex().raw<{ rows: Array<StateRow & { emptied: boolean }> }>(
      `select ${STATE_COLUMNS}, ${cacheEmptied('s')} as emptied from dns_zone_cache_state s where zone_id = ?`,
      [zoneId],
    );
    const r = res.rows[0];
    return r && !r.emptied ? stateOf(r) : null;
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
        const res = await this.knex().raw<{ rows: StateRow[] }>(
          `update dns_zone_cache_state set cached_at = now() where zone_id = ? returning ${STATE_COLUMNS}`,
          [z.id],
        );
        return { transferred: false, serial, state: res.rows[0] ? stateOf(res.rows[0]) : current };
      }
    }
    const state = await this.replaceByTransfer(z.id, (rows) => client.axfrWire(z.zone, (msg, records, count) => rows.wire(msg, records, count))).catch(
      (e: unknown) => (e instanceof DnsError ? upstream(e, z) : Promise.reject(e as Error)),
    );
    return { transferred: true, serial: state.serial, state };
  }

  /**
   * A full replace fed by a running zone transfer, in one transaction on one connection: the
   * transferred records are streamed into PostgreSQL's COPY (pg-copy-streams) while the transfer
   * goes on, into a new unlogged table created in the same transaction (so COPY FREEZE writes the
   * rows already visible to everyone and index-only scans work at once; migration 0022 says why
   * unlogged), with its one index. The table then replaces the zone's partition of
   * dns_record_cache (migration 0022): the old partition is detached (and dropped after the commit)
   * and the new one attached, which holds the parent's lock only for those last statements. A
   * failed transfer rolls everything back. Takes the zone row lock first, as the write sync does, so
   * writes wait for the swap. Returns the cache state it wrote.
   */
  async replaceByTransfer(zoneId: number, transfer: (rows: TransferRows) => Promise<{ serial: number }>): Promise<CacheState> {
    const pool = this.pool();
    const conn = await pool.acquireConnection();
    const id = Math.trunc(zoneId);
    const part = partitionOf(id);
    const detached = detachedPartitionOf(id);
    const load = `dns_record_cache_load_${id}`;
    try {
      // The simple query protocol takes several statements in one round trip (every value here is
      // an integer of ours). First the zone row lock, awaited: a write holding it (WriteSync)
      // finishes before the transfer starts, so nothing piles up in memory meanwhile.
      await conn.query(
        [
          'begin',
          // Derived data: a commit lost in a crash loses nothing the next transfer does not bring back.
          'set local synchronous_commit to off',
          `select z.id from dns_zones z left join dns_zone_cache_state s on s.zone_id = z.id where z.id = ${id} for update of z`,
        ].join(';\n'),
      );
      // Then the load table, sent together with the COPY while the transfer starts: its first rows
      // wait in the COPY stream until PostgreSQL is ready for them.
      const prologue = conn.query(
        [
          // Its columns spelled out, not LIKE dns_record_cache: LIKE would hold a share lock on
          // the parent until commit, and two refreshes each holding one while asking for the
          // exclusive lock of the swap deadlock.
          `create unlogged table ${load} (${CACHE_COLUMNS})`,
          // The partition bound as a constraint: ATTACH PARTITION then skips its scan of the rows.
          `alter table ${load} add constraint ${load}_zone check (zone_id = ${id})`,
          // The index exists before the rows come: a transfer sends names in canonical DNS order,
          // which is this index's order (only one name's records may come in another order, onto
          // the same page), so each row is added at the right edge of the tree while the transfer
          // goes on, instead of sorting everything after it.
          `create index ${load}_order on ${load} (${ORDER}) include (zone_id, ttl, class)`,
        ].join(';\n'),
      );
      const copy = conn.query(copyFrom(`copy ${load} (${CACHE_COPY_COLUMNS}) from stdin with (freeze)`));
      const done = finished(copy);
      // A failed prologue (its error is the cause) or COPY stops the transfer at its next message.
      let failure: unknown = null;
      prologue.catch((e: unknown) => (failure = e));
      done.catch((e: unknown) => (failure ??= e));
      const writer = new CacheRowWriter(id);
      let result: { serial: number };
      // The transfer's messages carry about a hundred records each: rows go to COPY in chunks of
      // about 256 KiB instead (a write per message cost more than the rows).
      const flush = (atLeast: number) => {
        if (failure) throw failure as Error;
        if (writer.size >= atLeast) copy.write(writer.take());
      };
      try {
        result = await transfer({
          records(records) {
            for (const r of records) writer.record(r);
            flush(262_144);
          },
          wire(msg, records, count) {
            for (let i = 0; i < count; i++) writer.wire(msg, records, i);
            flush(262_144);
          },
        });
        flush(1);
        await prologue;
      } catch (err) {
        copy.destroy();
        await done.catch(() => undefined);
        // The prologue's own error, when it failed, says more than the aborted COPY's.
        await prologue;
        throw err;
      }
      copy.end();
      await done;
      const serial = result.serial >>> 0;
      // Again one round trip, ending in the commit; the cache state it writes comes back.
      const ended = await conn.query<Array<{ command: string; rows: StateRow[] }>>(
        [
          // Planner statistics for the new rows before anyone reads them (an index made on the
          // empty table left it counted as empty, and a page would be planned as a scan and sort
          // of the whole zone: 25 ms instead of 1). What the plan needs is the row count, so the
          // smallest sample does (300 rows: 1.6 ms for 100,000 rows, 7 ms at target 10).
          'set local default_statistics_target = 1',
          `analyze ${load} (sort_key)`,
          // The zone's partition is detached and kept under another name, and dropped after the
          // commit (dropDetached): dropping it here put the truncation of its files (6 ms for
          // 100,000 rows) into the commit, before the answer. A detached table an earlier refresh
          // did not get to drop goes first.
          `drop table if exists ${detached}`,
          // The parent's lock is taken before the partition's: DETACH needs ACCESS EXCLUSIVE on the
          // parent anyway, and a reader locks the parent first, then the partitions; renaming the
          // partition first (its lock) and then detaching (the parent's) deadlocked with a reader
          // that held the parent and waited for the partition.
          `do $$ declare idx text; begin
             if to_regclass('${part}') is not null then
               lock table dns_record_cache in access exclusive mode;
               select indexrelid::regclass::text into idx from pg_index where indrelid = '${part}'::regclass limit 1;
               alter table ${part} rename to ${detached};
               if idx is not null then execute format('alter index %s rename to %I', idx, '${detached}_order'); end if;
               alter table dns_record_cache detach partition ${detached};
             end if;
           end $$`,
          `alter table ${load} rename to ${part}`,
          `alter index ${load}_order rename to ${part}_order`,
          `alter table ${part} rename constraint ${load}_zone to ${part}_zone`,
          `alter table dns_record_cache attach partition ${part} for values in (${id})`,
          `insert into dns_zone_cache_state (zone_id, serial, record_count, cached_at) values (${id}, ${serial}, ${writer.rows}, now())
           on conflict (zone_id) do update set serial = excluded.serial, record_count = excluded.record_count, cached_at = excluded.cached_at,
             generation = nextval('dns_cache_generation_seq')
           returning ${STATE_COLUMNS}`,
          'commit',
        ].join(';\n'),
      );
      this.dropDetached(id);
      return stateOf(ended.find((r) => r.command === 'INSERT')!.rows[0]!);
    } catch (err) {
      await conn.query('rollback').catch(() => undefined);
      throw err;
    } finally {
      await pool.releaseConnection(conn);
    }
  }

  /** Drops, in the background, the partition a refresh replaced; a failure leaves it to the zone's next refresh, clear or removal. */
  private dropDetached(zoneId: number): void {
    const drop: Promise<void> = this.knex()
      .raw(`drop table if exists ${detachedPartitionOf(zoneId)}`)
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
    return new WriteSync(this.pool(), zoneId, () => this.markStale(zoneId));
  }

  /**
   * A provider zone's write: the rows of the touched name/type pairs become `rows` (the provider's
   * read-back), under the same zone row lock and with the same exact count arithmetic as a
   * write's sync. Never fails the write it follows: on an error the cache is marked stale.
   */
  async replacePairs(zoneId: number, pairs: Array<{ name: string; type: string }>, rows: DnsRecord[]): Promise<void> {
    await this.beginSync(zoneId).replace(pairs, rows);
  }

  /** The knex pool's raw pg connections (its client is untyped): COPY and multi-statement round trips need the connection itself. */
  private pool(): RawPool {
    return this.knex().client as RawPool;
  }

  /** The next read transfers (or fetches) the zone again. */
  async markStale(zoneId: number): Promise<void> {
    await this.knex()
      .raw(`update dns_zone_cache_state set cached_at = to_timestamp(0) where zone_id = ?`, [zoneId])
      .catch(() => undefined);
  }

  async clear(zoneId: number): Promise<void> {
    await this.knex().transaction(async (trx) => {
      await trx.raw(`drop table if exists ${partitionOf(zoneId)}, ${detachedPartitionOf(zoneId)}`);
      await trx.raw(`delete from dns_zone_cache_state where zone_id = ?`, [zoneId]);
      await trx.raw(`update dns_zones set last_invalidated_at = now() where id = ?`, [zoneId]);
    });
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
    const res = await this.knex().raw<{ rows: Array<Omit<DnsRecord, 'name'> & { sort_key: string }> }>(
      // One index-only scan of the zone's partition from the anchor on: the index includes every
      // column shown, the name as its sort key (the same labels in reverse order).
      `select sort_key, ttl, class, type, rdata from dns_record_cache where zone_id = ?${after ? ` and (${ORDER}) > (?, ?, ?, ?, ?)` : ''}
        order by ${ORDER} limit ? offset ?`,
      [zoneId, ...(after ?? []), perPage, skip],
    );
    const rows = res.rows.map((r) => ({ name: sortKey(r.sort_key), ttl: Number(r.ttl), class: r.class, type: r.type, rdata: r.rdata }));
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
      const res = await this.knex().raw<{ rows: Array<Record<string, unknown>> }>(`select ${WITH_STATE_COLUMNS} ${WITH_STATE_FROM} where z.zone = ?`, [name]);
      const r = res.rows[0];
      return r ? { ...withStateOfRow(r), page: null } : null;
    }
    const params = { zone: name, zone_id: plan.zoneId, generation: plan.generation, limit: perPage, skip: plan.skip };
    const a = plan.after;
    const r = a
      ? await FOLDED_PAGE_ANCHORED.first(this.knex(), { ...params, a_key: a[0], a_rank: a[1], a_type: a[2], a_rdata: a[3], a_id: a[4] })
      : await FOLDED_PAGE.first(this.knex(), params);
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
    const keys = this.knex()
      .raw<{ rows: Array<{ sort_key: string; type_rank: number; type: string; rdata: string; id: string }> }>(
        `select ${ORDER} from (select ${ORDER}, row_number() over (order by ${ORDER}) as n from dns_record_cache where zone_id = ?) r
          where n % ? = 0 order by n`,
        [zoneId, ANCHOR_STEP],
      )
      .then((res) => res.rows.map((r): RowKey => [r.sort_key, Number(r.type_rank), r.type, r.rdata, String(r.id)]));
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
    let where: string;
    let binds: unknown[];
    const like = `%${escapeLike(term)}%`;
    switch (mode) {
      case 'ip':
        where = `(type in ('A','AAAA') and (rdata = ? or rdata like ?)) or (type = 'PTR' and name like ?)`;
        binds = [term, `${escapeLike(term)}%`, like];
        break;
      case 'type':
        where = `type = ?`;
        binds = [term];
        break;
      case 'name':
        // A bare word may be a name fragment or a word of record data (`spf1` in an apex `v=spf1` TXT): both match.
        where = `name like ? or rdata ilike ?`;
        binds = [like, `%${escapeLike(term)}%`];
        break;
      default:
        where = `rdata ilike ?`;
        binds = [like];
    }
    const res = await this.knex().raw<{ rows: Array<DnsRecord & { total: string }> }>(
      `select name, ttl, class, type, rdata, count(*) over () as total from dns_record_cache where zone_id = ? and (${where})
       order by sort_key, type_rank, type, rdata, id limit ? offset ?`,
      [zoneId, ...binds, perPage, (page - 1) * perPage],
    );
    const rows = res.rows;
    let total = rows[0] ? Number(rows[0].total) : 0;
    if (!rows.length && page > 1) {
      const c = await this.knex().raw<{ rows: Array<{ n: string }> }>(`select count(*) as n from dns_record_cache where zone_id = ? and (${where})`, [
        zoneId,
        ...binds,
      ]);
      total = Number(c.rows[0]!.n);
    }
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

interface PgClient {
  query<R = unknown>(text: string, values?: unknown[]): Promise<R>;
  query<T extends NodeJS.WritableStream>(stream: T): T;
}

interface RawPool {
  acquireConnection(): Promise<PgClient>;
  releaseConnection(c: PgClient): Promise<unknown>;
}

/**
 * A write's cache sync (ZoneCache.beginSync): after the write, the rows of each touched name/type
 * pair become the master's current answer for that pair; nothing else changes. The master is asked
 * with the zone row locked, so concurrent writers apply their answers one after another and a later
 * writer never sees an older answer. `record_count` moves by the rows deleted and inserted (no
 * recount, which each READ COMMITTED writer would do on its own snapshot). `serial` and the SOA row
 * advance together, and only when the master's serial moved by exactly our one update from the
 * cached serial; any other jump (concurrent writes, or a change made elsewhere) marks the cache
 * stale in the same statement, so reads say so and the next zone read transfers it.
 *
 * Two round trips of PostgreSQL in all: `begin` with the lock (sent at once, while the caller's
 * UPDATE is under way), then the change with its commit. Both go as simple-protocol text, so the
 * values are literals: integers of ours, and the rows as one JSON literal quoted by the driver.
 * Never fails the write it follows: when the master or the database cannot be asked, the cache is
 * marked stale so that the next read transfers the zone again.
 */
export class WriteSync {
  /** The locked connection with the cached serial; null when the zone has no usable cache (nothing to sync). */
  private readonly held: Promise<{ conn: PgClient; serial: number } | null>;
  private closed = false;

  constructor(
    private readonly pool: RawPool,
    private readonly zoneId: number,
    private readonly markStale: () => Promise<void>,
  ) {
    this.held = this.lock();
    // A failure is handled where the lock is awaited; this keeps it from counting as unhandled meanwhile.
    this.held.catch(() => undefined);
  }

  private async lock() {
    const conn = await this.pool.acquireConnection();
    try {
      const res = await conn.query<Array<{ rows: Array<{ serial: string | null; emptied: boolean | null }> }>>(
        `begin; select s.serial, ${cacheEmptied('s')} as emptied from dns_zones z left join dns_zone_cache_state s on s.zone_id = z.id
          where z.id = ${Math.trunc(this.zoneId)} for update of z`,
      );
      const row = res[1]?.rows[0];
      if (row?.serial === null || row?.serial === undefined || row.emptied) {
        await this.release(conn);
        return null;
      }
      return { conn, serial: Number(row.serial) };
    } catch (err) {
      await this.release(conn);
      throw err;
    }
  }

  /** Ends the transaction without a change and gives the connection back. */
  private async release(conn: PgClient) {
    await conn.query('rollback').catch(() => undefined);
    await this.pool.releaseConnection(conn);
  }

  /**
   * After the UPDATE: asks the master for the touched pairs, the zone's SOA and `alsoAsk` (the
   * write's read-back) in one pipelined exchange, and replaces the pairs' rows. Returns the answers
   * to `alsoAsk` in order, or null when the master was not asked (no cache for the zone, or a
   * failure), and the caller asks on its own.
   */
  async finish(
    client: DnsMasterClient,
    zone: string,
    pairs: Array<{ name: string; type: string }>,
    serialBefore: number | null,
    alsoAsk: Array<{ name: string; type: string }> = [],
  ): Promise<QueryResult[] | null> {
    return this.run(async (cached) => {
      const unique = [...new Map(pairs.map((p) => [`${normalizeName(p.name)}|${p.type}`, { name: normalizeName(p.name), type: p.type }])).values()];
      // One exchange for the pairs, the SOA and the extra questions, each distinct question once.
      const questions = new Map<string, { name: string; type: string }>();
      for (const q of [...unique, { name: zone, type: 'SOA' }, ...alsoAsk]) questions.set(`${normalizeName(q.name)}|${q.type}`, q);
      const keys = [...questions.keys()];
      const got = await client.queryMany([...questions.values()]);
      const byKey = new Map(keys.map((k, i) => [k, got[i]!]));
      const answerOf = (q: { name: string; type: string }) => byKey.get(`${normalizeName(q.name)}|${q.type}`)!;
      const answers = [...unique, { name: zone, type: 'SOA' }].map(answerOf);
      const rows = unique.flatMap((p, i) => recordsAt(answers[i]!, p.name, p.type));
      const soa = answers[unique.length]!.answers.find((r) => r.name === zone && r.type === 'SOA');
      const serialAfter = soa ? soaSerialOf(soa.rdata) : null;
      const advance = serialBefore !== null && serialAfter !== null && cached === serialBefore && serialAfter === (serialBefore + 1) >>> 0;
      if (advance && soa) {
        unique.push({ name: zone, type: 'SOA' });
        rows.push(soa);
      }
      // Any other jump (writes that ran at the same time, or a change made elsewhere): the rows
      // between the cached serial and the master's are not all known here, so the cache is marked
      // stale; reads then say so (`cache_is_stale`, `from_database_stale`) and a zone read transfers.
      const behind = !advance && serialAfter !== cached;
      return { pairs: unique, rows, serial: advance ? serialAfter : null, stale: behind, result: alsoAsk.map(answerOf) };
    });
  }

  /** The pairs' rows become `rows` (a provider zone's read-back). */
  async replace(pairs: Array<{ name: string; type: string }>, rows: DnsRecord[]): Promise<void> {
    await this.run(async () => ({ pairs, rows, serial: null, stale: false, result: undefined }));
  }

  /** Releases the lock without a change (the write failed); nothing once finished. */
  async cancel(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const held = await this.held.catch(() => null);
    if (held) await this.release(held.conn);
  }

  private async run<T>(
    change: (
      cachedSerial: number,
    ) => Promise<{ pairs: Array<{ name: string; type: string }>; rows: DnsRecord[]; serial: number | null; stale: boolean; result: T }>,
  ): Promise<T | null> {
    if (this.closed) throw new Error('WriteSync used twice');
    this.closed = true;
    let held;
    try {
      held = await this.held;
    } catch {
      await this.markStale();
      return null;
    }
    if (!held) return null;
    let done: { result: T } | null = null;
    try {
      const c = await change(held.serial);
      await held.conn.query(`${replacePairsSql(this.zoneId, c.pairs, c.rows, c.serial, c.stale)};\ncommit`);
      done = { result: c.result };
    } catch {
      await held.conn.query('rollback').catch(() => undefined);
    } finally {
      await this.pool.releaseConnection(held.conn);
    }
    if (done) return done.result;
    await this.markStale();
    return null;
  }
}

/**
 * One statement: the cached rows of these name/type pairs deleted (found through the ordering
 * index: sort_key is a function of the name), `rows` inserted, and the cache state's count moved by
 * the difference, with a new generation (keyset paging anchors of the old one are not used again)
 * and, when given, the new serial. The deleting and inserting parts see the same snapshot, so the
 * new rows are not deleted.
 */
function replacePairsSql(zoneId: number, pairs: Array<{ name: string; type: string }>, rows: DnsRecord[], serial: number | null, stale = false): string {
  const id = Math.trunc(zoneId);
  const keys = JSON.stringify(pairs.map((p) => ({ k: sortKey(p.name), n: normalizeName(p.name), t: p.type })));
  const data = JSON.stringify(rows.map((r) => ({ k: sortKey(r.name), y: typeRank(r.type), n: r.name, t: r.type, c: r.class, l: r.ttl, d: r.rdata })));
  return `with d as (
      delete from dns_record_cache where zone_id = ${id}
        and (sort_key, name, type) in (select x.k, x.n, x.t from jsonb_to_recordset(${escapeLiteral(keys)}::jsonb) as x(k text, n text, t text))
      returning 1),
    i as (
      insert into dns_record_cache (zone_id, sort_key, type_rank, name, type, class, ttl, rdata)
      select ${id}, x.k, x.y, x.n, x.t, x.c, x.l, x.d from jsonb_to_recordset(${escapeLiteral(data)}::jsonb)
        as x(k text, y smallint, n text, t text, c text, l integer, d text)
      returning 1)
    update dns_zone_cache_state set record_count = record_count + (select count(*) from i) - (select count(*) from d),
      generation = nextval('dns_cache_generation_seq')${serial === null ? '' : `, serial = ${serial >>> 0}`}${stale ? ', cached_at = to_timestamp(0)' : ''}
    where zone_id = ${id}`;
}

/** The serial of an SOA row's presentation form (`mname rname serial refresh retry expire minimum`). */
function soaSerialOf(rdata: string): number | null {
  const serial = Number(rdata.trim().split(/\s+/)[2]);
  return Number.isInteger(serial) ? serial : null;
}

/** Master unreachable or refusing: a 503 naming the zone (never a stack). */
function upstream(err: unknown, z: ZoneRow): never {
  throw masterUnavailable(err, `zone ${z.zone}: master ${z.server}:${z.port}`);
}
