import { execFile } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The closing line of `npm test` (test/support/summary-reporter.ts) against a folder of files that
 * fail on purpose in every way a file can: failed assertions, a thrown test, a failed beforeAll
 * (its tests never run), a file that fails to import, a failed afterAll after passing tests and an
 * unhandled rejection in a passing test. vitest runs on that folder as a child process.
 */

const root = path.resolve(import.meta.dirname, '../..');
const vitestCli = path.join(root, 'node_modules/vitest/vitest.mjs');

function runFixtures(...filters: string[]): Promise<{ code: number; lastLine: string; output: string }> {
  // The child is a vitest of its own: none of this run's worker settings may leak into it.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('VITEST') && k !== 'TEST' && k !== 'NODE_ENV'));
  const args = [vitestCli, 'run', '--config', 'test/fixtures/reporter/vitest.config.ts', '--reporter=./test/support/summary-reporter.ts', ...filters];
  return new Promise((resolve, reject) => {
    execFile(process.execPath, args, { cwd: root, env, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? err.code : 0;
      if (typeof code !== 'number') {
        reject(err ?? new Error('no exit code'));
        return;
      }
      const lines = stdout.trim().split('\n');
      resolve({ code, lastLine: lines.at(-1) ?? '', output: `${stdout}\n${stderr}` });
    });
  });
}

describe('the closing line', () => {
  it('counts every failed file, failed test, test that never ran and error outside a test', async () => {
    const run = await runFixtures();
    expect(run.code, run.output).toBe(1);
    // 7 files: passing and unhandled pass; one-failing, two-failing, before-all-fails, import-fails, after-all-fails fail.
    expect(run.lastLine, run.output).toBe('tests: 5 passed, 3 failed, 2 not run, 1 skipped | files: 2 passed, 5 failed | errors outside tests: 4');
  }, 120_000);

  it('reads all clear when nothing failed', async () => {
    const run = await runFixtures('passing');
    expect(run.code, run.output).toBe(0);
    expect(run.lastLine, run.output).toBe('tests: 2 passed, 0 failed, 0 not run, 1 skipped | files: 1 passed, 0 failed | errors outside tests: 0');
  }, 120_000);
});
