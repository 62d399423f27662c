import { execFile, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from 'irc-framework';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ConfigError, loadConfig } from '../../coordinator/src/config.js';
import { openOrm, type Orm } from '../../coordinator/src/db/orm.js';
import { IrcEventStore, type NewIrcEvent } from '../../coordinator/src/irc/event-store.js';
import {
  IrcLiveLogger,
  loadIrcLoggerConfig,
  NetsplitTracker,
  parseIrcLoggerConfig,
  type IrcLoggerConfigInput,
  type LiveEventStore,
} from '../../coordinator/src/irc/live-logger.js';
import { NETMERGE_WINDOW_S } from '../../coordinator/src/irc/parsers/common.js';
import { startCoordinator } from '../../coordinator/src/service.js';
import { createTestDatabase, testEnv, type TestDatabase } from '../support/harness.js';
import { startNgircd, type NgircdServer } from '../support/ngircd.js';
import { Proc, repoRoot } from '../support/processes.js';

/**
 * The live logger against a real IRC server: Debian's ngIRCd on loopback (test/support/ngircd.ts),
 * a fresh database, and test users driven with irc-framework. Every step waits for its row before
 * the next one, so the expected rows are exact. Netsplits need two linked servers, so their
 * grouping is tested on NetsplitTracker with fabricated quits.
 */

const silent = () => pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });

interface Row {
  id: string;
  network: string;
  channel: string;
  event_type: string;
  nick: string | null;
  message_text: string | null;
  target: string | null;
  to_nick: string | null;
}

/** Polls `fn` every 40 ms until it returns something truthy, and returns that; fails with its last error after `timeoutMs`. */
function until<T>(what: string, fn: () => Promise<T | null | undefined | false>, timeoutMs = 15_000): Promise<T> {
  return vi.waitFor(
    async () => {
      const v = await fn();
      if (!v) throw new Error(`timed out waiting for ${what}`);
      return v;
    },
    { timeout: timeoutMs, interval: 40 },
  );
}

/** A person on the test server. `next()` waits for a future event (set it up before acting). */
class TestUser {
  readonly client = new Client();
  private waiters: Array<{ name: string; pred: (e: any) => boolean; resolve: (e: any) => void }> = [];

  constructor(readonly nick: string) {
    for (const name of ['registered', 'join', 'part', 'kick', 'quit', 'nick', 'privmsg', 'notice', 'action', 'mode', 'topic', 'userlist', 'close']) {
      this.client.on(name, (e: unknown) => {
        this.waiters = this.waiters.filter((w) => (w.name === name && w.pred(e) ? (w.resolve(e), false) : true));
      });
    }
  }

  next(name: string, pred: (e: any) => boolean = () => true, timeoutMs = 15_000): Promise<any> {
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`${this.nick}: no ${name} event within ${timeoutMs} ms`)), timeoutMs);
      this.waiters.push({
        name,
        pred,
        resolve: (e) => {
          clearTimeout(t);
          resolve(e);
        },
      });
    });
  }

  async connect(port: number) {
    const registered = this.next('registered');
    this.client.connect({
      host: '127.0.0.1',
      port,
      nick: this.nick,
      username: this.nick,
      gecos: this.nick,
      auto_reconnect: false,
      ping_interval: 0,
      ping_timeout: 0,
    });
    await registered;
    return this;
  }

  async join(channel: string) {
    const joined = this.next('join', (e) => e.nick === this.nick && e.channel.toLowerCase() === channel.toLowerCase());
    this.client.join(channel);
    await joined;
  }

  quit(message = 'bye') {
    if (this.client.connected) this.client.quit(message);
  }
}

let ircd: NgircdServer;
let db: TestDatabase;
let orm: Orm;
let store: IrcEventStore;
const users: TestUser[] = [];
const loggers: IrcLiveLogger[] = [];

async function user(nick: string) {
  const u = new TestUser(nick);
  users.push(u);
  return u.connect(ircd.port);
}

