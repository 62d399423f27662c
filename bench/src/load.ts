// Load generator for bench/src/run.ts (compiled: bench/dist/load.js), forked as a child process so simulated workers and socket.io
// clients do not share the coordinator's event loop (real agents and browsers are other processes).
// It answers commands over the IPC channel: { id, cmd, args } -> { id, result } | { id, error }.
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import { WORKER_CONTRACT_VERSION, type ClaimResponseMsg, type LeaseRefMsg } from '@sonar/shared';
import { io, type Socket } from 'socket.io-client';
import { Pool } from 'undici';
import { CoordinatorClient } from '../../worker/dist/coordinator-client.js';
import { cpuSample, cpuSince, log, sleep, summarize, type DnsApiBody, type Summary } from './lib.js';

/** A simulated worker: its own client (gRPC channel) and the session its Hello opened. */
interface SimWorker {
  client: CoordinatorClient;
  sessionId: string;
  /** The heartbeat interval the coordinator's Hello asked for. */
  heartbeatMs: number;
}
type ClaimedJob = NonNullable<ClaimResponseMsg['job']>;

const CAPABILITIES = { models: ['small'], engines: ['bench'], diarization: true, can_fetch_urls: true, device: 'cpu' };

/** Every open resource, so a failed phase still closes them. */
const open = new Set<{ close(): unknown }>();

async function connectWorker(address: string, secret: string): Promise<SimWorker> {
  // Its own channel (TCP connection), as a real agent on its own host has: grpc-js would otherwise
  // share one subchannel between all clients of the same address in this process.
  const client = new CoordinatorClient(address, secret, { channelOptions: { 'grpc.use_local_subchannel_pool': 1 } });
  open.add(client);
  const hello = await client.hello({
    contract_version: WORKER_CONTRACT_VERSION,
    agent_version: 'bench',
    hostname: hostname(),
    capabilities: CAPABILITIES,
    local: false,
  });
  return { client, sessionId: hello.session_id, heartbeatMs: hello.heartbeat_interval_ms };
}

function closeAll() {
  for (const r of open) r.close();
  open.clear();
}

const completeOk = (lease: LeaseRefMsg, segmentCount: number) => ({
  lease,
  success: true,
  error: '',
  segment_count: segmentCount,
  duration_seconds: 1,
  engine: 'bench',
  engine_model: 'small',
  cancelled: false,
});

/**
 * Phase 1: each worker claims with Claim(wait_ms 0), then loops Complete with claim_next (contract
 * 4: the completion also claims the worker's next job); when a Complete brings no job it calls
 * Claim(wait_ms 0), and it stops when that comes back empty. With
 * `claimNext` false, the loop of contract 3: Claim(wait_ms 0) -> Complete. Latencies are
 * client-observed round trips of the unary calls.
 */
export interface ProtocolArgs {
  /** The coordinator's gRPC address, host:port. */
  address: string;
  /** One worker secret per simulated worker. */
  secrets: string[];
}

export interface ProtocolResult {
  loadCpu: number;
  /** Pairs per second over the first and the second half of the jobs. */
  halves: [number, number];
  jobs: number;
  distinctJobs: number;
  elapsedMs: number;
  /** Claim calls that found a job, and their latency. */
  claim: Summary;
  /** Claim calls in all (the empty ones that ended a worker's loop included). */
  claimCalls: number;
  /** Complete calls (with claim_next: each one a completion and the next claim). */
  complete: Summary;
  /** Jobs that came in a Complete's answer (CompleteResponse.next). */
  claimedByComplete: number;
  anomalies: Array<{ job: number; duplicate: boolean; status: string }>;
}

