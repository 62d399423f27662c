import { execFile, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import { openOrm, type Orm } from '../../coordinator/src/db/orm.js';
import { WorkerDirectory } from '../../coordinator/src/speech/workers/worker-directory.js';
import { launchBrowser, watchContext } from '../support/browser.js';
import { createTestDatabase, randomName, testEnv, type TestDatabase } from '../support/harness.js';
import { multipartForm } from '../support/multipart.js';
import { startCoordinatorProcess } from '../support/outage.js';
import { Proc, freePort, repoRoot, startNode } from '../support/processes.js';

/**
 * Three coordinator processes on one PostgreSQL and one Redis behind HAProxy (Debian's haproxy)
 * with the committed deploy/haproxy.cfg: HTTP with health checks on /api/platform/ready and
 * sticky cookies, worker gRPC as a TCP frontend. Real worker agents (ffmpeg + pocketsphinx).
 */
const run = promisify(execFile);
const MODEL = 'pocketsphinx-en-us';
const SENTENCES = ['hello world', 'i would like a cup of coffee', 'please call me tomorrow morning', 'good morning everyone'];
const dir = mkdtempSync(path.join(tmpdir(), 'sonar-cluster-'));
const CONFIG = path.join(repoRoot, 'deploy', 'haproxy.cfg');

type Coordinator = Awaited<ReturnType<typeof startCoordinatorProcess>>;
interface Node {
  name: string;
  httpPort: number;
  grpcPort: number;
  proc: Coordinator | null;
}

let db: TestDatabase;
let orm: Orm;
let env: Record<string, string>;
const nodes: Node[] = [];
let haproxy: Proc;
let haproxyEnv: Record<string, string>;
let base: string;
let grpcAddress: string;
let token: string;
let username: string;
let password: string;
let apiToken: string;
const agents: Proc[] = [];
let receiver: Server;
let receiverPort: number;
const callbacks: Array<{ path: string; body: string }> = [];

const sql = <T>(q: string, params: unknown[] = []) => orm.em.getConnection().execute<T[]>(q, params);

async function startNodeProcess(n: Node): Promise<void> {
  n.proc = await startCoordinatorProcess({ ...env, PORT: String(n.httpPort), GRPC_PORT: String(n.grpcPort) });
}

/** HAProxy's view of every server: `backend/server` → status (UP, DOWN, MAINT …), from the runtime API's `show stat`. */
async function haproxyStatus(): Promise<Record<string, string>> {
  const csv = await new Promise<string>((resolve, reject) => {
    const s = connect(haproxyEnv.SONAR_HAPROXY_STATS_SOCKET!);
    let out = '';
    s.on('data', (d: Buffer) => (out += d.toString()));
    s.on('end', () => resolve(out));
    s.on('error', reject);
    s.end('show stat\n');
  });
  const [header, ...rows] = csv.replace(/^# /, '').trim().split('\n');
  const cols = header!.split(',');
  const status = cols.indexOf('status');
  return Object.fromEntries(
    rows
      .map((r) => r.split(','))
      .filter((r) => r[1] !== 'FRONTEND' && r[1] !== 'BACKEND')
      .map((r) => [`${r[0]}/${r[1]}`, r[status]!]),
  );
}

/** Waits until HAProxy sends traffic to every coordinator again (HTTP and gRPC). */
async function allUp(): Promise<void> {
  await vi.waitFor(
    async () => {
      if (haproxy.child.exitCode !== null) throw new Error(`haproxy exited with ${haproxy.child.exitCode}:\n${haproxy.lines.join('\n')}`);
      expect(Object.values(await haproxyStatus())).toEqual(['UP', 'UP', 'UP', 'UP', 'UP', 'UP']);
    },
    { timeout: 30_000, interval: 100 },
  );
}

/** espeak-ng sentences joined by a second of silence each (pocketsphinx ends a segment at each). */
function speech(name: string, sentences: string[]): Buffer {
  const silence = path.join(dir, 'silence.wav');
  execFileSync('sox', ['-n', '-r', '22050', '-c', '1', '-b', '16', silence, 'trim', '0', '1.0']);
  const parts = sentences.flatMap((sentence, i) => {
    const part = path.join(dir, `${name}-${i}.wav`);
    execFileSync('espeak-ng', ['-v', 'en-us', '-w', part, `${sentence}.`]);
    return [part, silence];
  });
  const file = path.join(dir, `${name}.wav`);
  execFileSync('sox', [...parts, file]);
  return readFileSync(file);
}

/** Submits a recording through HAProxy; the job's id. */
async function submit(wav: Buffer, name: string): Promise<number> {
  const form = multipartForm([
    { name: 'model', value: MODEL },
    { name: 'disable_diarization', value: 'true' },
    { name: 'media_file', filename: `${name}.wav`, data: wav },
  ]);
  const res = await fetch(`${base}/api/speech/jobs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': form.contentType },
    body: form.payload,
  });
  expect(res.status, await res.clone().text()).toBe(201);
  return ((await res.json()) as { job: { id: number } }).job.id;
}

/** A real agent; `coordinator` is HAProxy's gRPC frontend or one coordinator's own port. */
async function startAgent(coordinator: string): Promise<{ name: string; proc: Proc }> {
  const name = randomName('agent');
  const { secret } = await new WorkerDirectory(orm, 45_000).createWorker(name);
  const proc = startNode('worker/dist/bin.js', ['--coordinator', coordinator, '--work-dir', dir, '--diarization', 'off'], { WORKER_SECRET: secret });
  agents.push(proc);
  await proc.waitFor(/connected to coordinator/, 30_000);
  return { name, proc };
}

const events = async (jobId: number) =>
  (await sql<{ event: string }>('select event from speech_job_events where job_id = ? order by id', [jobId])).map((e) => e.event);
const inList = (ids: number[]) => `(${ids.map(() => '?').join(', ')})`;
const statuses = async (ids: number[]) =>
  (await sql<{ id: number; status: string }>(`select id, status from speech_jobs where id in ${inList(ids)} order by id`, ids)).map((r) => r.status);

beforeAll(async () => {
  db = await createTestDatabase();
  orm = await openOrm({ databaseUrl: db.url, poolMax: 2 });
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      callbacks.push({ path: req.url ?? '/', body: Buffer.concat(chunks).toString('utf8') });
      res.end('ok');
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverPort = (receiver.address() as { port: number }).port;

  env = testEnv(db, {
    SPEECH_MEDIA_DIR: path.join(dir, 'media'),
    PUBLIC_BASE_URL: 'https://speech.example.org',
    OUTBOUND_ALLOW_RANGES: '127.0.0.0/8',
    SPEECH_CALLBACK_BACKOFF_MS: '200',
    SPEECH_LEASE_TTL_SECONDS: '60',
    SPEECH_STALE_SWEEP_SECONDS: '1',
    WORKER_HEARTBEAT_INTERVAL_MS: '1000',
    TRUST_PROXY: '127.0.0.1',
  });
  for (let i = 1; i <= 3; i++) nodes.push({ name: `c${i}`, httpPort: await freePort(), grpcPort: await freePort(), proc: null });
  for (const n of nodes) await startNodeProcess(n);

  const httpPort = await freePort();
  const grpcPort = await freePort();
  base = `http://127.0.0.1:${httpPort}`;
  grpcAddress = `127.0.0.1:${grpcPort}`;
  haproxyEnv = {
    SONAR_HTTP_BIND: `127.0.0.1:${httpPort}`,
    SONAR_GRPC_BIND: grpcAddress,
    SONAR_HAPROXY_STATS_SOCKET: path.join(dir, 'haproxy.sock'),
    ...Object.fromEntries(
      nodes.flatMap((n, i) => [
        [`SONAR_COORDINATOR_${i + 1}_HTTP`, `127.0.0.1:${n.httpPort}`],
        [`SONAR_COORDINATOR_${i + 1}_GRPC`, `127.0.0.1:${n.grpcPort}`],
      ]),
    ),
  };
  haproxy = new Proc(spawn('haproxy', ['-f', CONFIG, '-db'], { env: { ...process.env, ...haproxyEnv }, stdio: ['ignore', 'pipe', 'pipe'] }));
  await allUp();

  const accounts = new AccountService(orm);
  const created = await accounts.createUser({ username: randomName('cluster'), permissions: ['speech.use', 'speech.api'] });
  const { user } = created;
  username = user.username;
  password = created.password;
  apiToken = (await accounts.createPersonalToken(user.id, { name: 'cluster', scopes: ['speech.api'] })).token;
  const login = await fetch(`${base}/api/account/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: user.username, password }),
  });
  token = ((await login.json()) as { token: string }).token;
}, 180_000);

afterAll(async () => {
  await Promise.all(agents.map((a) => a.stop('SIGKILL')));
  await haproxy?.stop('SIGKILL');
  await Promise.all(nodes.flatMap((n) => (n.proc ? [n.proc.proc.stop('SIGKILL')] : [])));
  await new Promise<void>((resolve) => receiver?.close(() => resolve()));
  await orm?.close(true);
  await db?.drop();
  await rm(dir, { recursive: true, force: true });
});

describe('three coordinators behind HAProxy', () => {
  it('deploy/haproxy.cfg is valid (haproxy -c)', async () => {
    const r = await run('haproxy', ['-c', '-f', CONFIG], { env: { ...process.env, ...haproxyEnv }, encoding: 'utf8' });
    expect(r.stdout).toContain('Configuration file is valid');
    // docker-compose.yml's cluster profile sets every variable the file reads.
    const variables = [...new Set([...readFileSync(CONFIG, 'utf8').matchAll(/\$\{(SONAR_[A-Z0-9_]+)\}/g)].map((m) => m[1]!))].sort();
    expect(variables).toEqual(Object.keys(haproxyEnv).sort());
    const compose = readFileSync(path.join(repoRoot, 'docker-compose.yml'), 'utf8');
    const haproxyService = compose.slice(compose.indexOf('\n  haproxy:\n'), compose.indexOf('\nvolumes:\n'));
    for (const v of variables) expect(haproxyService).toContain(`      ${v}: `);
    expect(haproxyService).toContain('./deploy/haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro');
  });

  it('health checks: a coordinator that stops is taken out, and back in once it is ready again', async () => {
    const c3 = nodes[2]!;
    c3.proc!.proc.child.kill('SIGKILL');
    await c3.proc!.proc.exited;
    await expect.poll(async () => (await haproxyStatus())['coordinators/c3'], { timeout: 10_000, interval: 100 }).toBe('DOWN');
    // Meanwhile every request is answered by the others.
    for (let i = 0; i < 20; i++) expect((await fetch(`${base}/api/platform/ready`)).status).toBe(200);
    await startNodeProcess(c3);
    await allUp();
  });

  it('workers attached to different coordinators drain one queue, each job exactly once', { timeout: 240_000 }, async () => {
    const attached = await Promise.all(nodes.map((n) => startAgent(`127.0.0.1:${n.grpcPort}`)));
    const wav = speech('short', [SENTENCES[1]!]);
    const ids: number[] = [];
    for (let i = 0; i < 9; i++) ids.push(await submit(wav, `short-${i}`));
    await expect.poll(() => statuses(ids), { timeout: 200_000, interval: 500 }).toEqual(ids.map(() => 'completed'));
    for (const id of ids) {
      const ev = await events(id);
      expect(
        ev.filter((e) => e === 'claimed'),
        `job ${id}: ${ev.join(', ')}`,
      ).toHaveLength(1);
      expect(ev.filter((e) => e === 'completed')).toHaveLength(1);
    }
    const leases = await sql<{ job_id: number; worker: string; outcome: string }>(
      `select l.job_id, w.name as worker, l.outcome from speech_leases l join speech_workers w on w.id = l.worker_id where l.job_id in ${inList(ids)} order by l.job_id`,
      ids,
    );
    expect(leases.map((l) => l.job_id)).toEqual(ids);
    expect(leases.every((l) => l.outcome === 'completed')).toBe(true);
    // More than one coordinator handed out work (each agent talks to its own).
    expect(new Set(leases.map((l) => l.worker)).size).toBeGreaterThan(1);
    await Promise.all(attached.map((a) => a.proc.stop('SIGTERM')));
  });

  it('a browser watching a job through HAProxy sees it live to the end while the worker talks to another coordinator', { timeout: 180_000 }, async () => {
    // The worker on c1's own gRPC port; the browser pinned to c2 by HAProxy's cookie (what a first answer would set).
    const agent = await startAgent(`127.0.0.1:${nodes[0]!.grpcPort}`);
    const browser = await launchBrowser();
    try {
      const context = await browser.newContext();
      await context.addCookies([{ name: 'SONAR_NODE', value: 'c2', url: base }]);
      const { problems, cspViolations } = await watchContext(context);
      const page = await context.newPage();
      await page.goto(`${base}/login`);
      await page.fill('#username', username);
      await page.fill('#password', password);
      await page.click('button[type=submit]');
      await page.waitForURL(`${base}/`);

      const jobId = await submit(speech('watched', Array.from({ length: 3 }, () => SENTENCES).flat()), 'watched');
      await page.goto(`${base}/speech/jobs/${jobId}`);
      await page.waitForSelector('html[data-cards="synced"]');
      const view = () =>
        page.evaluate(() => ({
          segments: document.querySelectorAll('#segments .seg').length,
          status: document.getElementById('job-status')?.dataset.status ?? '',
        }));
      // Segments arrive while the job still runs: live, not only on completion.
      await expect.poll(async () => (await view()).segments, { timeout: 90_000, interval: 50 }).toBeGreaterThan(0);
      expect((await view()).status).not.toBe('completed');
      await expect.poll(async () => (await view()).status, { timeout: 90_000, interval: 100 }).toBe('completed');
      const [row] = await sql<{ n: number }>('select count(*)::int as n from speech_segments where job_id = ?', [jobId]);
      await expect.poll(async () => (await view()).segments, { timeout: 10_000 }).toBe(row!.n);
      // The page's socket went through HAProxy to c2 (the cookie), the worker's calls to c1.
      expect(nodes[0]!.proc!.proc.lines.some((l) => l.includes('"worker hello"') && l.includes(`"worker":"${agent.name}"`))).toBe(true);
      expect((await context.cookies(base)).find((c) => c.name === 'SONAR_NODE')?.value).toBe('c2');
      expect(await cspViolations(page)).toEqual([]);
      expect(problems).toEqual([]);
    } finally {
      await browser.close();
      await agent.proc.stop('SIGTERM');
    }
  });

  it('kill -9 of the coordinator a worker talks to mid-job: the job completes once and its callback is delivered once', { timeout: 240_000 }, async () => {
    const agent = await startAgent(grpcAddress);
    // Through the token API (HAProxy), with a callback to the receiver.
    const callbackPath = `/cb/${randomName('job')}`;
    const form = multipartForm([
      { name: 'model', value: MODEL },
      { name: 'disable_diarization', value: 'true' },
      { name: 'callback_url', value: `http://127.0.0.1:${receiverPort}${callbackPath}` },
      { name: 'media_file', filename: 'long.wav', data: speech('long', Array.from({ length: 3 }, () => SENTENCES).flat()) },
    ]);
    const res = await fetch(`${base}/api/speech/transcribe`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiToken}`, 'content-type': form.contentType },
      body: form.payload,
    });
    expect(res.status, await res.clone().text()).toBe(201);
    const jobId = ((await res.json()) as { job: { id: number } }).job.id;
    const stored = async () => Number((await sql<{ n: string }>('select count(*) as n from speech_segments where job_id = ?', [jobId]))[0]!.n);
    await expect.poll(stored, { timeout: 90_000, interval: 50 }).toBeGreaterThanOrEqual(1);

    // The coordinator the agent's connection went to (it logged the agent's Hello).
    const victim = nodes.find((n) => n.proc!.proc.lines.some((l) => l.includes('"worker hello"') && l.includes(`"worker":"${agent.name}"`)))!;
    expect(victim).toBeDefined();
    victim.proc!.proc.child.kill('SIGKILL');
    await victim.proc!.proc.exited;
    const atKill = await stored();

    await expect.poll(async () => (await statuses([jobId]))[0], { timeout: 150_000, interval: 250 }).toBe('completed');
    await startNodeProcess(victim);
    await expect
      .poll(
        async () =>
          (
            await sql<{ callback_status: string }>(
              'select callback_status, callback_attempts, callback_http_status, callback_error from speech_jobs where id = ?',
              [jobId],
            )
          )[0],
        { timeout: 60_000, interval: 100 },
      )
      .toMatchObject({ callback_status: 'delivered' });
    const ev = await events(jobId);
    expect(
      ev.filter((e) => e === 'completed'),
      ev.join(', '),
    ).toHaveLength(1);
    expect(ev.filter((e) => e === 'claimed')).toHaveLength(1);
    // The kill was mid-job: segments were stored after it (through another coordinator).
    expect(await stored()).toBeGreaterThan(atKill);
    const [row] = await sql<{ attempt: number; callback_attempts: number }>('select attempt, callback_attempts from speech_jobs where id = ?', [jobId]);
    expect(row).toEqual({ attempt: 1, callback_attempts: 1 });
    const received = callbacks.filter((c) => c.path === callbackPath);
    expect(received).toHaveLength(1);
    expect(JSON.parse(received[0]!.body)).toMatchObject({ ok: true, event: 'speech.job.completed', job: { status: 'completed' } });

    await allUp();
    await agent.proc.stop('SIGTERM');
  });

  it('a rolling restart of all three: no failed HTTP request, no lost or duplicated job', { timeout: 300_000 }, async () => {
    const rolling = await Promise.all([0, 1, 2].map(() => startAgent(grpcAddress)));
    const [{ max }] = (await sql<{ max: number }>('select coalesce(max(id), 0)::int as max from speech_jobs')) as [{ max: number }];
    const wav = speech('rolling', [SENTENCES[2]!]);
    const ids: number[] = [];
    const reads = { ok: 0, failed: [] as string[] };
    let restarting = true;
    // Readers through HAProxy for as long as the restart lasts: the platform and readiness
    // endpoints as fast as they answer, and the signed-in job list and a job's detail once a
    // second each (the speech routes allow 120 requests a minute per user).
    const read = async (url: string, headers: Record<string, string> = {}) => {
      try {
        const res = await fetch(url, { headers });
        await res.arrayBuffer();
        if (res.status === 200) reads.ok++;
        else reads.failed.push(`${res.status} ${url}`);
      } catch (err) {
        reads.failed.push(`${String(err)} ${url}`);
      }
    };
    const reader = async () => {
      while (restarting) for (const p of ['/api/platform', '/api/platform/ready']) await read(`${base}${p}`);
    };
    const signedInReader = async () => {
      while (restarting) {
        await read(ids.length ? `${base}/api/speech/jobs/${ids.at(-1)}` : `${base}/api/speech/jobs`, { authorization: `Bearer ${token}` });
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    };
    const readers = Promise.all([reader(), reader(), signedInReader()]);
    for (const n of nodes) {
      ids.push(await submit(wav, `rolling-${n.name}-a`));
      const stopped = await n.proc!.proc.stop('SIGTERM');
      expect(stopped, `${n.proc!.proc.child.signalCode}\n${n.proc!.proc.lines.slice(-8).join('\n')}`).toBe(0);
      ids.push(await submit(wav, `rolling-${n.name}-b`));
      await startNodeProcess(n);
      await allUp();
    }
    restarting = false;
    await readers;
    process.stderr.write(`cluster-haproxy: rolling restart: ${reads.ok} HTTP reads through HAProxy, ${reads.failed.length} failed\n`);
    expect(reads.failed).toEqual([]);
    expect(reads.ok).toBeGreaterThan(50);

    await expect.poll(() => statuses(ids), { timeout: 200_000, interval: 500 }).toEqual(ids.map(() => 'completed'));
    for (const id of ids) {
      const ev = await events(id);
      expect(
        ev.filter((e) => e === 'completed'),
        `job ${id}: ${ev.join(', ')}`,
      ).toHaveLength(1);
    }
    // Nothing was submitted twice (a POST retried by the proxy after a coordinator stored it).
    const created = await sql<{ id: number }>('select id from speech_jobs where id > ? order by id', [max]);
    expect(created.map((r) => r.id)).toEqual(ids);
    await Promise.all(rolling.map((a) => a.proc.stop('SIGTERM')));
  });
});