function loggerConfig(network: string, nick: string, channels: string[], extra: Partial<IrcLoggerConfigInput['networks'][number]> = {}): IrcLoggerConfigInput {
  return {
    networks: [{ name: network, source: 'sandbox', host: '127.0.0.1', port: ircd.port, tls: false, nick, channels, reconnectMaxWaitMs: 2000, ...extra }],
    quitMessage: `${nick} stopping`,
  };
}

function startLogger(config: IrcLoggerConfigInput, opts: { store?: LiveEventStore; logger?: pino.Logger } = {}) {
  const l = new IrcLiveLogger({ config: parseIrcLoggerConfig(config), store: opts.store ?? store, logger: opts.logger ?? silent() });
  loggers.push(l);
  return l;
}

async function rows(network: string): Promise<Row[]> {
  const res = await store.knex().raw(
    `select e.id, n.name as network, c.name as channel, e.event_type, e.nick, e.message_text, e.target, e.to_nick
       from irc_events e join irc_channels c on c.id = e.channel_id join irc_networks n on n.id = c.network_id
      where n.name = ? order by e.id`,
    [network],
  );
  return res.rows as Row[];
}

/** Waits until the network has a row matching `match` (all given fields equal) and returns it. */
function row(network: string, match: Partial<Row>, timeoutMs = 15_000): Promise<Row> {
  return until(
    `row ${JSON.stringify(match)} in ${network}`,
    async () => {
      const all = await rows(network);
      return all.find((r) => Object.entries(match).every(([k, v]) => r[k as keyof Row] === v));
    },
    timeoutMs,
  );
}

/** Rows of one channel as [type, nick, message_text, to_nick, target]. */
const shape = (all: Row[], channel: string) => all.filter((r) => r.channel === channel).map((r) => [r.event_type, r.nick, r.message_text, r.to_nick, r.target]);

beforeAll(async () => {
  ircd = await startNgircd();
  db = await createTestDatabase();
  orm = await openOrm({ databaseUrl: db.url, poolMax: 4 });
  store = new IrcEventStore(orm);
});

afterAll(async () => {
  for (const u of users) u.quit();
  await Promise.all(loggers.map((l) => l.stop().catch(() => undefined)));
  await orm?.close(true);
  await db?.drop();
  await ircd?.close();
});

