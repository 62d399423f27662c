// Coordinator benchmark: `npm run bench` (builds first). Prints one markdown table on stdout;
// progress goes to stderr. Needs the compiled packages (coordinator/dist, worker/dist), PostgreSQL
// and Redis (BENCH_PG_ADMIN_URL, BENCH_REDIS_URL), and for the speech part ffmpeg, sox, espeak-ng,
// pocketsphinx + en-us; for the DNS part (bench/src/dns.ts) BIND: named, dig, nsupdate, tsig-keygen.
// BENCH_ONLY=speech, dns, irc, diarization, subtitles (bench/src/subtitles.ts: the SRT cues of two long recordings,
// before and after the cue builder), fleet (bench/src/fleet.ts: 100 and 1,000 connected workers) or http
// (bench/src/http.ts: mixed HTTP reads from 64 connections) runs one part; the default
// is speech, DNS, the fleet, HTTP reads and diarization (bench/src/diarization.ts: DER of the worker's diarizer on meeting
// excerpts), plus the chat-log archive (bench/src/irc.ts) when its generated database exists (it is
// built once, apart: `npm run bench:irc:generate`). The subtitle part runs only when asked for
// (`BENCH_ONLY=subtitles`: about 20 minutes of pocketsphinx the first time; it needs neither
// PostgreSQL nor Redis). BENCH_ONLY=page (bench/src/page.ts, issue 38) runs the job page on a three-hour
// pass: server time, the waveform's peaks, the media route's memory, and in chromium at a phone viewport
// with 4× CPU throttling the first contentful paint and long tasks while playing; only when asked for.
//
// Speech:
// 1. protocol throughput: N queued URL jobs drained by simulated workers doing Claim, then Complete with claim_next (the next claim in the same call);
// 2. segment latency: jobs whose workers stream segments over ReportProgress, each watched by a
//    socket.io client (worker send -> browser receive);
// 3. pipeline overhead: the real worker agent (a child process) on an uploaded WAV, against the bare
//    pocketsphinx engine on the same file.
//
// The coordinator runs in this process; simulated workers and socket.io clients run in a forked load
// generator (bench/src/load.ts, forked as bench/dist/load.js) so they do not share its event loop. Everything created is removed at
// the end: the database, the run's Redis keys, temporary files, child processes.
import { execFileSync, fork, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import pg from 'pg';
import { AccountService } from '../../coordinator/dist/accounts/account-service.js';
import { loadConfig } from '../../coordinator/dist/config.js';
import { COORDINATOR_NODE_FLAGS } from '../../coordinator/dist/node-flags.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/dist/service.js';
import { POCKETSPHINX_MODEL, createEngines, decodeToWav, engineForModel } from '../../worker/dist/engines/index.js';
import { createDiarizer, readWav } from '../../worker/dist/diarization/index.js';
import { clusterPhases } from './cluster.js';
import { diarizationPhase } from './diarization.js';
import { dnsPhases } from './dns.js';
import { fleetPhases } from './fleet.js';
import { httpPhases } from './http.js';
import { subtitlesPhase } from './subtitles.js';
import { pagePhases } from './page.js';
import { IRC_GENERATE_HINT, ircBenchState, ircPhases } from './irc.js';
import {
  coordinatorEnv,
  countStatements,
  cpuSample,
  cpuSince,
  perUnitText,
  profiled,
  epochMs,
  errorStack,
  errorText,
  log,
  loginJwt,
  median,
  ms,
  pool,
  secs,
  type Cleanup,
  type CpuShare,
  type Query,
} from './lib.js';
import type { LoadGenerator, LoadReply, LoadRequest } from './load.js';

// This file runs as bench/dist/run.js: the repository root is two levels up.
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

// The coordinator runs in this process, so this process gets the V8 flags the coordinator is deployed
// with (the Dockerfile's CMD and `npm run serve`; docs/operations.md): started without them, the bench
// runs itself again with them and passes on its exit code (SIGTERM is passed on; Ctrl-C reaches both
// from the terminal). BENCH_NODE_FLAGS overrides them ("" for V8's defaults).
const nodeFlags = (process.env.BENCH_NODE_FLAGS ?? COORDINATOR_NODE_FLAGS.join(' ')).split(/\s+/).filter(Boolean);
if (nodeFlags.some((f) => !process.execArgv.includes(f)) && !process.env.BENCH_NODE_FLAGS_SET) {
  const child = spawn(process.execPath, [...process.execArgv, ...nodeFlags, ...process.argv.slice(1)], {
    stdio: 'inherit',
    env: { ...process.env, BENCH_NODE_FLAGS_SET: '1' },
  });
  process.on('SIGINT', () => undefined);
  process.on('SIGTERM', () => child.kill('SIGTERM'));
  const [code, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
  process.exit(code ?? (signal === 'SIGINT' ? 130 : 1));
}
const int = (name: string, fallback: number): number => {
  const v = Number(process.env[name]);
  return Number.isInteger(v) && v > 0 ? v : fallback;
};
const settings = {
  pgAdminUrl: process.env.BENCH_PG_ADMIN_URL || 'postgres://postgres@127.0.0.1:5432/postgres',
  redisUrl: process.env.BENCH_REDIS_URL || 'redis://127.0.0.1:6379',
  protocolJobs: int('BENCH_JOBS', 2000),
  protocolWarmupJobs: int('BENCH_WARMUP_JOBS', 500),
  protocolWorkers: int('BENCH_WORKERS', 20),
  /** BENCH_CLAIM_NEXT=0: the protocol phase's workers claim with Claim after every Complete (contract 3's loop). */
  protocolClaimNext: process.env.BENCH_CLAIM_NEXT !== '0',
  segmentJobs: int('BENCH_SEGMENT_JOBS', 50),
  segmentsPerJob: int('BENCH_SEGMENTS_PER_JOB', 40),
  segmentSpacingMs: int('BENCH_SEGMENT_SPACING_MS', 50),
  pipelineRuns: int('BENCH_PIPELINE_RUNS', 5),
};
const only = (process.env.BENCH_ONLY ?? '').trim().toLowerCase();
if (only && !['speech', 'dns', 'irc', 'diarization', 'subtitles', 'fleet', 'http', 'cluster', 'page'].includes(only)) {
  process.stderr.write(
    `BENCH_ONLY must be "speech", "dns", "irc", "diarization", "subtitles", "fleet", "http", "cluster" or "page" (or unset for all but subtitles, cluster and page), not "${only}"\n`,
  );
  process.exit(2);
}
// irc null: decided at start, by whether the generated chat-log archive exists.
const parts: { speech: boolean; dns: boolean; irc: boolean | null; diarization: boolean; fleet: boolean; http: boolean; cluster: boolean; page: boolean } = {
  speech: !only || only === 'speech',
  fleet: !only || only === 'fleet',
  dns: !only || only === 'dns',
  http: !only || only === 'http',
  irc: only === 'irc' ? true : only ? false : null,
  diarization: !only || only === 'diarization',
  // Only when asked for (bench/src/cluster.ts: one coordinator against two).
  cluster: only === 'cluster',
  // The job page on a three-hour pass (bench/src/page.ts): only when asked for (it needs chromium).
  page: only === 'page',
};
const SENTENCES = ['hello world', 'i would like a cup of coffee', 'please call me tomorrow morning', 'good morning everyone'];
// An address literal from a documentation range (allowed for this run through OUTBOUND_ALLOW_RANGES
// and never contacted): submission then measures the queue, not this sandbox's DNS resolver.
const URL_SOURCE = { type: 'url' as const, url: 'https://203.0.113.10/x.mp3' };

/** Rows of a query on the coordinator's database (`?` placeholders), typed by the caller. */

const runId = randomBytes(4).toString('hex');
const dbName = `sonar_bench_${runId}`;
const redisPrefix = `sonar-bench:${runId}:`;
const tmp = mkdtempSync(path.join(os.tmpdir(), 'sonar-bench-'));
const benchStart = performance.now();

const rows: Array<[measurement: string, value: string]> = [];
const row = (measurement: string, value: string) => {
  rows.push([measurement, value]);
};
/** A speed goal from the issue tracker: printed as MET or MISSED; a missed goal fails the run (exit 1). */
const target = (name: string, met: boolean, measured: string) => {
  if (!met) failed = true;
  row(`target: ${name}`, `${met ? 'MET' : 'MISSED'}: ${measured}`);
};
let failed = false;
const fail = (measurement: string, err: unknown) => {
  failed = true;
  row(measurement, `FAILED: ${errorText(err).split('\n')[0]}`);
  log(`${measurement} failed:`, errorStack(err));
};

// ---- cleanup (last in, first out; every step runs even when an earlier one fails) ---------------
const cleanups: Cleanup[] = [];
async function cleanup() {
  for (let next = cleanups.pop(); next; next = cleanups.pop()) {
    const [name, step] = next;
    try {
      await step();
    } catch (err) {
      log(`cleanup "${name}" failed: ${errorText(err)}`);
    }
  }
}
// Ctrl-C: stop the child processes and engine runs at once, skip the remaining phases, and let
// main()'s `finally` clean up (a second Ctrl-C exits without cleaning up).
const interrupt = new AbortController();
const onSignal = (signal: NodeJS.Signals) => {
  // A repeated SIGTERM (timeout(1) signals the process group, and the flag re-run above passes it on too) does not cut the cleanup short.
  if (interrupt.signal.aborted) {
    if (signal === 'SIGINT') process.exit(130);
    return;
  }
  log(`${signal}: stopping; cleaning up (press Ctrl-C again to exit at once)`);
  interrupt.abort(new Error(`interrupted by ${signal}`));
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);
// A rejection nobody handles (seen from Redis clients when the coordinator is closed with calls in
// flight) must not kill the process before the database and Redis keys are cleaned up.
process.on('unhandledRejection', (err) => {
  failed = true;
  log('unhandled rejection:', errorStack(err));
});
const checkInterrupted = () => interrupt.signal.throwIfAborted();
const onInterrupt = (fn: () => void) => interrupt.signal.addEventListener('abort', fn, { once: true });

async function adminQuery<Row extends pg.QueryResultRow>(sql: string) {
  const client = new pg.Client({ connectionString: settings.pgAdminUrl });
  await client.connect();
  try {
    return await client.query<Row>(sql);
  } finally {
    await client.end();
  }
}

function databaseUrl(name: string) {
  const u = new URL(settings.pgAdminUrl);
  u.pathname = `/${name}`;
  return u.toString();
}

async function deleteRedisKeys() {
  const redis = new Redis(settings.redisUrl, { maxRetriesPerRequest: 3 });
  try {
    let cursor = '0';
    let deleted = 0;
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${redisPrefix}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length) deleted += await redis.del(...keys);
    } while (cursor !== '0');
    log(`deleted ${deleted} Redis keys under ${redisPrefix}`);
  } finally {
    redis.disconnect();
  }
}

