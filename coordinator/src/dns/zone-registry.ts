/**
 * The `dns_zones` registry: which zones the API serves, on which master, with which zone file and
 * TSIG key file, and each zone's cache policy. Managed with the `dns:zone:*` CLI commands.
 */
import { access, constants, readFile } from 'node:fs/promises';
import type { Knex } from '@mikro-orm/postgresql';
import type { Orm } from '../db/orm.js';
import { AppError } from '../http/errors.js';
import type { ProviderBinding, ProviderKey } from './providers/types.js';
import { normalizeName, parseKeyFile, validateName, type TsigKey } from './wire/index.js';
import type { CacheState } from './zone-cache.js';

export interface ZoneRow {
  id: number;
  zone: string;
  server: string;
  port: number;
  /** Null for a provider zone (no zone file and no TSIG key here). */
  filePath: string | null;
  keyPath: string | null;
  cacheTtlSeconds: number | null;
  invalidateEnabled: boolean;
  invalidateIntervalSeconds: number;
  lastInvalidatedAt: Date | null;
  protectFromClear: boolean;
  /** Set once the zone is known to be served by an external provider (DnsService.bind). */
  provider?: ProviderBinding;
}

export interface CachePolicy {
  invalidate_enabled: boolean;
  invalidate_interval_seconds: number;
  last_invalidated_at: string | null;
  protect_from_clear: boolean;
}

export const cachePolicyOf = (z: ZoneRow): CachePolicy => ({
  invalidate_enabled: z.invalidateEnabled,
  invalidate_interval_seconds: z.invalidateIntervalSeconds,
  last_invalidated_at: z.lastInvalidatedAt ? z.lastInvalidatedAt.toISOString() : null,
  protect_from_clear: z.protectFromClear,
});

const COLUMNS = `id, zone, server, port, file_path, key_path, cache_ttl_seconds, invalidate_enabled, invalidate_interval_seconds,
  last_invalidated_at, protect_from_clear`;

function toRow(r: Record<string, unknown>): ZoneRow {
  return {
    id: Number(r.id),
    zone: String(r.zone),
    server: String(r.server),
    port: Number(r.port),
    filePath: r.file_path === null ? null : (r.file_path as string),
    keyPath: r.key_path === null ? null : (r.key_path as string),
    cacheTtlSeconds: r.cache_ttl_seconds === null ? null : Number(r.cache_ttl_seconds),
    invalidateEnabled: Boolean(r.invalidate_enabled),
    invalidateIntervalSeconds: Number(r.invalidate_interval_seconds),
    lastInvalidatedAt: r.last_invalidated_at ? new Date(r.last_invalidated_at as string) : null,
    protectFromClear: Boolean(r.protect_from_clear),
  };
}

function invalid(field: string, message: string) {
  return new AppError('validation_failed', `${field}: ${message}`, { errors: { [field]: [message] } });
}

/** A zone's row of dns_provider_zones: which provider serves it, under which id, with which token reference. */
export interface MappingRow {
  zone: string;
  zoneId: number;
  provider: ProviderKey;
  providerZoneId: string;
  tokenRef: string;
  createdAt: Date;
  updatedAt: Date;
}

/** A mapping row from a query's row: dns_provider_zones' columns under `prefix`, the zone's name as `zone`. */
export function mappingOfRow(r: Record<string, unknown>, prefix = ''): MappingRow {
  return {
    zone: String(r.zone),
    zoneId: Number(r[`${prefix}zone_id`]),
    provider: String(r[`${prefix}provider`]) as ProviderKey,
    providerZoneId: String(r[`${prefix}provider_zone_id`]),
    tokenRef: String(r[`${prefix}token_ref`]),
    createdAt: new Date(r[`${prefix}created_at`] as string),
    updatedAt: new Date(r[`${prefix}updated_at`] as string),
  };
}

