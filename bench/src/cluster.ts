// BENCH_ONLY=cluster: the same work on one coordinator and on two sharing one PostgreSQL and one
// Redis. The first coordinator is the bench's own (in this process); the second is a child process
// (`node coordinator/dist/main.js` with the coordinator's Node flags) on the same database, Redis
// prefix, secrets and media folder. Load comes from forked load generators: one per coordinator.
//
// 1. protocol: BENCH_CLUSTER_JOBS (2000) URL jobs drained by BENCH_CLUSTER_WORKERS (20) simulated
//    workers (Claim, then Complete with claim_next), all on the first coordinator, then half on
//    each (each half from its own load generator); pairs/s, CPU ms per pair of each coordinator
//    and of PostgreSQL, and exactly-once.
// 2. HTTP reads: BENCH_CLUSTER_HTTP_CONNECTIONS (32) keep-alive connections for
//    BENCH_CLUSTER_HTTP_SECONDS (15) sending GET /api/platform and GET /api/speech/jobs (JWT)
//    round-robin, all to the first coordinator, then half to each; requests/s, p50/p99, errors and
//    CPU ms per request (coordinators, PostgreSQL, Redis).
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { freePort } from '../../coordinator/dist/infra/ports.js';
import { COORDINATOR_NODE_FLAGS } from '../../coordinator/dist/node-flags.js';
import { clockTicks, cpuSample, cpuSince, log, loginJwt, ms, pool, secs, type Cleanup, type CpuShare, type PhaseContext } from './lib.js';
import type { HttpMixResult, LoadGenerator, MixRoute, ProtocolResult } from './load.js';

export interface ClusterContext extends PhaseContext {
  /** The first coordinator's environment: the second one gets the same, with its own ports. */
  env: Record<string, string>;
  root: string;
  cleanups: Cleanup[];
  check: (ok: boolean) => void;
  /** A second load generator: one per coordinator (a command closes every client of its process when it ends). */
  startLoadGenerator: () => LoadGenerator;
}

const num = (name: string, fallback: number): number => {
  const v = Number(process.env[name]);
  return Number.isFinite(v) && v > 0 ? v : fallback;
};
const URL_SOURCE = { type: 'url' as const, url: 'https://203.0.113.10/x.mp3' };

/** CPU seconds a process has used (utime + stime of /proc/<pid>/stat); null once it is gone. */
function pidSeconds(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / clockTicks;
  } catch {
    return null;
  }
}

