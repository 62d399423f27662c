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
import type { CacheState } from './cache-repository.js';
import { removeZone, Zones } from './zone-repository.js';
import { dbOf } from '../db/sql.js';

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
    return dbOf(this.orm.em);
  }

  async list(): Promise<ZoneRow[]> {
    return (await Zones.list.rows(this.knex(), {})).map(toRow);
  }

  async get(zone: string): Promise<ZoneRow | null> {
    const r = await Zones.get.first(this.knex(), { zone: normalizeName(zone) });
    return r ? toRow(r) : null;
  }

  /**
   * get(), the zone's cache state and its provider mapping row together, in one query (what every
   * read and write route needs first).
   */
  async getWithState(zone: string): Promise<ZoneWithState | null> {
    const r = await Zones.withState.first(this.knex(), { zone: normalizeName(zone) });
    return r ? withStateOfRow(r) : null;
  }

  /** The registered zone that contains `name` (longest match), or null. */
  async zoneFor(name: string): Promise<ZoneRow | null> {
    const n = normalizeName(name);
    if (!/^[a-z0-9_*.-]+$/.test(n)) return null;
    const labels = n.split('.');
    const candidates = labels.map((_, i) => labels.slice(i).join('.'));
    const r = await Zones.longestOf.first(this.knex(), { candidates: `{${candidates.map((c) => `"${c}"`).join(',')}}` });
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
    const row = await Zones.upsert.first(this.knex(), {
      zone: name.value,
      server: input.server ?? '127.0.0.1',
      port,
      filePath: input.file,
      keyPath: input.keyFile,
      cacheTtlSeconds: input.cacheTtlSeconds ?? null,
      invalidateEnabled: input.invalidateEnabled ?? true,
      invalidateIntervalSeconds: input.invalidateIntervalSeconds ?? 0,
      protectFromClear: input.protectFromClear ?? false,
    });
    return toRow(row!);
  }

  /** A zone served by an external provider: a row without zone file and key (kept when the zone is already registered). */
  async ensureExternal(zone: string): Promise<ZoneRow> {
    const name = validateName(zone, 'owner', { field: 'zone' });
    if (!name.ok) throw invalid('zone', name.errors[0]!.message);
    await Zones.ensureExternal.run(this.knex(), { zone: name.value });
    return (await this.get(name.value))!;
  }

  /** Removes the zone, its cache state and its cache partition (which has no foreign key to cascade). */
  async remove(zone: string): Promise<boolean> {
    return removeZone(this.knex(), normalizeName(zone));
  }
}

/** A zone's row with its cache state (null: never cached, or emptied) and its provider mapping row. */
export interface ZoneWithState {
  zone: ZoneRow;
  state: CacheState | null;
  mapping: MappingRow | null;
}

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