export interface ZoneInput {
  zone: string;
  file: string;
  keyFile: string;
  server?: string;
  port?: number;
  cacheTtlSeconds?: number | null;
  invalidateEnabled?: boolean;
  invalidateIntervalSeconds?: number;
  protectFromClear?: boolean;
}

export class ZoneRegistry {
  constructor(private readonly orm: Orm) {}

  knex(): Knex {
    return this.orm.em.getConnection().getKnex();
  }

  async list(): Promise<ZoneRow[]> {
    const res = await this.knex().raw<{ rows: Array<Record<string, unknown>> }>(`select ${COLUMNS} from dns_zones order by zone`);
    return res.rows.map(toRow);
  }

  async get(zone: string): Promise<ZoneRow | null> {
    const res = await this.knex().raw<{ rows: Array<Record<string, unknown>> }>(`select ${COLUMNS} from dns_zones where zone = ?`, [normalizeName(zone)]);
    const r = res.rows[0];
    return r ? toRow(r) : null;
  }

  /**
   * get(), the zone's cache state and its provider mapping row together, in one query (what every
   * read and write route needs first).
   */
  async getWithState(zone: string): Promise<ZoneWithState | null> {
    const res = await this.knex().raw<{ rows: Array<Record<string, unknown>> }>(`select ${WITH_STATE_COLUMNS} ${WITH_STATE_FROM} where z.zone = ?`, [
      normalizeName(zone),
    ]);
    const r = res.rows[0];
    return r ? withStateOfRow(r) : null;
  }

  /** The registered zone that contains `name` (longest match), or null. */
  async zoneFor(name: string): Promise<ZoneRow | null> {
    const n = normalizeName(name);
    if (!/^[a-z0-9_*.-]+$/.test(n)) return null;
    const labels = n.split('.');
    const candidates = labels.map((_, i) => labels.slice(i).join('.'));
    const res = await this.knex().raw<{ rows: Array<Record<string, unknown>> }>(
      `select ${COLUMNS} from dns_zones where zone = any(?::text[]) order by length(zone) desc limit 1`,
      [`{${candidates.map((c) => `"${c}"`).join(',')}}`],
    );
    const r = res.rows[0];
    return r ? toRow(r) : null;
  }

  /** zoneFor of many names with one query (the bulk route); null where a name is in no zone. */
  async zonesFor(names: string[]): Promise<Array<ZoneRow | null>> {
    const all = await this.list();
    const byName = new Map(all.map((z) => [z.zone, z]));
    return names.map((name) => {
      const n = normalizeName(name);
      if (!/^[a-z0-9_*.-]+$/.test(n)) return null;
      const labels = n.split('.');
      for (let i = 0; i < labels.length; i++) {
        const z = byName.get(labels.slice(i).join('.'));
        if (z) return z;
      }
      return null;
    });
  }

  /** Adds or replaces a zone (the CLI's `dns:zone:add`). Paths are stored as given; readability is checked per request. */
  async upsert(input: ZoneInput): Promise<ZoneRow> {
    const name = validateName(input.zone, 'owner', { field: 'zone' });
    if (!name.ok) throw invalid('zone', name.errors[0]!.message);
    if (!input.file.trim()) throw invalid('file', 'is required');
    if (!input.keyFile.trim()) throw invalid('key_file', 'is required');
    const port = input.port ?? 53;
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw invalid('port', 'must be 1-65535');
    const res = await this.knex().raw<{ rows: Array<Record<string, unknown>> }>(
      `insert into dns_zones (zone, server, port, file_path, key_path, cache_ttl_seconds, invalidate_enabled, invalidate_interval_seconds, protect_from_clear)
       values (?, ?, ?, ?, ?, ?, ?, ?, ?)
       on conflict (zone) do update set server = excluded.server, port = excluded.port, file_path = excluded.file_path,
         key_path = excluded.key_path, cache_ttl_seconds = excluded.cache_ttl_seconds, invalidate_enabled = excluded.invalidate_enabled,
         invalidate_interval_seconds = excluded.invalidate_interval_seconds, protect_from_clear = excluded.protect_from_clear
       returning ${COLUMNS}`,
      [
        name.value,
        input.server ?? '127.0.0.1',
        port,
        input.file,
        input.keyFile,
        input.cacheTtlSeconds ?? null,
        input.invalidateEnabled ?? true,
        input.invalidateIntervalSeconds ?? 0,
        input.protectFromClear ?? false,
      ],
    );
    return toRow(res.rows[0]!);
  }

