import { randomBytes } from 'node:crypto';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres, type EmbeddedPg } from '../../coordinator/src/infra/embedded-postgres.js';
import { resolveRedis, type RedisRuntime } from '../../coordinator/src/infra/redis-runtime.js';
import { migrate, openOrm } from '../../coordinator/src/db/orm.js';
import { buildWeb } from '../../scripts/src/web-build.js';
import { DEFAULT_PG_ADMIN_URL, canConnect, databaseUrl, withAdminClient } from './infra.js';

declare module 'vitest' {
  export interface ProvidedContext {
    pgAdminUrl: string;
    templateDatabase: string;
    runId: string;
    redisUrl: string;
  }
}

/**
 * Once per test run: find PostgreSQL and Redis, create a migrated template database that each
 * test file clones (a fresh database per file), and drop everything this run created at the end.
 */
export default async function setup(project: TestProject) {
  const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  const root = path.resolve(import.meta.dirname, '../..');
  // The web console's bundle, built from the current sources: no test sees a stale one.
  await buildWeb(root);
  let embedded: EmbeddedPg | null = null;

  let adminUrl = process.env.TEST_DATABASE_URL ?? DEFAULT_PG_ADMIN_URL;
  if (!(await canConnect(adminUrl))) {
    if (process.env.TEST_DATABASE_URL) throw new Error(`TEST_DATABASE_URL=${adminUrl} is not reachable`);
    embedded = await startEmbeddedPostgres({
      dataDir: path.join(root, '.data/test-postgres'),
      port: 54330,
      password: 'sonar-test',
      database: 'postgres',
    });
    adminUrl = databaseUrl(embedded.url, 'postgres');
  }
  const redis: RedisRuntime = await resolveRedis({ url: process.env.TEST_REDIS_URL, dataDir: path.join(root, '.data/test-redis') });

  const template = `sonar_test_${runId}`;
  await withAdminClient(adminUrl, (c) => c.query(`create database ${template}`));
  const orm = await openOrm({ databaseUrl: databaseUrl(adminUrl, template), poolMax: 2 });
  await migrate(orm);
  await orm.close(true);

  project.provide('pgAdminUrl', adminUrl);
  project.provide('templateDatabase', template);
  project.provide('runId', runId);
  project.provide('redisUrl', redis.url);

  return async () => {
    await withAdminClient(adminUrl, async (c) => {
      const { rows } = await c.query<{ datname: string }>('select datname from pg_database where datname like $1', [`${template}%`]);
      for (const { datname } of rows) await c.query(`drop database if exists "${datname}" with (force)`);
    });
    await redis.stop();
    await embedded?.stop();
  };
}
