#!/usr/bin/env node
// Builds whisper.cpp's CLI (whisper-cli) from the sources that the nodejs-whisper package ships
// (node_modules/nodejs-whisper/cpp/whisper.cpp) into worker/.whisper-build/, outside node_modules,
// so that `npm ci` never wipes it and nothing is downloaded: no model, no toolchain.
//
//   npm run whisper:build -w worker            build if missing or older than the sources
//   WHISPER_CUDA=1 npm run whisper:build ...   force a CUDA build (needs nvcc)
//   WHISPER_CUDA=0 npm run whisper:build ...   force a CPU build
//   WHISPER_BUILD_DIR=/some/dir                build somewhere else (the engine reads WHISPER_CLI)
//   WHISPER_NATIVE=0                           portable CPU flags instead of -march=native
//   WHISPER_FORCE=1                            rebuild even if up to date
//
// Without WHISPER_CUDA, CUDA is used when nvcc is on PATH *and* a GPU is visible (nvidia-smi -L
// lists one, or /dev/nvidia0 exists): some machines carry the CUDA toolkit without a GPU, and a
// CUDA build of ggml takes far longer than the CPU one while gaining nothing there.
//
// The last line printed on stdout is the absolute path of the binary.
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const workerDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(path.join(workerDir, 'package.json'));
const sourceDir = path.join(path.dirname(require.resolve('nodejs-whisper/package.json')), 'cpp', 'whisper.cpp');
const buildRoot = path.resolve(process.env.WHISPER_BUILD_DIR || path.join(workerDir, '.whisper-build'));
const buildDir = path.join(buildRoot, 'build');
const binary = path.join(buildDir, 'bin', 'whisper-cli');
const stampFile = path.join(buildRoot, 'build-config.json');

const log = (msg) => process.stderr.write(`whisper:build: ${msg}\n`);

function onPath(cmd) {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
}

function gpuVisible() {
  if (existsSync('/dev/nvidia0')) return true;
  if (!onPath('nvidia-smi')) return false;
  const r = spawnSync('nvidia-smi', ['-L'], { encoding: 'utf8' });
  return r.status === 0 && /GPU \d+/.test(r.stdout);
}

function wantCuda() {
  const env = process.env.WHISPER_CUDA;
  if (env === '1' || env === 'ON' || env === 'on' || env === 'true') {
    if (!onPath('nvcc')) throw new Error('WHISPER_CUDA=1 but nvcc is not on PATH');
    return true;
  }
  if (env === '0' || env === 'OFF' || env === 'off' || env === 'false') return false;
  if (!onPath('nvcc')) return false;
  if (!gpuVisible()) {
    log('nvcc is on PATH but no GPU is visible: building for CPU (set WHISPER_CUDA=1 to force CUDA)');
    return false;
  }
  return true;
}

const SKIP_DIRS = new Set(['.git', 'build', 'bindings', 'models', 'samples', 'tests', 'scripts', 'ci', 'media', 'grammars']);

/** Every file cmake compiles or reads (sources, headers, CMake files), sorted. */
function sourceFiles(dir) {
  const files = [];
  const walk = (d) => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, entry.name);
      if (entry.isDirectory()) {
        if (!SKIP_DIRS.has(entry.name)) walk(p);
      } else if (entry.isFile()) {
        files.push(p);
      }
    }
  };
  walk(dir);
  return files.sort();
}

/** Content hash of the sources: `npm ci` rewrites them with fresh mtimes but the same bytes. */
function sourceFingerprint(files) {
  const hash = createHash('sha256');
  for (const f of files) {
    hash.update(path.relative(sourceDir, f));
    hash.update('\0');
    hash.update(readFileSync(f));
  }
  return hash.digest('hex');
}

function run(cmd, args) {
  log(`$ ${cmd} ${args.join(' ')}`);
  const r = spawnSync(cmd, args, { stdio: ['ignore', process.stderr, process.stderr] });
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`${cmd} exited with ${r.status ?? r.signal}`);
}

