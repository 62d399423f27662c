#!/usr/bin/env node
import { spawn, type ChildProcess } from 'node:child_process';
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
import { startCoordinator, type RunningCoordinator } from './service.js';

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
  LOCAL_WORKER_SECRET?: string;
}

async function loadSecrets(): Promise<QuickstartSecrets> {
  const file = path.join(dataDir, 'secrets.json');
  if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')) as QuickstartSecrets;
  return saveSecrets({
    SESSION_SECRET: randomBytes(32).toString('base64url'),
    JWT_SECRET: randomBytes(32).toString('base64url'),
    EMBEDDED_PG_PASSWORD: randomBytes(18).toString('base64url'),
  });
}

async function saveSecrets(secrets: QuickstartSecrets): Promise<QuickstartSecrets> {
  await writeFile(path.join(dataDir, 'secrets.json'), JSON.stringify(secrets, null, 2), { mode: 0o600 });
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
    // Without a whisper model file the local worker transcribes with pocketsphinx (no download needed).
    const modelsDir = process.env.WHISPER_MODELS_DIR ?? path.join(dataDir, 'models');
    const hasSmall = ['ggml-small.bin', 'ggml-small.en.bin'].some((f) => existsSync(path.join(modelsDir, f)));
    config = loadConfig({
      HOST: '127.0.0.1',
      SPEECH_MEDIA_DIR: path.join(dataDir, 'media'),
      SPEECH_DEFAULT_MODEL: hasSmall ? 'small' : 'pocketsphinx-en-us',
      SPEECH_LOCAL_MODELS: 'small,pocketsphinx-en-us',
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
  const worker = startLocalWorker(svc, await ensureLocalWorkerSecret(svc, secrets), logger);

  const url = config.PUBLIC_BASE_URL;
  const lines = [
    '',
    `  Sonar is running at ${url}`,
    `  Sign in:      ${url}/login`,
    `  Transcribe:   ${url}/speech (default model ${config.SPEECH_DEFAULT_MODEL})`,
    `  API docs:     ${url}/docs`,
    `  Worker gRPC:  ${config.GRPC_HOST === '0.0.0.0' ? '127.0.0.1' : config.GRPC_HOST}:${svc.grpcPort} (local worker agent "local" started)`,
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
    await worker.stop();
    await svc.close();
    await redis.stop();
    await embedded?.stop();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
}

/** The local runner authenticates like any remote worker, with a secret kept in .data/secrets.json. */
async function ensureLocalWorkerSecret(svc: RunningCoordinator, secrets: QuickstartSecrets): Promise<string> {
  if (secrets.LOCAL_WORKER_SECRET && (await svc.workers.authenticate(secrets.LOCAL_WORKER_SECRET))) return secrets.LOCAL_WORKER_SECRET;
  const exists = (await svc.workers.listWorkers()).some((w) => w.name === 'local');
  const secret = exists ? await svc.workers.rotateSecret('local') : (await svc.workers.createWorker('local')).secret;
  await saveSecrets({ ...secrets, LOCAL_WORKER_SECRET: secret });
  return secret;
}

/**
 * Runs the same worker agent a GPU host runs, as a child process; restarts it if it dies,
 * except when the coordinator refused it (bad secret or contract), which a restart cannot fix.
 */
function startLocalWorker(svc: RunningCoordinator, secret: string, logger: pino.Logger) {
  const bin = path.join(repoRoot, 'worker/dist/bin.js');
  let child: ChildProcess | null = null;
  let stopping = false;
  const launch = () => {
    child = spawn(process.execPath, [bin, '--coordinator', `127.0.0.1:${svc.grpcPort}`, '--local'], {
      env: { ...process.env, WORKER_SECRET: secret, WHISPER_MODELS_DIR: process.env.WHISPER_MODELS_DIR ?? path.join(dataDir, 'models') },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    child.once('exit', (code) => {
      if (stopping) return;
      if (code === 2 || code === 3) {
        logger.error({ code }, 'local worker agent was refused by the coordinator; not restarting');
        return;
      }
      logger.warn({ code }, 'local worker agent exited; restarting in 2 s');
      setTimeout(launch, 2_000).unref();
    });
  };
  launch();
  return {
    stop: () =>
      new Promise<void>((resolve) => {
        stopping = true;
        const c = child as ChildProcess | null;
        if (!c || c.exitCode !== null || c.signalCode !== null) return resolve();
        c.once('exit', () => resolve());
        c.kill('SIGTERM');
      }),
  };
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