describe('live IRC logger on a real IRC server (ngIRCd)', () => {
  const NET = 'loopback';
  const A = '#sonar-a';
  const B = '#Sonar-B'; // configured spelling; the server knows it as #sonar-b
  let logger: IrcLiveLogger;
  let alice: TestUser;

  it("logs channel and private events with the importer's row conventions, counters and nick links", async () => {
    // alice is first in both channels, so ngIRCd makes her operator there.
    alice = await user('alice');
    await alice.join(A);
    await alice.join('#sonar-b');

    logger = startLogger(loggerConfig(NET, 'sonarlog', [A, B]));
    const botJoinsA = alice.next('join', (e) => e.nick === 'sonarlog' && e.channel === A);
    const botJoinsB = alice.next('join', (e) => e.nick === 'sonarlog' && e.channel.toLowerCase() === '#sonar-b');
    await logger.start();
    await Promise.all([botJoinsA, botJoinsB]);
    await row(NET, { channel: A, event_type: 'JOIN', nick: 'sonarlog' });
    await row(NET, { channel: B, event_type: 'JOIN', nick: 'sonarlog' });

    const bob = await user('bob');
    await bob.join(A);
    await bob.join('#sonar-b');
    await row(NET, { channel: B, event_type: 'JOIN', nick: 'bob' });

    alice.client.say(A, 'bob: h\u00e9llo w\u00f6rld \u2713 \x0304,12red\x03 \x02bold\x02 \u{1f600}');
    await row(NET, { event_type: 'PRIVMSG', nick: 'alice' });
    bob.client.action(A, 'waves \x1dslowly\x1d');
    await row(NET, { event_type: 'ACTION', nick: 'bob' });
    alice.client.notice(A, 'a notice for everyone');
    await row(NET, { event_type: 'NOTICE', nick: 'alice' });
    alice.client.setTopic(A, 'Sonar \x1ftest\x1f topic');
    await row(NET, { event_type: 'TOPIC' });
    alice.client.mode(A, '+o', 'bob');
    await row(NET, { event_type: 'MODE' });
    bob.client.changeNick('bobby');
    await row(NET, { event_type: 'NICK', channel: B });
    await row(NET, { event_type: 'NICK', channel: A });

    const carol = await user('carol');
    await carol.join(A);
    await row(NET, { event_type: 'JOIN', nick: 'carol' });
    bob.client.raw('KICK', A, 'carol', 'behave, please');
    await row(NET, { event_type: 'KICK' });
    alice.client.part('#sonar-b', 'see you later');
    await row(NET, { event_type: 'PART' });

    carol.client.say('sonarlog', 'psst, a private question \u2713');
    await row(NET, { channel: 'carol', nick: 'carol' });
    const carolGetsReply = carol.next('privmsg', (e) => e.nick === 'sonarlog' && e.target === 'carol');
    logger.say(NET, 'carol', 'a private answer');
    expect((await carolGetsReply).message).toBe('a private answer');
    await row(NET, { channel: 'carol', nick: 'sonarlog' });
    logger.say(NET, A, 'the bot speaks');
    await row(NET, { channel: A, nick: 'sonarlog', event_type: 'PRIVMSG' });

    bob.quit('gone fishing');
    await row(NET, { event_type: 'QUIT', channel: A });
    await row(NET, { event_type: 'QUIT', channel: B });
    expect(await logger.flush(5000)).toBe(true);

    const all = await rows(NET);
    expect(shape(all, A)).toEqual([
      ['JOIN', 'sonarlog', null, null, null],
      ['JOIN', 'bob', null, null, null],
      ['PRIVMSG', 'alice', 'bob: h\u00e9llo w\u00f6rld \u2713 red bold \u{1f600}', 'bob', null],
      ['ACTION', 'bob', 'waves slowly', null, null],
      ['NOTICE', 'alice', 'a notice for everyone', null, null],
      ['TOPIC', 'alice', 'Sonar test topic', null, null],
      ['MODE', 'alice', '+o bob', null, 'bob'],
      ['NICK', 'bob', null, 'bobby', null],
      ['JOIN', 'carol', null, null, null],
      ['KICK', 'bobby', 'behave, please', 'carol', null],
      ['PRIVMSG', 'sonarlog', 'the bot speaks', null, null],
      ['QUIT', 'bobby', '"gone fishing"', null, null], // ngIRCd quotes a client's quit reason
    ]);
    expect(shape(all, B)).toEqual([
      ['JOIN', 'sonarlog', null, null, null],
      ['JOIN', 'bob', null, null, null],
      ['NICK', 'bob', null, 'bobby', null],
      ['PART', 'alice', 'see you later', null, null],
      ['QUIT', 'bobby', '"gone fishing"', null, null], // ngIRCd quotes a client's quit reason
    ]);
    expect(shape(all, 'carol')).toEqual([
      ['PRIVMSG', 'carol', 'psst, a private question \u2713', null, null],
      ['PRIVMSG', 'sonarlog', 'a private answer', null, 'carol'],
    ]);
    expect(new Set(all.map((r) => r.channel))).toEqual(new Set([A, B, 'carol']));

    const knex = store.knex();
    const channels = (
      await knex.raw(
        `select c.name, c.is_private, c.event_count::int as events, n.source from irc_channels c join irc_networks n on n.id = c.network_id where n.name = ? order by c.name`,
        [NET],
      )
    ).rows;
    expect(channels).toEqual(
      [
        { name: B, is_private: false, events: 5, source: 'sandbox' },
        { name: A, is_private: false, events: 12, source: 'sandbox' },
        { name: 'carol', is_private: true, events: 2, source: 'sandbox' },
      ].sort((x, y) => (x.name < y.name ? -1 : 1)),
    );
    const nicks = Object.fromEntries(
      (
        await knex.raw(
          `select k.nick_key, k.message_count::int as messages, k.event_count::int as events from irc_nicks k join irc_networks n on n.id = k.network_id where n.name = ?`,
          [NET],
        )
      ).rows.map((r: { nick_key: string; messages: number; events: number }) => [r.nick_key, [r.messages, r.events]]),
    );
    expect(nicks).toEqual({
      alice: [1, 5], // PRIVMSG (counted), NOTICE, TOPIC, MODE, PART
      bob: [1, 5], // JOIN and NICK in both channels, ACTION
      bobby: [0, 3],
      carol: [1, 2],
      sonarlog: [2, 4],
    });
    const links = (
      await knex.raw(`select l.nick_key, l.other_key, l.origin from irc_nick_links l join irc_networks n on n.id = l.network_id where n.name = ?`, [NET])
    ).rows;
    expect(links).toEqual([{ nick_key: 'bob', other_key: 'bobby', origin: 'log' }]);
  }, 45_000);

  it('reconnects and rejoins after the server restarts, logs what follows, and quits with its message on stop', async () => {
    const before = logger.status()[0]!;
    expect(before).toMatchObject({ network: NET, registered: true, nick: 'sonarlog', registrations: 1 });
    expect(before.channels.sort()).toEqual([B, A].sort());

    await ircd.stop();
    await until('the bot to notice the disconnect', async () => !logger.status()[0]!.registered, 10_000);
    await ircd.start();
    await until(
      'the bot to register again and rejoin both channels',
      async () => {
        const s = logger.status()[0]!;
        return s.registrations === 2 && s.channels.length === 2;
      },
      25_000,
    );

    const dave = await user('dave');
    await dave.join(A);
    dave.client.say(A, 'said after the restart');
    await row(NET, { channel: A, nick: 'dave', message_text: 'said after the restart' });
    const joinsA = (await rows(NET)).filter((r) => r.channel === A && r.event_type === 'JOIN' && r.nick === 'sonarlog');
    expect(joinsA).toHaveLength(2);

    const botQuits = dave.next('quit', (e) => e.nick === 'sonarlog');
    await logger.stop();
    expect((await botQuits).message).toBe('"sonarlog stopping"'); // ngIRCd quotes a client's quit reason
    expect(logger.status()[0]).toMatchObject({ queued: 0, dropped: 0, connected: false });
    // The bot's second JOIN, dave's JOIN and message in #sonar-a. alice was disconnected by the
    // restart: ngIRCd may or may not get her QUIT out to the bot before it closes the bot's socket.
    const after = shape(await rows(NET), A).slice(12);
    const goingDown = after.filter((r) => r[2] === 'Server going down');
    expect(goingDown).toEqual(goingDown.length ? [['QUIT', 'alice', 'Server going down', null, null]] : []);
    expect(after.filter((r) => r[2] !== 'Server going down')).toEqual([
      ['JOIN', 'sonarlog', null, null, null],
      ['JOIN', 'dave', null, null, null],
      ['PRIVMSG', 'dave', 'said after the restart', null, null],
    ]);
  }, 45_000);
});

