// `npm run docs:lifecycle`: redraws the state diagrams in docs/architecture.md from the
// coordinator's transition tables (builds first). `-- --check` only compares (exit code 1 when
// stale); npm test runs the same comparison, test/e2e/config-docs.test.ts.
import { checkOnly, readRepoFile, writeOrCheck } from './generated-file.js';
import { lifecycleBlock, withLifecycleBlock } from './lifecycle-docs-lib.js';

const check = checkOnly('docs:lifecycle');
const page = readRepoFile('docs/architecture.md') ?? '';
writeOrCheck('docs/architecture.md', withLifecycleBlock(page, lifecycleBlock()), 'docs:lifecycle', check);