async function redisVersion() {
  const redis = new Redis(settings.redisUrl, { maxRetriesPerRequest: 3 });
  try {
    return /redis_version:(\S+)/.exec(await redis.info('server'))?.[1] ?? '?';
  } finally {
    redis.disconnect();
  }
}

// ---- the load generator (bench/src/load.ts, run as bench/dist/load.js) ------------------------------
function startLoadGenerator(): LoadGenerator {
  const child = fork(fileURLToPath(new URL('./load.js', import.meta.url)), [], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, BENCH_EPOCH_MS: String(epochMs) },
  });
  const pending = new Map<number, { resolve: (result: unknown) => void; reject: (err: Error) => void }>();
  let nextId = 0;
  const exited = new Promise<number | NodeJS.Signals | null>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)));
  child.on('message', (message) => {
    const m = message as LoadReply;
    const p = pending.get(m.id);
    pending.delete(m.id);
    if (m.error) p?.reject(new Error(`load generator: ${m.error}`));
    else p?.resolve('result' in m ? m.result : undefined);
  });
  void exited.then((code) => {
    for (const p of pending.values()) p.reject(new Error(`load generator exited (${code})`));
    pending.clear();
  });
  onInterrupt(() => child.kill('SIGKILL'));
  child.on('error', (err) => log(`load generator: ${err.message}`));
  return {
    call(cmd, args) {
      return new Promise((resolve, reject) => {
        if (!child.connected) {
          reject(new Error('load generator is not running'));
          return;
        }
        const id = nextId++;
        // The reply's result is what the command returned (LoadGenerator types it per command).
        pending.set(id, { resolve: resolve as (result: unknown) => void, reject });
        const request: LoadRequest = { id, cmd, args };
        child.send(request, (err) => {
          if (!err) return;
          pending.delete(id);
          reject(err);
        });
      });
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      if (child.connected) child.disconnect();
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

// ---- the worker agent (worker/dist/bin.js) as a child process --------------------------------------
async function startAgent(grpcPort: number, secretFile: string) {
  const child = spawn(
    process.execPath,
    [path.join(root, 'worker/dist/bin.js'), '--coordinator', `127.0.0.1:${grpcPort}`, '--secret-file', secretFile, '--work-dir', tmp],
    { cwd: root, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  const lines: string[] = [];
  const exited = new Promise<number | NodeJS.Signals | null>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)));
  let buffered = '';
  let onLine: (line: string) => void = () => undefined;
  child.stderr.on('data', (buf: Buffer) => {
    buffered += buf.toString();
    const parts = buffered.split('\n');
    buffered = parts.pop() ?? '';
    for (const l of parts) {
      lines.push(l);
      if (lines.length > 200) lines.shift();
      onLine(l);
    }
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the worker agent did not connect within 20 s:\n${lines.join('\n')}`)), 20_000);
    onLine = (l) => {
      if (l.includes('connected to coordinator')) {
        clearTimeout(timer);
        resolve();
      }
    };
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`the worker agent exited (${code}):\n${lines.join('\n')}`));
    });
  });
  onLine = () => undefined;
  onInterrupt(() => child.kill('SIGKILL'));
  return {
    lines,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

// ---- audio ------------------------------------------------------------------------------------------
/** ~30 s of espeak-ng speech: 12 sentences, each followed by 1 s of silence, as a 16 kHz mono WAV. */
function makeSpeech() {
  const dir = path.join(tmp, 'speech');
  mkdirSync(dir, { recursive: true });
  const silence = path.join(dir, 'silence.wav');
  execFileSync('sox', ['-n', '-r', '22050', '-c', '1', '-b', '16', silence, 'trim', '0', '1.0']);
  const parts: string[] = [];
  const sentences = [...SENTENCES, ...SENTENCES, ...SENTENCES];
  sentences.forEach((sentence, i) => {
    const part = path.join(dir, `part-${i}.wav`);
    execFileSync('espeak-ng', ['-v', 'en-us', '-w', part, `${sentence}.`]);
    parts.push(part, silence);
  });
  const file = path.join(tmp, 'speech.wav');
  execFileSync('sox', [...parts, '-r', '16000', '-c', '1', '-b', '16', file]);
  const durationSeconds = Number(execFileSync('soxi', ['-D', file]).toString().trim());
  return { file, durationSeconds, sentences: sentences.length };
}

function cpuText(cpu: CpuShare, loadCpu: number) {
  const parts = [`coordinator ${cpu.self}%`, `load generator ${loadCpu}%`];
  if (cpu.postgres !== null) parts.push(`PostgreSQL ${cpu.postgres}%`);
  return `${parts.join(', ')} of one core${cpu.machine !== null ? `; whole machine ${cpu.machine}% busy (${cpu.cores} cores)` : ''}`;
}

// ---- main -------------------------------------------------------------------------------------------
async function main() {
  cleanups.push(['temp files', async () => rmSync(tmp, { recursive: true, force: true })]);
  const cpus = os.cpus();
  row(
    'machine',
    `${cpus.length} × ${cpus[0]?.model.trim() ?? 'unknown CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, ${os.type()} ${os.release()}; load average at start ${(os.loadavg()[0] ?? 0).toFixed(2)}`,
  );
  // The diarization part alone needs neither PostgreSQL nor Redis.
  if (only === 'diarization') {
    row('software', `Node ${process.version}`);
    await diarizationPhase({ root, row, fail, target, signal: interrupt.signal });
    return;
  }
  // So does the subtitle part, which runs only when asked for.
  if (only === 'subtitles') {
    row('software', `Node ${process.version}`);
    await subtitlesPhase({ root, row, fail, target, signal: interrupt.signal });
    return;
  }
  const pgVersion = (await adminQuery<{ server_version: string }>('show server_version')).rows[0]!.server_version;
  row('software', `Node ${process.version}, PostgreSQL ${pgVersion.split(' ')[0]}, Redis ${await redisVersion()}`);
  cleanups.push(['redis keys', deleteRedisKeys]);

  // The chat-log part needs the archive `npm run bench:irc:generate` builds once (~15 min); a
  // default run includes it only when that exists, and never generates it.
  if (parts.irc === null) {
    parts.irc = Boolean(await ircBenchState(settings.pgAdminUrl).catch(() => null));
    if (!parts.irc) {
      log(`IRC part skipped: no generated chat-log archive; ${IRC_GENERATE_HINT}`);
      row('IRC archive', `skipped: no generated database sonar_bench_irc; ${IRC_GENERATE_HINT}`);
    }
  }
  const check = (ok: boolean) => {
    if (!ok) failed = true;
  };
  if (parts.speech || parts.dns || parts.fleet || parts.http || parts.cluster || parts.page) await coordinatorParts(check);
  if (parts.irc) {
    checkInterrupted();
    await ircPhases({ pgAdminUrl: settings.pgAdminUrl, redisUrl: settings.redisUrl, redisPrefix, tmp, runId, row, fail, check, checkInterrupted });
  }
  if (parts.diarization) {
    checkInterrupted();
    await diarizationPhase({ root, row, fail, target, signal: interrupt.signal });
  }
}

/** Speech, DNS, the fleet and the HTTP reads share one coordinator on a fresh database, dropped at the end. */
async function coordinatorParts(check: (ok: boolean) => void) {
  // Database and coordinator.
  log(`creating database ${dbName}`);
  await adminQuery(`create database ${dbName}`);
  cleanups.push([
    'drop database',
    async () => {
      await adminQuery(`drop database if exists ${dbName} with (force)`);
      log(`dropped database ${dbName}`);
    },
  ]);

  const env = coordinatorEnv(
    { databaseUrl: databaseUrl(dbName), redisUrl: settings.redisUrl, redisPrefix, mediaDir: path.join(tmp, 'media') },
    // The DNS reads must come from the cache the refresh phase filled, however long the run takes;
    // every DNS request of the bench comes from one client address: the default 300/min would answer 429.
    // The HTTP read phase's requests come through loopback as a proxy, each with its own client
    // address in X-Forwarded-For (the other phases send none: their address stays 127.0.0.1).
    // BENCH_IRC_SEARCH_CACHE_MB=0 measures the chat-log search without its answer cache.
    {
      DNS_CACHE_TTL_SECONDS: '86400',
      DNS_RATE_LIMIT_PER_MINUTE: '1000000',
      OUTBOUND_ALLOW_RANGES: '203.0.113.0/24',
      TRUST_PROXY: '127.0.0.1',
      ...(process.env.BENCH_IRC_SEARCH_CACHE_MB ? { IRC_SEARCH_CACHE_MB: process.env.BENCH_IRC_SEARCH_CACHE_MB } : {}),
    },
  );
  const config = loadConfig(env);
  log('starting the coordinator (migrations run now)');
  const svc = await startCoordinator(config);
  cleanups.push([
    'coordinator',
    async () => {
      await svc.close();
      log('coordinator closed');
    },
  ]);
  row(
    'coordinator',
    `in-process, DATABASE_POOL_MAX ${config.DATABASE_POOL_MAX}, LOG_LEVEL silent; load (simulated workers, socket.io and HTTP clients) from a forked load process; parts: ${(Object.keys(parts) as Array<keyof typeof parts>).filter((k) => parts[k]).join(' + ')}`,
  );
  const q: Query = (sql, params = []) => svc.orm.em.getConnection().execute(sql, params);

  const accounts = new AccountService(svc.orm);
  if (parts.speech) await speechPhases(svc, q, accounts);
  if (parts.fleet) {
    checkInterrupted();
    const load = startLoadGenerator();
    cleanups.push(['fleet load generator', () => load.stop()]);
    await fleetPhases({ svc, q, accounts, runId, load, row, fail, target, check, checkInterrupted });
  }
  if (parts.dns) {
    checkInterrupted();
    await dnsPhases({
      svc,
      accounts,
      tmp,
      runId,
      row,
      fail,
      check,
      signal: interrupt.signal,
      checkInterrupted,
      startLoadGenerator,
      cleanups,
    });
  }
  if (parts.cluster) {
    checkInterrupted();
    const load = startLoadGenerator();
    cleanups.push(['cluster load generator', () => load.stop()]);
    await clusterPhases({ svc, q, accounts, runId, load, row, fail, target, checkInterrupted, env, root, cleanups, check, startLoadGenerator });
    await load.stop();
  }
  if (parts.page) {
    checkInterrupted();
    await pagePhases({ svc, q, accounts, runId, row, fail, target, checkInterrupted, tmp, mediaDir: path.join(tmp, 'media') });
  }
  if (parts.http) {
    checkInterrupted();
    const load = startLoadGenerator();
    cleanups.push(['http load generator', () => load.stop()]);
    await httpPhases({ svc, q, accounts, runId, load, row, fail, target, checkInterrupted, signal: interrupt.signal, cleanups });
    await load.stop();
  }
}

// ---- speech phases ----------------------------------------------------------------------------------
async function speechPhases(svc: RunningCoordinator, q: Query, accounts: AccountService) {
  const { user, password } = await accounts.createUser({ username: `bench-${runId}`, permissions: ['speech.use'] });
  const token = await loginJwt(svc.url, user.username, password);

  // Submissions are refused for models no registered worker serves: register the simulated workers'
  // model the way a Hello stores it (they connect later, from the load generator).
  const catalog = await svc.workers.createWorker(`bench-catalog-${runId}`);
  await q('update speech_workers set capabilities = ?::jsonb where id = ?', [
    JSON.stringify({ models: ['small'], engines: ['bench'], diarization: true, canFetchUrls: true, device: 'cpu', local: false }),
    catalog.id,
  ]);

  const load = startLoadGenerator();
  cleanups.push(['load generator', () => load.stop()]);
  const address = `127.0.0.1:${svc.grpcPort}`;
  const createWorkers = (prefix: string, n: number) => pool(n, 4, async (i) => (await svc.workers.createWorker(`${prefix}-${i}`)).secret);

  // ---- 1. protocol throughput -------------------------------------------------------------------
  const N = settings.protocolJobs;
  const W = settings.protocolWorkers;
  let lastProtocolJob = 0;
  try {
    checkInterrupted();
    // Warm-up, untimed: the same workers drain a few hundred jobs first, so the timed run measures a
    // coordinator whose code is optimised and whose connections have their statements prepared.
    const secrets = await createWorkers(`bench-proto-${runId}`, W);
    const warmup = settings.protocolWarmupJobs;
    log(`protocol: warm-up with ${warmup} jobs (untimed)`);
    await pool(warmup, 8, async () => (await svc.speech.jobs.create(user, { channel: 'web', source: URL_SOURCE })).id);
    const claimNext = settings.protocolClaimNext;
    const warm = await load.call('protocol', { address, secrets, claimNext });
    if (warm.jobs !== warmup) throw new Error(`warm-up drained ${warm.jobs} of ${warmup} jobs`);
    log(`protocol: enqueueing ${N} URL jobs`);
    const tEnq = performance.now();
    const enqStatements = countStatements(svc);
    const ids = await pool(N, 8, async () => {
      checkInterrupted();
      return (await svc.speech.jobs.create(user, { channel: 'web', source: URL_SOURCE })).id;
    });
    const enqMs = performance.now() - tEnq;
    const enq = enqStatements.stop();
    lastProtocolJob = Math.max(...ids);
    const firstProtocolJob = Math.min(...ids);
    row(
      'job enqueue (JobService.create, 8 in flight)',
      `${Math.round((N / enqMs) * 1000)} jobs/s (${N} jobs in ${secs(enqMs)}); ${(enq.total / N).toFixed(2)} statements per job (${perUnitText(enq.byName, N)})`,
    );

    log(
      `protocol: ${W} simulated workers draining the queue (${claimNext ? 'Claim wait_ms 0, then Complete with claim_next' : 'Claim wait_ms 0 -> Complete'})`,
    );
    const cpu0 = cpuSample();
    const statements = countStatements(svc);
    const r = await profiled(process.env.BENCH_PROTOCOL_PROFILE || null, () => load.call('protocol', { address, secrets, claimNext }));
    const cpu = cpuSince(cpu0);
    const st = statements.stop();
    row(
      `protocol throughput (${W} workers)`,
      `${Math.round((r.jobs / r.elapsedMs) * 1000)} claim+complete/s (${r.jobs} jobs in ${secs(r.elapsedMs)} after ${warmup} untimed warm-up jobs; first half of the jobs ${Math.round(r.halves[0])}/s, second half ${Math.round(r.halves[1])}/s)`,
    );
    row(
      'claims: Claim calls / jobs claimed by a Complete (claim_next)',
      `${r.claimCalls} Claim calls (${r.claim.n} found a job) / ${r.claimedByComplete} jobs claimed by a Complete${claimNext ? '' : ' (BENCH_CLAIM_NEXT=0)'}`,
    );
    row('Claim latency p50 / p99 (job found)', `${ms(r.claim.p50)} / ${ms(r.claim.p99)} (max ${ms(r.claim.max)}, n=${r.claim.n})`);
    row(
      claimNext ? 'Complete (with the next claim) latency p50 / p99' : 'complete latency p50 / p99',
      `${ms(r.complete.p50)} / ${ms(r.complete.p99)} (max ${ms(r.complete.max)}, n=${r.complete.n})`,
    );
    row('CPU during protocol run', cpuText(cpu, r.loadCpu));
    const perPair = (seconds: number | null) => (seconds === null ? '?' : ((seconds * 1000) / r.jobs).toFixed(2));
    row(
      'CPU ms per claim+complete pair',
      `coordinator ${perPair(cpu.seconds.self)}, PostgreSQL ${perPair(cpu.seconds.postgres)} (every postgres process on the machine), load generator ${perPair((r.loadCpu / 100) * (r.elapsedMs / 1000))}`,
    );
    row('statements per claim+complete pair (each one round trip)', `${(st.total / r.jobs).toFixed(2)}: ${perUnitText(st.byName, r.jobs)}`);
    const pairsPerSecond = (r.jobs / r.elapsedMs) * 1000;
    target(`protocol ≥ 1,000 claim+complete pairs/s (${W} workers, own channels)`, pairsPerSecond >= 1000, `${Math.round(pairsPerSecond)}/s`);

    const [jobs] = await q<{ total: number; completed: number; first_attempt: number }>(
      `select count(*)::int as total, count(*) filter (where status = 'completed')::int as completed, count(*) filter (where attempt = 1)::int as first_attempt from speech_jobs where id between ? and ?`,
      [firstProtocolJob, lastProtocolJob],
    );
    const [leases] = await q<{ leases: number; jobs: number; completed: number }>(
      `select count(*)::int as leases, count(distinct job_id)::int as jobs, count(*) filter (where outcome = 'completed')::int as completed from speech_leases where job_id between ? and ?`,
      [firstProtocolJob, lastProtocolJob],
    );
    if (!jobs || !leases) throw new Error('the count queries returned no row');
    const ok =
      jobs.total === N &&
      jobs.completed === N &&
      jobs.first_attempt === N &&
      leases.leases === N &&
      leases.jobs === N &&
      leases.completed === N &&
      r.jobs === N &&
      r.distinctJobs === N &&
      r.anomalies.length === 0;
    if (!ok) failed = true;
    row(
      'protocol exactly-once check',
      `${ok ? 'PASS' : 'FAIL'}: ${jobs.completed}/${N} jobs completed (${jobs.first_attempt} on attempt 1), ${leases.leases} lease rows for ${leases.jobs} jobs, ` +
        `${r.distinctJobs} distinct of ${r.jobs} claims, ${r.anomalies.length} duplicate/odd completions`,
    );
  } catch (err) {
    fail(`protocol throughput (${W} workers)`, err);
  }

  // ---- 2. segment latency -----------------------------------------------------------------------
  const J = settings.segmentJobs;
  const S = settings.segmentsPerJob;
  try {
    checkInterrupted();
    log(`segments: enqueueing ${J} jobs and registering ${J} workers`);
    const ids = await pool(J, 8, async () => {
      checkInterrupted();
      return (await svc.speech.jobs.create(user, { channel: 'web', source: URL_SOURCE })).id;
    });
    const secrets = await createWorkers(`bench-seg-${runId}`, J);
    const cpu0 = cpuSample();
    const r = await load.call('segments', { address, secrets, url: svc.url, token, segmentsPerJob: S, spacingMs: settings.segmentSpacingMs });
    const cpu = cpuSince(cpu0);
    const offered = (J * 1000) / settings.segmentSpacingMs;
    row(
      `segment latency worker → socket.io p50 / p99 (${J} jobs × ${S} segments, ${settings.segmentSpacingMs} ms apart)`,
      `${ms(r.latency.p50)} / ${ms(r.latency.p99)} (max ${ms(r.latency.max)}, n=${r.latency.n})`,
    );
    row(
      'segment stream timing',
      `sends spanned ${secs(r.sendSpanMs)}; last segment received ${ms(r.lastReceiveAfterLastSendMs)} after the last send (delivered ${Math.round(r.deliveredPerSecond)} segments/s of ${offered} offered); streams acked and jobs completed after ${secs(r.streamMs)}`,
    );
    row('CPU during segment run', cpuText(cpu, r.loadCpu));
    target('segment latency worker → browser p99 ≤ 50 ms', r.latency.p99 <= 50, ms(r.latency.p99));
    const [db] = await q<{ jobs: number; completed: number; segments: number }>(
      `select count(*)::int as jobs, count(*) filter (where status = 'completed')::int as completed,
              (select count(*)::int from speech_segments where job_id > ?) as segments
         from speech_jobs where id > ?`,
      [lastProtocolJob, lastProtocolJob],
    );
    if (!db) throw new Error('the count query returned no row');
    const ok =
      r.clientsComplete === J &&
      r.problems.length === 0 &&
      r.storedAcks === J * S &&
      db.segments === J * S &&
      db.completed === J &&
      db.jobs === J &&
      ids.length === J;
    if (!ok) failed = true;
    row(
      'segment delivery check',
      `${ok ? 'PASS' : 'FAIL'}: ${r.clientsComplete}/${J} clients received all ${S} segments exactly once, in order; ${r.received} received of ${J * S} sent; ` +
        `${db.segments} stored; ${db.completed}/${J} jobs completed${r.problems.length ? `; problems: ${r.problems.slice(0, 5).join('; ')}` : ''}`,
    );
  } catch (err) {
    fail('segment latency worker → socket.io', err);
  }
  await load.stop();

  // ---- 3. pipeline overhead ---------------------------------------------------------------------
  try {
    checkInterrupted();
    const engine = engineForModel(createEngines(), POCKETSPHINX_MODEL);
    if (!engine) throw new Error(`no engine for ${POCKETSPHINX_MODEL}: is pocketsphinx with the en-us model installed?`);
    // Jobs ask for speaker labels (the default), so the agent also diarizes: the bare baseline does the
    // same work (the diarizer loaded once, as the agent loads it at start).
    const diarizer = await createDiarizer({ engine: 'default' });
    log('pipeline: making ~30 s of speech with espeak-ng + sox');
    const speech = makeSpeech();
    const bytes = readFileSync(speech.file);
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    row(
      'pipeline audio',
      `${speech.durationSeconds.toFixed(1)} s espeak-ng speech (${speech.sentences} sentences, 1 s gaps), 16 kHz mono WAV, ${(bytes.length / 1024).toFixed(0)} KiB`,
    );

    // Completion as the lease service reports it, timed in this process.
    const terminal = new Map<number, { status: string; at: number }>();
    const waiters = new Map<number, () => void>();
    svc.speech.repo.onTerminal((ended) => {
      for (const { jobId, status } of ended) {
        terminal.set(jobId, { status, at: performance.now() });
        waiters.get(jobId)?.();
      }
    });
    const waitTerminal = (jobId: number, timeoutMs: number) =>
      new Promise<{ status: string; at: number }>((resolve, reject) => {
        const done = () => {
          clearTimeout(timer);
          waiters.delete(jobId);
          resolve(terminal.get(jobId)!); // set before `done` runs
        };
        const timer = setTimeout(() => {
          waiters.delete(jobId);
          reject(new Error(`job ${jobId} did not finish within ${timeoutMs / 1000} s`));
        }, timeoutMs);
        if (terminal.has(jobId)) {
          done();
          return;
        }
        waiters.set(jobId, done);
        onInterrupt(() => {
          clearTimeout(timer);
          waiters.delete(jobId);
          reject(interrupt.signal.reason instanceof Error ? interrupt.signal.reason : new Error(String(interrupt.signal.reason)));
        });
      });

    const { secret } = await svc.workers.createWorker(`bench-agent-${runId}`);
    const secretFile = path.join(tmp, 'agent.secret');
    writeFileSync(secretFile, secret, { mode: 0o600 });
    log('pipeline: starting the worker agent (node worker/dist/bin.js)');
    const agent = await startAgent(svc.grpcPort, secretFile);
    cleanups.push(['worker agent', () => agent.stop()]);

    // One untimed engine run first: the first pocketsphinx start reads its model files from disk.
    log('pipeline: warm-up run of the bare engine (not timed)');
    const warm = path.join(tmp, 'warm.wav');
    await decodeToWav(speech.file, warm, { signal: interrupt.signal });
    await engine.transcribe({ wavPath: warm, model: POCKETSPHINX_MODEL, signal: interrupt.signal, onSegment: () => undefined });
    rmSync(warm, { force: true });

    const bare: Array<{ totalMs: number; transcribeMs: number; diarizeMs: number; segments: number; text: string }> = [];
    const viaAgent: Array<{ wallMs: number; createMs: number; status: string; segments: number; text: string }> = [];
    for (let i = 0; i < settings.pipelineRuns; i++) {
      // Alternate the two so drift on the machine affects both alike.
      log(`pipeline: run ${i + 1}/${settings.pipelineRuns}, bare engine`);
      const wav = path.join(tmp, `bare-${i}.wav`);
      const b0 = performance.now();
      checkInterrupted();
      await decodeToWav(speech.file, wav, { signal: interrupt.signal });
      const b1 = performance.now();
      const result = await engine.transcribe({ wavPath: wav, model: POCKETSPHINX_MODEL, signal: interrupt.signal, onSegment: () => undefined });
      const b2 = performance.now();
      const { samples, sampleRate } = await readWav(wav);
      await diarizer.diarize(samples, sampleRate, { signal: interrupt.signal });
      const b3 = performance.now();
      rmSync(wav, { force: true });
      bare.push({ totalMs: b3 - b0, transcribeMs: b2 - b1, diarizeMs: b3 - b2, segments: result.segments.length, text: result.text });

      log(`pipeline: run ${i + 1}/${settings.pipelineRuns}, worker agent`);
      const tempPath = path.join(tmp, `upload-${i}.part`);
      writeFileSync(tempPath, bytes); // JobService.create moves it into the media store
      const a0 = performance.now();
      const job = await svc.speech.jobs.create(user, {
        channel: 'web',
        model: POCKETSPHINX_MODEL,
        source: { type: 'upload', tempPath, filename: 'speech.wav', sizeBytes: bytes.length, sha256 },
      });
      const a1 = performance.now();
      const end = await waitTerminal(job.id, 120_000);
      const [info] = await q<{ status: string; transcript_text: string | null; segments: number }>(
        `select j.status, j.transcript_text, (select count(*)::int from speech_segments s where s.job_id = j.id and s.pass = j.current_pass) as segments from speech_jobs j where j.id = ?`,
        [job.id],
      );
      if (!info) throw new Error(`job ${job.id} not found`);
      viaAgent.push({ wallMs: end.at - a0, createMs: a1 - a0, status: info.status, segments: info.segments, text: info.transcript_text ?? '' });
    }
    await agent.stop();

    const bareTotal = median(bare.map((b) => b.totalMs));
    const bareTranscribe = median(bare.map((b) => b.transcribeMs));
    const agentWall = median(viaAgent.map((a) => a.wallMs));
    const n = settings.pipelineRuns;
    row(
      `bare engine: decodeToWav + pocketsphinx + diarizer (median of ${n})`,
      `${secs(bareTotal)} (transcribe alone ${secs(bareTranscribe)}, diarize alone ${secs(median(bare.map((b) => b.diarizeMs)))}; runs ${bare.map((b) => secs(b.totalMs)).join(', ')})`,
    );
    row(
      `worker agent: JobService.create → completed (median of ${n})`,
      `${secs(agentWall)} (create ${ms(median(viaAgent.map((a) => a.createMs)))}; runs ${viaAgent.map((a) => secs(a.wallMs)).join(', ')})`,
    );
    const diff = agentWall - bareTotal;
    row(
      'pipeline overhead (agent / bare decode+transcribe+diarize)',
      `${(agentWall / bareTotal).toFixed(2)}× (${diff < 0 ? '−' : '+'}${secs(Math.abs(diff))}); agent / transcribe alone ${(agentWall / bareTranscribe).toFixed(2)}×`,
    );
    target('pipeline overhead agent ÷ bare engine ≤ 1.05', agentWall / bareTotal <= 1.05, `${(agentWall / bareTotal).toFixed(2)}×`);
    const bareSegs = new Set(bare.map((b) => b.segments));
    const bareSegments = bare[0]?.segments ?? 0;
    const ok =
      viaAgent.every((a) => a.status === 'completed' && a.segments === bareSegments && /coffee/.test(a.text)) && bareSegs.size === 1 && bareSegments > 0;
    if (!ok) failed = true;
    row(
      'pipeline output check',
      `${ok ? 'PASS' : 'FAIL'}: agent jobs ${viaAgent.map((a) => `${a.status}/${a.segments} segments`).join(', ')}; bare engine ${[...bareSegs].join('/')} segments`,
    );
  } catch (err) {
    fail('pipeline overhead', err);
  }
}

try {
  await main();
} catch (err) {
  fail('bench', err);
} finally {
  await cleanup();
}
if (interrupt.signal.aborted) row('interrupted', 'the run was stopped early; the rows above are what had finished');
row('total bench time', secs(performance.now() - benchStart));

const width = [Math.max(...rows.map((r) => r[0].length), 11), Math.max(...rows.map((r) => r[1].length), 5)] as const;
const line = (a: string, b: string) => `| ${a.padEnd(width[0])} | ${b.padEnd(width[1])} |`;
process.stdout.write(
  [line('measurement', 'value'), `|${'-'.repeat(width[0] + 2)}|${'-'.repeat(width[1] + 2)}|`, ...rows.map(([a, b]) => line(a, b))].join('\n') + '\n',
);
process.exitCode = interrupt.signal.aborted ? 130 : failed ? 1 : 0;
// An interrupted phase can leave a handle open (a load-generator call that never answers): exit once the table is out.
if (interrupt.signal.aborted) process.stdout.write('', () => process.exit(130));
