#!/usr/bin/env node
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { AccountService } from './accounts/account-service.js';
import { ConfigError, loadConfig } from './config.js';
import { startEmbeddedPostgres, type EmbeddedPg } from './infra/embedded-postgres.js';
import { resolveRedis } from './infra/redis-runtime.js';
import { startCoordinator } from './service.js';

/**
 * `npm start`: the whole service on one machine with no setup. PostgreSQL is embedded (data under
 * .data/postgres), Redis is found or started, secrets are generated once into .data/secrets.json,
 * and an administrator is created on first run. Every variable of .env.example still applies.
 */
const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const dataDir = path.resolve(process.env.SONAR_DATA_DIR ?? path.join(repoRoot, '.data'));

interface QuickstartSecrets {
  SESSION_SECRET: string;
  JWT_SECRET: string;
  EMBEDDED_PG_PASSWORD: string;
}

async function loadSecrets(): Promise<QuickstartSecrets> {
  const file = path.join(dataDir, 'secrets.json');
  if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')) as QuickstartSecrets;
  const secrets = {
    SESSION_SECRET: randomBytes(32).toString('base64url'),
    JWT_SECRET: randomBytes(32).toString('base64url'),
    EMBEDDED_PG_PASSWORD: randomBytes(18).toString('base64url'),
  };
  await writeFile(file, JSON.stringify(secrets, null, 2), { mode: 0o600 });
  return secrets;
}

async function main() {
  await mkdir(dataDir, { recursive: true, mode: 0o755 });
  await chmod(dataDir, 0o755); // the embedded PostgreSQL runs as another user when we are root
  const logger = pino({ level: process.env.LOG_LEVEL ?? 'info' });
  const secrets = await loadSecrets();

  let embedded: EmbeddedPg | null = null;
  let databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) {
    logger.info('starting embedded PostgreSQL');
    embedded = await startEmbeddedPostgres({
      dataDir: path.join(dataDir, 'postgres'),
      port: Number(process.env.EMBEDDED_PG_PORT ?? 54329),
      password: secrets.EMBEDDED_PG_PASSWORD,
      database: 'sonar',
      log: (line) => logger.debug({ postgres: true }, line),
    });
    databaseUrl = embedded.url;
  }
  const redis = await resolveRedis({ url: process.env.REDIS_URL, dataDir: path.join(dataDir, 'redis') });
  logger.info({ source: redis.source, url: redis.url }, 'using Redis');

  let config;
  try {
    config = loadConfig({
      HOST: '127.0.0.1',
      SESSION_SECRET: secrets.SESSION_SECRET,
      JWT_SECRET: secrets.JWT_SECRET,
      ...process.env,
      DATABASE_URL: databaseUrl,
      REDIS_URL: redis.url,
    });
  } catch (err) {
    if (err instanceof ConfigError) console.error(err.message);
    await redis.stop();
    await embedded?.stop();
    process.exit(78);
  }

  const svc = await startCoordinator(config, { logger });
  const admin = await ensureAdmin(new AccountService(svc.orm));

  const url = config.PUBLIC_BASE_URL;
  const lines = [
    '',
    `  Sonar is running at ${url}`,
    `  Sign in:      ${url}/login`,
    `  API docs:     ${url}/docs`,
    `  Worker gRPC:  ${config.GRPC_HOST === '0.0.0.0' ? '127.0.0.1' : config.GRPC_HOST}:${svc.grpcPort}`,
    admin.password
      ? `  Admin:        username "${admin.username}", password "${admin.password}"`
      : `  Admin:        username "${admin.username}" (password was printed on first run; reset with npm run cli -- user:password ${admin.username})`,
    `  Data folder:  ${dataDir}`,
    '',
  ];
  process.stdout.write(lines.join('\n') + '\n');

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping');
    await svc.close();
    await redis.stop();
    await embedded?.stop();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
}

/** Creates the first administrator once; its password is kept (0600) so later runs can show it. */
async function ensureAdmin(accounts: AccountService): Promise<{ username: string; password: string | null }> {
  const file = path.join(dataDir, 'initial-admin.json');
  const existing = await accounts.findUser('admin');
  if (existing) {
    const saved = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as { password?: string }) : {};
    return { username: 'admin', password: saved.password ?? null };
  }
  const { password } = await accounts.createUser({ username: 'admin', isAdmin: true });
  await writeFile(file, JSON.stringify({ username: 'admin', password }, null, 2), { mode: 0o600 });
  return { username: 'admin', password };
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
