import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'coordinator/test/**/*.test.ts', 'worker/test/**/*.test.ts', 'shared/test/**/*.test.ts', 'proto/test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two cores on the project machine; each file gets its own database cloned from a template.
    maxWorkers: 2,
  },
});
