import type { SerializedError } from 'vitest';
import type { Reporter, TestCase, TestModule, TestSuite } from 'vitest/node';

interface RunSummary {
  /** `notRun`: tests that never ran because a hook of their file or suite failed (vitest counts them as skipped). */
  tests: { passed: number; failed: number; skipped: number; notRun: number };
  files: { passed: number; failed: number };
  /** Errors that belong to no test: a file that failed to import, a failed beforeAll/afterAll, an unhandled error or rejection. */
  errorsOutsideTests: number;
}

/** Whether a beforeAll/afterAll of the test's suite, or of a suite around it, or its file failed. */
function hookFailedAround(test: TestCase): boolean {
  for (let s: TestModule | TestSuite = test.parent; ; s = s.parent) {
    if (s.errors().length > 0) return true;
    if (s.type === 'module') return false;
  }
}

/** Every error raised in a suite's own hooks (beforeAll/afterAll), nested suites included. */
function suiteErrors(suite: TestModule | TestSuite): number {
  let n = suite.errors().length;
  for (const child of suite.children.suites()) n += suiteErrors(child);
  return n;
}

function summarise(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<SerializedError>): RunSummary {
  const summary: RunSummary = {
    tests: { passed: 0, failed: 0, skipped: 0, notRun: 0 },
    files: { passed: 0, failed: 0 },
    errorsOutsideTests: unhandledErrors.length,
  };
  for (const mod of testModules) {
    let testFailed = false;
    for (const test of mod.children.allTests()) {
      const state = test.result().state;
      if (state === 'passed') summary.tests.passed++;
      else if (state === 'failed') {
        summary.tests.failed++;
        testFailed = true;
      } else if (hookFailedAround(test)) summary.tests.notRun++;
      else summary.tests.skipped++;
    }
    // A file that failed to import has no tests; a failed beforeAll/afterAll fails the file while its tests may pass.
    const hookErrors = suiteErrors(mod);
    summary.errorsOutsideTests += hookErrors;
    if (testFailed || hookErrors > 0 || mod.state() === 'failed') summary.files.failed++;
    else summary.files.passed++;
  }
  return summary;
}

function closingLine(s: RunSummary): string {
  return (
    `tests: ${s.tests.passed} passed, ${s.tests.failed} failed, ${s.tests.notRun} not run, ${s.tests.skipped} skipped | ` +
    `files: ${s.files.passed} passed, ${s.files.failed} failed | errors outside tests: ${s.errorsOutsideTests}`
  );
}

/**
 * Prints one plain closing line after vitest's own summary, so CI tooling that reads only that line
 * sees the real counts: tests by state (a test whose hook failed is "not run", not "skipped"),
 * files passed and failed, and the errors that belong to no test (a file that fails to import, a
 * failed hook, an unhandled error or rejection). test/e2e/summary-reporter.test.ts checks it.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<SerializedError>) {
    process.stdout.write(`\n${closingLine(summarise(testModules, unhandledErrors))}\n`);
  }
}
