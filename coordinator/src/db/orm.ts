import { MikroORM, defineConfig } from '@mikro-orm/postgresql';
import { Migrator } from '@mikro-orm/migrations';
import type { Logger } from 'pino';
import { accountSchemas } from '../accounts/entities.js';
import { migrationsList } from './migrations/index.js';
import { SpeechWorkerSchema } from '../speech/workers/entities.js';
import { speechJobSchemas } from '../speech/jobs/entities.js';

export type Orm = MikroORM;

export const entitySchemas = [...accountSchemas, SpeechWorkerSchema, ...speechJobSchemas];

export interface OrmOptions {
  databaseUrl: string;
  poolMax: number;
  logger?: Logger;
}

export function ormConfig(opts: OrmOptions) {
  return defineConfig({
    clientUrl: opts.databaseUrl,
    entities: entitySchemas,
    extensions: [Migrator],
    pool: {
      min: 0,
      max: opts.poolMax,
      // JIT compilation pays off for long analytical queries; for this service's short queries its
      // compile time (tens of milliseconds, triggered by high cost estimates of full-text and
      // large index scans) is pure latency.
      afterCreate: (conn: { query(sql: string, cb: (err: Error | null) => void): void }, done: (err: Error | null, conn: unknown) => void) => {
        conn.query('set jit = off', (err) => done(err, conn));
      },
    },
    discovery: { warnWhenNoEntities: true },
    allowGlobalContext: false,
    forceUtcTimezone: true,
    debug: false,
    logger: (message) => opts.logger?.debug({ orm: true }, message),
    migrations: {
      migrationsList,
      tableName: 'mikro_orm_migrations',
      transactional: true,
      allOrNothing: true,
      disableForeignKeys: false,
      snapshot: false,
    },
  });
}

export async function openOrm(opts: OrmOptions): Promise<Orm> {
  return MikroORM.init(ormConfig(opts));
}

/** Applies every committed migration that has not run yet; returns the names applied. */
export async function migrate(orm: Orm): Promise<string[]> {
  const applied = await orm.getMigrator().up();
  return applied.map((m) => m.name);
}
