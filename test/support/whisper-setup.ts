import { spawn } from 'node:child_process';
import path from 'node:path';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Absolute path of whisper.cpp's CLI, built for this checkout. */
    whisperCli: string;
  }
}

/**
 * Once per e2e run, before any test file starts: whisper.cpp's CLI for the worker engine tests
 * (`worker/scripts/build-whisper.mjs`, the script behind `npm run whisper:build -w worker`). It
 * returns at once when the binary is up to date (`.ci/run` builds it before the tests); otherwise
 * it compiles it here, a few minutes on two cores, instead of inside one test file's `beforeAll`
 * where it held a worker slot and the hook timeout. A failed build fails the run: the engine tests
 * are never skipped.
 */
export default async function setup(project: TestProject) {
  const script = path.resolve(import.meta.dirname, '../../worker/scripts/build-whisper.mjs');
  const child = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let stdout = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  const code = await new Promise<number | null>((resolve, reject) => child.once('error', reject).once('close', resolve));
  if (code !== 0)
    throw new Error(`whisper.cpp's CLI could not be built (node ${path.relative(process.cwd(), script)} exited with ${code}); see its messages above`);
  const binary = stdout.trim().split('\n').at(-1);
  if (!binary) throw new Error('worker/scripts/build-whisper.mjs printed no binary path');
  project.provide('whisperCli', binary);
}
