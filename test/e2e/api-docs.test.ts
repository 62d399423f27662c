import { readFileSync } from 'node:fs';
import { describe, expect, inject, it } from 'vitest';
import { apiMarkdown } from '../../scripts/src/api-docs-lib.js';

// docs/api.md is generated from the coordinator's OpenAPI document (`npm run docs:api`); a route
// or schema change without regenerating it fails here, so the reference cannot drift.
describe('docs/api.md', () => {
  it('is what `npm run docs:api` generates from the current routes', async () => {
    const generated = await apiMarkdown({ redisUrl: inject('redisUrl') });
    const committed = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
    expect(committed === generated, 'docs/api.md is stale: run `npm run docs:api` and commit the result').toBe(true);
  });
});
