import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../coordinator/src/config.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { workerCommand } from '../../worker/src/options.js';
import { createTestDatabase, testEnv, type TestDatabase } from '../support/harness.js';
import { freePort, repoRoot } from '../support/processes.js';

/**
 * `sonar-worker doctor` (the clone's build) against a real coordinator over loopback, and the
 * systemd unit in deploy/ that runs the agent.
 */
const run = promisify(execFile);
let db: TestDatabase;
let svc: RunningCoordinator;
let secretFile: string;
const dir = mkdtempSync(path.join(tmpdir(), 'sonar-doctor-'));

interface Row {
  check: string;
  verdict: string;
  detail: string;
}

/** Runs the doctor; its table parsed into rows (two spaces or more part the columns). */
async function doctor(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<{ code: number; rows: Row[]; out: string }> {
  const r = await run(process.execPath, [path.join(repoRoot, 'worker/dist/bin.js'), 'doctor', '--work-dir', dir, ...args], {
    cwd: repoRoot,
    encoding: 'utf8',
    env,
  }).then(
    (ok) => ({ code: 0, stdout: ok.stdout }),
    (err: unknown) => ({ code: (err as { code: number }).code, stdout: (err as { stdout: string }).stdout }),
  );
  const lines = r.stdout.split('\n');
  const rows = lines
    .slice(1, lines.indexOf(''))
    .map((l) => /^(.+?)\s{2,}(ok|warn|FAIL)\s{2,}(.*)$/.exec(l))
    .map((m) => ({ check: m![1]!, verdict: m![2]!, detail: m![3]! }));
  return { code: r.code, rows, out: r.stdout };
}

const row = (rows: Row[], check: string) => rows.find((r) => r.check === check);

beforeAll(async () => {
  db = await createTestDatabase();
  svc = await startCoordinator(loadConfig(testEnv(db, { GRPC_PORT: String(await freePort()) })));
  secretFile = path.join(dir, 'secret');
  writeFileSync(secretFile, (await svc.workers.createWorker('doctor-1')).secret);
});
afterAll(async () => {
  await svc?.close();
  await db?.drop();
});

describe('sonar-worker doctor', () => {
  it('prints a verdict per check; a good secret is ok, and the probe registers nothing', async () => {
    const { code, rows, out } = await doctor(['--coordinator', `127.0.0.1:${svc.grpcPort}`, '--secret-file', secretFile]);
    expect(code, out).toBe(0);
    expect(out.split('\n')[0]).toMatch(/^CHECK\s+RESULT\s+DETAIL$/);
    expect(rows.map((r) => r.check)).toEqual([
      'node',
      'ffmpeg',
      'engine whisper.cpp',
      'engine pocketsphinx',
      'models',
      'diarizer',
      'GPU',
      'whisper.cpp GPU',
      'work folder',
      'coordinator',
    ]);
    expect(row(rows, 'ffmpeg')).toMatchObject({ verdict: 'ok', detail: expect.stringMatching(/^ffmpeg version /) as unknown });
    // No models folder: whisper.cpp serves nothing here, pocketsphinx does (the e2e hosts install it).
    expect(row(rows, 'engine whisper.cpp')).toMatchObject({ verdict: 'warn', detail: expect.stringContaining('no models folder') as unknown });
    expect(row(rows, 'models')).toEqual({ check: 'models', verdict: 'ok', detail: 'this worker can serve pocketsphinx-en-us' });
    expect(row(rows, 'diarizer')).toEqual({ check: 'diarizer', verdict: 'ok', detail: 'silero-mfcc loaded' });
    // The test hosts have no GPU and build whisper.cpp for the CPU: both lines say so without failing.
    expect(row(rows, 'whisper.cpp GPU')).toMatchObject({ verdict: 'ok', detail: expect.stringMatching(/^CPU build /) as unknown });
    expect(row(rows, 'work folder')).toMatchObject({ verdict: 'ok', detail: expect.stringContaining(`GiB free in ${dir}`) as unknown });
    expect(row(rows, 'coordinator')).toMatchObject({ verdict: 'ok', detail: expect.stringContaining('accepts the secret of worker "doctor-1"') as unknown });
    expect(out).toMatch(/\nok: this worker can serve jobs \(1 warning\(s\)\)\n$/);

    // A probe is no Hello: no presence and no capabilities were stored for the worker.
    const [w] = (await svc.workers.listWorkers()).filter((x) => x.name === 'doctor-1');
    expect(w).toMatchObject({ fresh: false, lastSeenAt: null });
  });

  it('a wrong secret is a FAIL line and exit code 1', async () => {
    const wrong = path.join(dir, 'wrong');
    writeFileSync(wrong, 'sonar_wrk_not-a-real-secret');
    const { code, rows, out } = await doctor(['--coordinator', `127.0.0.1:${svc.grpcPort}`, '--secret-file', wrong]);
    expect(code, out).toBe(1);
    expect(row(rows, 'coordinator')).toMatchObject({ verdict: 'FAIL', detail: expect.stringContaining('refused the worker secret') as unknown });
    expect(out).toMatch(/\nFAIL: 1 check\(s\) failed/);
  });

  it('an unreachable coordinator is a FAIL line and exit code 1', async () => {
    const nobody = `127.0.0.1:${await freePort()}`;
    const { code, rows, out } = await doctor(['--coordinator', nobody, '--secret-file', secretFile]);
    expect(code, out).toBe(1);
    expect(row(rows, 'coordinator')).toMatchObject({ verdict: 'FAIL', detail: expect.stringContaining(`cannot reach ${nobody}`) as unknown });
  });

  it('a worker that can serve no model fails, and so does a work folder it cannot write', async () => {
    // A PATH with ffmpeg and ldd but no pocketsphinx, and no whisper models folder: no engine has a model.
    const bin = mkdtempSync(path.join(dir, 'bin-'));
    for (const tool of ['ffmpeg', 'ldd']) symlinkSync(execFileSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).trim(), path.join(bin, tool));
    const { code, rows, out } = await doctor(
      ['--coordinator', `127.0.0.1:${svc.grpcPort}`, '--secret-file', secretFile, '--work-dir', path.join(dir, 'missing')],
      { ...process.env, PATH: bin },
    );
    expect(code, out).toBe(1);
    expect(row(rows, 'engine pocketsphinx')).toMatchObject({ verdict: 'warn', detail: expect.stringContaining('apt-get install pocketsphinx') as unknown });
    expect(row(rows, 'models')).toEqual({ check: 'models', verdict: 'FAIL', detail: 'no model can be served: the coordinator would hand this worker no job' });
    expect(row(rows, 'work folder')).toMatchObject({ verdict: 'FAIL', detail: expect.stringContaining('is not a writable folder (ENOENT)') as unknown });
    expect(row(rows, 'coordinator')!.verdict).toBe('ok');
    expect(out).toMatch(/\nFAIL: 2 check\(s\) failed/);
  });
});

