import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
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
const bareDir = mkdtempSync(path.join(tmpdir(), 'sonar-quickstart-bare-'));
const stateFile = path.join(dataDir, 'run', 'quickstart.json');
const withDns = bindInstalled();
const expected = ['postgres', 'worker', ...(withDns ? ['named'] : [])].sort();
const started: Proc[] = [];
let ports: { pg: number; dns: number; http: number } | undefined;

interface State {
  watchdog: ProcessRecord;
  children: ProcessRecord[];
}

async function startQuickstart(opts: { ownGroup?: boolean; dataDir?: string; path?: string; ports?: typeof ports } = {}): Promise<Proc> {
  ports ??= { pg: await freePort(), dns: await freePort(), http: await freePort() };
  const p = opts.ports ?? ports;
  const data = opts.dataDir ?? dataDir;
  // Only what the quick start needs: no DATABASE_URL (it must embed PostgreSQL), this run's Redis.
  const env = {
    PATH: opts.path ?? process.env.PATH ?? '',
    HOME: process.env.HOME ?? data,
    SONAR_DATA_DIR: data,
    EMBEDDED_PG_PORT: String(p.pg),
    DNS_QUICKSTART_PORT: String(p.dns),
    PORT: String(p.http),
    GRPC_PORT: '0',
    REDIS_URL: inject('redisUrl'),
    REDIS_KEY_PREFIX: `sonar-test:quickstart:${path.basename(data)}:`,
    WHISPER_MODELS_DIR: path.join(data, 'models'),
    LOG_LEVEL: 'warn',
  };
  const proc = new Proc(
    spawn(process.execPath, [path.join(repoRoot, 'coordinator/dist/quickstart.js')], {
      cwd: repoRoot,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      // A process group of its own, as a terminal gives it: a Ctrl-C signals the whole group.
      detached: opts.ownGroup ?? false,
    }),
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
  const bareState = path.join(bareDir, 'run', 'quickstart.json');
  if (existsSync(bareState)) {
    const left = JSON.parse(readFileSync(bareState, 'utf8')) as State;
    await Promise.all([...left.children, left.watchdog].map((r) => stopProcess({ ...r, graceMs: 5_000 })));
  }
  rmSync(bareDir, { recursive: true, force: true });
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
    // The README's transcription commands, as written (its password and port are this run's).
    const readme = readFileSync(path.join(repoRoot, 'README.md'), 'utf8');
    const block = /To transcribe:[\s\S]*?```sh\n([\s\S]*?)```/.exec(readme)![1]!;
    const password = /password "([^"]+)"/.exec(banner)![1]!;
    const script = block.replaceAll('"password":"…"', `"password":"${password}"`).replaceAll('http://localhost:8080', `http://127.0.0.1:${ports!.http}`);
    const { stdout } = await promisify(execFile)('bash', ['-euo', 'pipefail', '-c', script], { cwd: repoRoot, timeout: 120_000 }).catch((e: unknown) => {
      const { stdout: out = '', stderr = '' } = e as { stdout?: string; stderr?: string };
      throw new Error(`README commands failed: ${out} ${stderr.slice(-500)}`);
    });
    expect(stdout).toMatch(/"message":"Job queued\."/);
    // After the job's JSON: the transcript (TXT) with a recognised word, then the subtitles (SRT) from their first cue.
    const [, txt] = /"message":"Job queued\."[^\n]*\}([\s\S]*?)\n1\n00:00:\d\d,\d{3} --> 00:00:\d\d,\d{3}\n\S/.exec(stdout) ?? [];
    expect(txt?.replace(/Speaker \d+:/g, ''), stdout).toMatch(/[a-z]{2,}/i);
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

  it('a Ctrl-C reaches only the quick start: it drains, then stops its children, without a stack trace', async () => {
    const run = await startQuickstart({ ownGroup: true });
    await run.waitFor(/Sonar is running at/, 120_000);
    const state = await fullState();
    // What a terminal does on Ctrl-C: SIGINT to every process of the foreground group. The
    // children run in sessions of their own, so only the quick start hears it.
    process.kill(-run.child.pid!, 'SIGINT');
    const code = await run.exited;
    const output = run.lines.join('\n');
    expect({ code, signal: run.child.signalCode, output }).toMatchObject({ code: 0 });
    // one readable line says it stopped (the rest is the JSON log)
    expect(run.lines.at(-1)).toBe('Sonar stopped.');
    expect(running(state.children)).toEqual([]);
    expect(output).not.toMatch(/^\s+at /m);
    expect(output).not.toMatch(/\b(Error|FATAL|terminating connection)\b/);
    expect(existsSync(stateFile)).toBe(false);
  }, 300_000);

  it('a SIGTERM as soon as the HTTP port answers (before the banner) still stops everything it started', async () => {
    const run = await startQuickstart();
    const url = `http://127.0.0.1:${ports!.http}/api/platform`;
    await expect
      .poll(
        () =>
          fetch(url).then(
            (r) => r.status,
            () => 0,
          ),
        { timeout: 120_000, interval: 20 },
      )
      .toBe(200);
    run.child.kill('SIGTERM');
    expect(await run.exited, run.lines.join('\n')).toBe(0);
    expect(run.lines.join('\n')).not.toContain('Sonar is running at');
    // Nothing of this data folder runs on: no PostgreSQL, named or worker.
    const left = async () => (await promisify(execFile)('ps', ['-eo', 'args'])).stdout.split('\n').filter((l) => l.includes(dataDir));
    await expect.poll(left, { timeout: 30_000 }).toEqual([]);
  }, 300_000);

  it('a chat-log import by the admin CLI reaches the running quick start at once (its Redis, no REDIS_URL or DATABASE_URL given)', async () => {
    const run = await startQuickstart();
    await run.waitFor(/Sonar is running at/, 120_000);
    const base = `http://127.0.0.1:${ports!.http}`;
    const total = async () => ((await (await fetch(`${base}/irc/api/logs?q=zebrafish`)).json()) as { total: number }).total;
    expect(await total()).toBe(0); // now cached by the coordinator
    const logs = mkdtempSync(path.join(tmpdir(), 'sonar-quickstart-irc-'));
    writeFileSync(path.join(logs, '#example_20260105.log'), '[10:00:00] <alice> zebrafish are great\n');
    // As the README's command runs it: the CLI finds the quick start's database and Redis in its data folder.
    const cli = await promisify(execFile)(process.execPath, ['coordinator/dist/cli.js', 'irc:import', '--network', 'example', '--source', 'production', logs], {
      cwd: repoRoot,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? dataDir,
        SONAR_DATA_DIR: dataDir,
        EMBEDDED_PG_PORT: String(ports!.pg),
        REDIS_KEY_PREFIX: `sonar-test:quickstart:${path.basename(dataDir)}:`,
      },
      timeout: 60_000,
    });
    expect(cli.stderr).not.toMatch(/not announced/);
    // Polled slowly: the public API allows 60 requests a minute per client.
    await expect.poll(total, { timeout: 10_000, interval: 500 }).toBe(1);
    rmSync(logs, { recursive: true, force: true });
    await run.stop('SIGINT');
  }, 300_000);

  it('without ffmpeg and pocketsphinx on PATH: one line with the install command, the same in the banner, on /speech and in the status API', async () => {
    // A PATH with every executable of the usual folders but the ones the local worker needs.
    const hidden = new Set(['ffmpeg', 'ffprobe', 'pocketsphinx', 'pocketsphinx_continuous']);
    const bin = path.join(bareDir, 'bin');
    mkdirSync(bin, { recursive: true });
    for (const dir of (process.env.PATH ?? '').split(path.delimiter).filter(Boolean)) {
      if (!existsSync(dir)) continue;
      for (const name of readdirSync(dir)) {
        if (hidden.has(name) || existsSync(path.join(bin, name))) continue;
        symlinkSync(path.join(dir, name), path.join(bin, name));
      }
    }
    const own = { pg: await freePort(), dns: await freePort(), http: await freePort() };
    const run = await startQuickstart({ dataDir: bareDir, path: bin, ports: own });
    await run.waitFor(/Sonar is running at/, 120_000);
    const output = run.lines.join('\n');
    const sentence = /The local worker cannot transcribe: ffmpeg(, | and )pocketsphinx.* missing\. Install with: sudo apt-get install ffmpeg pocketsphinx\b.*/;
    const line = output.split('\n').find((l) => sentence.test(l) && !l.includes('Local worker:'))!;
    expect(line).toBeTruthy();
    const problem = line.trim();
    expect(output).toContain(`Local worker: ${problem}`);
    // Printed before the banner.
    expect(output.indexOf(line)).toBeLessThan(output.indexOf('Sonar is running at'));

    const base = `http://127.0.0.1:${own.http}`;
    const password = /password "([^"]+)"/.exec(output)![1]!;
    const login = await fetch(`${base}/api/account/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'admin', password }),
    });
    const { token } = (await login.json()) as { token: string };
    const status = (await (await fetch(`${base}/api/speech/status`, { headers: { authorization: `Bearer ${token}` } })).json()) as Record<string, unknown>;
    expect(status.local_worker_problem).toBe(problem);

    // The page, signed in with a session (the sign-in form's CSRF token and cookie first).
    const form = await fetch(`${base}/login`);
    const csrf = /name="_csrf" value="([^"]+)"/.exec(await form.text())![1]!;
    const cookie = (res: Response) =>
      res.headers
        .getSetCookie()
        .map((c) => c.split(';')[0])
        .join('; ');
    const signedIn = await fetch(`${base}/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: cookie(form) },
      body: new URLSearchParams({ _csrf: csrf, username: 'admin', password }).toString(),
    });
    const page = await (await fetch(`${base}/speech`, { headers: { cookie: cookie(signedIn) || cookie(form) } })).text();
    expect(page).toContain(`id="local-worker-problem"><p>${problem}</p>`);
    expect(await run.stop('SIGTERM')).toBe(0);
  }, 300_000);
});
