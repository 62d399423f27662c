// Fleet phase (`BENCH_ONLY=fleet`): how many connected GPU workers one coordinator holds.
//
// For each fleet size (BENCH_FLEET_SIZES, default 100 and 1,000) the load generator connects that
// many simulated workers, each on its own gRPC channel, behaving as idle agents do: Hello, a
// heartbeat at the interval the coordinator asks for, and long-poll Claims (wait_ms 20 s). Then:
// 1. idle: the coordinator's CPU (share of one core) and RSS over BENCH_FLEET_IDLE_MS (default 30 s,
//    two heartbeat intervals), and presence (every worker's last_seen_at fresh);
// 2. burst: 5 jobs per worker are created as fast as JobService.create allows (8 in flight); every
//    worker completes what it claims at once and claims again. Measured: the creation rate, the time
//    from the burst's start until every job was claimed and completed, how long each new job waited
//    for a worker (created → claimed), and exactly-once (each job claimed once, completed on
//    attempt 1, one lease row each).
// BENCH_FLEET_PROFILE_DIR=<dir> also writes a V8 CPU profile of the coordinator's idle window per size
// (`fleet-<n>-idle.cpuprofile`; the profiler's own cost then shows in that run's CPU row).
import path from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { getHeapSpaceStatistics } from 'node:v8';
import { countStatements, cpuSample, cpuSince, log, ms, perUnitText, pool, profiled, secs, summarize, type PhaseContext } from './lib.js';

export interface FleetContext extends PhaseContext {
  check: (ok: boolean) => void;
}

const URL_SOURCE = { type: 'url' as const, url: 'https://203.0.113.10/x.mp3' };
const sizes = (process.env.BENCH_FLEET_SIZES ?? '100,1000')
  .split(',')
  .map((s) => Number(s.trim()))
  .filter((n) => Number.isInteger(n) && n > 0);
const idleMs = Number(process.env.BENCH_FLEET_IDLE_MS) || 30_000;
const JOBS_PER_WORKER = Number(process.env.BENCH_FLEET_JOBS_PER_WORKER ?? 5);
const WAIT_MS = 20_000;
const profileDir = process.env.BENCH_FLEET_PROFILE_DIR || null;
const mb = (bytes: number) => `${Math.round(bytes / 2 ** 20)} MB`;

/** Where the coordinator process's memory is: V8's young and old generations (allocated / used) and everything outside V8's heap. */
function memoryParts(): string {
  const { rss, heapTotal } = process.memoryUsage();
  const spaces = getHeapSpaceStatistics();
  const part = (names: string[]) => {
    const s = spaces.filter((x) => names.includes(x.space_name));
    return `${mb(s.reduce((a, x) => a + x.space_size, 0))} (${mb(s.reduce((a, x) => a + x.space_used_size, 0))} used)`;
  };
  return `RSS ${mb(rss)}: V8 new space ${part(['new_space', 'new_large_object_space'])}, old space ${part(['old_space', 'large_object_space'])}, code ${part(['code_space', 'code_large_object_space', 'trusted_space', 'trusted_large_object_space'])}; RSS beyond V8's heap ${mb(rss - heapTotal)} (the node binary's pages, native memory: HTTP/2 sessions, sockets, malloc)`;
}

