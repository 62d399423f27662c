import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IrcImportService } from '../../coordinator/src/irc/import-service.js';
import { createTestApp, type TestApp } from '../support/harness.js';

// The chat-log search's transaction (IrcArchiveService.bounded): opened by hand on a pooled
// connection with its statement_timeout, it must stop a search at IRC_QUERY_TIMEOUT_MS and give
// the connection back to the pool outside any transaction.

let t: TestApp;
let dir: string;

beforeAll(async () => {
  t = await createTestApp({ env: { IRC_QUERY_TIMEOUT_MS: '200', IRC_SEARCH_CACHE_MB: '0', IRC_API_RATE_LIMIT_MAX: '100000' } });
  dir = mkdtempSync(path.join(os.tmpdir(), 'irc-timeout-'));
  writeFileSync(path.join(dir, '#slow_20240501.log'), '[10:00:00] <alice> hello slow world\n[10:01:00] <bob> hello again\n');
  await new IrcImportService(t.orm).importPaths([dir], { network: 'slownet', source: 'production' });
});
afterAll(async () => {
  await t?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const search = (qs: string) => t.app.inject({ method: 'GET', url: `/irc/api/logs?${qs}` });

describe('chat-log search transaction', () => {
  it('stops a search at IRC_QUERY_TIMEOUT_MS with 503, and leaves no pooled connection in a transaction', async () => {
    const knex = t.orm.em.getConnection().getKnex();
    // A writer holding the rows table: the search's page statement waits for it until its timeout.
    const blocker = await knex.transaction();
    try {
      await blocker.raw('lock table irc_events in access exclusive mode');
      const res = await search('q=hello');
      expect(res.statusCode, res.body).toBe(503);
      expect(res.json()).toEqual({ success: false, error: expect.stringMatching(/^the search took longer than 0\.2 s and was stopped/) });
    } finally {
      await blocker.rollback();
    }
    // Every connection of the pool (4) answers again, as many searches at once as it has.
    const again = await Promise.all(Array.from({ length: 8 }, (_, i) => search(i % 2 ? 'q=hello' : 'q=hello&order=desc')));
    expect(again.map((r) => [r.statusCode, r.json<{ total: number }>().total])).toEqual(Array.from({ length: 8 }, () => [200, 2]));
    const stuck = await knex.raw<{ rows: Array<{ n: string }> }>(
      `select count(*) as n from pg_stat_activity where datname = current_database() and state like 'idle in transaction%'`,
    );
    expect(Number(stuck.rows[0]!.n)).toBe(0);
  });
});
