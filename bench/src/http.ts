// HTTP read phase (`BENCH_ONLY=http`): reads as integrators and browsers make them, many clients at once.
//
// The coordinator trusts loopback as a proxy (TRUST_PROXY, set by run.ts), and every request carries
// another client address in X-Forwarded-For, so the per-client rate limits are counted (a Redis
// counter per client, as in production) without capping the run. From the forked load generator,
// BENCH_HTTP_CONNECTIONS (64) keep-alive connections send GETs back to back for BENCH_HTTP_SECONDS
// (30), round-robin over four routes:
// - `GET /api/platform` (public, no credential);
// - `GET /api/speech/jobs` with a JWT from `POST /api/account/login` (the user owns 50 jobs);
// - `GET /irc/api/logs?q=<word>` over a small chat-log archive imported here (ZNC files);
// - `GET /api/dns/zones/{zone}?page=N&limit=100` with a DNS API key, from the cache (a small zone
//   served by a throwaway named, transferred once).
// Then one short run per route alone (BENCH_HTTP_ROUTE_SECONDS, 5) for its CPU per request: the
// coordinator process, every `postgres` and every `redis-server` process, from /proc. With
// BENCH_HTTP_PROFILE_DIR set, each of these runs also writes a CPU profile of the coordinator's
// process there (`http-<route>.cpuprofile`, for Chrome DevTools or any .cpuprofile viewer).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ZoneRegistry } from '../../coordinator/dist/dns/zone-registry.js';
import { IrcImportService } from '../../coordinator/dist/irc/import-service.js';
import { makeZone, startNamed } from './bind.js';
import { cpuSample, cpuSince, log, loginJwt, ms, pool, profiled, rng, secs, type Cleanup, type CpuShare, type PhaseContext } from './lib.js';
import type { HttpMixResult, MixRoute } from './load.js';

export interface HttpContext extends PhaseContext {
  signal: AbortSignal;
  cleanups: Cleanup[];
}

const num = (name: string, fallback: number): number => {
  const v = Number(process.env[name]);
  return Number.isFinite(v) && v > 0 ? v : fallback;
};
const URL_SOURCE = { type: 'url' as const, url: 'https://203.0.113.10/x.mp3' };
const JOBS = 50;
const DNS_RECORDS = 2_000;
const IRC_LINES = 4_000;
/** Words of the small chat-log archive; the searches ask for the first 20 (each in many rows). */
const IRC_WORDS = (() => {
  const rand = rng(7);
  const syllables = ['ka', 'lo', 'mi', 'ne', 'ru', 'sa', 'ti', 'vo', 'ze', 'po', 'de', 'gu'];
  const words = new Set<string>();
  while (words.size < 300) words.add(Array.from({ length: 2 + Math.floor(rand() * 2) }, () => syllables[Math.floor(rand() * syllables.length)]).join(''));
  return [...words];
})();

/** CPU milliseconds per request: the coordinator (this process), PostgreSQL and Redis. */
function cpuPerRequest(cpu: CpuShare, requests: number) {
  const s = cpu.seconds;
  const per = (seconds: number | null) => (seconds === null ? NaN : (seconds * 1000) / requests);
  return { total: per(s.self + (s.postgres ?? 0) + (s.redis ?? 0)), self: per(s.self), postgres: per(s.postgres), redis: per(s.redis) };
}
const cpuText = (c: ReturnType<typeof cpuPerRequest>) =>
  `${c.total.toFixed(2)} ms CPU/request (coordinator ${c.self.toFixed(2)}, PostgreSQL ${c.postgres.toFixed(2)}, Redis ${c.redis.toFixed(2)})`;