async function protocol({ address, secrets, claimNext }: ProtocolArgs & { claimNext: boolean }): Promise<ProtocolResult> {
  const workers = await Promise.all(secrets.map((s) => connectWorker(address, s)));
  const claimMs: number[] = [];
  const completeMs: number[] = [];
  const jobIds: number[] = [];
  const anomalies: ProtocolResult['anomalies'] = [];
  let claimCalls = 0;
  let claimedByComplete = 0;
  let lastComplete = 0;
  const doneAt: number[] = [];
  const cpu0 = cpuSample();
  const t0 = performance.now();
  const ticker = setInterval(() => log(`protocol: ${jobIds.length} jobs claimed+completed`), 2000);
  const claim = async (w: SimWorker): Promise<ClaimedJob | null> => {
    const t = performance.now();
    claimCalls++;
    const res = await w.client.claim({ session_id: w.sessionId, wait_ms: 0 });
    if (!res.has_job || !res.job) return null; // the queue is empty
    claimMs.push(performance.now() - t);
    return res.job;
  };
  try {
    await Promise.all(
      workers.map(async (w) => {
        let job = await claim(w);
        while (job) {
          const t = performance.now();
          const c = await w.client.complete({ ...completeOk(job.lease, 0), ...(claimNext ? { claim_next: true, session_id: w.sessionId } : {}) });
          lastComplete = performance.now();
          completeMs.push(lastComplete - t);
          if (c.duplicate || c.status !== 'completed') anomalies.push({ job: job.lease.job_id, duplicate: c.duplicate, status: c.status });
          jobIds.push(job.lease.job_id);
          doneAt.push(lastComplete - t0);
          // Nothing in the answer (none found, none looked for within a second of the group's empty
          // look, or a coordinator that does not claim in Complete): Claim then, as the agent does.
          job = c.next?.job ?? null;
          if (job) claimedByComplete++;
          else job = await claim(w);
        }
      }),
    );
  } finally {
    clearInterval(ticker);
    closeAll();
  }
  // Throughput over the first and the second half of the jobs (the queue is deeper in the first).
  const half = Math.floor(doneAt.length / 2);
  const at = (k: number) => doneAt[k] ?? NaN;
  const halves: [number, number] =
    doneAt.length >= 2 ? [(half / at(half - 1)) * 1000, ((doneAt.length - half) / (at(doneAt.length - 1) - at(half - 1))) * 1000] : [NaN, NaN];
  return {
    loadCpu: cpuSince(cpu0).self,
    halves,
    jobs: jobIds.length,
    distinctJobs: new Set(jobIds).size,
    elapsedMs: lastComplete - t0,
    claim: summarize(claimMs),
    claimCalls,
    complete: summarize(completeMs),
    claimedByComplete,
    anomalies,
  };
}

/** Claims until it gets a job (with several workers racing, a claim can miss rows locked by another). */
async function claimOne(w: SimWorker, deadline: number): Promise<ClaimedJob> {
  while (performance.now() < deadline) {
    const res = await w.client.claim({ session_id: w.sessionId, wait_ms: 1000 });
    if (res.has_job && res.job) return res.job;
  }
  throw new Error('a segment-phase worker found no job to claim');
}

/**
 * Phase 2: one worker per job holds its lease and streams `segmentsPerJob` segments over its progress
 * stream, one every `spacingMs` (worker start times are staggered uniformly over one spacing); one
 * socket.io client per job subscribes first. Latency = client receive time - send time, both read
 * from this process's monotonic clock (the send time travels inside the segment text).
 */
export interface SegmentsArgs extends ProtocolArgs {
  /** The coordinator's HTTP base URL (socket.io). */
  url: string;
  /** A user's JWT for the socket.io handshake. */
  token: string;
  segmentsPerJob: number;
  spacingMs: number;
}

export interface SegmentsResult {
  loadCpu: number;
  jobs: number;
  segmentsPerJob: number;
  spacingMs: number;
  jobIds: number[];
  latency: Summary;
  received: number;
  storedAcks: number;
  streamMs: number;
  sendSpanMs: number;
  lastReceiveAfterLastSendMs: number;
  deliveredPerSecond: number;
  clientsComplete: number;
  problems: string[];
}

interface Watcher {
  jobId: number;
  socket: Socket;
  received: Array<{ seq: number; latency: number }>;
  foreign: number;
  snapshotSegments: number;
}