describe('write failures', () => {
  it('keeps rows queued through a database outage and drops only rows the database refuses', async () => {
    const NET = 'flaky';
    let failNext = 0;
    const flaky: LiveEventStore = {
      ensureNetwork: (source, name) => store.ensureNetwork(source, name),
      ensureChannel: (networkId, name) => store.ensureChannel(networkId, name),
      knex: () => store.knex(),
      async insert(networkId: number, channelId: number, events: NewIrcEvent[]) {
        if (failNext > 0) {
          failNext -= 1;
          throw new Error('simulated outage');
        }
        if (events.some((e) => e.messageText === 'poison')) throw new Error('simulated refusal');
        return store.insert(networkId, channelId, events);
      },
    };
    const logs: Array<{ level: number; msg: string }> = [];
    const logger = startLogger(loggerConfig(NET, 'sonarflaky', ['#sonar-flaky']), {
      store: flaky,
      logger: pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line)) }),
    });
    await logger.start();
    await row(NET, { event_type: 'JOIN', nick: 'sonarflaky' });

    const erin = await user('erin');
    await erin.join('#sonar-flaky');
    await row(NET, { event_type: 'JOIN', nick: 'erin' });
    failNext = 2;
    erin.client.say('#sonar-flaky', 'through the outage');
    await row(NET, { message_text: 'through the outage' }, 10_000);
    expect(logs.filter((l) => l.msg.includes('database write failed'))).toHaveLength(2);
    expect(logs.some((l) => l.msg.includes('succeeded after retrying'))).toBe(true);

    erin.client.say('#sonar-flaky', 'poison');
    erin.client.say('#sonar-flaky', 'fine after the poison');
    await row(NET, { message_text: 'fine after the poison' }, 15_000);
    expect((await rows(NET)).map((r) => r.message_text)).not.toContain('poison');
    expect(logger.status()[0]).toMatchObject({ dropped: 1, queued: 0, registered: true });
    expect(logs.some((l) => l.msg.includes('refused a row'))).toBe(true);
    await logger.stop();
  }, 30_000);
});

