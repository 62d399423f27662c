import { MikroORM, defineConfig } from '@mikro-orm/postgresql';
import type { MigrationObject } from '@mikro-orm/core';
import type { Logger } from 'pino';
import { stripSqlValues } from '../http/log-redaction.js';
import { MIGRATION_NAMES } from './migrations/names.js';
import { entitySchemas } from '../entities.js';

export type Orm = MikroORM;

/** How many migrations this build has (pendingMigrations() returning all of them: an empty database). */
export const MIGRATION_COUNT = MIGRATION_NAMES.length;

export interface OrmOptions {
  databaseUrl: string;
  poolMax: number;
  logger?: Logger;
  /**
   * Load MikroORM's Migrator and the migrations (default true), for migrate(). The admin CLI's
   * commands leave it out (a quicker start) and check the schema with pendingMigrations().
   */
  migrator?: boolean;
}

interface MigratorParts {
  Migrator: typeof import('@mikro-orm/migrations').Migrator;
  migrationsList: MigrationObject[];
}

export function ormConfig(opts: OrmOptions, migrator: MigratorParts | null) {
  return defineConfig({
    clientUrl: opts.databaseUrl,
    entities: entitySchemas,
    extensions: migrator ? [migrator.Migrator] : [],
    pool: {
      min: 0,
      max: opts.poolMax,
      // JIT compilation pays off for long analytical queries; for this service's short queries its
      // compile time (tens of milliseconds, triggered by high cost estimates of full-text and
      // large index scans) is pure latency.
      afterCreate: (conn: { query(sql: string, cb: (err: Error | null) => void): void }, done: (err: Error | null, conn: unknown) => void) => {
        // Prepared statements (db/prepared.ts, the worker protocol's hot paths) are planned once per connection.
        conn.query('set jit = off; set plan_cache_mode = force_generic_plan', (err) => done(err, conn));
      },
    },
    discovery: { warnWhenNoEntities: true },
    allowGlobalContext: false,
    forceUtcTimezone: true,
    debug: false,
    // Query logs (debug only) without the values MikroORM inlines into every statement.
    logger: (message) => opts.logger?.debug({ orm: true }, stripSqlValues(message)),
    migrations: {
      migrationsList: migrator?.migrationsList ?? [],
      tableName: 'mikro_orm_migrations',
      transactional: true,
      allOrNothing: true,
      disableForeignKeys: false,
      snapshot: false,
    },
  });
}

export async function openOrm(opts: OrmOptions): Promise<Orm> {
  const migrator =
    opts.migrator === false
      ? null
      : await Promise.all([import('@mikro-orm/migrations'), import('./migrations/index.js')]).then(([m, l]) => ({
          Migrator: m.Migrator,
          migrationsList: l.migrationsList,
        }));
  return MikroORM.init(ormConfig(opts, migrator));
}

/**
 * Committed migrations the database has not applied, in order (all of them on an empty
 * database), read from the migrations table in one query without the Migrator.
 */
export async function pendingMigrations(orm: Orm): Promise<string[]> {
  let applied: Set<string>;
  try {
    const rows = await orm.em.getConnection().execute<Array<{ name: string }>>('select name from mikro_orm_migrations');
    applied = new Set(rows.map((r) => r.name));
  } catch (err) {
    if ((err as { code?: string }).code !== '42P01') throw err; // undefined_table: nothing was ever migrated
    applied = new Set();
  }
  return MIGRATION_NAMES.filter((name) => !applied.has(name));
}

/** Applies every committed migration that has not run yet; returns the names applied. */
export async function migrate(orm: Orm): Promise<string[]> {
  const applied = await orm.migrator.up();
  return applied.map((m) => m.name);
}
