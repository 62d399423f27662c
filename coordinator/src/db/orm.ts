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
  /**
   * Bounds on each wait for the database, in milliseconds (absent: unbounded, for the CLI's imports
   * and recounts and for migrations). A connection from the pool, a new connection's start-up and a
   * statement each fail after this long, so that a frozen PostgreSQL (SIGSTOP, a hung host) turns
   * requests into 503 instead of holding them for the whole stall. The server cancels a statement
   * at this bound (statement_timeout); the client gives up one second later when the server does
   * not answer at all (query_timeout), and the pool then drops that connection.
   */
  waitTimeoutMs?: number;
}

interface MigratorParts {
  Migrator: typeof import('@mikro-orm/migrations').Migrator;
  migrationsList: MigrationObject[];
}

/**
 * Knex query options (`.options(...)`) for a statement that may legitimately run long inside the
 * coordinator (a recount over the whole chat-log archive): no client-side bound. Its transaction
 * lifts the server-side one with `set local statement_timeout = 0`.
 */
export const LONG_STATEMENT = { query_timeout: 24 * 3600_000 };

/** The pg driver's error when a statement got no answer within query_timeout. */
const QUERY_READ_TIMEOUT = 'Query read timeout';

type PgConn = { query: (...args: unknown[]) => unknown; __knex__disposed?: unknown };

/**
 * A connection whose statement timed out on the client still has that statement in flight (pg
 * does not cancel it), so the next query on it would wait behind it: marked disposed, knex's pool
 * destroys it instead of lending it again. (pg reports the timeout to the callback only; there is
 * no event to hook.)
 */
function disposeOnReadTimeout(conn: PgConn) {
  const query = conn.query.bind(conn);
  conn.query = (...args: unknown[]) => {
    const last = args.length - 1;
    const cb = args[last];
    if (typeof cb === 'function') {
      args[last] = (err: Error | null, ...rest: unknown[]) => {
        if (err?.message === QUERY_READ_TIMEOUT) conn.__knex__disposed = err.message;
        return (cb as (...a: unknown[]) => unknown)(err, ...rest);
      };
    }
    return query(...args);
  };
}

export function ormConfig(opts: OrmOptions, migrator: MigratorParts | null) {
  const wait = opts.waitTimeoutMs;
  return defineConfig({
    clientUrl: opts.databaseUrl,
    ...(wait
      ? {
          driverOptions: {
            acquireConnectionTimeout: wait,
            connection: { connectionTimeoutMillis: wait, statement_timeout: wait, query_timeout: wait + 1000, keepAlive: true },
          },
        }
      : {}),
    entities: entitySchemas,
    extensions: migrator ? [migrator.Migrator] : [],
    pool: {
      min: 0,
      max: opts.poolMax,
      // JIT compilation pays off for long analytical queries; for this service's short queries its
      // compile time (tens of milliseconds, triggered by high cost estimates of full-text and
      // large index scans) is pure latency.
      afterCreate: (conn: PgConn, done: (err: Error | null, conn: unknown) => void) => {
        if (wait) disposeOnReadTimeout(conn);
        // Prepared statements (db/prepared.ts, the worker protocol's hot paths) are planned once per connection.
        conn.query('set jit = off; set plan_cache_mode = force_generic_plan', (err: Error | null) => done(err, conn));
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
