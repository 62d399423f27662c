import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  bindTool,
  generateTsigKey,
  runTool,
  startNamedProcess,
  zoneText,
  type ZoneRecordSpec,
  type ZoneSpec,
} from '../../coordinator/src/dns/named-runtime.js';

/**
 * A real BIND `named` for tests: a temp directory with a fresh TSIG key, named.conf and zone
 * files, named in the foreground as a child process on a free high port of 127.0.0.1, plus `dig`
 * and `nsupdate` helpers for checks that do not go through the code under test. The config,
 * key and process handling is coordinator/src/dns/named-runtime.ts, shared with `npm start`.
 */

export type { ZoneRecordSpec, ZoneSpec };

export interface NamedServer {
  host: '127.0.0.1';
  port: number;
  key: { name: string; secret: string; algorithm: 'hmac-sha256' };
  /** The key clause as tsig-keygen wrote it (dig/nsupdate `-k`). */
  keyFile: string;
  dir: string;
  zoneFile(zone: string): string;
  /** `dig @127.0.0.1 -p <port> -k <keyFile> ...args`; returns stdout. */
  dig(args: string[], opts?: { signed?: boolean }): Promise<string>;
  /** Runs nsupdate signed with the key; `commands` without server/send. Returns stdout. */
  nsupdate(commands: string[]): Promise<string>;
  /** named's log lines so far. */
  logs(): string[];
  /** Sends a signal to the running named (SIGKILL, SIGSTOP, SIGCONT); resolves once a killed one has exited. */
  signal(sig: NodeJS.Signals): Promise<void>;
  /** Starts named again on the same port and files (after a kill), resolving once it answers. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export async function startNamed(opts: { zones: ZoneSpec[]; keyName?: string }): Promise<NamedServer> {
  if (opts.zones.length === 0) throw new Error('startNamed needs at least one zone');
  const keyName = opts.keyName ?? 'sonar-test-key';
  const dir = await mkdtemp(path.join(tmpdir(), 'sonar-named-'));
  try {
    const keyFile = path.join(dir, 'tsig.key');
    const key = await generateTsigKey(keyName, keyFile);
    const zoneFile = (zone: string) => path.join(dir, `db.${zone.replace(/\.$/, '')}`);
    for (const z of opts.zones) await writeFile(zoneFile(z.name), zoneText(z));
    const zones = opts.zones.map((z) => ({ name: z.name, file: zoneFile(z.name) }));
    let proc = await startNamedProcess({ dir, keyFile, keyName, zones });
    const port = proc.port;
    const earlier: string[] = [];
    return {
      host: '127.0.0.1',
      port,
      key,
      keyFile,
      dir,
      zoneFile,
      async dig(digArgs, o = {}) {
        const base = ['@127.0.0.1', '-p', String(port), ...(o.signed === false ? [] : ['-k', keyFile])];
        return (await runTool(bindTool('dig'), [...base, ...digArgs])).stdout;
      },
      async nsupdate(commands) {
        const script = [`server 127.0.0.1 ${port}`, ...commands, 'send', ''].join('\n');
        return (await runTool(bindTool('nsupdate'), ['-k', keyFile], script)).stdout;
      },
      logs: () => [...earlier, ...proc.lines],
      async signal(sig) {
        proc.child.kill(sig);
        if (sig === 'SIGKILL' || sig === 'SIGTERM') await proc.exited;
        // kill() returns before every thread has stopped: a thread already running on another CPU
        // could still answer a query sent right after. Wait until all of them are stopped.
        if (sig === 'SIGSTOP') await allThreadsStopped(proc.child.pid!);
      },
      async restart() {
        earlier.push(...proc.lines);
        proc = await startNamedProcess({ dir, keyFile, keyName, zones, port });
      },
      async stop() {
        proc.child.kill('SIGCONT');
        await proc.stop();
        await rm(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
}

/** Resolves once every thread of the process is stopped (state T in /proc/PID/task/TID/stat). */
async function allThreadsStopped(pid: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const tids = await readdir(`/proc/${pid}/task`);
    const states = await Promise.all(tids.map(async (tid) => (await readFile(`/proc/${pid}/task/${tid}/stat`, 'utf8')).replace(/^.*\) /s, '')[0]));
    if (states.every((st) => st === 'T' || st === 't')) return;
    if (Date.now() > deadline) throw new Error(`named (pid ${pid}) did not stop: thread states ${states.join('')}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Sets a registered zone's cache policy columns directly (the API and CLI set them through dns:zone:add). */
export async function setZonePolicy(
  knex: { raw(sql: string, bindings: unknown[]): PromiseLike<unknown> },
  zone: string,
  policy: { invalidateEnabled?: boolean; invalidateIntervalSeconds?: number; protectFromClear?: boolean; cacheTtlSeconds?: number | null },
): Promise<void> {
  const columns = {
    invalidateEnabled: 'invalidate_enabled',
    invalidateIntervalSeconds: 'invalidate_interval_seconds',
    protectFromClear: 'protect_from_clear',
    cacheTtlSeconds: 'cache_ttl_seconds',
  };
  for (const [key, column] of Object.entries(columns)) {
    const value = policy[key as keyof typeof policy];
    if (value !== undefined) await knex.raw(`update dns_zones set ${column} = ? where zone = ?`, [value, zone]);
  }
}
