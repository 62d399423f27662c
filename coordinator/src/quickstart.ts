#!/usr/bin/env node
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { POCKETSPHINX_MODEL, WHISPER_MODEL_FILES, localWorkerMissing } from '@sonar/shared';
import { loggerOptions } from './http/log-redaction.js';
import { AccountService } from './accounts/account-service.js';
import { ConfigError, loadConfig } from './config.js';
import { AnotherRunError, ChildGuard } from './infra/child-guard.js';
import { startEmbeddedPostgres, type EmbeddedPg } from './infra/embedded-postgres.js';
import { resolveRedis } from './infra/redis-runtime.js';
import { setLocalWorkerProblem } from './speech/local-worker-status.js';
import { onShutdownSignal } from './infra/shutdown.js';
import { startCoordinator, type RunningCoordinator } from './service.js';
import {
  BIND_INSTALL_HINT,
  bindInstalled,
  generateTsigKey,
  parseKeyClause,
  startNamedProcess,
  stopStaleNamed,
  superviseNamed,
  zoneText,
  type NamedProcess,
} from './dns/named-runtime.js';
import { ZoneRegistry } from './dns/zone-registry.js';

/**
 * `npm start`: the whole service on one machine with no setup. PostgreSQL is embedded (data under
 * .data/postgres), Redis is found or started, secrets are generated once into .data/secrets.json,
 * and an administrator is created on first run. Every variable of .env.example still applies.
 *
 * Its children (PostgreSQL, redis-server, named, the worker agent) do not outlive it: a watchdog
 * stops them when it dies, even by SIGKILL, and a new run first stops whatever a killed run left
 * (see infra/child-guard.ts).
 */
const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const dataDir = path.resolve(process.env.SONAR_DATA_DIR ?? path.join(repoRoot, '.data'));

interface QuickstartSecrets {
  SESSION_SECRET: string;
  JWT_SECRET: string;
  EMBEDDED_PG_PASSWORD: string;
  LOCAL_WORKER_SECRET?: string;
  /** Added after the first release of the quick start: generated on the next run where missing. */
  ASSISTANT_SECRET_KEY?: string;
}

async function loadSecrets(): Promise<QuickstartSecrets> {
  const file = path.join(dataDir, 'secrets.json');
  if (existsSync(file)) {
    const saved = JSON.parse(readFileSync(file, 'utf8')) as QuickstartSecrets;
    return saved.ASSISTANT_SECRET_KEY ? saved : saveSecrets({ ...saved, ASSISTANT_SECRET_KEY: randomBytes(32).toString('base64url') });
  }
  return saveSecrets({
    SESSION_SECRET: randomBytes(32).toString('base64url'),
    JWT_SECRET: randomBytes(32).toString('base64url'),
    EMBEDDED_PG_PASSWORD: randomBytes(18).toString('base64url'),
    ASSISTANT_SECRET_KEY: randomBytes(32).toString('base64url'),
  });
}

async function saveSecrets(secrets: QuickstartSecrets): Promise<QuickstartSecrets> {
  await writeFile(path.join(dataDir, 'secrets.json'), JSON.stringify(secrets, null, 2), { mode: 0o600 });
  return secrets;
}

