import { defineConfig } from 'vitest/config';

/**
 * Two projects (see docs/testing.md):
 *  - `unit`: pure logic, plus in-process loopback HTTP/TCP servers. No PostgreSQL, Redis, Debian
 *    tool, gRPC server, browser or child process; `npm run test:unit` runs it in seconds.
 *  - `e2e`: everything that touches real parts. Its global setup creates the template database,
 *    finds Redis, bundles the web console and builds whisper.cpp's CLI when it is missing.
 * A file belongs to `unit` only when it is listed here; every other test file is `e2e`, so a new
 * test file runs with its dependencies until someone moves it here on purpose.
 */
const UNIT = [
  'coordinator/test/cidr.test.ts',
  'coordinator/test/config.test.ts',
  'coordinator/test/dns-wire.test.ts',
  'coordinator/test/irc-archive-rules.test.ts',
  'coordinator/test/irc-formats.test.ts',
  'coordinator/test/job-page-text.test.ts',
  'coordinator/test/irc-parsers.test.ts',
  'coordinator/test/password.test.ts',
  'coordinator/test/set-map.test.ts',
  'coordinator/test/subtitle-cues.test.ts',
  'coordinator/test/timeline.test.ts',
  'coordinator/test/unavailable.test.ts',
  'coordinator/test/word-speakers.test.ts',
  'shared/test/download-failure.test.ts',
  'shared/test/outbound.test.ts',
  'test/bench/der.test.ts',
  'worker/test/diarization-cluster.test.ts',
  'worker/test/download.test.ts',
];

const ALL = ['test/**/*.test.ts', 'coordinator/test/**/*.test.ts', 'worker/test/**/*.test.ts', 'shared/test/**/*.test.ts', 'proto/test/**/*.test.ts'];

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two cores on the project machine; each e2e file gets its own database cloned from a template.
    maxWorkers: 2,
    projects: [
      {
        extends: true,
        test: { name: 'unit', include: UNIT },
      },
      {
        extends: true,
        test: {
          name: 'e2e',
          include: ALL,
          exclude: UNIT,
          globalSetup: ['test/support/global-setup.ts', 'test/support/whisper-setup.ts'],
        },
      },
    ],
  },
});
