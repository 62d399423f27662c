// Small helpers shared by bench/src/run.ts (the coordinator side) and bench/src/load.ts (the load generator).
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import os from 'node:os';
import type { AccountService } from '../../coordinator/dist/accounts/account-service.js';
import type { RunningCoordinator } from '../../coordinator/dist/service.js';
import type { LoadGenerator } from './load.js';

/** The bench's start (epoch ms); forked children get the parent's through BENCH_EPOCH_MS, so log times agree. */
export const epochMs = Number(process.env.BENCH_EPOCH_MS) || Date.now();

/** Progress goes to stderr, so stdout carries only the result table. */
export function log(...parts: unknown[]): void {
  process.stderr.write(`[bench ${((Date.now() - epochMs) / 1000).toFixed(1).padStart(5)}s] ${parts.join(' ')}\n`);
}

/** Runs `fn` under the V8 CPU profiler of this process (the coordinator's) and writes the profile to `file` (none: just runs it). */
export async function profiled<T>(file: string | null, fn: () => Promise<T>): Promise<T> {
  if (!file) return fn();
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  try {
    return await fn();
  } finally {
    const { profile } = await session.post('Profiler.stop');
    writeFileSync(file, JSON.stringify(profile));
    session.disconnect();
    log(`CPU profile written to ${file}`);
  }
}

// ---- CPU accounting (Linux /proc; anything unreadable is left out) -----------------------------------
export let clockTicks = 100;
try {
  clockTicks = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
} catch {
  // keep the usual 100 Hz
}

interface Jiffies {
  total: number;
  busy: number;
}

function machineJiffies(): Jiffies | null {
  try {
    const f = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number);
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0); // user nice system idle iowait irq softirq steal
    return { total, busy: total - (f[3] ?? 0) - (f[4] ?? 0) };
  } catch {
    return null;
  }
}

/**
 * CPU seconds used so far by every process named `name` (`postgres`: the server and its backends),
 * with the CPU of their children that ended (cutime, cstime): a backend that closes during a
 * measurement moves its time to the server's count instead of taking it out of the sum.
 */
function processSeconds(name: string): number | null {
  let ticks = 0;
  let found = false;
  try {
    for (const pid of readdirSync('/proc')) {
      if (!/^\d+$/.test(pid)) continue;
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        if (stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) !== name) continue;
        const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        ticks += Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]); // utime, stime, cutime, cstime
        found = true;
      } catch {
        // the process ended meanwhile
      }
    }
  } catch {
    return null;
  }
  return found ? ticks / clockTicks : null;
}

export interface CpuSample {
  at: bigint;
  self: NodeJS.CpuUsage;
  machine: Jiffies | null;
  postgres: number | null;
  redis: number | null;
}

export interface CpuShare {
  self: number;
  postgres: number | null;
  /** Every `redis-server` process on the machine. */
  redis: number | null;
  /** CPU seconds behind the shares above (wall time × share). */
  seconds: { self: number; postgres: number | null; redis: number | null };
  machine: number | null;
  cores: number;
}

export function cpuSample(): CpuSample {
  return {
    at: process.hrtime.bigint(),
    self: process.cpuUsage(),
    machine: machineJiffies(),
    postgres: processSeconds('postgres'),
    redis: processSeconds('redis-server'),
  };
}

/** Percent of one core used since `from` by this process, by PostgreSQL, and by the whole machine (of all cores). */
export function cpuSince(from: CpuSample): CpuShare {
  const to = cpuSample();
  const wallS = Number(to.at - from.at) / 1e9;
  const self = process.cpuUsage(from.self);
  const pct = (seconds: number) => Math.round((seconds / wallS) * 100);
  const selfS = (self.user + self.system) / 1e6;
  const postgresS = from.postgres !== null && to.postgres !== null ? to.postgres - from.postgres : null;
  const redisS = from.redis !== null && to.redis !== null ? to.redis - from.redis : null;
  return {
    self: pct(selfS),
    postgres: postgresS !== null ? pct(postgresS) : null,
    redis: redisS !== null ? pct(redisS) : null,
    seconds: { self: selfS, postgres: postgresS, redis: redisS },
    machine:
      from.machine && to.machine && to.machine.total > from.machine.total
        ? Math.round(((to.machine.busy - from.machine.busy) / (to.machine.total - from.machine.total)) * 100)
        : null,
    cores: os.cpus().length,
  };
}

/** Nearest-rank percentile (p in 0..100) of an array of numbers; NaN when empty. */
export function percentile(values: readonly number[], p: number): number {
  if (!values.length) return NaN;
  const sorted = Float64Array.from(values).sort();
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] ?? NaN;
}

export interface Summary {
  n: number;
  p50: number;
  p99: number;
  max: number;
}

export function summarize(values: readonly number[]): Summary {
  return { n: values.length, p50: percentile(values, 50), p99: percentile(values, 99), max: values.length ? values.reduce((a, b) => (b > a ? b : a)) : NaN };
}

/** Milliseconds with a precision that suits their size. */
export function ms(v: number): string {
  if (!Number.isFinite(v)) return 'n/a';
  if (v < 10) return `${v.toFixed(2)} ms`;
  if (v < 100) return `${v.toFixed(1)} ms`;
  if (v < 10_000) return `${Math.round(v)} ms`;
  return `${(v / 1000).toFixed(1)} s`;
}

