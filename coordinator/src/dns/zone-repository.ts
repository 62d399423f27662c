/**
 * The SQL of the `dns_zones` registry (ZoneRegistry) and the zone/cache-state/mapping join every
 * read and write route starts from. Rows come back as the database gives them; zone-registry.ts
 * turns them into ZoneRow and ZoneWithState.
 */
import type { Knex } from '@mikro-orm/postgresql';
import { sql } from '../db/sql.js';

type Row = Record<string, unknown>;

const COLUMNS = `id, zone, server, port, file_path, key_path, cache_ttl_seconds, invalidate_enabled, invalidate_interval_seconds,
  last_invalidated_at, protect_from_clear`;

/** The zone's partition of dns_record_cache (migration 0022). */
export const partitionOf = (zoneId: number) => `dns_record_cache_z${Math.trunc(zoneId)}`;
/** A partition a refresh replaced, detached until it is dropped (cache-loader-repository.ts). */
export const detachedPartitionOf = (zoneId: number) => `${partitionOf(zoneId)}_replaced`;

/**
 * SQL: true when the cache state `s` (a dns_zone_cache_state row) counts rows that its zone's
 * partition no longer holds. The partitions are unlogged (derived data, no WAL), and PostgreSQL
 * empties unlogged tables when it recovers from a crash: such a cache counts as absent, so the next
 * read transfers the zone again. Finding one row is enough, so the scan stops at the first.
 */
export const cacheEmptied = (s: string) => `(${s}.record_count > 0 and not exists (select 1 from dns_record_cache c where c.zone_id = ${s}.zone_id))`;

/**
 * The columns and joins of ZoneRegistry.getWithState (the cache's folded page read uses them in
 * the same statement). The zone's columns by name, not `z.*`: a named prepared statement whose
 * result columns changed under it (a migration adding one while the coordinator runs) would fail.
 */
export const WITH_STATE_COLUMNS = `${COLUMNS.split(',')
  .map((c) => `z.${c.trim()}`)
  .join(', ')}, s.serial as cache_serial, s.record_count as cache_record_count, s.cached_at as cache_cached_at, s.generation as cache_generation,
  ${cacheEmptied('s')} as cache_emptied, m.zone_id as mapping_zone_id, m.provider as mapping_provider,
  m.provider_zone_id as mapping_provider_zone_id, m.token_ref as mapping_token_ref, m.created_at as mapping_created_at,
  m.updated_at as mapping_updated_at`;
export const WITH_STATE_FROM = 'from dns_zones z left join dns_zone_cache_state s on s.zone_id = z.id left join dns_provider_zones m on m.zone_id = z.id';

export const Zones = {
  list: sql<Record<string, never>, Row>(`select ${COLUMNS} from dns_zones order by zone`),
  get: sql<{ zone: string }, Row>(`select ${COLUMNS} from dns_zones where zone = :zone`),
  withState: sql<{ zone: string }, Row>(`select ${WITH_STATE_COLUMNS} ${WITH_STATE_FROM} where z.zone = :zone`),
  /** The longest of `candidates` (a text[] literal) that is a registered zone. */
  longestOf: sql<{ candidates: string }, Row>(`select ${COLUMNS} from dns_zones where zone = any(:candidates::text[]) order by length(zone) desc limit 1`),
  upsert: sql<
    {
      zone: string;
      server: string;
      port: number;
      filePath: string;
      keyPath: string;
      cacheTtlSeconds: number | null;
      invalidateEnabled: boolean;
      invalidateIntervalSeconds: number;
      protectFromClear: boolean;
    },
    Row
  >(
    `insert into dns_zones (zone, server, port, file_path, key_path, cache_ttl_seconds, invalidate_enabled, invalidate_interval_seconds, protect_from_clear)
     values (:zone, :server, :port, :filePath, :keyPath, :cacheTtlSeconds, :invalidateEnabled, :invalidateIntervalSeconds, :protectFromClear)
     on conflict (zone) do update set server = excluded.server, port = excluded.port, file_path = excluded.file_path,
       key_path = excluded.key_path, cache_ttl_seconds = excluded.cache_ttl_seconds, invalidate_enabled = excluded.invalidate_enabled,
       invalidate_interval_seconds = excluded.invalidate_interval_seconds, protect_from_clear = excluded.protect_from_clear
     returning ${COLUMNS}`,
  ),
  ensureExternal: sql<{ zone: string }>(`insert into dns_zones (zone, file_path, key_path) values (:zone, null, null) on conflict (zone) do nothing`),
};

const DELETE_ZONE = sql<{ zone: string }, { id: number }>(`delete from dns_zones where zone = :zone returning id`);
const dropPartitions = (zoneId: number) => sql<Record<string, never>>(`drop table if exists ${partitionOf(zoneId)}, ${detachedPartitionOf(zoneId)}`);

/** Removes the zone, its cache state and its cache partition (which has no foreign key to cascade). */
export async function removeZone(knex: Knex, zone: string): Promise<boolean> {
  return knex.transaction(async (trx) => {
    const row = await DELETE_ZONE.first(trx, { zone });
    if (!row) return false;
    await dropPartitions(Number(row.id)).run(trx, {});
    return true;
  });
}

/** Drops the zone's cache partitions (a clear), as part of the caller's transaction. */
export const dropCachePartitions = (db: Knex | Knex.Transaction, zoneId: number) => dropPartitions(zoneId).run(db, {});

const MAPPING_SELECT = `select z.zone, m.zone_id, m.provider, m.provider_zone_id, m.token_ref, m.created_at, m.updated_at
  from dns_provider_zones m join dns_zones z on z.id = m.zone_id`;

/** The dns_provider_zones mapping table (providers/directory.ts): which provider serves a zone. */
export const Mappings = {
  all: sql<Record<string, never>, Row>(`${MAPPING_SELECT} order by z.zone`),
  of: sql<{ zoneId: number }, Row>(`${MAPPING_SELECT} where m.zone_id = :zoneId order by z.zone`),
  save: sql<{ zoneId: number; provider: string; providerZoneId: string; tokenRef: string }>(
    `insert into dns_provider_zones (zone_id, provider, provider_zone_id, token_ref) values (:zoneId, :provider, :providerZoneId, :tokenRef)
     on conflict (zone_id) do update set provider = excluded.provider, provider_zone_id = excluded.provider_zone_id,
       token_ref = excluded.token_ref, updated_at = now()`,
  ),
  remove: sql<{ zoneId: number }>(`delete from dns_provider_zones where zone_id = :zoneId`),
};
