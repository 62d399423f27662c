import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../coordinator/src/app.js';
import { openOrm, type Orm } from '../../coordinator/src/db/orm.js';
import { IrcAliasService } from '../../coordinator/src/irc/alias-service.js';
import { IrcCorrectionService } from '../../coordinator/src/irc/correction-service.js';
import { IrcEventStore } from '../../coordinator/src/irc/event-store.js';
import { IrcImportService } from '../../coordinator/src/irc/import-service.js';
import { readPlatformVersion } from '../../coordinator/src/version.js';
import { createTestApp, testEnv, type TestApp } from '../support/harness.js';

// The chat-log search's answer cache (coordinator/src/irc/search-cache.ts): a repeated search is
// answered from memory, and every kind of write to the archive drops the cached answers, in the
// writing process at once and in a second coordinator (same database and Redis) over Redis.
// A write made behind the writers' backs (plain SQL) shows whether an answer came from the cache.

let t: TestApp;
/** A second coordinator over the same database and Redis. */
let other: { app: FastifyInstance; orm: Orm; redis: Redis };
let dir: string;
let networkId: number;
let channelId: number;

const DAY1 = ['[10:00:00] <alice> hello cachetest world', '[10:01:00] <bob> cachetest again', '[10:02:00] <carol> nothing here'].join('\n');

const search = async (app: FastifyInstance, qs: string) => {
  const res = await app.inject({ method: 'GET', url: `/irc/api/logs?${qs}` });
  expect(res.statusCode, res.body).toBe(200);
  return res.json<{ total: number; results: Array<{ id: number; nick: string; message_text: string | null }>; nick_profile: { aliases: string[] } | null }>();
};
const knex = () => t.orm.em.getConnection().getKnex();
/** Edits a stored message with plain SQL, which no cache hears of. */
const editQuietly = (id: number, text: string) => knex().raw('update irc_events set message_text = ? where id = ?', [text, id]);
let lines = 0;
const line = (nick: string, text: string) => ({
  eventType: 'PRIVMSG' as const,
  occurredAt: `2024-05-02 12:00:${String(lines).padStart(2, '0')}`,
  nick,
  messageText: text,
  target: null,
  toNick: null,
  netsplitGroup: null,
  netsplitLeader: false,
  lineHash: Buffer.from(`cache-test-${lines++}`),
});