async function main() {
  await mkdir(dataDir, { recursive: true, mode: 0o755 });
  await chmod(dataDir, 0o755); // the embedded PostgreSQL runs as another user when we are root
  const logger = pino(loggerOptions(process.env.LOG_LEVEL ?? 'info'));
  let guard: ChildGuard;
  try {
    guard = await ChildGuard.open({ stateFile: path.join(dataDir, 'run', 'quickstart.json'), ownerMatch: 'quickstart', log: (m) => logger.warn(m) });
  } catch (err) {
    if (!(err instanceof AnotherRunError)) throw err;
    console.error(err.message);
    process.exit(1);
  }
  const secrets = await loadSecrets();

  let embedded: EmbeddedPg | null = null;
  let databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) {
    logger.info('starting embedded PostgreSQL');
    const pgDir = path.resolve(dataDir, 'postgres');
    embedded = await startEmbeddedPostgres({
      dataDir: pgDir,
      port: Number(process.env.EMBEDDED_PG_PORT ?? 54329),
      password: secrets.EMBEDDED_PG_PASSWORD,
      database: 'sonar',
      log: (line) => logger.debug({ postgres: true }, line),
      notice: (line) => logger.warn(line),
    });
    // SIGINT is PostgreSQL's fast shutdown: sessions are ended, the data is checkpointed.
    guard.watch(embedded.pid, { name: 'postgres', signal: 'SIGINT', match: [pgDir], graceMs: 30_000 });
    databaseUrl = embedded.url;
  }
  const redis = await resolveRedis({ url: process.env.REDIS_URL, dataDir: path.join(dataDir, 'redis') });
  // redis-server rewrites its command line to "redis-server 127.0.0.1:PORT".
  if (redis.pid !== undefined) guard.watch(redis.pid, { name: 'redis', signal: 'SIGTERM', match: ['redis-server', `:${new URL(redis.url).port}`] });
  logger.info({ source: redis.source, url: redis.url }, 'using Redis');
  // The admin CLI announces its chat-log and credential changes to this coordinator's caches over
  // this Redis (cli/runner.ts reads the file when neither DATABASE_URL nor REDIS_URL is set).
  await mkdir(path.join(dataDir, 'run'), { recursive: true });
  await writeFile(path.join(dataDir, 'run', 'redis-url'), `${redis.url}\n`);

  let config;
  try {
    // Without a whisper model file the local worker transcribes with pocketsphinx (no download needed).
    const modelsDir = process.env.WHISPER_MODELS_DIR ?? path.join(dataDir, 'models');
    const hasSmall = WHISPER_MODEL_FILES.small.some((f) => existsSync(path.join(modelsDir, f)));
    config = loadConfig({
      // Loopback only unless asked otherwise: the admin password and worker secrets live here.
      HOST: '127.0.0.1',
      GRPC_HOST: '127.0.0.1',
      SPEECH_MEDIA_DIR: path.join(dataDir, 'media'),
      SPEECH_DEFAULT_MODEL: hasSmall ? 'small' : POCKETSPHINX_MODEL,
      SPEECH_LOCAL_MODELS: `small,${POCKETSPHINX_MODEL}`,
      SESSION_SECRET: secrets.SESSION_SECRET,
      JWT_SECRET: secrets.JWT_SECRET,
      // Encrypts the assistant connector's tenant credentials and token caches at rest.
      ASSISTANT_SECRET_KEY: secrets.ASSISTANT_SECRET_KEY,
      ...process.env,
      DATABASE_URL: databaseUrl,
      REDIS_URL: redis.url,
    });
  } catch (err) {
    if (err instanceof ConfigError) console.error(err.message);
    await redis.stop();
    await embedded?.stop();
    guard.close();
    process.exit(78);
  }

  // What the local worker agent needs, checked before anything is announced: one line now, the
  // same sentence in the banner, on /speech and in GET /api/speech/status.
  const missing = localWorkerMissing({ pocketsphinx: config.SPEECH_DEFAULT_MODEL === POCKETSPHINX_MODEL, modelDir: process.env.POCKETSPHINX_MODEL_DIR });
  setLocalWorkerProblem(missing);
  if (missing) console.error(missing);

  const svc = await startCoordinator(config, { logger });
  // What has started so far, for the shutdown handler installed next, and the start-up step in
  // flight: a stop waits for it (a named being started is stopped too), then no further step runs.
  const started: { worker?: ReturnType<typeof startLocalWorker>; dns?: Awaited<ReturnType<typeof startLocalDns>> } = {};
  let step: Promise<unknown> = Promise.resolve();
  const next = <T>(p: Promise<T>): Promise<T> => {
    step = p.catch(() => undefined);
    return p;
  };
  // The handler goes in as soon as the coordinator answers (before the local worker, named and the
  // banner): a Ctrl-C or SIGTERM at any moment after that stops whatever has started.
  onShutdownSignal(async (signal) => {
    stopping = true;
    logger.info({ signal }, 'stopping');
    // Readable lines beside the JSON log, as the banner is.
    const daemons = ['named', redis.pid !== undefined ? 'Redis' : null, embedded ? 'PostgreSQL' : null].filter(Boolean).join(', ');
    process.stdout.write(`\nStopping Sonar: the worker agent, the coordinator${daemons ? `, then ${daemons}` : ''}…\n`);
    try {
      await step;
      await stopAll();
    } catch (err) {
      // One line, not a stack trace: the watchdog stops whatever is left.
      console.error(`stopping failed: ${err instanceof Error ? err.message : String(err)}`);
      process.exit(1);
    }
    process.stdout.write('Sonar stopped.\n');
    process.exit(0);
  });

  const admin = await next(ensureAdmin(new AccountService(svc.orm)));
  const grpcHost = ['0.0.0.0', '::'].includes(config.GRPC_HOST) ? null : config.GRPC_HOST;
  const workerSecret = await next(ensureLocalWorkerSecret(svc, secrets));
  if (stopping) return;
  started.worker = startLocalWorker(svc, grpcHost ?? '127.0.0.1', workerSecret, config.OUTBOUND_ALLOW_RANGES, guard, logger);
  const dns = (started.dns = await next(startLocalDns(svc, guard, logger)));
  // "Sonar is running" means a file can be transcribed at once: the banner waits (a minute at most)
  // for the local worker to register the default model, else the submission would be refused.
  const notReady = missing || stopping ? null : await next(localWorkerReady(svc, config.SPEECH_DEFAULT_MODEL, 60_000));
  if (stopping) return;
  if (notReady) console.error(notReady);

  const url = config.PUBLIC_BASE_URL;
  const lines = [
    '',
    `  Sonar is running at ${url}`,
    `  Sign in:      ${url}/login`,
    `  Transcribe:   ${url}/speech (default model ${config.SPEECH_DEFAULT_MODEL})`,
    `  API docs:     ${url}/docs`,
    ...(missing ? [`  Local worker: ${missing}`] : notReady ? [`  Local worker: ${notReady}`] : []),
    `  Worker gRPC:  ${grpcHost ? `${grpcHost}:${svc.grpcPort}` : `port ${svc.grpcPort} on all interfaces (GRPC_HOST=${config.GRPC_HOST})`} (local worker agent "local" started)`,
    admin.password
      ? `  Admin:        username "${admin.username}", password "${admin.password}" (shown only now; store it)`
      : `  Admin:        username "${admin.username}" (its password was shown on the first run; set a new one with npm run cli -- user:password ${admin.username})`,
    `  ${dns.banner}`,
    `  Chat logs:    ${url}/irc (API ${url}/irc/api/networks; load logs with npm run cli -- irc:import --network NAME --source production PATH)`,
    `  Data folder:  ${dataDir}`,
    '',
  ];
  process.stdout.write(lines.join('\n') + '\n');

  async function stopAll() {
    // The children run in sessions of their own, so a Ctrl-C reaches only this process: the worker
    // agent stops first, the coordinator drains and closes, then named, Redis and PostgreSQL stop.
    // From now on named's exit is expected, not restarted.
    started.dns?.release();
    await started.worker?.stop();
    await svc.close();
    await started.dns?.stop();
    await redis.stop();
    guard.forget(redis.pid);
    await embedded?.stop();
    guard.forget(embedded?.pid);
    guard.close();
  }
}

