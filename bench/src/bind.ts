// A throwaway BIND `named` for bench/src/dns.ts, started through the coordinator's named runtime
// (coordinator/dist/dns/named-runtime.js), plus timed `dig` / `nsupdate` runners and the zone.
import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { bindTool, generateTsigKey, startNamedProcess, type NamedProcess } from '../../coordinator/dist/dns/named-runtime.js';

export { bindTool as tool };

/** Runs a command; resolves { stdout, stderr, ms } (wall time including process start), rejects on a non-zero exit. */
export interface RunResult {
  stdout: string;
  stderr: string;
  /** Wall time including the process start. */
  ms: number;
}

export interface RunOptions {
  input?: string;
  /** A file that receives stdout instead of the pipe (`/dev/null` to discard it). */
  stdoutTo?: string;
  timeout?: number;
}

export function run(cmd: string, args: string[], { input, stdoutTo, timeout = 120_000 }: RunOptions = {}): Promise<RunResult> {
  return new Promise<RunResult>((resolve, reject) => {
    const out = stdoutTo ? openSync(stdoutTo, 'w') : 'pipe';
    const t0 = performance.now();
    const child = spawn(cmd, args, { stdio: [input === undefined ? 'ignore' : 'pipe', out, 'pipe'] });
    if (typeof out === 'number') closeSync(out);
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    child.stdout?.on('data', (b: Buffer) => stdout.push(b));
    child.stderr?.on('data', (b: Buffer) => stderr.push(b));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeout);
    child.once('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(new Error(`${cmd}: ${err.message}${err.code === 'ENOENT' ? ' (install bind9 and bind9-dnsutils)' : ''}`));
    });
    child.once('close', (code, signal) => {
      const ms = performance.now() - t0;
      clearTimeout(timer);
      const res = { stdout: Buffer.concat(stdout).toString(), stderr: Buffer.concat(stderr).toString(), ms };
      if (code === 0) resolve(res);
      else
        reject(
          new Error(`${path.basename(cmd)} ${args.slice(0, 6).join(' ')} … exited ${code ?? signal}: ${res.stderr.trim()} ${res.stdout.slice(0, 500).trim()}`),
        );
    });
    if (input !== undefined) {
      child.stdin?.on('error', () => undefined); // an early exit is reported by 'close'
      child.stdin?.end(input);
    }
  });
}

/**
 * Starts named (the coordinator's own runtime, as the quick start and tests use it) with one
 * primary zone whose file is already written at `zoneFile` (inside `dir`), and a fresh TSIG key
 * that may transfer and update it. Adds timed `dig` / `nsupdate` runners for the comparisons.
 */
export interface BenchNamed {
  port: number;
  keyName: string;
  secret: string;
  keyFile: string;
  /** `-y hmac-sha256:name:secret`, as dig takes it. */
  yArg: string;
  dig(args: string[], opts?: RunOptions): Promise<RunResult>;
  /** One update message: `commands` without server/send. */
  nsupdate(commands: string[]): Promise<RunResult>;
  logs(): string[];
  stop(): Promise<void>;
}

export async function startNamed({
  dir,
  zone,
  zoneFile,
  keyName = 'sonar-bench-key',
  signal,
}: {
  dir: string;
  zone: string;
  zoneFile: string;
  keyName?: string;
  signal?: AbortSignal;
}): Promise<BenchNamed> {
  mkdirSync(dir, { recursive: true });
  const keyFile = path.join(dir, 'tsig.key');
  const { secret } = await generateTsigKey(keyName, keyFile);
  // A 100k-record zone takes a moment to load.
  const named: NamedProcess = await startNamedProcess({ dir, keyFile, keyName, zones: [{ name: zone, file: zoneFile }], readyTimeoutMs: 60_000 });
  signal?.addEventListener('abort', () => named.child.kill('SIGKILL'), { once: true });
  const digBase = ['@127.0.0.1', '-p', String(named.port)];
  return {
    port: named.port,
    keyName,
    secret,
    keyFile,
    /** `-y hmac-sha256:name:secret`, as dig takes it. */
    yArg: `hmac-sha256:${keyName}:${secret}`,
    dig: (args, opts = {}) => run(bindTool('dig'), [...digBase, ...args], opts),
    /** One update message: `commands` without server/send. */
    nsupdate: (commands) => run(bindTool('nsupdate'), ['-k', keyFile], { input: [`server 127.0.0.1 ${named.port}`, ...commands, 'send', ''].join('\n') }),
    logs: () => [...named.lines],
    stop: () => named.stop(),
  };
}

// ---- the zone --------------------------------------------------------------------------------------
const DEPTS = ['eng', 'ops', 'sales', 'hr', 'lab', 'db', 'web', 'edge', 'mail', 'dev', 'qa', 'prod', 'stage', 'corp', 'vpn', 'iot'];
export const WORDS = ['amber', 'birch', 'cobalt', 'delta', 'ember', 'falcon', 'garnet', 'harbor', 'indigo', 'juniper', 'kestrel', 'lumen'];

/** Host i's IPv4 address (unique per i up to 2^24). */
export const hostIp = (i: number): string => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
export const hostName = (i: number, zone: string): string => `h${i}.${DEPTS[i % DEPTS.length]}.${zone}`;

/**
 * A zone file with exactly `total` records (SOA, NS and ns1 A included): hosts h<i>.<dept> each
 * with an A record, and by turns AAAA (every 2nd), TXT (every 3rd: team/owner words or SPF),
 * a www-<i> CNAME to the host (every 4th) and MX (every 5th). Returns the text and the host count.
 */
export function makeZone(zone: string, total: number): { text: string; records: number; hosts: number } {
  const out = [
    '$TTL 300',
    `@ IN SOA ns1.${zone}. hostmaster.${zone}. 1 3600 600 86400 300`,
    `@ IN NS ns1.${zone}.`,
    `ns1 IN A 127.0.0.1`,
    `@ IN MX 10 mx1.${zone}.`,
    `mx1 IN A 127.0.0.2`,
  ];
  let count = 5;
  let hosts = 0;
  const add = (line: string) => {
    if (count >= total) return false;
    out.push(line);
    count++;
    return true;
  };
  for (let i = 0; count < total; i++) {
    const owner = hostName(i, zone) + '.';
    hosts = i + 1;
    add(`${owner} IN A ${hostIp(i)}`);
    if (i % 2 === 0) add(`${owner} IN AAAA fd00:${(i >> 16).toString(16)}:${(i & 0xffff).toString(16)}::1`);
    if (i % 3 === 0)
      add(
        i % 6 === 0
          ? `${owner} IN TXT "team=${DEPTS[i % DEPTS.length]}" "owner=${WORDS[Math.floor(i / 6) % WORDS.length]}"`
          : `${owner} IN TXT "v=spf1 ip4:${hostIp(i)} include:_spf.${zone} -all"`,
      );
    if (i % 4 === 0) add(`www-${i}.${zone}. 600 IN CNAME ${owner}`);
    if (i % 5 === 0) add(`${owner} IN MX ${10 + (i % 3) * 10} mx1.${zone}.`);
  }
  return { text: `${out.join('\n')}\n`, records: count, hosts };
}
