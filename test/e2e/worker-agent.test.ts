import { spawn } from 'node:child_process';
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WORKER_CONTRACT_VERSION } from '@sonar/shared';
import { CoordinatorClient } from '../../worker/src/coordinator-client.js';
import { whisperCliBuilt } from '../../worker/src/engines/whisper-cpp.js';
import { loadConfig } from '../../coordinator/src/config.js';
import { WorkerDirectory } from '../../coordinator/src/speech/workers/worker-directory.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { isSameProcess, recordProcess, stopProcess } from '../../coordinator/src/infra/processes.js';
import { createTestDatabase, testEnv, type TestDatabase } from '../support/harness.js';
import { Proc, freePort, repoRoot, startNode } from '../support/processes.js';

/**
 * The worker agent as a real process against a real coordinator over gRPC on loopback:
 * authentication, contract-version refusal, presence, reconnection and clean shutdown.
 */
let db: TestDatabase;
let svc: RunningCoordinator;
let grpcPort: number;
let secret: string;
let secondSecret: string;
const dir = mkdtempSync(path.join(tmpdir(), 'sonar-worker-'));
const procs: Proc[] = [];

function env() {
  return testEnv(db, { GRPC_PORT: String(grpcPort), WORKER_HEARTBEAT_INTERVAL_MS: '1000', WORKER_PRESENCE_TTL_MS: '3000' });
}

function agent(extra: string[] = [], secretValue = secret) {
  const file = path.join(dir, `secret-${procs.length}`);
  writeFileSync(file, secretValue);
  const p = startNode('worker/dist/bin.js', ['--coordinator', `127.0.0.1:${grpcPort}`, '--secret-file', file, ...extra]);
  procs.push(p);
  return p;
}

/**
 * The agent with --exit-with-parent, started by a parent of its own (like the quick start) that
 * prints the agent's PID and then idles; the agent's output goes through the parent's.
 * `stdin`: 'pipe' hands the agent a pipe only the parent holds, 'ignore' leaves only the parent PID.
 */
function agentUnderParent(stdin: 'pipe' | 'ignore') {
  const file = path.join(dir, `secret-${procs.length}`);
  writeFileSync(file, secret);
  const parentScript = `
    const c = require('node:child_process').spawn(process.execPath, process.argv.slice(1), { stdio: [process.env.AGENT_STDIN, 'inherit', 'inherit'] });
    console.log('agent pid ' + c.pid);
    setInterval(() => undefined, 60000);`;
  const args = [path.join(repoRoot, 'worker/dist/bin.js'), '--coordinator', `127.0.0.1:${grpcPort}`, '--secret-file', file, '--exit-with-parent'];
  const p = new Proc(
    spawn(process.execPath, ['-e', parentScript, '--', ...args], {
      cwd: repoRoot,
      env: { ...process.env, AGENT_STDIN: stdin },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  procs.push(p);
  return p;
}

async function metricsConnected(): Promise<number> {
  const res = await svc.app.inject({ method: 'GET', url: '/metrics', remoteAddress: '127.0.0.1' });
  return Number(/^speech_workers_connected (\d+)$/m.exec(res.body)?.[1]);
}

beforeAll(async () => {
  db = await createTestDatabase();
  grpcPort = await freePort();
  svc = await startCoordinator(loadConfig(env()));
  secret = (await svc.workers.createWorker('gpu-1')).secret;
});
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop('SIGKILL')));
  await svc?.close();
  await db?.drop();
});