describe('wiring', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'sonar-irc-logger-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('startCoordinator runs the logger when IRC_LOGGER_CONFIG is set and stops it on close', async () => {
    const file = path.join(dir, 'service.json');
    await writeFile(file, JSON.stringify(loggerConfig('service', 'sonarsvc', ['#sonar-svc'])));
    const frank = await user('frank');
    await frank.join('#sonar-svc');
    const botJoins = frank.next('join', (e) => e.nick === 'sonarsvc');
    const svc = await startCoordinator(loadConfig(testEnv(db, { IRC_LOGGER_CONFIG: file, DATABASE_MIGRATE_ON_START: 'false' })));
    try {
      expect(svc.ircLogger).not.toBeNull();
      await botJoins;
      frank.client.say('#sonar-svc', 'hello service');
      await row('service', { nick: 'frank', message_text: 'hello service' });
    } finally {
      const botQuits = frank.next('quit', (e) => e.nick === 'sonarsvc');
      await svc.close();
      expect((await botQuits).message).toBe('"sonarsvc stopping"'); // ngIRCd quotes a client's quit reason
    }

    await writeFile(file, JSON.stringify({ networks: [{ name: 'x', host: 'h', nick: 'n', port: 70000 }] }));
    const bad = startCoordinator(loadConfig(testEnv(db, { IRC_LOGGER_CONFIG: file })));
    await expect(bad).rejects.toBeInstanceOf(ConfigError);
    await expect(bad).rejects.toThrow(/IRC_LOGGER_CONFIG \(.*service\.json\): networks\[0\]\.port/);
  }, 30_000);

  it('`sonar-cli irc:logger` runs until SIGTERM (compiled CLI; build with tsc -b first)', async () => {
    const file = path.join(dir, 'cli.json');
    await writeFile(file, JSON.stringify(loggerConfig('cli', 'sonarcli', ['#sonar-cli'])));
    const gina = await user('gina');
    await gina.join('#sonar-cli');
    const botJoins = gina.next('join', (e) => e.nick === 'sonarcli');
    const cli = path.join(repoRoot, 'coordinator/dist/cli.js');
    const child = spawn(process.execPath, [cli, 'irc:logger', '--config', file], {
      cwd: repoRoot,
      env: { PATH: process.env.PATH ?? '', DATABASE_URL: db.url, LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const proc = new Proc(child);
    let stdout = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    try {
      await botJoins;
      gina.client.say('#sonar-cli', 'hello cli');
      await row('cli', { nick: 'gina', message_text: 'hello cli' });
      const botQuits = gina.next('quit', (e) => e.nick === 'sonarcli');
      expect(await proc.stop('SIGTERM')).toBe(0);
      expect((await botQuits).message).toBe('"sonarcli stopping"'); // ngIRCd quotes a client's quit reason
      expect(stdout).toMatch(/^cli \(sandbox\): 2 row\(s\) written$/m);
      expect(proc.lines.some((l) => l.includes('irc logger: registered'))).toBe(true);
    } finally {
      await proc.stop('SIGKILL');
    }

    await writeFile(file, JSON.stringify({ networks: [{ name: 'x', host: 'h', nick: '9lives', channels: ['nochannel'] }] }));
    const bad = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        [cli, 'irc:logger', '--config', file],
        { cwd: repoRoot, env: { PATH: process.env.PATH ?? '', DATABASE_URL: db.url } },
        (err, _out, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stderr }),
      );
    });
    expect(bad.code).toBe(78);
    expect(bad.stderr).toContain('networks[0].nick: must be an IRC nick');
    expect(bad.stderr).toContain('networks[0].channels[0]: must be a channel name');
  }, 30_000);
});

