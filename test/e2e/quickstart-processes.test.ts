import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { bindInstalled } from '../../coordinator/src/dns/named-runtime.js';
import { isSameProcess, stopProcess, type ProcessRecord } from '../../coordinator/src/infra/processes.js';
import { Proc, freePort, repoRoot } from '../support/processes.js';

/**
 * The real quick start (coordinator/dist/quickstart.js; build with `npx tsc -b`) with its own data
 * folder and ports: embedded PostgreSQL, named (when BIND is installed), the worker agent, and the
 * run's Redis. It is SIGKILLed, and its children must not outlive it; a later start must get past
 * what a killed run left behind.
 */
const dataDir = mkdtempSync(path.join(tmpdir(), 'sonar-quickstart-'));
const stateFile = path.join(dataDir, 'run', 'quickstart.json');
const withDns = bindInstalled();
const expected = ['postgres', 'worker', ...(withDns ? ['named'] : [])].sort();
const started: Proc[] = [];
let ports: { pg: number; dns: number; http: number } | undefined;

interface State {
  watchdog: ProcessRecord;
  children: ProcessRecord[];
}

async function startQuickstart(): Promise<Proc> {
  ports ??= { pg: await freePort(), dns: await freePort(), http: await freePort() };
  // Only what the quick start needs: no DATABASE_URL (it must embed PostgreSQL), this run's Redis.
  const env = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? dataDir,
    SONAR_DATA_DIR: dataDir,
    EMBEDDED_PG_PORT: String(ports.pg),
    DNS_QUICKSTART_PORT: String(ports.dns),
    PORT: String(ports.http),
    GRPC_PORT: '0',
    REDIS_URL: inject('redisUrl'),
    REDIS_KEY_PREFIX: `sonar-test:quickstart:${path.basename(dataDir)}:`,
    WHISPER_MODELS_DIR: path.join(dataDir, 'models'),
    LOG_LEVEL: 'warn',
  };
  const proc = new Proc(
    spawn(process.execPath, [path.join(repoRoot, 'coordinator/dist/quickstart.js')], { cwd: repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'] }),
  );
  started.push(proc);
  return proc;
}

const readState = (): State => JSON.parse(readFileSync(stateFile, 'utf8')) as State;
const child = (s: State, name: string) => s.children.find((c) => c.name === name)!;
const running = (records: ProcessRecord[]) =>
  records
    .filter(isSameProcess)
    .map((r) => r.name)
    .sort();

/** The state once every child has been recorded (the worker is recorded when it has spawned). */
async function fullState(): Promise<State> {
  await expect
    .poll(
      () =>
        existsSync(stateFile)
          ? readState()
              .children.map((c) => c.name)
              .sort()
          : [],
      { timeout: 15_000 },
    )
    .toEqual(expected);
  return readState();
}

afterAll(async () => {
  for (const p of started) await p.stop('SIGKILL');
  // Whatever is left (a failed assertion above) is stopped by identity, never by name.
  if (existsSync(stateFile)) await Promise.all([...readState().children, readState().watchdog].map((r) => stopProcess({ ...r, graceMs: 5_000 })));
  rmSync(dataDir, { recursive: true, force: true });
}, 60_000);

describe('quick start child processes', () => {
  it('a SIGKILLed quick start leaves no PostgreSQL, named or worker behind, and the next start succeeds', async () => {
    const first = await startQuickstart();
    await first.waitFor(/Sonar is running at/, 120_000);
    const banner = first.lines.join('\n');
    // First run: the generated password, once; gRPC on loopback, as the banner says.
    expect(banner).toMatch(/Admin: +username "admin", password "[^"]+"/);
    expect(banner).toMatch(/Worker gRPC: +127\.0\.0\.1:\d+ /);
    expect(existsSync(path.join(dataDir, 'initial-admin.json'))).toBe(false);
    const state = await fullState();
    expect(running(state.children)).toEqual(expected);

    first.child.kill('SIGKILL');
    await first.exited;
    await expect.poll(() => running(state.children), { timeout: 60_000 }).toEqual([]);
    await expect.poll(() => isSameProcess(state.watchdog), { timeout: 10_000 }).toBe(false);

    const second = await startQuickstart();
    await second.waitFor(/Sonar is running at/, 120_000);
    const again = second.lines.join('\n');
    expect(again).not.toMatch(/password "/);
    expect(again).toContain('npm run cli -- user:password admin');
    expect(running((await fullState()).children)).toEqual(expected);
  }, 300_000);

  it('stops the PostgreSQL and named a killed run left without a watchdog, and refuses a second live run', async () => {
    const previous = started.at(-1)!;
    const state = await fullState();
    // Kill the watchdog first, then the quick start: as after a run of a version without one.
    process.kill(state.watchdog.pid, 'SIGKILL');
    await expect.poll(() => isSameProcess(state.watchdog)).toBe(false);
    previous.child.kill('SIGKILL');
    await previous.exited;
    // The worker watches its parent and stops by itself; the daemons do not.
    await expect.poll(() => isSameProcess(child(state, 'worker')), { timeout: 20_000 }).toBe(false);
    const daemons = state.children.filter((c) => c.name !== 'worker');
    expect(running(daemons)).toEqual(expected.filter((n) => n !== 'worker'));
    // Without the state file only postmaster.pid and named.pid say what is left.
    rmSync(stateFile);

    const next = await startQuickstart();
    await next.waitFor(/Sonar is running at/, 120_000);
    expect(running(daemons)).toEqual([]);
    expect(next.lines.join('\n')).toContain('left running by an earlier run');

    const rival = await startQuickstart();
    expect(await rival.exited).toBe(1);
    expect(rival.lines.join('\n')).toContain('another quick start');

    const current = await fullState();
    expect(await next.stop('SIGTERM')).toBe(0);
    expect(running(current.children)).toEqual([]);
    await expect.poll(() => isSameProcess(current.watchdog), { timeout: 10_000 }).toBe(false);
    expect(existsSync(stateFile)).toBe(false);
  }, 300_000);
});
