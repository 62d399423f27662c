import type {} from '@fastify/jwt';
import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyServerOptions, LightMyRequestResponse } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, inject } from 'vitest';
import { buildApp } from '../../coordinator/src/app.js';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import { loadConfig, type Config } from '../../coordinator/src/config.js';
import { openOrm, type Orm } from '../../coordinator/src/db/orm.js';
import { readPlatformVersion } from '../../coordinator/src/version.js';
import { databaseUrl, withAdminClient } from './infra.js';

export interface TestDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

/** A fresh, migrated database for one test file, cloned from the run's template. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const admin = inject('pgAdminUrl') as string | undefined;
  if (admin === undefined) {
    // Only the e2e project's global setup makes the template database (vitest.config.ts).
    throw new Error(`${expect.getState().testPath ?? 'this file'} needs PostgreSQL: it belongs in the e2e project, not in vitest.config.ts's UNIT list`);
  }
  const name = `${inject('templateDatabase')}_${randomBytes(4).toString('hex')}`;
  await withAdminClient(admin, (c) => c.query(`create database ${name} template ${inject('templateDatabase')}`));
  return {
    name,
    url: databaseUrl(admin, name),
    drop: () => withAdminClient(admin, (c) => c.query(`drop database if exists ${name} with (force)`)).then(() => undefined),
  };
}

/** Environment for a coordinator under test; extra values override. */
export function testEnv(db: TestDatabase, extra: Record<string, string> = {}): Record<string, string> {
  return {
    NODE_ENV: 'test',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    DATABASE_URL: db.url,
    DATABASE_POOL_MAX: '4',
    REDIS_URL: inject('redisUrl'),
    REDIS_KEY_PREFIX: `sonar-test:${db.name}:`,
    SESSION_SECRET: 'test-session-secret-0123456789abcdef',
    JWT_SECRET: 'test-jwt-secret-0123456789abcdef0123',
    PORT: '0',
    GRPC_PORT: '0',
    HOST: '127.0.0.1',
    GRPC_HOST: '127.0.0.1',
    // A test file makes hundreds of speech API requests a minute from one loopback address; the
    // throttle tests set the specification's 120 (the default) themselves.
    SPEECH_RATE_LIMIT_PER_MINUTE: '1000',
    ...extra,
  };
}

export interface TestApp {
  app: FastifyInstance;
  config: Config;
  orm: Orm;
  redis: Redis;
  accounts: AccountService;
  db: TestDatabase;
  close(): Promise<void>;
}

/**
 * The real application over a fresh database and the real Redis, driven with app.inject().
 * `beforeReady` may register extra routes (for example probes of an auth policy) before use;
 * `logger` replaces the pino options (a test capturing the log passes its own stream).
 */
export async function createTestApp(
  opts: { env?: Record<string, string>; beforeReady?: (app: FastifyInstance) => Promise<void> | void; logger?: FastifyServerOptions['logger'] } = {},
): Promise<TestApp> {
  const db = await createTestDatabase();
  const config = loadConfig(testEnv(db, opts.env));
  const orm = await openOrm({ databaseUrl: config.DATABASE_URL, poolMax: config.DATABASE_POOL_MAX });
  const redis = new Redis(config.REDIS_URL, { maxRetriesPerRequest: 3 });
  const app = await buildApp({ config, orm, redis, version: readPlatformVersion(), logger: opts.logger ?? { level: config.LOG_LEVEL } });
  await opts.beforeReady?.(app);
  await app.ready();
  return {
    app,
    config,
    orm,
    redis,
    accounts: new AccountService(orm),
    db,
    async close() {
      await app.close();
      // Leave no keys behind in a shared Redis.
      const keys = await redis.keys(`${config.REDIS_KEY_PREFIX}*`);
      if (keys.length) await redis.del(...keys);
      await redis.quit();
      await orm.close(true);
      await db.drop();
    },
  };
}

/** Cookie jar for app.inject(): keeps the cookies a response sets. */
export class CookieJar {
  private readonly cookies = new Map<string, string>();

  store(res: LightMyRequestResponse) {
    for (const c of res.cookies as Array<{ name: string; value: string; expires?: Date; maxAge?: number }>) {
      if ((c.expires && c.expires.getTime() < Date.now()) || c.maxAge === 0) this.cookies.delete(c.name);
      else this.cookies.set(c.name, c.value);
    }
    return res;
  }

  header(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }
}

/** Signs in through the HTML form like a browser and returns the jar with the session cookie. */
export async function browserLogin(app: FastifyInstance, username: string, password: string) {
  const jar = new CookieJar();
  const page = jar.store(await app.inject({ method: 'GET', url: '/login' }));
  const csrf = extractCsrf(page.body);
  const res = jar.store(
    await app.inject({
      method: 'POST',
      url: '/login',
      headers: { cookie: jar.header(), 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ _csrf: csrf, username, password, next: '/' }).toString(),
    }),
  );
  return { jar, res };
}

export function extractCsrf(body: string): string {
  const m = /name="_csrf" value="([^"]+)"/.exec(body);
  if (!m?.[1]) throw new Error('no CSRF token in page');
  return m[1];
}

export function randomName(prefix = 'user') {
  return `${prefix}${randomBytes(4).toString('hex')}`;
}

/** A user of the test app and the Bearer header of a fresh JWT for them. */
export interface TestUser {
  id: number;
  name: string;
  password: string;
  auth: { authorization: string };
}

export async function createJwtUser(
  t: Pick<TestApp, 'app' | 'accounts'>,
  permissions: string[],
  opts: { isAdmin?: boolean; prefix?: string } = {},
): Promise<TestUser> {
  const name = randomName(opts.prefix);
  const { user, password } = await t.accounts.createUser({ username: name, permissions, isAdmin: opts.isAdmin ?? false });
  const token = t.app.jwt.sign({ sub: String(user.id), typ: 'access' });
  return { id: user.id, name, password, auth: { authorization: `Bearer ${token}` } };
}

/**
 * A fresh database and ORM for the enclosing describe block (made in beforeAll, dropped in
 * afterAll), with a raw-SQL helper. Read `orm` inside tests, not at collection time.
 */
export function useTestOrm() {
  const ctx = {
    db: undefined as unknown as TestDatabase,
    orm: undefined as unknown as Orm,
    sql: async <T = Record<string, unknown>>(q: string, b: unknown[] = []) => (await ctx.orm.em.getConnection().getKnex().raw(q, b)).rows as T[],
  };
  beforeAll(async () => {
    ctx.db = await createTestDatabase();
    ctx.orm = await openOrm({ databaseUrl: ctx.db.url, poolMax: 2 });
  });
  afterAll(async () => {
    await ctx.orm?.close(true);
    await ctx.db?.drop();
  });
  return ctx;
}