describe('netsplit grouping (NetsplitTracker, fabricated quits and joins)', () => {
  const T0 = Date.parse('2026-01-02T03:04:05Z');
  const s = (seconds: number) => T0 + seconds * 1000;
  const tracker = () => {
    let n = 0;
    return new NetsplitTracker(() => `g${++n}`);
  };

  it('groups netsplit quits with the same reason at most 30 s apart; the first row leads', () => {
    const t = tracker();
    expect(t.quit('a', '*.net *.split', s(0))).toEqual({ eventType: 'NETSPLIT', netsplitGroup: 'g1', netsplitLeader: true });
    expect(t.quit('b', '*.net *.split', s(10))).toEqual({ eventType: 'NETSPLIT', netsplitGroup: 'g1', netsplitLeader: false });
    expect(t.quit('c', '*.net *.split', s(40))).toEqual({ eventType: 'NETSPLIT', netsplitGroup: 'g1', netsplitLeader: false }); // 30 s after b
    expect(t.quit('d', '*.net *.split', s(71))).toEqual({ eventType: 'NETSPLIT', netsplitGroup: 'g2', netsplitLeader: true }); // 31 s gap
    expect(t.quit('e', 'hub.example.net leaf.example.org', s(72))).toEqual({ eventType: 'NETSPLIT', netsplitGroup: 'g3', netsplitLeader: true });
    expect(t.quit('f', '*.net *.split', s(73))).toEqual({ eventType: 'NETSPLIT', netsplitGroup: 'g4', netsplitLeader: true }); // reason changed back
    expect(t.quit('g', '*.net *.split', s(60))).toEqual({ eventType: 'NETSPLIT', netsplitGroup: 'g5', netsplitLeader: true }); // clock went back
  });

  it('leaves ordinary quits alone', () => {
    const t = tracker();
    for (const reason of ['Quit: leaving', 'Ping timeout: 240 seconds', 'irc.example.net irc.example.net', null, '']) {
      expect(t.quit('x', reason, s(0))).toEqual({ eventType: 'QUIT', netsplitGroup: null, netsplitLeader: false });
    }
    expect(t.join('x', s(1))).toEqual({ eventType: 'JOIN', netsplitGroup: null, netsplitLeader: false });
  });

  it('turns the rejoin of split nicks within 30 minutes into NETMERGE bursts', () => {
    const t = tracker();
    t.quit('Alice', '*.net *.split', s(0));
    t.quit('bob', '*.net *.split', s(1));
    t.quit('carol', '*.net *.split', s(2));
    t.quit('dave', 'Quit: bye', s(3));
    expect(t.join('alice', s(600))).toEqual({ eventType: 'NETMERGE', netsplitGroup: 'g2', netsplitLeader: true });
    expect(t.join('bob', s(620))).toEqual({ eventType: 'NETMERGE', netsplitGroup: 'g2', netsplitLeader: false });
    expect(t.join('alice', s(621))).toEqual({ eventType: 'JOIN', netsplitGroup: null, netsplitLeader: false }); // merged once only
    expect(t.join('dave', s(622))).toEqual({ eventType: 'JOIN', netsplitGroup: null, netsplitLeader: false });
    expect(t.join('carol', s(2 + NETMERGE_WINDOW_S + 1))).toEqual({ eventType: 'JOIN', netsplitGroup: null, netsplitLeader: false }); // too late
    expect(t.pending).toBe(0);

    const u = tracker();
    u.quit('a', '*.net *.split', s(0));
    u.quit('b', '*.net *.split', s(0));
    expect(u.join('a', s(100))).toMatchObject({ eventType: 'NETMERGE', netsplitGroup: 'g2', netsplitLeader: true });
    expect(u.join('b', s(140))).toMatchObject({ eventType: 'NETMERGE', netsplitGroup: 'g3', netsplitLeader: true }); // 40 s later: a new merge burst
  });
});