/**
 * Waits until a connected worker serves `model` (the local worker's Hello registered it); the
 * sentence to print when it did not within `ms`, null once it does.
 */
async function localWorkerReady(svc: RunningCoordinator, model: string, ms: number): Promise<string | null> {
  const deadline = Date.now() + ms;
  for (;;) {
    const refusal = (await svc.speech.models.snapshot()).refusal(model);
    if (!refusal || stopping) return null;
    if (Date.now() > deadline) return `not connected after ${Math.round(ms / 1000)} s (${refusal.message}); see the log above`;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** A SIGINT or SIGTERM arrived: start-up takes no further step. */
let stopping = false;

const SAMPLE_ZONE = 'example.test';
const SAMPLE_KEY = 'sonar-quickstart-key';

/**
 * The DNS API's master: BIND `named` as a child process on 127.0.0.1:DNS_QUICKSTART_PORT (default
 * 53535) with one sample zone, a TSIG key and named's working files under .data/bind (created on
 * the first run, kept after: named's journals hold the API's changes). The zone is registered in
 * the DNS zone registry (server/port/paths brought up to date, its cache policy kept). Without
 * BIND, or when named cannot start, the rest runs and the banner says why.
 */
async function startLocalDns(
  svc: RunningCoordinator,
  guard: ChildGuard,
  logger: pino.Logger,
): Promise<{ banner: string; release: () => void; stop: () => Promise<void> }> {
  const none = (banner: string) => ({ banner, release: () => {}, stop: async () => {} });
  if (!bindInstalled()) return none(`DNS master:   not started; the DNS API needs BIND (${BIND_INSTALL_HINT})`);
  const port = Number(process.env.DNS_QUICKSTART_PORT ?? 53535);
  if (!Number.isInteger(port) || port < 1 || port > 65535) return none(`DNS master:   not started; DNS_QUICKSTART_PORT must be 1-65535`);
  const dir = path.join(dataDir, 'bind');
  const keyFile = path.join(dir, 'tsig.key');
  const zoneFile = path.join(dir, `db.${SAMPLE_ZONE}`);
  let named: NamedProcess;
  try {
    await mkdir(dir, { recursive: true });
    const keyName = existsSync(keyFile) ? parseKeyClause(readFileSync(keyFile, 'utf8')).name : (await generateTsigKey(SAMPLE_KEY, keyFile)).name;
    if (!existsSync(zoneFile)) {
      await writeFile(
        zoneFile,
        zoneText({
          name: SAMPLE_ZONE,
          serial: 1,
          records: [
            { name: `www.${SAMPLE_ZONE}`, type: 'A', rdata: '192.0.2.10' },
            { name: `www.${SAMPLE_ZONE}`, type: 'AAAA', rdata: '2001:db8::10' },
            { name: `mail.${SAMPLE_ZONE}`, type: 'A', rdata: '192.0.2.25' },
            { name: '@', type: 'MX', rdata: `10 mail.${SAMPLE_ZONE}.` },
            { name: '@', type: 'TXT', rdata: '"v=spf1 mx -all"' },
            { name: `docs.${SAMPLE_ZONE}`, type: 'CNAME', rdata: `www.${SAMPLE_ZONE}.` },
          ],
        }),
      );
    }
    const stale = await stopStaleNamed(dir);
    if (stale !== null) logger.warn(`stopped named (pid ${stale}) left running by an earlier run`);
    named = await startNamedProcess({
      dir,
      keyFile,
      keyName,
      port,
      zones: [{ name: SAMPLE_ZONE, file: zoneFile }],
      onLine: (line) => logger.debug({ named: true }, line),
    });
  } catch (err) {
    logger.warn({ err }, 'BIND named did not start; the DNS API has no local master');
    const why = (err as Error).message.split('\n').find((l) => /address in use|failed|error|cannot/i.test(l)) ?? (err as Error).message.split('\n')[0];
    return none(`DNS master:   not started (port ${port}: ${why?.trim()}); set DNS_QUICKSTART_PORT to a free port`);
  }
  const confMatch = { name: 'named', signal: 'SIGTERM' as const, match: [path.join(dir, 'named.conf')] };
  guard.watch(named.child.pid, confMatch);
  // The quick start notices when its named dies (killed, crashed) and starts it again, with backoff.
  const supervisor = superviseNamed(
    named,
    () =>
      startNamedProcess({
        dir,
        keyFile,
        keyName: parseKeyClause(readFileSync(keyFile, 'utf8')).name,
        port,
        zones: [{ name: SAMPLE_ZONE, file: zoneFile }],
        onLine: (line) => logger.debug({ named: true }, line),
      }),
    {
      onExit: ({ code, signal, lastLines, delayMs }) => {
        guard.forget(named.child.pid);
        logger.error({ code, signal, lastLines }, `BIND named exited unexpectedly; starting it again in ${delayMs} ms`);
      },
      onRestart: (p, attempt) => {
        named = p;
        guard.watch(p.child.pid, confMatch);
        logger.warn({ pid: p.child.pid, attempt }, `BIND named is running again on 127.0.0.1:${port}`);
      },
      onRestartFailed: (err, delayMs) => logger.error({ err }, `BIND named did not start again; next try in ${delayMs} ms`),
    },
  );
  const zones = new ZoneRegistry(svc.orm);
  const existing = await zones.get(SAMPLE_ZONE);
  if (!existing || existing.server !== '127.0.0.1' || existing.port !== port || existing.filePath !== zoneFile || existing.keyPath !== keyFile) {
    await zones.upsert({
      zone: SAMPLE_ZONE,
      file: zoneFile,
      keyFile,
      server: '127.0.0.1',
      port,
      ...(existing
        ? {
            cacheTtlSeconds: existing.cacheTtlSeconds,
            invalidateEnabled: existing.invalidateEnabled,
            invalidateIntervalSeconds: existing.invalidateIntervalSeconds,
            protectFromClear: existing.protectFromClear,
          }
        : {}),
    });
  }
  return {
    banner: `DNS master:   127.0.0.1:${port} (zone ${SAMPLE_ZONE}; try GET /api/dns/zones with the admin session or a key from npm run cli -- dnskey:create --name me)`,
    release: () => supervisor.release(),
    stop: async () => {
      await supervisor.stop();
      guard.forget(named.child.pid);
    },
  };
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
 * It stops by itself when the quick start is gone (--exit-with-parent): its stdin is a pipe that only
 * this process holds open, which the kernel closes however this process ends, even before the agent
 * has finished starting (a changed parent PID is the agent's second sign). The watchdog stops it too.
 * It downloads URL sources with the coordinator's outbound allow-list (it runs on the same host).
 */
function startLocalWorker(
  svc: RunningCoordinator,
  host: string,
  secret: string,
  outboundAllowRanges: readonly string[],
  guard: ChildGuard,
  logger: pino.Logger,
) {
  const bin = path.join(repoRoot, 'worker/dist/bin.js');
  let child: ChildProcess | null = null;
  let stopping = false;
  const launch = () => {
    const c = spawn(process.execPath, [bin, '--coordinator', `${host}:${svc.grpcPort}`, '--local', '--exit-with-parent'], {
      env: {
        ...process.env,
        WORKER_SECRET: secret,
        WHISPER_MODELS_DIR: process.env.WHISPER_MODELS_DIR ?? path.join(dataDir, 'models'),
        SONAR_OUTBOUND_ALLOW_RANGES: outboundAllowRanges.join(','),
      },
      stdio: ['pipe', 'inherit', 'inherit'],
      // Its own session, like PostgreSQL, Redis and named: a Ctrl-C reaches the quick start only,
      // which stops the agent (it hands its job back) before the coordinator drains and closes.
      detached: true,
    });
    child = c;
    // Nothing is written; the open write end is the agent's lifeline (see above).
    c.stdin?.on('error', () => undefined);
    c.once('spawn', () => guard.watch(c.pid, { name: 'worker', signal: 'SIGTERM', match: [bin] }));
    c.once('exit', (code) => {
      guard.forget(c.pid);
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
        const c = child;
        if (!c || c.exitCode !== null || c.signalCode !== null) {
          resolve();
          return;
        }
        c.once('exit', () => resolve());
        c.kill('SIGTERM');
      }),
  };
}

/**
 * Creates the first administrator once and returns its password only then: it is not kept
 * anywhere (a kept copy goes stale once changed). Earlier versions kept it in initial-admin.json;
 * that plaintext copy is removed.
 */
async function ensureAdmin(accounts: AccountService): Promise<{ username: string; password: string | null }> {
  await rm(path.join(dataDir, 'initial-admin.json'), { force: true });
  if (await accounts.findUser('admin')) return { username: 'admin', password: null };
  const { password } = await accounts.createUser({ username: 'admin', isAdmin: true });
  return { username: 'admin', password };
}

main().catch((err: unknown) => {
  // A start-up step that failed because a stop closed what it used: the shutdown handler ends the process.
  if (stopping) return;
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
