import { envSchema } from '../config.js';
import type { Orm } from '../db/orm.js';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDriverError, reportError, SchemaNotCurrent } from './errors.js';
import { EX_CONFIG, jsonMode, type Result } from './program.js';

/** The quick start's data folder (`npm start`). */
const quickstartDataDir = () => path.resolve(process.env.SONAR_DATA_DIR ?? fileURLToPath(new URL('../../../.data', import.meta.url)));

/**
 * Without DATABASE_URL, a quick start's embedded database is used when its secrets exist
 * (`npm start` must be running for it to answer).
 */
function quickstartDatabaseUrl(): string | undefined {
  const file = path.join(quickstartDataDir(), 'secrets.json');
  if (!existsSync(file)) return undefined;
  const { EMBEDDED_PG_PASSWORD } = JSON.parse(readFileSync(file, 'utf8')) as { EMBEDDED_PG_PASSWORD?: string };
  if (!EMBEDDED_PG_PASSWORD) return undefined;
  const port = Number(process.env.EMBEDDED_PG_PORT ?? 54329);
  console.error(`note: DATABASE_URL is not set; using the quick start's embedded database on 127.0.0.1:${port}`);
  return `postgres://postgres:${encodeURIComponent(EMBEDDED_PG_PASSWORD)}@127.0.0.1:${port}/sonar`;
}

/** The Redis of a running quick start (written by quickstart.ts), for a CLI on its database. */
function quickstartRedisUrl(): string | undefined {
  const file = path.join(quickstartDataDir(), 'run', 'redis-url');
  return existsSync(file) ? readFileSync(file, 'utf8').trim() || undefined : undefined;
}

/**
 * A command that writes to the chat-log archive tells the coordinators (their search caches) over
 * Redis, as they tell each other (irc/archive-changes.ts), when REDIS_URL is set; so does one that
 * changes users, permissions or DNS API keys (their credential caches, accounts/credential-cache.ts).
 * On a quick start's database (no DATABASE_URL) the quick start's own Redis is used. Without either,
 * or when Redis cannot be reached (a warning on stderr), their cached answers age out
 * (IRC_SEARCH_CACHE_TTL_SECONDS, AUTH_CACHE_SECONDS). Redis is reached only when there is news: a
 * command that writes nothing never connects. Returns the disconnect, which lets the news already
 * sent go out first.
 */
async function announceChanges(orm: Orm, what: { archive: boolean; credentials: boolean }): Promise<() => Promise<void>> {
  const env = envSchema.pick({ REDIS_URL: true, REDIS_KEY_PREFIX: true }).safeParse({
    REDIS_URL: process.env.REDIS_URL || (process.env.DATABASE_URL ? undefined : quickstartRedisUrl()),
    REDIS_KEY_PREFIX: process.env.REDIS_KEY_PREFIX || undefined,
  });
  if (!env.success) return async () => undefined;
  const [{ Redis }, { IrcArchiveChanges }, { credentialChanges }] = await Promise.all([
    import('ioredis'),
    import('../irc/archive-changes.js'),
    import('../accounts/credential-cache.js'),
  ]);
  const redis = new Redis(env.data.REDIS_URL, { maxRetriesPerRequest: 1, connectTimeout: 5_000, lazyConnect: true });
  redis.on('error', () => undefined); // a failed publish says so below
  let warned = false;
  const warn = (obj: object) => {
    if (warned) return;
    warned = true;
    const err = (obj as { err?: unknown }).err;
    console.error(`warning: the changes were not announced to the coordinators (Redis: ${err instanceof Error ? err.message : String(err)})`);
  };
  const log = { warn, info: () => undefined, error: warn };
  const unlinks = [
    ...(what.archive ? [IrcArchiveChanges.of(orm).publishTo(redis, `${env.data.REDIS_KEY_PREFIX}irc:archive-changed`, log)] : []),
    ...(what.credentials ? [credentialChanges.publishTo(redis, `${env.data.REDIS_KEY_PREFIX}auth:credentials-changed`, log)] : []),
  ];
  return async () => {
    for (const unlink of unlinks) unlink();
    if (redis.status === 'wait') redis.disconnect();
    else await redis.quit().catch(() => redis.disconnect());
  };
}

/**
 * Wraps a command: open the database, check that its schema is current (or, with
 * `migrate: true`, bring it up to date), run the command through a service, print, always close.
 * `archiveWriter`: the command writes to the chat-log archive; `credentialWriter`: to users, permissions
 * or DNS API keys (see announceChanges).
 */
export function runWith<S>(make: (orm: Orm) => S | Promise<S>, opts: { migrate?: boolean; archiveWriter?: boolean; credentialWriter?: boolean } = {}) {
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
      let unannounce = async (): Promise<void> => undefined;
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
        if (opts.archiveWriter || opts.credentialWriter) {
          unannounce = await announceChanges(orm, { archive: opts.archiveWriter === true, credentials: opts.credentialWriter === true });
        }
        const result = await fn(await make(orm), ...args);
        if (jsonMode()) console.log(JSON.stringify({ ok: true, ...result.json }, null, 2));
        else for (const line of result.text) console.log(line);
      } catch (err) {
        process.exitCode = reportError(err, await isDriverError(err));
      } finally {
        await unannounce();
        await orm?.close(true);
      }
    };
}

/** Commands that change accounts go through AccountService, like the HTTP API. */
export const runAccounts = runWith(async (orm) => new (await import('../accounts/account-service.js')).AccountService(orm), { credentialWriter: true });
