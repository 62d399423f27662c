import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import { freePort } from './ports.js';
import { Redis } from 'ioredis';

export interface RedisRuntime {
  url: string;
  /** How it was found, for the start-up banner. */
  source: 'REDIS_URL' | 'localhost' | 'child';
  /** The redis-server child's PID when source is 'child'. */
  pid?: number;
  stop(): Promise<void>;
}

async function pingable(url: string): Promise<boolean> {
  const client = new Redis(url, { lazyConnect: true, connectTimeout: 1_000, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

/**
 * Finds a Redis for the quick start and the tests: REDIS_URL if given; else one already on
 * localhost:6379; else a `redis-server` from PATH started as a child process; else a clear error.
 */
export async function resolveRedis(opts: { url?: string | undefined; dataDir: string }): Promise<RedisRuntime> {
  if (opts.url) {
    if (!(await pingable(opts.url))) throw new Error(`REDIS_URL=${opts.url} does not answer PING`);
    return { url: opts.url, source: 'REDIS_URL', stop: async () => undefined };
  }
  const local = 'redis://127.0.0.1:6379';
  if (await pingable(local)) return { url: local, source: 'localhost', stop: async () => undefined };

  const port = await freePort();
  await mkdir(opts.dataDir, { recursive: true });
  let child: ChildProcess;
  try {
    child = await new Promise<ChildProcess>((resolve, reject) => {
      const c = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', opts.dataDir], {
        stdio: 'ignore',
        // Its own session: a Ctrl-C in the terminal reaches the quick start only, which stops Redis last.
        detached: true,
      });
      c.once('error', reject);
      c.once('spawn', () => resolve(c));
    });
  } catch {
    throw new Error(
      'No Redis available: set REDIS_URL, start Redis on localhost:6379, or install redis-server ' +
        '(Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis) so it can be started for you.',
    );
  }
  const url = `redis://127.0.0.1:${port}`;
  for (let i = 0; i < 50 && !(await pingable(url)); i++) await new Promise((r) => setTimeout(r, 100));
  if (!(await pingable(url))) {
    child.kill('SIGKILL');
    throw new Error('redis-server was started but did not answer PING within 5 s');
  }
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null) {
        resolve();
        return;
      }
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    });
  return { url, source: 'child', ...(child.pid !== undefined ? { pid: child.pid } : {}), stop };
}