async function segments({ address, secrets, url, token, segmentsPerJob, spacingMs }: SegmentsArgs): Promise<SegmentsResult> {
  const workers = await Promise.all(secrets.map((s) => connectWorker(address, s)));
  const deadline = performance.now() + 30_000;
  const jobs = await Promise.all(workers.map((w) => claimOne(w, deadline)));
  const jobIds = jobs.map((j) => j.lease.job_id);
  if (new Set(jobIds).size !== jobIds.length) throw new Error('two workers claimed the same job');
  let lastReceive = 0;
  log(`segments: ${jobs.length} workers hold one lease each; connecting ${jobs.length} socket.io clients`);

  const clients = await Promise.all(
    jobIds.map(async (jobId) => {
      // forceNew: one connection per client, as separate browsers would have (no multiplexing).
      const socket = io(url, { transports: ['websocket'], auth: { token }, reconnection: false, forceNew: true });
      open.add(socket);
      const seen: Watcher = { jobId, socket, received: [], foreign: 0, snapshotSegments: 0 };
      socket.on('segment', (s: { job_id: number; seq: number; text: string }) => {
        const at = performance.now();
        if (s.job_id !== jobId) {
          seen.foreign++;
          return;
        }
        const m = /@(\d+(?:\.\d+)?)$/.exec(s.text);
        seen.received.push({ seq: s.seq, latency: m ? at - Number(m[1]) : NaN });
        if (at > lastReceive) lastReceive = at;
      });
      socket.on('snapshot', (snap: { segments?: unknown[] }) => (seen.snapshotSegments += snap.segments?.length ?? 0));
      await new Promise<void>((resolve, reject) => {
        socket.once('connect', resolve);
        socket.once('connect_error', (err) => reject(new Error(`socket.io connect failed: ${err.message}`)));
      });
      const ack = (await socket.timeout(10_000).emitWithAck('subscribe', { jobId })) as { ok?: boolean } | null;
      if (!ack?.ok) throw new Error(`subscribe to job ${jobId} refused: ${JSON.stringify(ack)}`);
      return seen;
    }),
  );

  log(`segments: streaming ${segmentsPerJob} segments on each of ${jobs.length} progress streams, ${spacingMs} ms apart`);
  const acks: number[] = [];
  const cpu0 = cpuSample();
  const t0 = performance.now();
  let lastSend = 0;
  await Promise.all(
    jobs.map(async (job, i) => {
      const w = workers[i]!; // one worker per job
      const stream = w.client.progress(job.lease);
      const start = performance.now() + Math.random() * spacingMs;
      for (let seq = 0; seq < segmentsPerJob; seq++) {
        const due = start + seq * spacingMs;
        const wait = due - performance.now();
        if (wait > 0) await sleep(wait);
        const sentAt = performance.now();
        stream.send({
          stage: 'transcribing',
          stage_detail: '',
          audio_position_seconds: seq + 1,
          segments: [{ seq, start: seq, end: seq + 1, text: `bench segment ${seq} of job ${job.lease.job_id} sent@${sentAt.toFixed(3)}` }],
          duration_seconds: segmentsPerJob,
          engine: 'bench',
          engine_model: 'small',
        });
        if (sentAt > lastSend) lastSend = sentAt;
      }
      const ack = await Promise.race([stream.end(), stream.failed]);
      acks.push(Number(ack.segments_stored));
      const c = await w.client.complete(completeOk(job.lease, segmentsPerJob));
      if (c.duplicate || c.status !== 'completed') throw new Error(`job ${job.lease.job_id} completion answered ${JSON.stringify(c)}`);
    }),
  );
  const streamsDone = performance.now();

  // Everything is stored; give the last socket.io events time to arrive.
  const expected = segmentsPerJob;
  const waitUntil = performance.now() + 15_000;
  while (performance.now() < waitUntil && clients.some((c) => c.received.length < expected)) await sleep(20);

  const latencies: number[] = [];
  const problems: string[] = [];
  for (const c of clients) {
    const seqs = c.received.map((r) => r.seq);
    const inOrderOnce = seqs.length === expected && seqs.every((s, k) => s === k);
    if (!inOrderOnce) {
      const dup = seqs.length - new Set(seqs).size;
      problems.push(
        `job ${c.jobId}: got ${seqs.length}/${expected} (${dup} duplicates${seqs.every((s, k) => k === 0 || s > seqs[k - 1]!) ? '' : ', out of order'})`,
      );
    }
    if (c.foreign) problems.push(`job ${c.jobId}: ${c.foreign} segments of other jobs`);
    if (c.snapshotSegments) problems.push(`job ${c.jobId}: ${c.snapshotSegments} segments already in the snapshot`);
    for (const r of c.received) latencies.push(r.latency);
  }
  for (const c of clients) c.socket.close();
  closeAll();
  return {
    loadCpu: cpuSince(cpu0).self,
    jobs: jobs.length,
    segmentsPerJob,
    spacingMs,
    jobIds,
    latency: summarize(latencies.filter(Number.isFinite)),
    received: latencies.length,
    storedAcks: acks.reduce((a, b) => a + b, 0),
    streamMs: streamsDone - t0,
    sendSpanMs: lastSend - t0,
    lastReceiveAfterLastSendMs: lastReceive - lastSend,
    deliveredPerSecond: (latencies.length / (lastReceive - t0)) * 1000,
    clientsComplete: clients.filter((c) => c.received.length === expected && c.received.every((r, k) => r.seq === k)).length,
    problems,
  };
}

