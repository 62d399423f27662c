/**
 * Issue 41, chat-log archive, through the API and the reader: the day pages of days outside the
 * archive's range answer 404 (never 500), and a channel's calendar links only the years that have
 * rows. The fixture files are generated here.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IrcImportService } from '../../coordinator/src/irc/import-service.js';
import { createTestApp, type TestApp } from '../support/harness.js';

let t: TestApp;
let dir: string;

const get = (url: string) => t.app.inject({ method: 'GET', url });

beforeAll(async () => {
  t = await createTestApp({ env: { IRC_API_RATE_LIMIT_MAX: '100000' } });
  dir = mkdtempSync(path.join(os.tmpdir(), 'irc-days-'));
  mkdirSync(path.join(dir, 'logs'));
  writeFileSync(path.join(dir, 'logs', '#cal_20100301.log'), '[12:00:00] <ann> early\n');
  writeFileSync(path.join(dir, 'logs', '#cal_20240301.log'), '[12:00:00] <ann> late\n');
  await new IrcImportService(t.orm).importPaths([path.join(dir, 'logs')], { network: 'defects', source: 'production' });
}, 120_000);
afterAll(async () => {
  await t?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("days outside the archive's range", () => {
  it('answers 404, never 500, for 0000-01-01 and 9999-12-31', async () => {
    for (const day of ['0000-01-01', '9999-12-31']) {
      const r = await get(`/irc/net/defects/%23cal/${day}`);
      expect(r.statusCode, `${day}: ${r.body.slice(0, 200)}`).toBe(404);
    }
    expect((await get('/irc/api/logs?date=0000-01-01')).statusCode).toBe(422);
    expect((await get('/irc/net/defects/%23cal?year=0000')).statusCode).toBe(422);
  });

  it('a calendar links only the years that have rows', async () => {
    const r = await get('/irc/net/defects/%23cal');
    expect(r.statusCode).toBe(200);
    expect(r.body).toContain('?year=2010');
    for (let y = 2011; y <= 2023; y += 1) expect(r.body).not.toContain(`?year=${y}`);
  });
});
