// `npm run pack:worker`: builds, then writes dist/sonar-worker-<version>.tgz, the worker agent as
// one tarball that installs outside a clone (`npm install -g ./sonar-worker-<version>.tgz`).
// `--out <dir>` writes it elsewhere; the last line printed is the tarball's absolute path.
//
// @sonar/proto and @sonar/shared are never published, so they travel inside the tarball as
// bundleDependencies, each as what `npm pack` of its workspace holds (its package.json and built
// files). Their own registry dependencies are declared by the worker's package.json next to the
// worker's (npm installs a bundled package's dependencies only when the bundling package declares
// them), with the ranges the workspaces declare. Sources, tests and the TypeScript build info stay
// out; scripts/build-whisper.mjs goes in, so whisper.cpp is built on the host as the Docker image
// builds it (`npm run whisper:build` in the installed package).
//
// The dependencies are declared as ranges, not pinned by a shrinkwrap: npm reads a shrinkwrap only
// from registry packages, never from a local tarball, so `npm install -g ./<tgz>` resolves them
// against the registry like any install.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const repoRoot = path.resolve(import.meta.dirname, '..', '..');
const BUNDLED = ['proto', 'shared'] as const;

interface Manifest {
  name: string;
  version: string;
  description?: string;
  engines?: Record<string, string>;
  type?: string;
  bin?: Record<string, string>;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}

function readManifest(dir: string): Manifest {
  return JSON.parse(readFileSync(path.join(repoRoot, dir, 'package.json'), 'utf8')) as Manifest;
}

function outDir(): string {
  const i = process.argv.indexOf('--out');
  if (i < 0) return path.join(repoRoot, 'dist');
  const dir = process.argv[i + 1];
  if (!dir) throw new Error('--out needs a folder');
  return path.resolve(dir);
}

function npm(args: string[], cwd: string): string {
  return execFileSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
}

/** `npm pack` of a workspace, unpacked into `dest`: exactly the files it would publish. */
function unpackWorkspace(workspace: string, dest: string, scratch: string): void {
  const [packed] = JSON.parse(npm(['pack', '--json', '--pack-destination', scratch], path.join(repoRoot, workspace))) as { filename: string }[];
  mkdirSync(dest, { recursive: true });
  execFileSync('tar', ['-xzf', path.join(scratch, packed!.filename), '-C', dest, '--strip-components=1']);
  removeBuildInfo(dest);
}

function removeBuildInfo(dir: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile() && entry.name.endsWith('.tsbuildinfo')) rmSync(path.join(entry.parentPath, entry.name));
  }
}

/** The worker's registry dependencies plus those of the bundled workspaces; one range per name. */
function registryDependencies(worker: Manifest): Record<string, string> {
  const deps: Record<string, string> = {};
  const add = (from: string, all: Record<string, string> | undefined) => {
    for (const [name, range] of Object.entries(all ?? {})) {
      if (name.startsWith('@sonar/')) continue;
      if (deps[name] !== undefined && deps[name] !== range) {
        throw new Error(`${from} asks for ${name}@${range} but another package asks for ${deps[name]}: align them first`);
      }
      deps[name] = range;
    }
  };
  add('worker', worker.dependencies);
  for (const ws of BUNDLED) add(ws, readManifest(ws).dependencies);
  return Object.fromEntries(Object.entries(deps).sort(([a], [b]) => a.localeCompare(b)));
}

function main(): void {
  const worker = readManifest('worker');
  const stage = mkdtempSync(path.join(tmpdir(), 'sonar-pack-worker-'));
  try {
    const pkg = path.join(stage, 'package');
    cpSync(path.join(repoRoot, 'worker', 'dist'), path.join(pkg, 'dist'), { recursive: true });
    removeBuildInfo(path.join(pkg, 'dist'));
    cpSync(path.join(repoRoot, 'worker', 'scripts', 'build-whisper.mjs'), path.join(pkg, 'scripts', 'build-whisper.mjs'));

    const bundled: Record<string, string> = {};
    for (const ws of BUNDLED) {
      const m = readManifest(ws);
      unpackWorkspace(ws, path.join(pkg, 'node_modules', ...m.name.split('/')), stage);
      bundled[m.name] = m.version;
    }

    const manifest = {
      name: worker.name,
      version: worker.version,
      description: worker.description,
      license: 'UNLICENSED',
      engines: worker.engines,
      type: worker.type,
      bin: worker.bin,
      files: ['dist', 'scripts/build-whisper.mjs'],
      scripts: { 'whisper:build': 'node scripts/build-whisper.mjs' },
      dependencies: { ...registryDependencies(worker), ...bundled },
      optionalDependencies: worker.optionalDependencies,
      bundleDependencies: Object.keys(bundled),
    };
    writeFileSync(path.join(pkg, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);

    const out = outDir();
    mkdirSync(out, { recursive: true });
    const [packed] = JSON.parse(npm(['pack', '--json', '--pack-destination', out], pkg)) as { filename: string; size: number; entryCount: number }[];
    const file = path.join(out, packed!.filename);
    process.stderr.write(`pack:worker: ${packed!.entryCount} files, ${(packed!.size / 1024).toFixed(0)} KiB\n`);
    process.stdout.write(`${file}\n`);
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

main();
