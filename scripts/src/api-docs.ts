// `npm run docs:api`: writes docs/api.md from the coordinator's OpenAPI document (builds first).
// `npm run docs:api -- --check` only compares and exits 1 when docs/api.md is stale (npm test
// runs the same comparison, test/e2e/api-docs.test.ts). Needs Redis: REDIS_URL, else
// redis://127.0.0.1:6379; no database.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { apiMarkdown } from './api-docs-lib.js';

// Runs as scripts/dist/api-docs.js: the repository root is two levels up.
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const file = path.join(root, 'docs', 'api.md');

const args = process.argv.slice(2);
if (args.some((a) => a !== '--check')) {
  process.stderr.write('usage: npm run docs:api [-- --check]   (env: REDIS_URL)\n');
  process.exit(2);
}
const check = args.includes('--check');

try {
  const text = await apiMarkdown(process.env.REDIS_URL ? { redisUrl: process.env.REDIS_URL } : {});
  let current: string | null = null;
  try {
    current = readFileSync(file, 'utf8');
  } catch {
    // not written yet
  }
  if (check) {
    if (current !== text) {
      process.stderr.write('docs/api.md is stale: run `npm run docs:api` and commit the result\n');
      process.exitCode = 1;
    } else {
      process.stderr.write('docs/api.md is current\n');
    }
  } else if (current === text) {
    process.stderr.write('docs/api.md is already current\n');
  } else {
    writeFileSync(file, text);
    process.stderr.write(`wrote docs/api.md (${text.split('\n').length} lines)\n`);
  }
} catch (err) {
  process.stderr.write(`docs:api failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
}
