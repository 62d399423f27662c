/**
 * Issue 41, chat-log search: tokens with punctuation are found inside longer tokens (`don't`,
 * `GPII-3544`, `pull-request`, `node.js`), as users type them. The fixture channel is generated here.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IrcImportService } from '../../coordinator/src/irc/import-service.js';
import { createTestApp, type TestApp } from '../support/harness.js';

const SEARCH_DAY = [
  "[10:00:00] <ann> we *don't* need it",
  "[10:00:01] <bob> fine...don't worry",
  "[10:00:02] <carl> I don't know",
  '[10:00:03] <dee> "don\'t", she said',
  '[10:00:04] <ann> donut time, don t ask',
  '[10:00:05] <bob> merged stegru/windows#GPII-3544+e1f2767 today',
  '[10:00:06] <carl> see https://ci.fluidproject.org/job/infusion-pull-request/ for the build',
  '[10:00:07] <dee> pouchdb-node.js is out',
  '[10:00:08] <ann> node and js are two words here',
].join('\n');

let t: TestApp;
let dir: string;
let network: number;

const get = (url: string) => t.app.inject({ method: 'GET', url });
const texts = async (q: string) => {
  const r = await get(`/irc/api/logs?network_id=${network}&q=${encodeURIComponent(q)}&limit=100`);
  expect(r.statusCode, r.body).toBe(200);
  const b = r.json<{ total: number; results: Array<{ message_text: string }> }>();
  expect(b.total).toBe(b.results.length);
  return b.results.map((x) => x.message_text);
};

beforeAll(async () => {
  t = await createTestApp({ env: { IRC_API_RATE_LIMIT_MAX: '100000' } });
  dir = mkdtempSync(path.join(os.tmpdir(), 'irc-tokens-'));
  mkdirSync(path.join(dir, 'logs'));
  writeFileSync(path.join(dir, 'logs', '#fluid_20240501.log'), `${SEARCH_DAY}\n`);
  await new IrcImportService(t.orm).importPaths([path.join(dir, 'logs')], { network: 'defects', source: 'production' });
  const k = t.orm.em.getConnection().getKnex();
  network = Number((await k.raw(`select id from irc_networks where name = 'defects'`)).rows[0].id);
}, 120_000);
afterAll(async () => {
  await t?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('search finds what users type', () => {
  it("q=don't finds all 4 lines with don't (not donut, nor `don t`)", async () => {
    expect(await texts("don't")).toEqual(["we *don't* need it", "fine...don't worry", "I don't know", '"don\'t", she said']);
    // `q=don` found them before too (and `don t ask`, a word of its own).
    expect(await texts('don')).toEqual(expect.arrayContaining(["we *don't* need it", "fine...don't worry", "I don't know", '"don\'t", she said']));
    // Excluded the same way: the rest of the day.
    expect(await texts("ann -don't")).toEqual(['donut time, don t ask', 'node and js are two words here']);
  });

  it('q=GPII-3544, q=pull-request and q=node.js find them inside longer tokens', async () => {
    expect(await texts('GPII-3544')).toEqual(['merged stegru/windows#GPII-3544+e1f2767 today']);
    expect(await texts('3544')).toEqual(['merged stegru/windows#GPII-3544+e1f2767 today']);
    expect(await texts('pull-request')).toEqual(['see https://ci.fluidproject.org/job/infusion-pull-request/ for the build']);
    expect(await texts('node.js')).toEqual(['pouchdb-node.js is out']);
  });
});