export async function fleetPhases(ctx: FleetContext) {
  const { svc, q, accounts, runId, load, row, target } = ctx;
  const { user } = await accounts.createUser({ username: `bench-fleet-${runId}`, permissions: ['speech.use'] });
  const address = `127.0.0.1:${svc.grpcPort}`;
  const largest = Math.max(...sizes);
  for (const n of sizes) {
    ctx.checkInterrupted();
    const name = `fleet ${n} workers`;
    try {
      log(`fleet: creating ${n} workers`);
      const prefix = `bench-fleet${n}-${runId}`;
      const secrets = await pool(n, 4, async (i) => (await svc.workers.createWorker(`${prefix}-${i}`)).secret);
      const rss0 = process.memoryUsage().rss;
      const memory0 = memoryParts();
      log(`fleet: ${n} workers say Hello`);
      const started = await load.call('fleetStart', { address, secrets, waitMs: WAIT_MS });
      // Settle (Hello's writes, first long-polls), then the idle window.
      await load.call('fleetIdle', { ms: 3_000 });
      log(`fleet: ${n} workers idle for ${secs(idleMs)}`);
      const cpu0 = cpuSample();
      let rssPeak = process.memoryUsage().rss;
      const knexPool = (svc.orm.em.getConnection().getKnex().client as { pool: { numPendingAcquires(): number; numUsed(): number } }).pool;
      let pendingPeak = 0;
      let usedPeak = 0;
      const rssTimer = setInterval(() => {
        rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
        pendingPeak = Math.max(pendingPeak, knexPool.numPendingAcquires());
        usedPeak = Math.max(usedPeak, knexPool.numUsed());
      }, 100);
      const lag = monitorEventLoopDelay({ resolution: 10 });
      lag.enable();
      const idle = await profiled(profileDir && path.join(profileDir, `fleet-${n}-idle.cpuprofile`), () => load.call('fleetIdle', { ms: idleMs }));
      const cpu = cpuSince(cpu0);
      clearInterval(rssTimer);
      lag.disable();
      row(`${name}: memory before the workers connected`, memory0);
      row(`${name}: memory at the end of the idle window`, memoryParts());
      row(
        `${name}: idle internals`,
        `event loop delay p99 ${ms(lag.percentile(99) / 1e6)} (max ${ms(lag.max / 1e6)}); database pool: at most ${usedPeak} connections busy, ${pendingPeak} requests waiting for one`,
      );
      const [presence] = await q<{ fresh: number; total: number }>(
        `select count(*) filter (where last_seen_at > now() - interval '${Math.ceil((started.heartbeatIntervalMs * 2) / 1000)} seconds')::int as fresh, count(*)::int as total from speech_workers where name like ?`,
        [`${prefix}-%`],
      );
      row(
        `${name}: idle (heartbeat every ${secs(started.heartbeatIntervalMs)}, long-poll ${secs(WAIT_MS)})`,
        `coordinator ${cpu.self}% of one core, PostgreSQL ${cpu.postgres ?? 'n/a'}%, load generator ${idle.loadCpu}%; RSS ${mb(rssPeak)} (${mb(rss0)} before the workers connected); ` +
          `${idle.heartbeats} heartbeats in ${secs(idleMs)}; Hello p50/p99 ${ms(started.hello.p50)} / ${ms(started.hello.p99)}; presence fresh ${presence?.fresh}/${n}`,
      );
      if (n === largest) {
        target(`${n} idle workers ≤ 10 % of a core`, cpu.self <= 10, `${cpu.self}%`);
        target(`${n} idle workers ≤ 300 MB RSS`, rssPeak <= 300 * 2 ** 20, mb(rssPeak));
      }
      const presenceOk = presence?.fresh === n && idle.heartbeatErrors === 0 && idle.claimErrorCount === 0;
      ctx.check(presenceOk);
      if (!presenceOk)
        row(
          `${name}: presence`,
          `FAIL: ${presence?.fresh}/${n} fresh, ${idle.heartbeatErrors} heartbeat errors, ${idle.claimErrorCount} claim errors ${idle.claimErrors.join('; ')}`,
        );

      // The burst.
      const jobs = n * JOBS_PER_WORKER;
      if (!jobs) continue;
      log(`fleet: a burst of ${jobs} jobs for ${n} waiting workers`);
      const burstCpu = cpuSample();
      const statements = countStatements(svc);
      // Claim looks (LeaseService.claim calls, each a claim statement or a share of one) during the burst.
      const leases = svc.speech.leases;
      const realClaim = leases.claim.bind(leases);
      let looks = 0;
      // When the coordinator had leased each job (Date.now(), as createdAt and the load generator's claimedAt).
      const leasedAt = new Map<number, number>();
      leases.claim = async (worker) => {
        looks += 1;
        const assignment = await realClaim(worker);
        if (assignment) leasedAt.set(assignment.lease.job_id, Date.now());
        return assignment;
      };
      const drained = load.call('fleetDrain', { jobs, timeoutMs: 300_000 });
      const t0 = performance.now();
      const createdAt = new Map<number, number>();
      // BENCH_FLEET_PROFILE=<dir>: a V8 CPU profile of the coordinator during each burst (fleet-<n>.cpuprofile).
      const profile = process.env.BENCH_FLEET_PROFILE ? path.join(process.env.BENCH_FLEET_PROFILE, `fleet-${n}.cpuprofile`) : null;
      let createdMs = 0;
      const { ids, r } = await profiled(profile, async () => {
        const ids = await pool(jobs, 8, async () => {
          const id = (await svc.speech.jobs.create(user, { channel: 'web', source: URL_SOURCE })).id;
          createdAt.set(id, Date.now());
          return id;
        });
        createdMs = performance.now() - t0;
        return { ids, r: await drained };
      });
      const bcpu = cpuSince(burstCpu);
      const st = statements.stop();
      leases.claim = realClaim;
      // How long each new job waited for a worker: claimed (load generator) minus created (here), one machine's clock.
      const waited = summarize(ids.flatMap((id) => (r.claimedAt[id] !== undefined ? [Math.max(0, r.claimedAt[id] - createdAt.get(id)!)] : [])));
      // The wait in two parts: until the coordinator's claim statement had leased the job, and from there until the simulated worker had the answer.
      const leasing = summarize(ids.flatMap((id) => (leasedAt.has(id) ? [Math.max(0, leasedAt.get(id)! - createdAt.get(id)!)] : [])));
      const delivery = summarize(
        ids.flatMap((id) => (leasedAt.has(id) && r.claimedAt[id] !== undefined ? [Math.max(0, r.claimedAt[id] - leasedAt.get(id)!)] : [])),
      );
      row(
        `${name}: burst of ${jobs} jobs`,
        `created through JobService.create (8 in flight) in ${secs(createdMs)} (${Math.round((jobs / createdMs) * 1000)} jobs/s); all claimed and completed ${secs(r.elapsedMs)} after the burst began; ` +
          `a new job's wait for a worker (created → claimed) p50/p99 ${ms(waited.p50)} / ${ms(waited.p99)} (n=${waited.n}): created → leased by the coordinator ${ms(leasing.p50)} / ${ms(leasing.p99)}, leased → the answer at the simulated worker ${ms(delivery.p50)} / ${ms(delivery.p99)}; ` +
          `coordinator ${bcpu.self}%, PostgreSQL ${bcpu.postgres ?? 'n/a'}%, load generator ${r.loadCpu}% of one core`,
      );
      row(
        `${name}: burst, per job`,
        `${(looks / jobs).toFixed(2)} claim looks; ${(st.total / jobs).toFixed(2)} statements (create, claim, complete, presence: ${perUnitText(st.byName, jobs, 8)}); CPU ms coordinator ${((bcpu.seconds.self * 1000) / jobs).toFixed(2)}, PostgreSQL ${bcpu.seconds.postgres === null ? '?' : ((bcpu.seconds.postgres * 1000) / jobs).toFixed(2)}`,
      );
      const [db] = await q<{ total: number; completed: number; first: number; leases: number }>(
        `select count(*)::int as total, count(*) filter (where status = 'completed')::int as completed, count(*) filter (where attempt = 1)::int as first,
                (select count(*)::int from speech_leases l where l.job_id between ? and ?) as leases
           from speech_jobs where id between ? and ?`,
        [Math.min(...ids), Math.max(...ids), Math.min(...ids), Math.max(...ids)],
      );
      const ok = r.jobs === jobs && r.distinctJobs === jobs && r.anomalies === 0 && db?.completed === jobs && db.first === jobs && db.leases === jobs;
      ctx.check(ok);
      row(
        `${name}: exactly-once check`,
        `${ok ? 'PASS' : 'FAIL'}: ${db?.completed}/${jobs} completed (${db?.first} on attempt 1), ${db?.leases} lease rows, ${r.distinctJobs} distinct of ${r.jobs} claims, ${r.anomalies} odd completions`,
      );
      if (n === largest) {
        // No claim at all is a miss (NaN), not a 0 ms latency.
        target(`claim latency p99 ≤ 100 ms with ${n} waiting workers (a new job, created → claimed)`, waited.n === jobs && waited.p99 <= 100, ms(waited.p99));
      }
    } catch (err) {
      ctx.fail(name, err);
    } finally {
      await load.call('fleetStop', undefined).catch(() => undefined);
    }
  }
}