describe('worker agent over gRPC', () => {
  it('says hello, advertises what it has, keeps presence with heartbeats, and stops on SIGTERM', async () => {
    const p = agent(['--device', 'cpu', '--models-dir', dir]);
    await p.waitFor(/connected to coordinator/);
    const [w] = (await svc.workers.listWorkers()).filter((x) => x.name === 'gpu-1');
    expect(w).toMatchObject({ fresh: true, contractVersion: WORKER_CONTRACT_VERSION, agentVersion: '0.1.0' });
    // No ggml files in the models folder: no whisper models are claimed (pocketsphinx's may be).
    expect(w!.capabilities).toMatchObject({ device: 'cpu', canFetchUrls: true });
    expect(w!.capabilities!.models.filter((m) => ['small', 'large', 'turbo'].includes(m))).toEqual([]);
    expect(await metricsConnected()).toBe(1);

    // Heartbeats every second (WORKER_HEARTBEAT_INTERVAL_MS) move last-seen forward.
    const first = w!.lastSeenAt!.getTime();
    const lastSeen = async () => (await svc.workers.listWorkers()).find((x) => x.name === 'gpu-1')!.lastSeenAt!.getTime();
    await expect.poll(lastSeen, { timeout: 10_000, interval: 200 }).toBeGreaterThan(first);

    const started = Date.now();
    expect(await p.stop('SIGTERM')).toBe(0);
    expect(Date.now() - started).toBeLessThan(3_000);
    await expect.poll(metricsConnected, { timeout: 6_000, interval: 500 }).toBe(0);
  });

  it('advertises whisper models only when their ggml files exist', async () => {
    // whisper.cpp's CLI is built by the e2e project's global setup (test/support/whisper-setup.ts).
    expect(whisperCliBuilt(), 'whisper-cli is not built: npm run whisper:build -w worker').toBe(true);
    const models = mkdtempSync(path.join(tmpdir(), 'sonar-models-'));
    writeFileSync(path.join(models, 'ggml-small.bin'), 'x');
    const p = agent(['--models-dir', models]);
    await p.waitFor(/connected to coordinator/);
    const [w] = (await svc.workers.listWorkers()).filter((x) => x.name === 'gpu-1');
    expect(w!.capabilities!.models.filter((m) => ['small', 'large', 'turbo'].includes(m))).toEqual(['small']);
    expect(w!.capabilities!.engines).toContain('whisper.cpp');
    await p.stop();
  });

  it('exits with code 3 and a clear message when the secret is wrong', async () => {
    const p = agent([], 'sonar_wrk_not-a-real-secret');
    expect(await p.exited).toBe(3);
    expect(p.lines.join('\n')).toMatch(/refused the worker secret/);
  });

  it('refuses an incompatible contract version with FAILED_PRECONDITION', async () => {
    const client = new CoordinatorClient(`127.0.0.1:${grpcPort}`, secret);
    try {
      for (const version of [WORKER_CONTRACT_VERSION + 1, 0]) {
        const err = (await client
          .hello({ contract_version: version, agent_version: 'x', hostname: 'h', capabilities: null, local: false })
          .catch((e: unknown) => e)) as grpc.ServiceError;
        expect(err.code).toBe(grpc.status.FAILED_PRECONDITION);
        expect(err.details).toContain(`worker contract version ${version} is not supported`);
      }
      const ok = await client.hello({ contract_version: WORKER_CONTRACT_VERSION, agent_version: 'x', hostname: 'h', capabilities: null, local: false });
      expect(ok.worker_name).toBe('gpu-1');
      expect(Math.abs(ok.server_time_unix_ms - Date.now())).toBeLessThan(5_000);
      expect((await client.heartbeat({ session_id: ok.session_id })).session_valid).toBe(true);
      expect((await client.heartbeat({ session_id: 'made-up' })).session_valid).toBe(false);
    } finally {
      client.close();
    }
  });

  it('a session belongs to its worker: another worker cannot heartbeat it', async () => {
    secondSecret = (await svc.workers.createWorker('gpu-2')).secret;
    const a = new CoordinatorClient(`127.0.0.1:${grpcPort}`, secret);
    const b = new CoordinatorClient(`127.0.0.1:${grpcPort}`, secondSecret);
    try {
      const hello = await a.hello({ contract_version: WORKER_CONTRACT_VERSION, agent_version: 'x', hostname: 'h', capabilities: null, local: false });
      expect((await b.heartbeat({ session_id: hello.session_id })).session_valid).toBe(false);
    } finally {
      a.close();
      b.close();
    }
  });

  it('reconnects with backoff when the coordinator restarts', async () => {
    const p = agent();
    await p.waitFor(/connected to coordinator/);
    const connectsBefore = p.lines.filter((l) => l.includes('connected to coordinator')).length;
    await svc.close();
    await p.waitFor(/coordinator unreachable; retrying/, 10_000);
    svc = await startCoordinator(loadConfig(env()));
    await expect
      .poll(() => p.lines.filter((l) => l.includes('connected to coordinator')).length, { timeout: 20_000, interval: 200 })
      .toBeGreaterThan(connectsBefore);
    await p.stop();
  });

  it('with --exit-with-parent, stops when its parent dies, even while it is still starting', async () => {
    // Killed at once: the agent is still loading, so the parent PID it first sees may already be
    // init's; the pipe on its stdin still reaches end of input.
    const early = agentUnderParent('pipe');
    const pid = Number(/agent pid (\d+)/.exec(await early.waitFor(/agent pid \d+/))![1]);
    const worker = recordProcess(pid, { name: 'worker', signal: 'SIGTERM', match: ['worker/dist/bin.js'] })!;
    try {
      early.child.kill('SIGKILL');
      await early.exited;
      await expect.poll(() => isSameProcess(worker), { timeout: 15_000 }).toBe(false);
      expect(early.lines.join('\n')).toMatch(/parent process exited; stopping.*stdin from the parent closed/);
    } finally {
      await stopProcess(worker);
    }

    // Without the pipe, a changed parent PID is the sign.
    const late = agentUnderParent('ignore');
    await late.waitFor(/connected to coordinator/);
    const second = recordProcess(Number(/agent pid (\d+)/.exec(late.lines.join('\n'))![1]), {
      name: 'worker',
      signal: 'SIGTERM',
      match: ['worker/dist/bin.js'],
    })!;
    try {
      late.child.kill('SIGKILL');
      await late.exited;
      await expect.poll(() => isSameProcess(second), { timeout: 15_000 }).toBe(false);
      expect(late.lines.join('\n')).toMatch(/parent process exited; stopping.*parent PID changed/);
    } finally {
      await stopProcess(second);
    }
  });

  it('a revoked worker is refused', async () => {
    expect(await svc.workers.revokeWorker('gpu-2')).toBe(true);
    const p = agent([], secondSecret);
    expect(await p.exited).toBe(3);
    // Rotating issues a new secret that works again; the old one stays dead.
    const rotated = await svc.workers.rotateSecret('gpu-2');
    expect(await svc.workers.authenticate(rotated)).not.toBeNull();
    expect(await svc.workers.authenticate(secondSecret)).toBeNull();
    const client = new CoordinatorClient(`127.0.0.1:${grpcPort}`, secret);
    await svc.workers.revokeWorker('gpu-1');
    const err = (await client
      .hello({ contract_version: WORKER_CONTRACT_VERSION, agent_version: 'x', hostname: 'h', capabilities: null, local: false })
      .catch((e: unknown) => e)) as grpc.ServiceError;
    expect(err.code).toBe(grpc.status.UNAUTHENTICATED);
    client.close();
  });

  it('a revocation or rotation made by another process (the CLI) reaches a coordinator that trusts the secret from its cache', async () => {
    const { secret: s1 } = await svc.workers.createWorker('gpu-elsewhere-1');
    const { secret: s2 } = await svc.workers.createWorker('gpu-elsewhere-2');
    expect(await svc.workers.authenticate(s1)).not.toBeNull();
    expect(await svc.workers.authenticate(s2)).not.toBeNull(); // both now cached as good
    // The CLI's own directory (another process in production): this coordinator's cache is not told.
    const cli = new WorkerDirectory(svc.orm, 45_000);
    expect(await cli.revokeWorker('gpu-elsewhere-1')).toBe(true);
    await cli.rotateSecret('gpu-elsewhere-2');
    await expect.poll(() => svc.workers.authenticate(s1), { timeout: 20_000, interval: 250 }).toBeNull();
    await expect.poll(() => svc.workers.authenticate(s2), { timeout: 20_000, interval: 250 }).toBeNull();
  });
});

describe('coordinator shutdown', () => {
  it('drains and releases its HTTP and gRPC ports', async () => {
    const url = svc.url;
    expect((await fetch(`${url}/api/platform`)).status).toBe(200);
    await svc.close();
    await expect(fetch(`${url}/api/platform`)).rejects.toThrow();
    // The gRPC port can be bound again at once.
    svc = await startCoordinator(loadConfig(env()));
    expect(svc.grpcPort).toBe(grpcPort);
  });
});