/**
 * DNS reads (bench/dns.mjs): `requests` ({ kind, path, minRows }) as real HTTP GETs on loopback with
 * a DNS API key, at most `concurrency` in flight. Latency = request start -> JSON body parsed. A
 * response counts as good when it is 200, ok, served from the cache (method CACHE) and has at least
 * `minRows` rows (the bench knows each page/term has data).
 */
export interface HttpArgs {
  url: string;
  /** A DNS API key (x-api-key). */
  key: string;
  requests: Array<{ kind: string; path: string; minRows: number }>;
  concurrency: number;
}

export interface HttpResult {
  kinds: Record<string, Summary & { rows: number }>;
  all: Summary;
  bad: number;
  badExamples: string[];
  elapsedMs: number;
  loadCpu: number;
}

async function http({ url, key, requests, concurrency }: HttpArgs): Promise<HttpResult> {
  const byKind: Record<string, { ms: number[]; rows: number }> = {};
  const bad: string[] = [];
  const cpu0 = cpuSample();
  const t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < requests.length) {
        const r = requests[next++]!;
        const t = performance.now();
        const res = await fetch(`${url}${r.path}`, { headers: { 'x-api-key': key } });
        const body = (await res.json().catch(() => null)) as DnsApiBody | null;
        const elapsed = performance.now() - t;
        const kind = (byKind[r.kind] ??= { ms: [], rows: 0 });
        kind.ms.push(elapsed);
        const rows = body?.zoneData?.length ?? 0;
        kind.rows += rows;
        if (res.status !== 200 || !body?.ok || body.method !== 'CACHE' || rows < r.minRows) {
          bad.push(`${r.path}: HTTP ${res.status} ${body?.reason ?? ''} method ${body?.method} rows ${rows}`);
        }
      }
    }),
  );
  const elapsedMs = performance.now() - t0;
  const kinds = Object.fromEntries(Object.entries(byKind).map(([k, v]) => [k, { ...summarize(v.ms), rows: v.rows }]));
  return {
    kinds,
    all: summarize(Object.values(byKind).flatMap((v) => v.ms)),
    bad: bad.length,
    badExamples: bad.slice(0, 3),
    elapsedMs,
    loadCpu: cpuSince(cpu0).self,
  };
}

// ---- the HTTP read phase (bench/src/http.ts) ---------------------------------------------------------
/** One route of the HTTP mix: a GET with its own headers and a check of its JSON answer. */
export interface MixRoute {
  name: string;
  /** Taken in turn, one per request of this route. */
  paths: string[];
  headers: Record<string, string>;
  /** The answer is good when it is 200 and its JSON has a non-empty array under this key (`jobs`, `results`, `zoneData`) or, without one, `ok: true`. */
  rowsKey?: string;
}

export interface HttpMixArgs {
  url: string;
  routes: MixRoute[];
  connections: number;
  seconds: number;
  /** First octet of the client addresses sent in X-Forwarded-For: runs that must not share a per-client budget use different ones. */
  clientNet: number;
}

export interface HttpMixResult {
  requests: number;
  elapsedMs: number;
  all: Summary;
  routes: Record<string, Summary & { errors: number }>;
  errors: number;
  errorExamples: string[];
  loadCpu: number;
}

/**
 * `connections` keep-alive connections (one undici pool), each sending its next GET as soon as the
 * last one was answered, for `seconds`; the routes are taken round-robin over all connections. Each
 * request carries another client address in X-Forwarded-For (the coordinator trusts loopback as a
 * proxy), as requests from many browsers and integrators behind a reverse proxy do.
 */
