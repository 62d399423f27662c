/**
 * The SQL of the zone cache (zone-cache.ts): per-zone cache state, pages in cache order (from a
 * keyset anchor), searches, and the statements of a write's sync (write-sync.ts), which run on a
 * borrowed connection as simple-protocol text. The full replace by a transfer, with its partition
 * DDL and COPY, is cache-loader-repository.ts.
 */
import type { Knex } from '@mikro-orm/postgresql';
import { literal, sql, type Db, type PooledConnection } from '../db/sql.js';
import { sortKey, typeRank } from './cache-order.js';
import { normalizeName, type DnsRecord } from './wire/index.js';
import { cacheEmptied, detachedPartitionOf, dropCachePartitions, WITH_STATE_COLUMNS, WITH_STATE_FROM } from './zone-repository.js';

/** The columns of dns_zone_cache_state a CacheState is made of, and the row they come in. */
export const STATE_COLUMNS = 'serial, record_count, cached_at, generation';
export interface StateRow {
  serial: string;
  record_count: number;
  cached_at: Date;
  generation: string;
}
export const stateOf = (r: StateRow): CacheState => ({
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

/** The order of index dns_record_cache_order after zone_id. */
export const ORDER = 'sort_key, type_rank, type, rdata, id';

/** A keyset anchor's columns as parameters (RowKey). */
type Anchor = Record<'a_key' | 'a_rank' | 'a_type' | 'a_rdata' | 'a_id', unknown>;
type PageRow = Omit<DnsRecord, 'name'> & { sort_key: string };

const STATE = sql<{ zoneId: number }, StateRow & { emptied: boolean }>(
  `select ${STATE_COLUMNS}, ${cacheEmptied('s')} as emptied from dns_zone_cache_state s where zone_id = :zoneId`,
);
const pageOf = (anchored: boolean) =>
  sql<{ zoneId: number; limit: number; skip: number } & Partial<Anchor>, PageRow>(
    // One index-only scan of the zone's partition from the anchor on: the index includes every
    // column shown, the name as its sort key (the same labels in reverse order).
    `select sort_key, ttl, class, type, rdata from dns_record_cache where zone_id = :zoneId${
      anchored ? ` and (${ORDER}) > (:a_key, :a_rank, :a_type, :a_rdata, :a_id)` : ''
    }
      order by ${ORDER} limit :limit offset :skip`,
  );

/**
 * A zone's row, cache state and mapping (ZoneRegistry.getWithState) with one page of its cached
 * rows, in one statement: the page of a zone read before, planned from what that read saw (zone id,
 * cache generation, anchor). The rows come only while the zone still has that id and generation
 * (null otherwise, and the page is read on its own): a page planned for an older generation is
 * never answered. Named prepared statements, one without an anchor and one from an anchor.
 */
const foldedPage = (anchored: boolean, name: string) =>
  sql<
    { zone: string; zone_id: number; generation: string; limit: number; skip: number } & Partial<Anchor>,
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

/** What a search mode matches (`:term`, `:prefix` and `:like` are its parameters). */
const SEARCH_WHERE = {
  ip: `(type in ('A','AAAA') and (rdata = :term or rdata like :prefix)) or (type = 'PTR' and name like :like)`,
  type: `type = :term`,
  // A bare word may be a name fragment or a word of record data (`spf1` in an apex `v=spf1` TXT): both match.
  name: `name like :like or rdata ilike :like`,
  data: `rdata ilike :like`,
};
type SearchParams = { zoneId: number; term: string; prefix: string; like: string };
const search = (where: string) => ({
  rows: sql<SearchParams & { limit: number; offset: number }, DnsRecord & { total: string }>(
    `select name, ttl, class, type, rdata, count(*) over () as total from dns_record_cache where zone_id = :zoneId and (${where})
     order by sort_key, type_rank, type, rdata, id limit :limit offset :offset`,
  ),
  count: sql<SearchParams, { n: string }>(`select count(*) as n from dns_record_cache where zone_id = :zoneId and (${where})`),
});

export const CacheRows = {
  touch: sql<{ zoneId: number }, StateRow>(`update dns_zone_cache_state set cached_at = now() where zone_id = :zoneId returning ${STATE_COLUMNS}`),
  markStale: sql<{ zoneId: number }>(`update dns_zone_cache_state set cached_at = to_timestamp(0) where zone_id = :zoneId`),
  page: pageOf(false),
  pageAfter: pageOf(true),
  foldedPage: foldedPage(false, 'dns_zone_folded_page'),
  foldedPageAnchored: foldedPage(true, 'dns_zone_folded_page_anchored'),
  zoneWithState: sql<{ zone: string }, Record<string, unknown>>(`select ${WITH_STATE_COLUMNS} ${WITH_STATE_FROM} where z.zone = :zone`),
  /** The key of every `step`-th row of the zone in cache order. */
  anchors: sql<{ zoneId: number; step: number }, { sort_key: string; type_rank: number; type: string; rdata: string; id: string }>(
    `select ${ORDER} from (select ${ORDER}, row_number() over (order by ${ORDER}) as n from dns_record_cache where zone_id = :zoneId) r
      where n % :step = 0 order by n`,
  ),
  search: { ip: search(SEARCH_WHERE.ip), type: search(SEARCH_WHERE.type), name: search(SEARCH_WHERE.name), data: search(SEARCH_WHERE.data) },
};

/** The zone's cache state, or null when it has none (never cached, or emptied by a crash recovery). */
export async function cacheStateOf(db: Db, zoneId: number): Promise<CacheState | null> {
  const r = await STATE.first(db, { zoneId });
  return r && !r.emptied ? stateOf(r) : null;
}

const DELETE_STATE = sql<{ zoneId: number }>(`delete from dns_zone_cache_state where zone_id = :zoneId`);
const INVALIDATED = sql<{ zoneId: number }>(`update dns_zones set last_invalidated_at = now() where id = :zoneId`);

/** Empties the zone's cache (a clear): its partitions and state go, and the zone records when. */
export async function clearCache(knex: Knex, zoneId: number): Promise<void> {
  await knex.transaction(async (trx) => {
    await dropCachePartitions(trx, zoneId);
    await DELETE_STATE.run(trx, { zoneId });
    await INVALIDATED.run(trx, { zoneId });
  });
}

/** Drops the partition a refresh replaced (cache-loader-repository.ts detaches it). */
export const dropDetachedPartition = (db: Db, zoneId: number) => sql<Record<string, never>>(`drop table if exists ${detachedPartitionOf(zoneId)}`).run(db, {});

/**
 * A write's sync, first round trip (write-sync.ts): `begin` and the zone row lock, the lock a
 * full replace takes too. The cached serial, or null when the zone has no usable cache (the
 * transaction stays open either way; rollbackSync ends it).
 */
export async function lockForSync(conn: PooledConnection, zoneId: number): Promise<number | null> {
  const res = await conn.query<Array<{ rows: Array<{ serial: string | null; emptied: boolean | null }> }>>(
    `begin; select s.serial, ${cacheEmptied('s')} as emptied from dns_zones z left join dns_zone_cache_state s on s.zone_id = z.id
      where z.id = ${Math.trunc(zoneId)} for update of z`,
  );
  const row = res[1]?.rows[0];
  return row?.serial === null || row?.serial === undefined || row.emptied ? null : Number(row.serial);
}

/** Ends a write sync's transaction without a change. */
export async function rollbackSync(conn: PooledConnection): Promise<void> {
  await conn.query('rollback').catch(() => undefined);
}

/**
 * A write's sync, second round trip: the cached rows of these name/type pairs deleted (found
 * through the ordering index: sort_key is a function of the name), `rows` inserted, and the cache
 * state's count moved by the difference, with a new generation (keyset paging anchors of the old
 * one are not used again) and, when given, the new serial; then the commit. The deleting and
 * inserting parts see the same snapshot, so the new rows are not deleted. Simple-protocol text:
 * the values are literals, integers of ours and the rows as one JSON literal.
 */
export async function commitPairs(
  conn: PooledConnection,
  zoneId: number,
  change: { pairs: Array<{ name: string; type: string }>; rows: DnsRecord[]; serial: number | null; stale: boolean },
): Promise<void> {
  const id = Math.trunc(zoneId);
  const { serial, stale } = change;
  const keys = JSON.stringify(change.pairs.map((p) => ({ k: sortKey(p.name), n: normalizeName(p.name), t: p.type })));
  const data = JSON.stringify(change.rows.map((r) => ({ k: sortKey(r.name), y: typeRank(r.type), n: r.name, t: r.type, c: r.class, l: r.ttl, d: r.rdata })));
  await conn.query(`with d as (
      delete from dns_record_cache where zone_id = ${id}
        and (sort_key, name, type) in (select x.k, x.n, x.t from jsonb_to_recordset(${literal(keys)}::jsonb) as x(k text, n text, t text))
      returning 1),
    i as (
      insert into dns_record_cache (zone_id, sort_key, type_rank, name, type, class, ttl, rdata)
      select ${id}, x.k, x.y, x.n, x.t, x.c, x.l, x.d from jsonb_to_recordset(${literal(data)}::jsonb)
        as x(k text, y smallint, n text, t text, c text, l integer, d text)
      returning 1)
    update dns_zone_cache_state set record_count = record_count + (select count(*) from i) - (select count(*) from d),
      generation = nextval('dns_cache_generation_seq')${serial === null ? '' : `, serial = ${serial >>> 0}`}${stale ? ', cached_at = to_timestamp(0)' : ''}
    where zone_id = ${id};
    commit`);
}