  /** A zone served by an external provider: a row without zone file and key (kept when the zone is already registered). */
  async ensureExternal(zone: string): Promise<ZoneRow> {
    const name = validateName(zone, 'owner', { field: 'zone' });
    if (!name.ok) throw invalid('zone', name.errors[0]!.message);
    await this.knex().raw(`insert into dns_zones (zone, file_path, key_path) values (?, null, null) on conflict (zone) do nothing`, [name.value]);
    return (await this.get(name.value))!;
  }

  async setPolicy(zone: string, policy: Partial<Pick<ZoneRow, 'invalidateEnabled' | 'invalidateIntervalSeconds' | 'protectFromClear' | 'cacheTtlSeconds'>>) {
    const z = await this.get(zone);
    if (!z) throw new AppError('not_found', `zone ${zone} is not registered`);
    await this.knex().raw(
      `update dns_zones set invalidate_enabled = ?, invalidate_interval_seconds = ?, protect_from_clear = ?, cache_ttl_seconds = ? where id = ?`,
      [
        policy.invalidateEnabled ?? z.invalidateEnabled,
        policy.invalidateIntervalSeconds ?? z.invalidateIntervalSeconds,
        policy.protectFromClear ?? z.protectFromClear,
        policy.cacheTtlSeconds === undefined ? z.cacheTtlSeconds : policy.cacheTtlSeconds,
        z.id,
      ],
    );
    return (await this.get(zone))!;
  }

  /** Removes the zone, its cache state and its cache partition (which has no foreign key to cascade). */
  async remove(zone: string): Promise<boolean> {
    return this.knex().transaction(async (trx) => {
      const res = await trx.raw<{ rows: Array<{ id: number }> }>(`delete from dns_zones where zone = ? returning id`, [normalizeName(zone)]);
      const id = res.rows[0]?.id;
      if (id === undefined) return false;
      await trx.raw(`drop table if exists ${partitionOf(Number(id))}, ${detachedPartitionOf(Number(id))}`);
      return true;
    });
  }
}

/** The zone's partition of dns_record_cache (migration 0022). */
export const partitionOf = (zoneId: number) => `dns_record_cache_z${Math.trunc(zoneId)}`;
/** A partition a refresh replaced, detached until it is dropped (ZoneCache.replaceByTransfer). */
export const detachedPartitionOf = (zoneId: number) => `${partitionOf(zoneId)}_replaced`;

/**
 * SQL: true when the cache state `s` (a dns_zone_cache_state row) counts rows that its zone's
 * partition no longer holds. The partitions are unlogged (derived data, no WAL), and PostgreSQL
 * empties unlogged tables when it recovers from a crash: such a cache counts as absent, so the next
 * read transfers the zone again. Finding one row is enough, so the scan stops at the first.
 */
export const cacheEmptied = (s: string) => `(${s}.record_count > 0 and not exists (select 1 from dns_record_cache c where c.zone_id = ${s}.zone_id))`;

/** A zone's row with its cache state (null: never cached, or emptied) and its provider mapping row. */
export interface ZoneWithState {
  zone: ZoneRow;
  state: CacheState | null;
  mapping: MappingRow | null;
}

/**
 * The columns and joins of getWithState (zone-cache.ts reads a page in the same statement). The
 * zone's columns by name, not `z.*`: a named prepared statement whose result columns changed under
 * it (a migration adding one while the coordinator runs) would fail.
 */
