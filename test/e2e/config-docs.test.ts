import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { configMarkdown, coordinatorSettings, envExampleProblems } from '../../scripts/src/config-docs-lib.js';
import { lifecycleBlock, withLifecycleBlock } from '../../scripts/src/lifecycle-docs-lib.js';

const read = (relative: string) => readFileSync(new URL(`../../${relative}`, import.meta.url), 'utf8');

// docs/configuration.md and the state diagrams of docs/architecture.md are generated from the
// code (`npm run docs:config`, `npm run docs:lifecycle`); a setting or a transition changed
// without regenerating them fails here, so the pages cannot drift.
describe('generated documentation', () => {
  it('docs/configuration.md is what `npm run docs:config` generates from the settings', () => {
    expect(read('docs/configuration.md') === configMarkdown(), 'docs/configuration.md is stale: run `npm run docs:config` and commit the result').toBe(true);
  });

  it('every coordinator setting has a description', () => {
    expect(
      coordinatorSettings()
        .filter((s) => !s.description.trim())
        .map((s) => s.name),
    ).toEqual([]);
  });

  it('.env.example lists every coordinator setting once and nothing unknown', () => {
    expect(envExampleProblems(read('.env.example'))).toEqual([]);
  });

  it("docs/architecture.md's state diagrams are what `npm run docs:lifecycle` draws from job-transitions.ts", () => {
    const page = read('docs/architecture.md');
    expect(page === withLifecycleBlock(page, lifecycleBlock()), 'docs/architecture.md is stale: run `npm run docs:lifecycle` and commit the result').toBe(true);
  });
});