export async function httpPhases(ctx: HttpContext): Promise<void> {
  const { svc, q, accounts, runId, load, row, target } = ctx;
  const settings = {
    seconds: num('BENCH_HTTP_SECONDS', 30),
    routeSeconds: num('BENCH_HTTP_ROUTE_SECONDS', 5),
    connections: Math.round(num('BENCH_HTTP_CONNECTIONS', 64)),
    profileDir: process.env.BENCH_HTTP_PROFILE_DIR || null,
  };
  let routes: MixRoute[];
  try {
    ctx.checkInterrupted();
    // Speech: a user with a JWT, owning JOBS queued jobs (the model registered the way a Hello stores it).
    const { user, password } = await accounts.createUser({ username: `bench-http-${runId}`, permissions: ['speech.use'] });
    const catalog = await svc.workers.createWorker(`bench-http-catalog-${runId}`);
    await q('update speech_workers set capabilities = ?::jsonb where id = ?', [
      JSON.stringify({ models: ['small'], engines: ['bench'], diarization: true, canFetchUrls: true, device: 'cpu', local: false }),
      catalog.id,
    ]);
    await pool(JOBS, 4, () => svc.speech.jobs.create(user, { channel: 'web', source: URL_SOURCE }));
    const token = await loginJwt(svc.url, user.username, password);

    // Chat log: IRC_LINES lines of ZNC logs in four channel-days, imported as a network of this run.
    const dir = mkdtempSync(path.join(os.tmpdir(), 'sonar-bench-http-'));
    ctx.cleanups.push(['http phase files', async () => rmSync(dir, { recursive: true, force: true })]);
    const ircDir = path.join(dir, 'irc');
    mkdirSync(ircDir);
    const rand = rng(11);
    const word = () => IRC_WORDS[Math.floor(rand() ** 2 * IRC_WORDS.length)]!;
    for (let f = 0; f < 4; f++) {
      const lines = Array.from({ length: IRC_LINES / 4 }, (_, i) => {
        const s = Math.floor((i * 86_000) / (IRC_LINES / 4));
        const at = [Math.floor(s / 3600), Math.floor(s / 60) % 60, s % 60].map((n) => String(n).padStart(2, '0')).join(':');
        return `[${at}] <nick${Math.floor(rand() * 40)}> ${Array.from({ length: 3 + Math.floor(rand() * 10) }, word).join(' ')}\n`;
      });
      writeFileSync(path.join(ircDir, `#bench-http-${f % 2}_2026010${1 + Math.floor(f / 2)}.log`), lines.join(''));
    }
    const imported = await new IrcImportService(svc.orm).importPaths([ircDir], { network: `bench-http-${runId}`, source: 'production' });

    // DNS: a small zone in a throwaway named, read once through /axfr so the pages come from the cache.
    const zone = `bench-http-${runId}.test`;
    // Its own temp directory: named runs as `bind` when we are root and must reach it.
    const namedDir = mkdtempSync(path.join(os.tmpdir(), 'sonar-bench-named-'));
    ctx.cleanups.push(['http phase named directory', async () => rmSync(namedDir, { recursive: true, force: true })]);
    const zoneFile = path.join(namedDir, `db.${zone}`);
    writeFileSync(zoneFile, makeZone(zone, DNS_RECORDS).text);
    const ns = await startNamed({ dir: namedDir, zone, zoneFile, signal: ctx.signal });
    ctx.cleanups.push(['http phase named', () => ns.stop()]);
    await new ZoneRegistry(svc.orm).upsert({ zone, file: zoneFile, keyFile: ns.keyFile, server: '127.0.0.1', port: ns.port });
    const key = (await accounts.createDnsApiKey({ name: `bench-http-${runId}` })).key;
    const axfr = await fetch(`${svc.url}/api/dns/zones/${zone}/axfr`, { headers: { 'x-api-key': key } });
    if (!axfr.ok) throw new Error(`the zone's first transfer failed: HTTP ${axfr.status} ${await axfr.text()}`);
    const pages = Math.ceil(DNS_RECORDS / 100);

    routes = [
      { name: 'platform', paths: ['/api/platform'], headers: {} },
      { name: 'speech jobs (JWT)', paths: ['/api/speech/jobs'], headers: { authorization: `Bearer ${token}` }, rowsKey: 'jobs' },
      {
        name: 'chat-log search',
        paths: IRC_WORDS.slice(0, 20).map((w) => `/irc/api/logs?q=${w}`),
        headers: {},
        rowsKey: 'results',
      },
      {
        name: 'DNS zone page (API key)',
        paths: Array.from({ length: pages }, (_, i) => `/api/dns/zones/${zone}?page=${i + 1}&limit=100`),
        headers: { 'x-api-key': key },
        rowsKey: 'zoneData',
      },
    ];
    row(
      'HTTP read data',
      `${JOBS} speech jobs of the JWT's user; chat log ${imported.inserted} lines (4 channel-days, ${IRC_WORDS.length} words), searched for its 20 most frequent words; DNS zone of ${DNS_RECORDS} records (${pages} pages of 100) in the cache`,
    );
  } catch (err) {
    ctx.fail('HTTP read setup', err);
    return;
  }

  const mix = (rs: MixRoute[], seconds: number, clientNet: number) =>
    load.call('httpMix', { url: svc.url, routes: rs, connections: settings.connections, seconds, clientNet });
  const summary = (r: HttpMixResult) => `${Math.round((r.requests / r.elapsedMs) * 1000)} req/s, p50 / p99 ${ms(r.all.p50)} / ${ms(r.all.p99)}`;

  try {
    ctx.checkInterrupted();
    // Untimed warm-up: the code paths optimised, the connections' statements prepared.
    log(`http: warm-up, ${settings.connections} connections for 3 s`);
    await mix(routes, 3, 10);
    log(`http: ${settings.connections} connections for ${settings.seconds} s, round-robin over ${routes.length} routes`);
    const cpu0 = cpuSample();
    const r = await mix(routes, settings.seconds, 11);
    const cpu = cpuSince(cpu0);
    const rate = (r.requests / r.elapsedMs) * 1000;
    row(
      `HTTP reads, ${settings.connections} connections × ${secs(settings.seconds * 1000)}, each request another client (X-Forwarded-For)`,
      `${summary(r)} (max ${ms(r.all.max)}, n=${r.requests}); ${r.errors} errors${r.errors ? ` (e.g. ${r.errorExamples.join('; ')})` : ''}`,
    );
    row(
      'HTTP reads per route p50 / p99',
      Object.entries(r.routes)
        .map(([name, s]) => `${name} ${ms(s.p50)} / ${ms(s.p99)}`)
        .join('; '),
    );
    row(
      'CPU during HTTP reads',
      `coordinator ${cpu.self}%, PostgreSQL ${cpu.postgres ?? 'n/a'}%, Redis ${cpu.redis ?? 'n/a'}%, load generator ${r.loadCpu}% of one core; whole machine ${cpu.machine ?? 'n/a'}% busy; ${cpuText(cpuPerRequest(cpu, r.requests))}`,
    );
    target('HTTP reads ≥ 1,500 requests/s (64 connections, mixed routes)', rate >= 1500, `${Math.round(rate)}/s`);
    target('HTTP reads p99 ≤ 150 ms', r.all.p99 <= 150, ms(r.all.p99));
    target('HTTP reads without errors', r.errors === 0, `${r.errors} of ${r.requests}`);

    // Each route alone: its rate and its CPU per request.
    const per: string[] = [];
    for (const [i, route] of routes.entries()) {
      ctx.checkInterrupted();
      log(`http: ${route.name} alone for ${settings.routeSeconds} s`);
      const c0 = cpuSample();
      const file = settings.profileDir && path.join(settings.profileDir, `http-${route.name.replace(/\W+/g, '-')}.cpuprofile`);
      const one = await profiled(file, () => mix([route], settings.routeSeconds, 20 + i));
      const c = cpuSince(c0);
      per.push(`${route.name}: ${summary(one)}, ${cpuText(cpuPerRequest(c, one.requests))}${one.errors ? `, ${one.errors} errors` : ''}`);
      if (one.errors) target(`HTTP reads without errors (${route.name} alone)`, false, `${one.errors} of ${one.requests}: ${one.errorExamples[0]}`);
    }
    row(`HTTP reads, each route alone (${secs(settings.routeSeconds * 1000)} each)`, per.join('; '));
  } catch (err) {
    ctx.fail('HTTP reads', err);
  }
}