export const WITH_STATE_COLUMNS = `${COLUMNS.split(',')
  .map((c) => `z.${c.trim()}`)
  .join(', ')}, s.serial as cache_serial, s.record_count as cache_record_count, s.cached_at as cache_cached_at, s.generation as cache_generation,
  ${cacheEmptied('s')} as cache_emptied, m.zone_id as mapping_zone_id, m.provider as mapping_provider,
  m.provider_zone_id as mapping_provider_zone_id, m.token_ref as mapping_token_ref, m.created_at as mapping_created_at,
  m.updated_at as mapping_updated_at`;
export const WITH_STATE_FROM = 'from dns_zones z left join dns_zone_cache_state s on s.zone_id = z.id left join dns_provider_zones m on m.zone_id = z.id';

export function withStateOfRow(r: Record<string, unknown>): ZoneWithState {
  const state =
    r.cache_serial === null || r.cache_emptied === true
      ? null
      : {
          serial: Number(r.cache_serial),
          recordCount: Number(r.cache_record_count),
          cachedAt: new Date(r.cache_cached_at as string),
          generation: String(r.cache_generation),
        };
  return { zone: toRow(r), state, mapping: r.mapping_zone_id === null ? null : mappingOfRow(r, 'mapping_') };
}

/** Paths found readable, with when: a busy zone is not checked on every request (an access() costs a system call). */
const readableAt = new Map<string, number>();
const READABLE_MEMO_MS = 5_000;

/**
 * Both server-side paths readable, else 404 required_paths_missing_or_unreadable. A path found
 * readable is taken as readable for 5 s; an unreadable one is checked again on every request.
 */
export async function checkPaths(z: ZoneRow): Promise<void> {
  if (z.filePath === null || z.keyPath === null)
    throw new AppError(
      'required_paths_missing_or_unreadable',
      `zone ${z.zone} has no zone file and TSIG key here and no usable provider mapping (dns:providers:list shows the mappings)`,
    );
  const bad: string[] = [];
  const now = Date.now();
  for (const [what, p] of [
    ['zone file', z.filePath],
    ['key file', z.keyPath],
  ] as const) {
    if (now - (readableAt.get(p) ?? -Infinity) < READABLE_MEMO_MS) continue;
    try {
      await access(p, constants.R_OK);
      if (readableAt.size >= 1000) readableAt.clear();
      readableAt.set(p, now);
    } catch {
      readableAt.delete(p);
      bad.push(`${what} ${p}`);
    }
  }
  if (bad.length) throw new AppError('required_paths_missing_or_unreadable', `zone ${z.zone}: not readable: ${bad.join(', ')}`);
}

/** Key files read and parsed, with when: like readableAt, a busy zone does not read its key file on every request. */
const keysRead = new Map<string, { at: number; key: TsigKey }>();

/**
 * The zone's TSIG key from its key file. A key read is used for 5 s (a replaced key file takes
 * effect within that time); a file that cannot be read or parsed is tried again on every request.
 */
export async function loadKey(z: ZoneRow): Promise<TsigKey> {
  if (z.keyPath === null) throw new AppError('required_paths_missing_or_unreadable', `zone ${z.zone} has no TSIG key file (a provider zone)`);
  const now = Date.now();
  const held = keysRead.get(z.keyPath);
  if (held && now - held.at < READABLE_MEMO_MS) return held.key;
  try {
    const key = parseKeyFile(await readFile(z.keyPath, 'utf8'));
    if (keysRead.size >= 1000) keysRead.clear();
    keysRead.set(z.keyPath, { at: now, key });
    return key;
  } catch (err) {
    keysRead.delete(z.keyPath);
    throw new AppError('required_paths_missing_or_unreadable', `zone ${z.zone}: key file ${z.keyPath} is unreadable or invalid: ${(err as Error).message}`);
  }
}
