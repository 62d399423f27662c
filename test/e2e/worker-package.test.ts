import { execFileSync, spawn } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WORKER_CONTRACT_VERSION } from '@sonar/shared';
import { loadConfig } from '../../coordinator/src/config.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { createTestDatabase, testEnv, type TestDatabase } from '../support/harness.js';
import { Proc, freePort, repoRoot } from '../support/processes.js';

/**
 * `npm run pack:worker`'s tarball installed the way a GPU host installs it: into an empty folder
 * outside the repository, then its `sonar-worker` started against a real coordinator over gRPC.
 * The install takes package tarballs from the npm cache that `npm ci` filled (--prefer-offline);
 * install scripts are skipped, since onnxruntime-node's would go to the network.
 */
let db: TestDatabase;
let svc: RunningCoordinator;
let grpcPort: number;
let secret: string;
const work = mkdtempSync(path.join(tmpdir(), 'sonar-worker-package-'));
const procs: Proc[] = [];
const version = (JSON.parse(readFileSync(path.join(repoRoot, 'worker', 'package.json'), 'utf8')) as { version: string }).version;
// The installed bin starts with `#!/usr/bin/env node`: the Node that runs the tests (24) goes first.
const PATH = `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH ?? ''}`;

/** Every path under `dir` that is a symbolic link, with what it resolves to. */
function links(dir: string): { link: string; target: string }[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .map((rel) => path.join(dir, rel))
    .filter((p) => lstatSync(p).isSymbolicLink())
    .map((link) => ({ link, target: existsSync(link) ? realpathSync(link) : link }));
}

beforeAll(async () => {
  db = await createTestDatabase();
  grpcPort = await freePort();
  svc = await startCoordinator(loadConfig(testEnv(db, { GRPC_PORT: String(grpcPort) })));
  secret = (await svc.workers.createWorker('packaged-1')).secret;
});
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop('SIGKILL')));
  await svc?.close();
  await db?.drop();
  rmSync(work, { recursive: true, force: true });
});

describe('the worker as its own package', () => {
  it('packs into one tarball that installs outside the repository and connects to a coordinator', { timeout: 180_000 }, async () => {
    const out = path.join(work, 'out');
    const printed = execFileSync(process.execPath, [path.join(repoRoot, 'scripts', 'dist', 'pack-worker.js'), '--out', out], {
      encoding: 'utf8',
      env: { ...process.env, PATH },
    });
    const tgz = printed.trim().split('\n').at(-1)!;
    expect(tgz).toBe(path.join(out, `sonar-worker-${version}.tgz`));

    const entries = execFileSync('tar', ['-tzf', tgz], { encoding: 'utf8' }).trim().split('\n');
    expect(entries).toContain('package/dist/bin.js');
    expect(entries).toContain('package/scripts/build-whisper.mjs');
    expect(entries).toContain('package/node_modules/@sonar/proto/worker.proto');
    expect(entries).toContain('package/node_modules/@sonar/shared/dist/index.js');
    // No sources, tests or build info; nothing bundled but the two workspaces.
    expect(entries.filter((e) => /\/(src|test)\/|\.tsbuildinfo$|\.ts$/.test(e) && !e.endsWith('.d.ts'))).toEqual([]);
    expect(new Set(entries.filter((e) => e.startsWith('package/node_modules/')).map((e) => e.split('/').slice(2, 4).join('/')))).toEqual(
      new Set(['@sonar/proto', '@sonar/shared']),
    );

    const prefix = path.join(work, 'host');
    mkdirSync(prefix);
    const started = Date.now();
    execFileSync('npm', ['install', '--prefix', prefix, '--prefer-offline', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error', tgz], {
      cwd: prefix,
      env: { ...process.env, PATH },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    process.stderr.write(`worker-package: installed in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);

    // A self-contained tree: the bundled workspaces are real folders, no link leads back into the clone.
    const installed = path.join(prefix, 'node_modules', '@sonar', 'worker');
    expect(lstatSync(path.join(installed, 'node_modules', '@sonar', 'shared')).isDirectory()).toBe(true);
    expect(links(prefix).filter(({ target }) => !target.startsWith(prefix + path.sep))).toEqual([]);
    expect(readdirSync(path.join(prefix, 'node_modules', '@sonar'))).toEqual(['worker']);

    const secretFile = path.join(work, 'secret');
    writeFileSync(secretFile, secret);
    const models = mkdtempSync(path.join(work, 'models-'));
    const bin = path.join(prefix, 'node_modules', '.bin', 'sonar-worker');
    const p = new Proc(
      spawn(bin, ['--coordinator', `127.0.0.1:${grpcPort}`, '--secret-file', secretFile, '--device', 'cpu', '--models-dir', models], {
        cwd: work,
        env: { ...process.env, PATH },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    procs.push(p);
    await p.waitFor(/connected to coordinator/, 30_000);
    const [w] = (await svc.workers.listWorkers()).filter((x) => x.name === 'packaged-1');
    expect(w).toMatchObject({ fresh: true, contractVersion: WORKER_CONTRACT_VERSION, agentVersion: version });
    expect(w!.lastSeenAt).toBeInstanceOf(Date);
    expect(await p.stop('SIGTERM')).toBe(0);
  });
});