/** The second coordinator as a child process; resolves once it answers /api/platform/ready. */
async function startSecond(ctx: ClusterContext): Promise<{ child: ChildProcess; url: string; grpcAddress: string }> {
  const port = await freePort();
  const grpcPort = await freePort();
  const child = spawn(process.execPath, [...COORDINATOR_NODE_FLAGS, path.join(ctx.root, 'coordinator', 'dist', 'main.js')], {
    env: { ...process.env, ...ctx.env, PORT: String(port), GRPC_PORT: String(grpcPort), DATABASE_MIGRATE_ON_START: 'false', LOG_LEVEL: 'error' },
    // Its log lines would land in the bench's table on stdout.
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  ctx.cleanups.push([
    'second coordinator',
    async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    },
  ]);
  const url = `http://127.0.0.1:${port}`;
  const started = performance.now();
  for (;;) {
    ctx.checkInterrupted();
    if (child.exitCode !== null) throw new Error(`the second coordinator exited with ${child.exitCode}`);
    const ok = await fetch(`${url}/api/platform/ready`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (performance.now() - started > 60_000) throw new Error('the second coordinator did not become ready in 60 s');
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return { child, url, grpcAddress: `127.0.0.1:${grpcPort}` };
}

/** CPU used during a run: this process (the first coordinator), the second one, PostgreSQL and Redis. */
function cpuMeter(secondPid: number) {
  const at = cpuSample();
  const second0 = pidSeconds(secondPid);
  return (): CpuShare & { second: number } => {
    const share = cpuSince(at);
    const second1 = pidSeconds(secondPid);
    return { ...share, second: second0 !== null && second1 !== null ? second1 - second0 : NaN };
  };
}

export async function clusterPhases(ctx: ClusterContext): Promise<void> {
  const { svc, q, accounts, runId, load, row, fail } = ctx;
  const settings = {
    jobs: Math.round(num('BENCH_CLUSTER_JOBS', 2000)),
    workers: Math.round(num('BENCH_CLUSTER_WORKERS', 20)),
    connections: Math.round(num('BENCH_CLUSTER_HTTP_CONNECTIONS', 32)),
    seconds: num('BENCH_CLUSTER_HTTP_SECONDS', 15),
  };
  let second: Awaited<ReturnType<typeof startSecond>>;
  let user: Awaited<ReturnType<typeof accounts.createUser>>['user'];
  let secrets: string[];
  const loads = [load, ctx.startLoadGenerator()];
  ctx.cleanups.push(['cluster second load generator', () => loads[1]!.stop()]);
  try {
    log('cluster: starting the second coordinator');
    second = await startSecond(ctx);
    row(
      'cluster: coordinators',
      `one: the bench's own (in-process); two: plus a child process (node ${COORDINATOR_NODE_FLAGS.join(' ')} coordinator/dist/main.js) on the same PostgreSQL and Redis`,
    );
    const created = await accounts.createUser({ username: `bench-cluster-${runId}`, permissions: ['speech.use'] });
    user = created.user;
    const catalog = await svc.workers.createWorker(`bench-cluster-catalog-${runId}`);
    await q('update speech_workers set capabilities = ?::jsonb where id = ?', [
      JSON.stringify({ models: ['small'], engines: ['bench'], diarization: true, canFetchUrls: true, device: 'cpu', local: false }),
      catalog.id,
    ]);
    secrets = await pool(settings.workers, 4, async (i) => (await svc.workers.createWorker(`bench-cluster-${runId}-${i}`)).secret);
  } catch (err) {
    fail('cluster setup', err);
    return;
  }

  const first = `127.0.0.1:${svc.grpcPort}`;
  const half = Math.ceil(secrets.length / 2);
  /** Queues `n` jobs, drains them with the workers split over `addresses`; pairs/s, CPU and exactly-once. */
  const drain = async (n: number, addresses: string[]) => {
    const ids = await pool(n, 8, async () => (await svc.speech.jobs.create(user, { channel: 'web', source: URL_SOURCE })).id);
    const groups = addresses.length === 1 ? [secrets] : [secrets.slice(0, half), secrets.slice(half)];
    const meter = cpuMeter(second.child.pid!);
    const t0 = performance.now();
    const results: ProtocolResult[] = await Promise.all(
      groups.map((g, i) => loads[i]!.call('protocol', { address: addresses[i]!, secrets: g, claimNext: true })),
    );
    const elapsedMs = performance.now() - t0;
    const cpu = meter();
    const jobs = results.reduce((a, r) => a + r.jobs, 0);
    const [check] = await q<{ completed: number; first_attempt: number; leases: number }>(
      `select count(*) filter (where status = 'completed')::int as completed, count(*) filter (where attempt = 1)::int as first_attempt,
              (select count(*)::int from speech_leases l where l.job_id between ? and ?) as leases
         from speech_jobs where id between ? and ?`,
      [Math.min(...ids), Math.max(...ids), Math.min(...ids), Math.max(...ids)],
    );
    const ok = jobs === n && check?.completed === n && check.first_attempt === n && check.leases === n && results.every((r) => r.anomalies.length === 0);
    ctx.check(ok);
    return { jobs, elapsedMs, cpu, ok, results, check };
  };

  try {
    ctx.checkInterrupted();
    log('cluster: protocol warm-up (untimed) on both coordinators');
    await drain(500, [first, second.grpcAddress]);
    for (const addresses of [[first], [first, second.grpcAddress]]) {
      ctx.checkInterrupted();
      const label = addresses.length === 1 ? 'one coordinator' : 'two coordinators';
      log(`cluster: protocol, ${settings.jobs} jobs, ${settings.workers} workers, ${label}`);
      const r = await drain(settings.jobs, addresses);
      const per = (seconds: number | null) => (seconds === null || Number.isNaN(seconds) ? '?' : ((seconds * 1000) / r.jobs).toFixed(2));
      row(
        `cluster protocol, ${label} (${settings.workers} workers${addresses.length > 1 ? `, ${half} on each` : ''})`,
        `${Math.round((r.jobs / r.elapsedMs) * 1000)} claim+complete/s (${r.jobs} jobs in ${secs(r.elapsedMs)}); CPU ms per pair: first coordinator ${per(r.cpu.seconds.self)}` +
          `${addresses.length > 1 ? `, second ${per(r.cpu.second)}` : ''}, PostgreSQL ${per(r.cpu.seconds.postgres)}, Redis ${per(r.cpu.seconds.redis)}; ` +
          `machine ${r.cpu.machine ?? '?'}% busy of ${r.cpu.cores} cores; exactly once: ${r.ok ? 'PASS' : `FAIL (${JSON.stringify(r.check)})`}`,
      );
    }
  } catch (err) {
    fail('cluster protocol', err);
  }

  try {
    // The HTTP reads list the jobs of a user of their own (50, as the HTTP phase's), not the thousands the protocol runs queue.
    // (created now: the protocol runs drain the whole queue)
    const reader = await accounts.createUser({ username: `bench-cluster-reader-${runId}`, permissions: ['speech.use'] });
    await pool(50, 4, () => svc.speech.jobs.create(reader.user, { channel: 'web', source: URL_SOURCE }));
    const token = await loginJwt(svc.url, reader.user.username, reader.password);
    const routes: MixRoute[] = [
      { name: 'platform', paths: ['/api/platform'], headers: {} },
      { name: 'speech jobs (JWT)', paths: ['/api/speech/jobs'], headers: { authorization: `Bearer ${token}` }, rowsKey: 'jobs' },
    ];
    // Warm-up, untimed, on both.
    await Promise.all(
      [svc.url, second.url].map((url, i) =>
        loads[i]!.call('httpMix', { url, routes, connections: Math.ceil(settings.connections / 2), seconds: 3, clientNet: 20 + i }),
      ),
    );
    for (const urls of [[svc.url], [svc.url, second.url]]) {
      ctx.checkInterrupted();
      const label = urls.length === 1 ? 'one coordinator' : 'two coordinators';
      log(`cluster: HTTP reads, ${settings.connections} connections for ${settings.seconds} s, ${label}`);
      const meter = cpuMeter(second.child.pid!);
      const t0 = performance.now();
      const results: HttpMixResult[] = await Promise.all(
        urls.map((url, i) =>
          loads[i]!.call('httpMix', { url, routes, connections: Math.ceil(settings.connections / urls.length), seconds: settings.seconds, clientNet: 30 + i }),
        ),
      );
      const elapsedMs = performance.now() - t0;
      const cpu = meter();
      const requests = results.reduce((a, r) => a + r.requests, 0);
      const errors = results.reduce((a, r) => a + r.errors, 0);
      ctx.check(errors === 0);
      const per = (seconds: number | null) => (seconds === null || Number.isNaN(seconds) ? '?' : ((seconds * 1000) / requests).toFixed(3));
      const p99 = Math.max(...results.map((r) => r.all.p99));
      const p50 = Math.max(...results.map((r) => r.all.p50));
      row(
        `cluster HTTP reads, ${label} (${settings.connections} connections${urls.length > 1 ? `, ${Math.ceil(settings.connections / 2)} to each` : ''})`,
        `${Math.round((requests / elapsedMs) * 1000)} req/s, p50 / p99 ${ms(p50)} / ${ms(p99)}, ${errors} errors${errors ? ` (${results.flatMap((r) => r.errorExamples).join('; ')})` : ''}; ` +
          `CPU ms per request: first coordinator ${per(cpu.seconds.self)}${urls.length > 1 ? `, second ${per(cpu.second)}` : ''}, PostgreSQL ${per(cpu.seconds.postgres)}, Redis ${per(cpu.seconds.redis)}; ` +
          `machine ${cpu.machine ?? '?'}% busy of ${cpu.cores} cores`,
      );
    }
  } catch (err) {
    fail('cluster HTTP reads', err);
  }
}
