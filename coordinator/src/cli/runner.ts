import { envSchema } from '../config.js';
import type { Orm } from '../db/orm.js';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDriverError, reportError, SchemaNotCurrent } from './errors.js';
import { EX_CONFIG, jsonMode, type Result } from './program.js';

/**
 * Without DATABASE_URL, a quick start's embedded database is used when its secrets exist
 * (`npm start` must be running for it to answer).
 */
function quickstartDatabaseUrl(): string | undefined {
  const dataDir = path.resolve(process.env.SONAR_DATA_DIR ?? fileURLToPath(new URL('../../../.data', import.meta.url)));
  const file = path.join(dataDir, 'secrets.json');
  if (!existsSync(file)) return undefined;
  const { EMBEDDED_PG_PASSWORD } = JSON.parse(readFileSync(file, 'utf8')) as { EMBEDDED_PG_PASSWORD?: string };
  if (!EMBEDDED_PG_PASSWORD) return undefined;
  const port = Number(process.env.EMBEDDED_PG_PORT ?? 54329);
  console.error(`note: DATABASE_URL is not set; using the quick start's embedded database on 127.0.0.1:${port}`);
  return `postgres://postgres:${encodeURIComponent(EMBEDDED_PG_PASSWORD)}@127.0.0.1:${port}/sonar`;
}

/**
 * Wraps a command: open the database, check that its schema is current (or, with
 * `migrate: true`, bring it up to date), run the command through a service, print, always close.
 */
export function runWith<S>(make: (orm: Orm) => S | Promise<S>, opts: { migrate?: boolean } = {}) {
  return <A extends unknown[]>(fn: (svc: S, ...args: A) => Promise<Result>) =>
    async (...args: A) => {
      // Reuse the coordinator's own rule for DATABASE_URL; nothing else from the environment is needed.
      const given = process.env.DATABASE_URL || undefined;
      const env = envSchema.pick({ DATABASE_URL: true }).safeParse({ DATABASE_URL: given ?? quickstartDatabaseUrl() });
      if (!env.success) {
        const why = given ? `is invalid (${env.error.issues[0]?.message})` : 'is not set';
        console.error(`error: DATABASE_URL ${why}; set it to the coordinator's postgres:// URL`);
        process.exitCode = EX_CONFIG;
        return;
      }
      let orm: Orm | undefined;
      try {
        const db = await import('../db/orm.js');
        orm = await db.openOrm({ databaseUrl: env.data.DATABASE_URL, poolMax: 2, migrator: opts.migrate === true });
        if (!opts.migrate) {
          const pending = await db.pendingMigrations(orm);
          if (pending.length) {
            const fresh = pending.length === db.MIGRATION_COUNT;
            throw new SchemaNotCurrent(
              `${fresh ? 'the database has no sonar schema yet' : `the database schema is behind: ${pending.length} migration(s) not applied (${pending.join(', ')})`}; ` +
                'run `npm run cli -- db:migrate` (or start the coordinator, which migrates on start)',
            );
          }
        }
        const result = await fn(await make(orm), ...args);
        if (jsonMode()) console.log(JSON.stringify({ ok: true, ...result.json }, null, 2));
        else for (const line of result.text) console.log(line);
      } catch (err) {
        process.exitCode = reportError(err, await isDriverError(err));
      } finally {
        await orm?.close(true);
      }
    };
}

/** Commands that change accounts go through AccountService, like the HTTP API. */
export const runAccounts = runWith(async (orm) => new (await import('../accounts/account-service.js')).AccountService(orm));
