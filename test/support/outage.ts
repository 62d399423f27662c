import { spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, readFileSync, readdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { canConnect, withAdminClient } from './infra.js';
import { Proc, freePort, startNode } from './processes.js';

/**
 * Backing services that a test may stop and start again (outage tests), and a coordinator as a
 * real child process, so that "it did not crash" is observable as "the process is still running".
 */

async function until(probe: () => Promise<boolean>, timeoutMs: number, what: string) {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The newest Debian PostgreSQL server binaries, or null. */
export function postgresBinDir(): string | null {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const versions = readdirSync(root)
    .filter((v) => existsSync(path.join(root, v, 'bin', 'postgres')) && existsSync(path.join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] ? path.join(root, versions[0], 'bin') : null;
}

/** uid/gid of the `postgres` system user when running as root (PostgreSQL refuses to run as root). */
function postgresIds(): { uid: number; gid: number } | Record<string, never> {
  if (process.getuid?.() !== 0) return {};
  const uid = Number(spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).stdout.trim());
  const gid = Number(spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).stdout.trim());
  if (!Number.isInteger(uid) || !Number.isInteger(gid)) throw new Error('running as root needs a postgres system user');
  return { uid, gid };
}

/** A PostgreSQL cluster of its own (temporary data folder, free loopback port), stoppable. */
export class DedicatedPostgres {
  private proc: Proc | null = null;

  private constructor(
    private readonly bin: string,
    private readonly dir: string,
    readonly port: number,
  ) {}

  static async create(bin: string): Promise<DedicatedPostgres> {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'sonar-outage-pg-'));
    const ids = postgresIds();
    if ('uid' in ids) chownSync(dir, ids.uid, ids.gid);
    const init = spawnSync(path.join(bin, 'initdb'), ['-D', path.join(dir, 'data'), '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-locale'], {
      ...ids,
      encoding: 'utf8',
    });
    if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr}`);
    const pg = new DedicatedPostgres(bin, dir, await freePort());
    await pg.start();
    return pg;
  }

  get adminUrl() {
    return this.url('postgres');
  }

  url(database: string) {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  async start() {
    const child = spawn(
      path.join(this.bin, 'postgres'),
      ['-D', path.join(this.dir, 'data'), '-p', String(this.port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'fsync=off'],
      { ...postgresIds(), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    this.proc = new Proc(child);
    await until(() => canConnect(this.adminUrl), 30_000, `PostgreSQL on port ${this.port}`);
  }

  /**
   * SIGSTOP (freeze) or SIGCONT (thaw) to the postmaster and every process it started (backends,
   * background workers): connections stay open and the kernel still accepts new ones, but nothing
   * answers, like a hung host.
   */
  signalAll(signal: 'SIGSTOP' | 'SIGCONT') {
    const pid = this.proc?.child.pid;
    if (!pid) throw new Error('PostgreSQL is not running');
    const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(/\s+/).filter(Boolean).map(Number);
    for (const p of [pid, ...children]) process.kill(p, signal);
  }

  /** Fast shutdown: open connections are terminated (SQLSTATE 57P01), new ones refused. */
  async stop() {
    await this.proc?.stop('SIGINT');
    this.proc = null;
  }

  async createDatabase(name: string) {
    await withAdminClient(this.adminUrl, (c) => c.query(`create database ${name}`));
    return this.url(name);
  }

  async destroy() {
    await this.stop();
    await rm(this.dir, { recursive: true, force: true });
  }
}

/** A redis-server child without persistence: a restart comes back empty, like a failover to a blank node. */
export class DedicatedRedis {
  private proc: Proc | null = null;

  private constructor(readonly port: number) {}

  static async create(): Promise<DedicatedRedis> {
    const r = new DedicatedRedis(await freePort());
    await r.start();
    return r;
  }

  get url() {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start() {
    const child = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.proc = new Proc(child);
    await this.proc.waitFor(/Ready to accept connections/, 15_000);
  }

  /** Killed outright: no graceful close of client connections. */
  async kill() {
    await this.proc?.stop('SIGKILL');
    this.proc = null;
  }
}

/** `node coordinator/dist/main.js` with `env`; resolves once it logged "coordinator ready". */
export async function startCoordinatorProcess(env: Record<string, string>) {
  const proc = startNode('coordinator/dist/main.js', [], { ...env, LOG_LEVEL: 'info' });
  const ready = await Promise.race([
    proc.waitFor(/"coordinator ready"/, 60_000),
    proc.exited.then((code) => {
      throw new Error(`coordinator exited with ${code}:\n${proc.lines.join('\n')}`);
    }),
  ]);
  const { url, grpcPort } = JSON.parse(ready) as { url: string; grpcPort: number };
  return {
    proc,
    url,
    grpcPort,
    /** Still running, i.e. nothing crashed it. */
    get alive() {
      return proc.child.exitCode === null && proc.child.signalCode === null;
    },
  };
}