export function secs(vMs: number): string {
  return Number.isFinite(vMs) ? `${(vMs / 1000).toFixed(2)} s` : 'n/a';
}

export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

export const sleep = (msDelay: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, msDelay));

/** Runs `fn(i)` for i in 0..count-1 with at most `limit` in flight; resolves with the results in order. */
export async function pool<T>(count: number, limit: number, fn: (i: number) => Promise<T>): Promise<T[]> {
  const out = new Array<T>(count);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, count) }, async () => {
      while (next < count) {
        const i = next++;
        out[i] = await fn(i);
      }
    }),
  );
  return out;
}

/** Deterministic pseudo-random numbers in [0, 1) (mulberry32: small, fast, seedable), so runs pick comparable data. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Environment for a coordinator started in-process by the bench: its own database and Redis
 * prefix, fresh secrets, ephemeral loopback ports, no logging. `extra` adds or overrides values.
 */
export function coordinatorEnv(
  { databaseUrl, redisUrl, redisPrefix, mediaDir }: { databaseUrl: string; redisUrl: string; redisPrefix: string; mediaDir: string },
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    DATABASE_URL: databaseUrl,
    REDIS_URL: redisUrl,
    REDIS_KEY_PREFIX: redisPrefix,
    SESSION_SECRET: randomBytes(24).toString('hex'),
    JWT_SECRET: randomBytes(24).toString('hex'),
    PORT: '0',
    GRPC_PORT: '0',
    HOST: '127.0.0.1',
    GRPC_HOST: '127.0.0.1',
    LOG_LEVEL: 'silent',
    SPEECH_MEDIA_DIR: mediaDir,
    ...extra,
  };
}

// ---- types shared by the phases ------------------------------------------------------------------

/** Adds a row to the result table. */
export type Row = (measurement: string, value: string) => void;
/** Marks the run failed and adds a FAILED row for `measurement`. */
export type Fail = (measurement: string, err: unknown) => void;
/** A named cleanup step; the steps run last in, first out. */
export type Cleanup = [name: string, step: () => Promise<unknown>];

/** A SQL query on the bench database (the coordinator's own pool). */
export type Query = <T = Record<string, unknown>>(sql: string, params?: unknown[]) => Promise<T[]>;

/** What run.ts hands every phase that drives the in-process coordinator from the load generator. */
export interface PhaseContext {
  svc: RunningCoordinator;
  q: Query;
  accounts: AccountService;
  runId: string;
  load: LoadGenerator;
  row: Row;
  fail: Fail;
  target: (name: string, met: boolean, measured: string) => void;
  checkInterrupted: () => void;
}

/** A JWT from POST /api/account/login, as an API client gets one. */
export async function loginJwt(baseUrl: string, username: string, password: string): Promise<string> {
  const login = await fetch(`${baseUrl}/api/account/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username, password }),
  });
  if (!login.ok) throw new Error(`login failed: HTTP ${login.status} ${await login.text()}`);
  return ((await login.json()) as { token: string }).token;
}

/** What the bench reads from the DNS API's JSON answers (only the fields it looks at). */
export interface DnsApiBody {
  ok?: boolean;
  reason?: string;
  method?: string;
  record_count?: number;
  serial?: number | string;
  zoneData?: unknown[];
  results?: Array<{ ok: boolean }>;
  update_messages?: number;
}

/** The message text of an error (or the value itself), as the table and the log show it. */
export function errorText(err: unknown): string {
  return String((err as { message?: unknown } | null)?.message ?? err);
}

/** The stack of an error (or the value itself), for the log. */
export function errorStack(err: unknown): string {
  return String((err as { stack?: unknown } | null)?.stack ?? err);
}

// ---- statements sent to PostgreSQL ----------------------------------------------------------------------
/**
 * Counts the statements the coordinator sends through its ORM's knex (every query, raw statement,
 * BEGIN and COMMIT; each is one round trip to PostgreSQL), by name: the prepared statement's name,
 * else the statement's first words. `stop()` detaches and returns the counts.
 */
export function countStatements(svc: RunningCoordinator): { stop(): { total: number; byName: Map<string, number> } } {
  const knex = svc.orm.em.getConnection().getKnex();
  const byName = new Map<string, number>();
  const onQuery = (q: { sql?: string; options?: { name?: string } }) => {
    const name = q.options?.name ?? (q.sql ?? '').replace(/\s+/g, ' ').trim().slice(0, 40);
    byName.set(name, (byName.get(name) ?? 0) + 1);
  };
  knex.on('query', onQuery);
  return {
    stop() {
      knex.removeListener('query', onQuery);
      let total = 0;
      for (const n of byName.values()) total += n;
      return { total, byName };
    },
  };
}

/** Counts per unit, largest first: `2.00 speech_finish, 0.45 BEGIN; …`. */
export function perUnitText(byName: Map<string, number>, units: number, top = 6): string {
  return [...byName]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([name, n]) => `${(n / units).toFixed(2)} ${name}`)
    .join(', ');
}