async function httpMix({ url, routes, connections, seconds, clientNet }: HttpMixArgs): Promise<HttpMixResult> {
  const pool = new Pool(url, { connections, pipelining: 1, keepAliveTimeout: 60_000 });
  const times = routes.map(() => [] as number[]);
  const errors = routes.map(() => 0);
  const turns = routes.map(() => 0);
  const examples: string[] = [];
  let next = 0;
  let client = 0;
  const cpu0 = cpuSample();
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  try {
    await Promise.all(
      Array.from({ length: connections }, async () => {
        while (performance.now() < end) {
          const k = next++ % routes.length;
          const route = routes[k]!;
          const c = client++;
          const path = route.paths[turns[k]!++ % route.paths.length]!;
          const ip = `${clientNet}.${(c >> 16) & 255}.${(c >> 8) & 255}.${c & 255}`;
          const t = performance.now();
          let problem: string | null = null;
          try {
            const res = await pool.request({ method: 'GET', path, headers: { ...route.headers, 'x-forwarded-for': ip } });
            const text = await res.body.text();
            times[k]!.push(performance.now() - t);
            if (res.statusCode !== 200) problem = `HTTP ${res.statusCode} ${text.slice(0, 200)}`;
            else {
              const body = JSON.parse(text) as Record<string, unknown>;
              const rows = route.rowsKey ? body[route.rowsKey] : null;
              if (route.rowsKey ? !Array.isArray(rows) || rows.length === 0 : body.ok !== true) problem = `unexpected answer ${text.slice(0, 200)}`;
            }
          } catch (err) {
            times[k]!.push(performance.now() - t);
            problem = err instanceof Error ? err.message : String(err);
          }
          if (problem) {
            errors[k]!++;
            if (examples.length < 3) examples.push(`${route.name} ${path}: ${problem}`);
          }
        }
      }),
    );
  } finally {
    await pool.close();
  }
  const elapsedMs = performance.now() - t0;
  return {
    requests: times.reduce((a, t) => a + t.length, 0),
    elapsedMs,
    all: summarize(times.flat()),
    routes: Object.fromEntries(routes.map((r, k) => [r.name, { ...summarize(times[k]!), errors: errors[k]! }])),
    errors: errors.reduce((a, b) => a + b, 0),
    errorExamples: examples,
    loadCpu: cpuSince(cpu0).self,
  };
}

// ---- the fleet phase (bench/src/fleet.ts): many connected, mostly idle workers ---------------------
/**
 * Each simulated worker behaves like the agent (worker/src/agent.ts) with nothing to do: Hello, a
 * heartbeat every `heartbeat_interval_ms` (first one at a random point of the interval, as agents
 * started at different times), and a long-poll Claim (`wait_ms`) again and again. A claimed job is
 * completed at once, the completion claiming the next job (claim_next); Claim again when it brought none.
 */
export interface FleetStartArgs extends ProtocolArgs {
  waitMs: number;
}
interface FleetWorker extends SimWorker {
  heartbeat: NodeJS.Timeout | null;
}
const fleet = {
  workers: [] as FleetWorker[],
  stopping: false,
  loops: [] as Array<Promise<void>>,
  heartbeats: 0,
  heartbeatErrors: 0,
  claimErrors: [] as string[],
  /** Jobs claimed (and completed) since the last fleetDrain began, and the claims' timings. */
  drain: null as null | {
    t0: number;
    jobs: number[];
    /** Job id → when it was claimed (epoch ms: the creator's clock is another process's). */
    claimedAt: Record<number, number>;
    anomalies: number;
    wanted: number;
    done: () => void;
  },
};

async function fleetStart({ address, secrets, waitMs }: FleetStartArgs) {
  fleet.stopping = false;
  const helloMs: number[] = [];
  // Hello in batches, as a fleet coming up does over some seconds (and as the coordinator's auth allows).
  const connected: FleetWorker[] = [];
  for (let i = 0; i < secrets.length; i += 50) {
    const batch = await Promise.all(
      secrets.slice(i, i + 50).map(async (s) => {
        const t = performance.now();
        const w = await connectWorker(address, s);
        helloMs.push(performance.now() - t);
        return { ...w, heartbeat: null };
      }),
    );
    connected.push(...batch);
  }
  fleet.workers = connected;
  const intervalMs = connected[0]?.heartbeatMs || 15_000;
  for (const w of connected) {
    const beat = () => {
      if (fleet.stopping) return;
      fleet.heartbeats++;
      w.client.heartbeat({ session_id: w.sessionId, leases: [] }).catch(() => fleet.heartbeatErrors++);
    };
    // The first beat at a random point of the interval, then every interval.
    w.heartbeat = setTimeout(() => {
      beat();
      w.heartbeat = setInterval(beat, intervalMs);
    }, Math.random() * intervalMs);
    fleet.loops.push(claimLoop(w, waitMs));
  }
  return { workers: connected.length, hello: summarize(helloMs), heartbeatIntervalMs: intervalMs };
}