describe('deploy/sonar-worker.service', () => {
  const unit = path.join(repoRoot, 'deploy', 'sonar-worker.service');

  it('passes systemd-analyze verify without a message (where systemd is installed; else its sections are checked)', async () => {
    const analyze = ['/usr/bin/systemd-analyze', '/bin/systemd-analyze'].find((p) => existsSync(p));
    if (analyze) {
      const r = await run(analyze, ['verify', '--man=no', unit], { encoding: 'utf8' });
      expect(r.stderr).toBe('');
    } else {
      const sections = readFileSync(unit, 'utf8')
        .split('\n')
        .filter((l) => l.startsWith('['));
      expect(sections).toEqual(['[Unit]', '[Service]', '[Install]']);
    }
  });

  it('runs sonar-worker with an environment file whose every setting the agent reads', () => {
    const text = readFileSync(unit, 'utf8');
    const keys = (section: string) =>
      Object.fromEntries(
        (new RegExp(`^\\[${section}\\]\\n([^[]*)`, 'm').exec(text)?.[1] ?? '')
          .split('\n')
          .filter((l) => l && !l.startsWith('#'))
          .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
      );
    const service = keys('Service');
    expect(service).toMatchObject({ ExecStart: '/usr/bin/env sonar-worker', EnvironmentFile: '/etc/sonar/worker.env', Restart: 'on-failure' });
    // The agent's own refusals (contract, secret, configuration) are not retried.
    expect(service.RestartPreventExitStatus).toBe('2 3 78');
    // Longer than the default shutdown grace (60 s), so a job can finish before systemd kills.
    expect(Number(service.TimeoutStopSec)).toBeGreaterThan(60);

    const known = new Set([
      ...workerCommand('0').options.map((o) => o.envVar),
      // read by the engines (worker/src/engines) rather than by an option
      'WHISPER_BUILD_DIR',
      'WHISPER_CLI',
      'WHISPER_THREADS',
    ]);
    const example = readFileSync(path.join(repoRoot, 'deploy', 'sonar-worker.env.example'), 'utf8');
    const settings = example
      .split('\n')
      .map((l) => l.replace(/^# (?=[A-Z_]+=)/, ''))
      .filter((l) => /^[A-Z_]+=/.test(l))
      .map((l) => l.slice(0, l.indexOf('=')));
    expect(settings.length).toBeGreaterThan(5);
    expect(settings.filter((s) => !known.has(s))).toEqual([]);
  });
});