beforeAll(async () => {
  t = await createTestApp({ env: { IRC_API_RATE_LIMIT_MAX: '100000' } });
  dir = mkdtempSync(path.join(os.tmpdir(), 'irc-cache-'));
  mkdirSync(path.join(dir, 'a'));
  writeFileSync(path.join(dir, 'a', '#cache_20240501.log'), DAY1);
  await new IrcImportService(t.orm).importPaths([path.join(dir, 'a')], { network: 'cachenet', source: 'production' });
  networkId = Number((await knex().raw(`select id from irc_networks where name = 'cachenet'`)).rows[0].id);
  channelId = Number((await knex().raw(`select id from irc_channels where name = '#cache'`)).rows[0].id);
  const orm = await openOrm({ databaseUrl: t.config.DATABASE_URL, poolMax: 2 });
  const redis = new Redis(t.config.REDIS_URL, { maxRetriesPerRequest: 3 });
  const app = await buildApp({ config: t.config, orm, redis, version: readPlatformVersion(), logger: false });
  await app.ready();
  other = { app, orm, redis };
});
afterAll(async () => {
  if (other) {
    await other.app.close();
    await other.redis.quit();
    await other.orm.close(true);
  }
  await t?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('chat-log search cache', () => {
  it('answers a repeated search from the cache, and a logged line (the live logger’s write) drops it', async () => {
    const first = await search(t.app, 'q=cachetest');
    expect(first.total).toBe(2);
    await editQuietly(first.results[0]!.id, 'hello cachetest world (edited)');
    // Cached: the quiet edit does not show, for the same search in either spelling of its terms.
    expect((await search(t.app, 'q=cachetest')).results[0]!.message_text).toBe('hello cachetest world');
    expect((await search(t.app, 'q=CacheTest')).results[0]!.message_text).toBe('hello cachetest world');
    // Another search is not that answer.
    expect((await search(t.app, 'q=cachetest&order=desc')).results.at(-1)!.message_text).toBe('hello cachetest world (edited)');

    await new IrcEventStore(t.orm).insert(networkId, channelId, [line('dave', 'a new cachetest line')]);
    const after = await search(t.app, 'q=cachetest');
    expect(after.total).toBe(3);
    expect(after.results.map((r) => r.message_text)).toEqual(['hello cachetest world (edited)', 'cachetest again', 'a new cachetest line']);
  });

  it('drops cached answers on an import, a correction and an alias change', async () => {
    expect((await search(t.app, 'q=importword')).total).toBe(0);
    mkdirSync(path.join(dir, 'b'));
    writeFileSync(path.join(dir, 'b', '#cache_20240503.log'), '[09:00:00] <erin> importword arrives\n');
    await new IrcImportService(t.orm).importPaths([path.join(dir, 'b')], { network: 'cachenet', source: 'production' });
    expect((await search(t.app, 'q=importword')).total).toBe(1);

    await new IrcCorrectionService(t.orm).deleteRows({ source: 'production', network: 'cachenet', from: '2024-05-03', to: '2024-05-03' });
    expect((await search(t.app, 'q=importword')).total).toBe(0);

    const byNick = `network_id=${networkId}&nick=alice`;
    expect((await search(t.app, byNick)).nick_profile!.aliases).toEqual([]);
    await new IrcAliasService(t.orm).add('production', 'cachenet', 'alice', 'bob');
    const linked = await search(t.app, byNick);
    expect(linked.nick_profile!.aliases).toEqual(['bob']);
    expect(linked.results.map((r) => r.nick)).toEqual(['alice', 'bob']);
    await new IrcAliasService(t.orm).remove('production', 'cachenet', 'alice', 'bob');
    expect((await search(t.app, byNick)).results.map((r) => r.nick)).toEqual(['alice']);
  });

  it('drops a second coordinator’s cached answers when the first one writes (over Redis)', async () => {
    const before = await search(other.app, 'q=shared');
    expect(before.total).toBe(0);
    // Cached there: a line written behind the writers' backs does not show on the second coordinator…
    await knex().raw(
      `insert into irc_events (channel_id, event_type, occurred_at, nick, message_text, line_hash) values (?, 'PRIVMSG', '2024-05-04 08:00:00', 'zed', 'shared quietly', ?)`,
      [channelId, Buffer.from('cache-test-quiet')],
    );
    expect((await search(other.app, 'q=shared&date_from=2024-01-01')).total).toBe(1);
    expect((await search(other.app, 'q=shared')).total).toBe(0);
    // …until the first coordinator's process writes through the store: the news reaches it over Redis.
    await new IrcEventStore(t.orm).insert(networkId, channelId, [line('zed', 'shared loudly')]);
    await expect.poll(async () => (await search(other.app, 'q=shared&date_from=2024-01-01')).total).toBe(2);
    await expect.poll(async () => (await search(other.app, 'q=shared')).results.map((r) => r.message_text)).toContain('shared loudly');
  });

  it('drops cached answers when the admin CLI writes (compiled CLI; build with tsc -b first)', async () => {
    const byNick = `network_id=${networkId}&nick=carol`;
    for (const app of [t.app, other.app]) expect((await search(app, byNick)).nick_profile!.aliases).toEqual([]);
    const repoRoot = path.resolve(import.meta.dirname, '../..');
    const run = await promisify(execFile)(process.execPath, ['coordinator/dist/cli.js', 'irc:alias:add', '--network', 'cachenet', 'carol', 'dave'], {
      cwd: repoRoot,
      env: { ...process.env, ...testEnv(t.db) },
      timeout: 60_000,
    });
    expect(run.stderr).toBe('');
    // Another process wrote: the news comes over Redis, to both coordinators.
    for (const app of [t.app, other.app]) await expect.poll(async () => (await search(app, byNick)).nick_profile!.aliases).toEqual(['dave']);
  }, 90_000);
});
