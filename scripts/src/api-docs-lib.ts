// The HTTP API reference (docs/api.md) from the coordinator's own OpenAPI document: the real
// application is built in-process (buildApp from coordinator/dist) and asked for /openapi.json
// with inject(). No database is needed (the ORM is created without connecting); Redis is, because
// building the application starts its queue workers (keys go under a run-specific prefix and are
// deleted afterwards).
import { randomBytes } from 'node:crypto';
import { MikroORM } from '@mikro-orm/postgresql';
import { Redis } from 'ioredis';
// Brings in the FastifyInstance augmentation (routeAuthTable).
import type {} from '../../coordinator/dist/accounts/auth-plugin.js';
import { buildApp } from '../../coordinator/dist/app.js';
import { loadConfig } from '../../coordinator/dist/config.js';
import { ormConfig } from '../../coordinator/dist/db/orm.js';
import { readPlatformVersion } from '../../coordinator/dist/version.js';
import { renderApiMarkdown, type OpenApiDocument, type OperationAuth } from './openapi-markdown.js';

export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

/** `/api/x/{id}` (OpenAPI) -> `/api/x/:id` (Fastify). */
const fastifyPath = (openApiPath: string) => openApiPath.replace(/\{([^}]+)\}/g, ':$1');

/** docs/api.md's text for the coordinator as built now. */
export async function apiMarkdown(opts: { redisUrl?: string } = {}): Promise<string> {
  const redisUrl = opts.redisUrl ?? DEFAULT_REDIS_URL;
  const prefix = `sonar-docs:${randomBytes(4).toString('hex')}:`;
  // Fixed values wherever the document could show configuration, so the output depends on the code only.
  const config = loadConfig({
    NODE_ENV: 'production',
    DATABASE_URL: 'postgres://docs@127.0.0.1:5432/never_connected',
    REDIS_URL: redisUrl,
    REDIS_KEY_PREFIX: prefix,
    SESSION_SECRET: randomBytes(24).toString('hex'),
    JWT_SECRET: randomBytes(24).toString('hex'),
    PUBLIC_BASE_URL: 'http://localhost:8080',
    LOG_LEVEL: 'silent',
    OPENAPI_ENABLED: 'true',
    METRICS_ENABLED: 'false',
  });
  // An ORM that never connects (the document needs no database).
  const orm = await MikroORM.init({ ...ormConfig({ databaseUrl: config.DATABASE_URL, poolMax: 1, migrator: false }, null), connect: false });
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    // MikroORM.init's instance is the coordinator's Orm (one hoisted @mikro-orm/postgresql); the rule cannot see that.
    // eslint-disable-next-line @typescript-eslint/no-unsafe-class-instance-assignment
    const app = await buildApp({ config, orm, redis, version: readPlatformVersion(), logger: false });
    try {
      await app.ready();
      const res = await app.inject({ method: 'GET', url: '/openapi.json' });
      if (res.statusCode !== 200) throw new Error(`GET /openapi.json answered ${res.statusCode}: ${res.body.slice(0, 300)}`);
      const doc = res.json<OpenApiDocument>();
      const table = app.routeAuthTable;
      const authOf = (method: string, path: string): OperationAuth | undefined =>
        table.find((r) => r.method === method.toUpperCase() && r.url === fastifyPath(path))?.auth;
      return renderApiMarkdown(doc, authOf);
    } finally {
      await app.close();
    }
  } finally {
    await orm.close(true);
    // quit, not disconnect: a command the closed app still had on its way gets its reply instead of
    // an unhandled "Connection is closed" (seen once in a full run); as the service closes its own.
    await deleteKeys(redis, prefix).finally(() => redis.quit().catch(() => redis.disconnect()));
  }
}

async function deleteKeys(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length) await redis.del(...keys);
  } while (cursor !== '0');
}
