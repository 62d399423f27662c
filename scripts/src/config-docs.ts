// `npm run docs:config`: writes docs/configuration.md from the settings' declarations (builds
// first). `npm run docs:config -- --check` only compares, and also checks that .env.example lists
// every setting; it exits 1 when either is off (npm test runs the same checks,
// test/e2e/config-docs.test.ts).
import { configMarkdown, envExampleProblems } from './config-docs-lib.js';
import { checkOnly, readRepoFile, writeOrCheck } from './generated-file.js';

const check = checkOnly('docs:config');
writeOrCheck('docs/configuration.md', configMarkdown(), 'docs:config', check);
const problems = envExampleProblems(readRepoFile('.env.example') ?? '');
if (problems.length) {
  process.stderr.write(`.env.example does not match coordinator/src/config.ts:\n${problems.map((p) => `  - ${p}`).join('\n')}\n`);
  process.exitCode = 1;
}