describe('logger configuration', () => {
  const base = { name: 'libera', host: 'irc.libera.chat', nick: 'sonarlog' };

  it('fills in defaults', () => {
    expect(parseIrcLoggerConfig({ networks: [base] })).toEqual({
      networks: [
        {
          ...base,
          source: 'production',
          port: 6697,
          tls: true,
          tlsVerify: true,
          realname: 'sonar archive',
          password: null,
          sasl: null,
          channels: [],
          reconnectMaxWaitMs: 300_000,
        },
      ],
      quitMessage: 'sonar archive logger stopping',
    });
  });

  it('names every bad field', () => {
    const issues = (value: unknown) => {
      try {
        parseIrcLoggerConfig(value);
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        return (err as ConfigError).issues;
      }
      throw new Error('no ConfigError');
    };
    expect(issues({})).toEqual(['IRC_LOGGER_CONFIG: networks: Invalid input: expected array, received undefined']);
    expect(issues({ networks: [] })).toEqual(['IRC_LOGGER_CONFIG: networks: must list at least one network']);
    const many = issues({
      networks: [
        { ...base, port: 0, source: 'elsewhere', sasl: { account: 'x' }, extra: 1 },
        { ...base, nick: 'has space' },
      ],
    });
    expect(many.map((i) => i.split(':').slice(0, 2).join(':'))).toEqual(
      expect.arrayContaining([
        'IRC_LOGGER_CONFIG: networks[0].port',
        'IRC_LOGGER_CONFIG: networks[0].source',
        'IRC_LOGGER_CONFIG: networks[0].sasl.password',
        'IRC_LOGGER_CONFIG: networks[0]',
        'IRC_LOGGER_CONFIG: networks[1].nick',
      ]),
    );
    expect(many.join('\n')).toContain('"extra"');
    expect(issues({ networks: [{ ...base, channels: ['#a', '#b', '#A'] }] })).toEqual(['IRC_LOGGER_CONFIG: networks[0].channels[2]: "#A" is listed twice']);
    expect(issues({ networks: [base, { ...base, name: 'LIBERA' }] })).toEqual(['IRC_LOGGER_CONFIG: networks[1].name: network "LIBERA" is configured twice']);
  });

  it('reads the file IRC_LOGGER_CONFIG names, and says when it cannot', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'sonar-irc-config-'));
    try {
      const good = path.join(dir, 'good.json');
      await writeFile(good, JSON.stringify({ networks: [{ ...base, channels: ['#a'] }] }));
      expect(loadIrcLoggerConfig(good).networks[0]!.channels).toEqual(['#a']);
      const broken = path.join(dir, 'broken.json');
      await writeFile(broken, '{"networks": [');
      expect(() => loadIrcLoggerConfig(broken)).toThrow(/IRC_LOGGER_CONFIG \(.*broken\.json\): not valid JSON/);
      expect(() => loadIrcLoggerConfig(path.join(dir, 'missing.json'))).toThrow(/cannot read the file \(ENOENT\)/);
      expect(loadConfig(testEnv(db, { IRC_LOGGER_CONFIG: good })).IRC_LOGGER_CONFIG).toBe(good);
      expect(loadConfig(testEnv(db)).IRC_LOGGER_CONFIG).toBeUndefined();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('the example file in deploy/ is valid', () => {
    const cfg = loadIrcLoggerConfig(path.join(repoRoot, 'deploy/irc-logger.example.json'));
    expect(cfg.networks.length).toBeGreaterThan(0);
  });
});
