import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
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
 *
 * The install never asks the registry (`--offline`): it takes package tarballs from the npm cache
 * that `npm ci` filled. A plain `npm install <tgz>` cannot do that: npm resolves the tarball's
 * dependency ranges from full registry documents, which `npm ci` never stores (it reads the
 * lockfile, caching only the abbreviated ones). So the host folder gets a lockfile that pins the
 * tarball's dependencies, transitively, to the versions and places of the repository's
 * package-lock.json (what `npm ci` cached), and npm installs from it. Only the tarball's own
 * manifest decides what is pinned, so a dependency it fails to declare is still missing on the host.
 * Install scripts are skipped, since onnxruntime-node's would go to the network.
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

interface LockEntry {
  name?: string;
  version: string;
  resolved?: string;
  link?: boolean;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  [key: string]: unknown;
}

interface PackedManifest {
  name: string;
  version: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  bundleDependencies?: string[];
  [key: string]: unknown;
}

/**
 * Writes `host/package.json` (the tarball as its one dependency) and `host/package-lock.json`: the
 * tarball's registry dependencies and theirs, each at the version and node_modules path the
 * repository's lockfile holds, so that `npm install --offline` needs nothing the cache lacks.
 */
function pinnedHostInstall(tgz: string, host: string): number {
  const lock = (JSON.parse(readFileSync(path.join(repoRoot, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> }).packages;
  const manifest = JSON.parse(execFileSync('tar', ['-xOzf', tgz, 'package/package.json'], { encoding: 'utf8' })) as PackedManifest;
  const bundled = new Set(manifest.bundleDependencies ?? []);
  /** Node's lookup: the nearest node_modules/<name> at or above `from`. */
  const place = (from: string, name: string): string | null => {
    for (let at = from; ;) {
      const candidate = `${at ? `${at}/` : ''}node_modules/${name}`;
      if (lock[candidate] && !lock[candidate].link) return candidate;
      if (!at) return null;
      const up = at.lastIndexOf('/node_modules/');
      at = up < 0 ? '' : at.slice(0, up);
    }
  };
  const pinned: Record<string, LockEntry> = {};
  const todo: Array<{ from: string; name: string; optional: boolean }> = [
    ...Object.keys(manifest.dependencies ?? {}).map((name) => ({ from: '', name, optional: false })),
    ...Object.keys(manifest.optionalDependencies ?? {}).map((name) => ({ from: '', name, optional: true })),
  ].filter((d) => !bundled.has(d.name));
  for (let next = todo.pop(); next; next = todo.pop()) {
    const at = place(next.from, next.name);
    if (!at) {
      if (next.optional) continue;
      throw new Error(`${next.name} (needed by ${next.from || manifest.name}) is not in package-lock.json`);
    }
    if (pinned[at]) continue;
    const { dev: _dev, devOptional: _devOptional, peer: _peer, ...entry } = lock[at]!;
    const name = entry.name ?? at.slice(at.lastIndexOf('node_modules/') + 'node_modules/'.length);
    // The lockfile leaves the registry address out; the host's names the tarball the cache holds.
    pinned[at] = { ...entry, resolved: entry.resolved ?? `https://registry.npmjs.org/${name}/-/${name.split('/').at(-1)}-${entry.version}.tgz` };
    for (const dep of Object.keys(entry.dependencies ?? {})) todo.push({ from: at, name: dep, optional: false });
    for (const dep of Object.keys(entry.optionalDependencies ?? {})) todo.push({ from: at, name: dep, optional: true });
    for (const dep of Object.keys(entry.peerDependencies ?? {})) todo.push({ from: at, name: dep, optional: !!entry.peerDependenciesMeta?.[dep]?.optional });
  }
  const spec = `file:${path.relative(host, tgz)}`;
  const integrity = `sha512-${createHash('sha512').update(readFileSync(tgz)).digest('base64')}`;
  const { name: _name, version, dependencies, optionalDependencies, bundleDependencies, bin, engines, license } = manifest;
  const packages: Record<string, unknown> = {
    '': { name: 'host', dependencies: { [manifest.name]: spec } },
    [`node_modules/${manifest.name}`]: { version, resolved: spec, integrity, dependencies, optionalDependencies, bundleDependencies, bin, engines, license },
    ...Object.fromEntries(
      [...bundled].map((b) => [`node_modules/${manifest.name}/node_modules/${b}`, { version: manifest.dependencies?.[b], inBundle: true }]),
    ),
    ...Object.fromEntries(Object.entries(pinned).sort(([a], [b]) => a.localeCompare(b))),
  };
  writeFileSync(path.join(host, 'package.json'), JSON.stringify({ name: 'host', private: true, dependencies: { [manifest.name]: spec } }, null, 2));
  writeFileSync(path.join(host, 'package-lock.json'), JSON.stringify({ name: 'host', lockfileVersion: 3, requires: true, packages }, null, 2));
  return Object.keys(pinned).length;
}

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
    const count = pinnedHostInstall(tgz, prefix);
    try {
      execFileSync('npm', ['install', '--prefix', prefix, '--offline', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], {
        cwd: prefix,
        env: { ...process.env, PATH },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
    } catch (err) {
      const stderr = String((err as { stderr?: Buffer }).stderr ?? '');
      const missing = /ENOTCACHED[\s\S]*?request to (\S+) failed/.exec(stderr)?.[1];
      if (!missing) throw err;
      throw new Error(
        `the npm cache lacks ${missing}, which the worker tarball needs (the install runs --offline, from what \`npm ci\` cached): ` +
          'run `npm ci` in the repository first, with the same npm cache',
        { cause: err },
      );
    }
    process.stderr.write(`worker-package: ${count} locked packages installed offline in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);

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