async function claimLoop(w: FleetWorker, waitMs: number) {
  // A job the last completion claimed (CompleteResponse.next): run before any Claim, as the agent does.
  let handed: ClaimedJob | null = null;
  while (!fleet.stopping) {
    let job = handed;
    handed = null;
    if (!job) {
      let res;
      try {
        res = await w.client.claim({ session_id: w.sessionId, wait_ms: waitMs });
      } catch (err) {
        if (fleet.stopping) return;
        fleet.claimErrors.push(err instanceof Error ? err.message : String(err));
        await sleep(1000);
        continue;
      }
      if (!res.has_job || !res.job) continue;
      job = res.job;
    }
    const d = fleet.drain;
    if (d) d.claimedAt[job.lease.job_id] = Date.now();
    const c = await w.client.complete({ ...completeOk(job.lease, 0), claim_next: true, session_id: w.sessionId });
    handed = c.next?.job ?? null;
    if (d) {
      if (c.duplicate || c.status !== 'completed') d.anomalies++;
      d.jobs.push(job.lease.job_id);
      if (d.jobs.length >= d.wanted) d.done();
    }
  }
}

/** Starts counting claims now; resolves when `jobs` jobs were claimed and completed (or after `timeoutMs`). */
async function fleetDrain({ jobs, timeoutMs }: { jobs: number; timeoutMs: number }) {
  const cpu0 = cpuSample();
  const t0 = performance.now();
  let done: () => void = () => undefined;
  const finished = new Promise<void>((resolve) => (done = resolve));
  fleet.drain = { t0, jobs: [], claimedAt: {}, anomalies: 0, wanted: jobs, done };
  const timer = setTimeout(done, timeoutMs);
  await finished;
  clearTimeout(timer);
  const d = fleet.drain;
  fleet.drain = null;
  return {
    elapsedMs: performance.now() - t0,
    jobs: d.jobs.length,
    distinctJobs: new Set(d.jobs).size,
    anomalies: d.anomalies,
    claimedAt: d.claimedAt,
    loadCpu: cpuSince(cpu0).self,
  };
}

/** Counters since the start; the load generator's own CPU over `ms` when asked to measure. */
async function fleetIdle({ ms: waitMs }: { ms: number }) {
  const cpu0 = cpuSample();
  const beats0 = fleet.heartbeats;
  await sleep(waitMs);
  return {
    heartbeats: fleet.heartbeats - beats0,
    heartbeatErrors: fleet.heartbeatErrors,
    claimErrors: fleet.claimErrors.slice(0, 3),
    claimErrorCount: fleet.claimErrors.length,
    loadCpu: cpuSince(cpu0).self,
  };
}

async function fleetStop() {
  fleet.stopping = true;
  for (const w of fleet.workers) if (w.heartbeat) clearTimeout(w.heartbeat);
  closeAll();
  await Promise.allSettled(fleet.loops);
  fleet.loops = [];
  fleet.workers = [];
  fleet.heartbeats = 0;
  fleet.heartbeatErrors = 0;
  fleet.claimErrors = [];
  return { stopped: true };
}

const commands = { protocol, segments, http, httpMix, fleetStart, fleetDrain, fleetIdle, fleetStop };

/** The commands the load generator answers, by name. */
export type LoadCommands = typeof commands;

/** The parent's handle on a forked load generator (bench/src/run.ts `startLoadGenerator`). */
export interface LoadGenerator {
  call<K extends keyof LoadCommands>(cmd: K, args: Parameters<LoadCommands[K]>[0]): Promise<Awaited<ReturnType<LoadCommands[K]>>>;
  stop(): Promise<void>;
}

/** IPC messages: parent -> child, child -> parent. */
export interface LoadRequest {
  id: number;
  cmd: keyof LoadCommands;
  args: unknown;
}
export type LoadReply = { id: number; result: unknown; error?: undefined } | { id: number; error: string };

const reply = (m: LoadReply) => process.send?.(m);

async function handle(msg: LoadRequest): Promise<void> {
  try {
    const result = await (commands[msg.cmd] as (args: unknown) => Promise<unknown>)(msg.args);
    reply({ id: msg.id, result });
  } catch (err) {
    closeAll();
    reply({ id: msg.id, error: err instanceof Error ? `${err.message}\n${err.stack}` : String(err) });
  }
}
process.on('message', (msg: LoadRequest) => void handle(msg));
// The parent disconnects IPC when it is done (or dies): leave then.
process.on('disconnect', () => {
  closeAll();
  process.exit(0);
});