function main() {
  if (!existsSync(path.join(sourceDir, 'CMakeLists.txt'))) {
    throw new Error(`whisper.cpp sources not found at ${sourceDir} (is nodejs-whisper installed? run npm ci)`);
  }
  if (!onPath('cmake')) throw new Error('cmake is not on PATH (apt-get install cmake g++ make)');

  const cuda = wantCuda();
  const native = process.env.WHISPER_NATIVE !== '0';
  const files = sourceFiles(sourceDir);
  const config = { cuda, native, source: sourceDir, version: readVersion(), fingerprint: sourceFingerprint(files) };

  // Up to date: same configuration and sources, and the binary is newer than every source file or
  // was built from identical source contents (npm ci re-extracts them with new mtimes).
  if (process.env.WHISPER_FORCE !== '1' && existsSync(binary) && existsSync(stampFile)) {
    let previous;
    try {
      previous = JSON.parse(readFileSync(stampFile, 'utf8'));
    } catch {
      previous = null;
    }
    const sameConfig = previous && previous.cuda === config.cuda && previous.native === config.native;
    const binaryTime = statSync(binary).mtimeMs;
    const newer = files.every((f) => statSync(f).mtimeMs < binaryTime);
    if (sameConfig && (previous.fingerprint === config.fingerprint || (newer && previous.source === config.source))) {
      if (previous.fingerprint !== config.fingerprint || previous.source !== config.source) writeFileSync(stampFile, `${JSON.stringify(config, null, 2)}\n`);
      log(`up to date (${cuda ? 'CUDA' : 'CPU'} build of whisper.cpp ${config.version})`);
      process.stdout.write(`${binary}\n`);
      return;
    }
  }

  // A CMake cache made for sources elsewhere (the checkout moved) cannot be reused.
  const cache = path.join(buildDir, 'CMakeCache.txt');
  if (existsSync(cache) && !readFileSync(cache, 'utf8').includes(`CMAKE_HOME_DIRECTORY:INTERNAL=${sourceDir}\n`)) {
    log('sources moved: starting from a clean build folder');
    rmSync(buildDir, { recursive: true, force: true });
  }
  mkdirSync(buildRoot, { recursive: true });
  const jobs = String(Math.max(1, os.availableParallelism?.() ?? os.cpus().length));
  const started = Date.now();
  log(`building whisper.cpp ${config.version} (${cuda ? 'CUDA' : 'CPU'}, ${jobs} jobs) into ${buildDir}`);
  const configure = [
    '-S',
    sourceDir,
    '-B',
    buildDir,
    '-DCMAKE_BUILD_TYPE=Release',
    '-DBUILD_SHARED_LIBS=OFF', // one self-contained binary
    '-DWHISPER_BUILD_TESTS=OFF',
    '-DWHISPER_BUILD_SERVER=OFF',
    '-DWHISPER_BUILD_EXAMPLES=ON',
    '-DWHISPER_SDL2=OFF',
    '-DWHISPER_CURL=OFF',
    '-DWHISPER_COMMON_FFMPEG=OFF',
    '-DGGML_CCACHE=OFF',
    `-DGGML_NATIVE=${native ? 'ON' : 'OFF'}`,
    `-DGGML_CUDA=${cuda ? 'ON' : 'OFF'}`,
  ];
  if (cuda) {
    // Compiling kernels for every architecture takes very long; build for the GPU that is here.
    const arch = process.env.WHISPER_CUDA_ARCH || (gpuVisible() ? 'native' : '');
    if (arch) configure.push(`-DCMAKE_CUDA_ARCHITECTURES=${arch}`);
  }
  run('cmake', configure);
  run('cmake', ['--build', buildDir, '--config', 'Release', '--target', 'whisper-cli', '-j', jobs]);
  if (!existsSync(binary)) throw new Error(`build finished but ${binary} is missing`);
  writeFileSync(stampFile, `${JSON.stringify(config, null, 2)}\n`);
  // It must at least start.
  execFileSync(binary, ['--help'], { stdio: 'ignore' });
  log(`built in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  process.stdout.write(`${binary}\n`);
}

function readVersion() {
  const m = /project\("whisper\.cpp" VERSION ([0-9.]+)\)/.exec(readFileSync(path.join(sourceDir, 'CMakeLists.txt'), 'utf8'));
  return m?.[1] ?? 'unknown';
}

try {
  main();
} catch (err) {
  log(`failed: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
}
