/** One network's bot: IRC client, channel membership, event → row mapping and the write queue. */
import { createHash, randomUUID } from 'node:crypto';
import {
  Client,
  type JoinEvent,
  type KickEvent,
  type MessageEvent,
  type ModeEvent,
  type NickEvent,
  type PartEvent,
  type QuitEvent,
  type TopicEvent,
  type UserlistEvent,
} from 'irc-framework';
import type { Logger } from 'pino';
import type { IrcEventStore, IrcSource, NewIrcEvent } from '../event-store.js';
import { ARCHIVE_RANGE_TEXT, isArchiveInstant } from '../archive-dates.js';
import { isChannelName, stripControls, stripFormatting } from '../parsers/common.js';
import type { IrcEventType } from '../parsers/types.js';
import type { IrcLoggerConfig, IrcLoggerNetworkConfig } from './config.js';
import { liveNetsplitTracker, type NetsplitTracker } from './netsplit-tracker.js';
import { ping } from '../../db/sql.js';

/** What the logger needs of IrcEventStore (a wrapper can stand in for it in tests). */
export type LiveEventStore = Pick<IrcEventStore, 'ensureNetwork' | 'ensureChannel' | 'insert' | 'knex'>;

export interface IrcLiveLoggerOptions {
  config: IrcLoggerConfig;
  store: LiveEventStore;
  logger: Logger;
  /** How long `stop()` waits for queued rows to be written; default 10 s. */
  flushTimeoutMs?: number;
}

export interface IrcNetworkStatus {
  network: string;
  source: IrcSource;
  connected: boolean;
  registered: boolean;
  nick: string;
  /** Channels the bot is in now. */
  channels: string[];
  /** Rows waiting to be written. */
  queued: number;
  written: number;
  /** Rows given up on (queue overflow, rows the database refused, unwritten at stop). */
  dropped: number;
  /** Registrations so far (1 after the first connect; +1 per reconnect). */
  registrations: number;
}

/** Rows kept in memory per network while the database cannot be written. */
const MAX_QUEUED = 50_000;
const MAX_BATCH = 200;
const REJOIN_AFTER_KICK_MS = 10_000;
const CLOSE_WAIT_MS = 5_000;

/** UTC `YYYY-MM-DD HH:MM:SS.mmm`. */
const utcStamp = (ms: number) => new Date(ms).toISOString().slice(0, 23).replace('T', ' ');
export const lower = (s: string) => s.toLowerCase();
/** Exponential backoff with jitter: ~1 s, 2 s, 4 s … capped at `max`. */
const backoff = (attempt: number, max: number) => Math.min(1000 * 2 ** Math.min(attempt, 20), max) + Math.floor(Math.random() * 1000);
const orNull = (s: string | undefined | null) => (s ? s : null);

interface ChannelState {
  /** Name as stored (the configured spelling for configured channels). */
  name: string;
  /** Lower-cased nick → nick as last seen. */
  members: Map<string, string>;
  splits: NetsplitTracker;
  joined: boolean;
}

interface PendingRow {
  channel: string;
  row: NewIrcEvent;
}

type RowFields = Partial<Omit<NewIrcEvent, 'occurredAt' | 'lineHash'>> & { eventType: IrcEventType; nick: string | null };

/** One network's bot: IRC client, membership tracking and the write queue. */

export class NetworkLogger {
  readonly client: Client;
  private readonly log: Logger;
  private nick: string;
  private registered = false;
  private stopping = false;
  private registrations = 0;
  private nickAttempts = 0;
  private fallbackAttempts = 0;
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly channels = new Map<string, ChannelState>();
  private readonly configured = new Map<string, string>();
  private readonly privateNames = new Map<string, string>();
  private readonly channelIds = new Map<string, number>();
  private networkId: number | null = null;
  private queue: PendingRow[] = [];
  private draining: Promise<void> | null = null;
  private wake: (() => void) | null = null;
  private abandon = false;
  private overflowLogged = false;
  private written = 0;
  private dropped = 0;
  private closeWaiters: Array<() => void> = [];

  constructor(
    readonly cfg: IrcLoggerNetworkConfig,
    private readonly store: LiveEventStore,
    logger: Logger,
  ) {
    this.log = logger.child({ irc: cfg.name });
    this.nick = cfg.nick;
    for (const c of cfg.channels) this.configured.set(lower(c), c);
    this.client = new Client();
    this.bind();
  }

  /** Network and configured channel rows, so a database that cannot be reached fails the start. */
  async prepare(): Promise<void> {
    this.networkId = await this.store.ensureNetwork(this.cfg.source, this.cfg.name);
    for (const c of this.cfg.channels) this.channelIds.set(c, await this.store.ensureChannel(this.networkId, c));
  }

  connect(): void {
    const c = this.cfg;
    this.log.info({ host: c.host, port: c.port, tls: c.tls, nick: c.nick }, 'irc logger: connecting');
    this.client.connect({
      host: c.host,
      port: c.port,
      tls: c.tls,
      rejectUnauthorized: c.tlsVerify,
      nick: c.nick,
      username: c.username ?? c.nick,
      gecos: c.realname,
      ...(c.password ? { password: c.password } : {}),
      // `{}` keeps irc-framework from reusing the server password for SASL.
      account: c.sasl ? { account: c.sasl.account, password: c.sasl.password } : {},
      encoding: 'utf8',
      version: 'sonar archive logger',
      enable_echomessage: true,
      auto_reconnect: true,
      auto_reconnect_max_wait: c.reconnectMaxWaitMs,
      auto_reconnect_max_retries: Number.MAX_SAFE_INTEGER,
      ping_interval: 30,
      ping_timeout: 120,
    });
  }

  status(): IrcNetworkStatus {
    return {
      network: this.cfg.name,
      source: this.cfg.source,
      connected: this.client.connected,
      registered: this.registered,
      nick: this.nick,
      channels: [...this.channels.values()].filter((s) => s.joined).map((s) => s.name),
      queued: this.queue.length,
      written: this.written,
      dropped: this.dropped,
      registrations: this.registrations,
    };
  }

  /** Sends a message (or action/notice) and logs it as the bot's own row unless the server echoes it. */
  send(kind: 'PRIVMSG' | 'ACTION' | 'NOTICE', target: string, text: string): void {
    if (!this.registered) throw new Error(`not connected to ${this.cfg.name}`);
    if (kind === 'PRIVMSG') this.client.say(target, text);
    else if (kind === 'NOTICE') this.client.notice(target, text);
    else this.client.action(target, text);
    if (this.client.network.cap.isEnabled('echo-message')) return;
    const at = Date.now();
    for (const line of text.split(/\r\n|\n|\r/).filter(Boolean)) this.onMessage(kind, { nick: this.nick, target, message: line, time: at, from_server: false });
  }

  async stop(message: string, flushTimeoutMs: number): Promise<void> {
    this.stopping = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    const wasConnected = this.client.connected;
    const closed = new Promise<void>((resolve) => {
      if (!wasConnected) {
        resolve();
        return;
      }
      const t = setTimeout(resolve, CLOSE_WAIT_MS);
      this.closeWaiters.push(() => {
        clearTimeout(t);
        resolve();
      });
    });
    try {
      this.client.quit(message);
    } catch (err) {
      this.log.warn({ err }, 'irc logger: quit failed');
    }
    await closed;
    this.log.info('irc logger: disconnected (stopped)');
    if (!(await this.flush(flushTimeoutMs))) {
      this.abandon = true;
      this.wake?.();
      this.dropped += this.queue.length;
      this.log.error({ rows: this.queue.length }, 'irc logger: rows not written before stop were dropped');
      this.queue = [];
    }
  }

  /** Resolves true once every queued row is written, false after `timeoutMs`. */
  async flush(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (this.queue.length || this.draining) {
      if (Date.now() >= deadline) return false;
      const left = deadline - Date.now();
      await Promise.race([this.draining ?? Promise.resolve(), new Promise((r) => setTimeout(r, Math.min(left, 100)))]);
    }
    return true;
  }

  // ---- IRC events ------------------------------------------------------------------------------

  private bind() {
    const c = this.client;
    const guard =
      <A extends unknown[]>(what: string, fn: (...args: A) => void) =>
      (...args: A) => {
        try {
          fn(...args);
        } catch (err) {
          this.log.error({ err, event: what }, 'irc logger: event handling failed');
        }
      };
    c.on(
      'socket connected',
      guard('socket connected', () => this.log.debug('irc logger: socket connected')),
    );
    c.on(
      'registered',
      guard('registered', (e) => {
        this.nick = e.nick;
        this.registered = true;
        this.registrations += 1;
        this.nickAttempts = 0;
        this.fallbackAttempts = 0;
        this.log.info({ nick: e.nick, registrations: this.registrations }, 'irc logger: registered');
        for (const ch of this.cfg.channels) c.join(ch);
      }),
    );
    c.on(
      'reconnecting',
      guard('reconnecting', (e) => this.log.warn({ attempt: e.attempt, waitMs: e.wait }, 'irc logger: reconnecting')),
    );
    c.on(
      'socket error',
      guard('socket error', (err) => this.log.warn({ err: { message: err.message, code: (err as NodeJS.ErrnoException).code } }, 'irc logger: socket error')),
    );
    c.on(
      'socket close',
      guard('socket close', () => {
        const wasRegistered = this.registered;
        this.registered = false;
        for (const s of this.channels.values()) {
          s.joined = false;
          s.members.clear();
        }
        if (!this.stopping && wasRegistered) this.log.warn('irc logger: disconnected');
      }),
    );
    c.on(
      'close',
      guard('close', () => {
        const waiters = this.closeWaiters;
        this.closeWaiters = [];
        for (const w of waiters) w();
        if (this.stopping) return;
        // irc-framework gave up (first connection failed, or dropped right after registering).
        const wait = backoff(this.fallbackAttempts++, this.cfg.reconnectMaxWaitMs);
        this.log.warn({ waitMs: wait, attempt: this.fallbackAttempts }, 'irc logger: connection closed; reconnecting');
        this.later(wait, () => {
          if (!this.stopping && !this.client.connected) this.client.connect();
        });
      }),
    );
    c.on(
      'irc error',
      guard('irc error', (e) => {
        // The server answers our QUIT with ERROR; that one is expected.
        const level = this.stopping && e.error === 'irc' ? 'debug' : 'warn';
        this.log[level]({ error: e.error, channel: e.channel, nick: e.nick, reason: e.reason }, 'irc logger: server error reply');
      }),
    );
    c.on(
      'sasl failed',
      guard('sasl failed', (e) => this.log.error({ reason: e.reason, message: e.message }, 'irc logger: SASL authentication failed')),
    );
    c.on(
      'nick in use',
      guard('nick in use', () => {
        if (this.registered) return;
        this.nickAttempts += 1;
        const alt = `${this.cfg.nick.slice(0, 28)}${'_'.repeat(Math.min(this.nickAttempts, 3))}${this.nickAttempts > 3 ? this.nickAttempts : ''}`;
        this.log.warn({ nick: alt }, 'irc logger: nick in use; trying another');
        c.changeNick(alt);
      }),
    );

    c.on(
      'privmsg',
      guard('privmsg', (e) => this.onMessage('PRIVMSG', e)),
    );
    c.on(
      'action',
      guard('action', (e) => this.onMessage('ACTION', e)),
    );
    c.on(
      'notice',
      guard('notice', (e) => this.onMessage('NOTICE', e)),
    );
    c.on(
      'join',
      guard('join', (e) => this.onJoin(e)),
    );
    c.on(
      'part',
      guard('part', (e) => this.onPart(e)),
    );
    c.on(
      'kick',
      guard('kick', (e) => this.onKick(e)),
    );
    c.on(
      'quit',
      guard('quit', (e) => this.onQuit(e)),
    );
    c.on(
      'nick',
      guard('nick', (e) => this.onNick(e)),
    );
    c.on(
      'mode',
      guard('mode', (e) => this.onMode(e)),
    );
    c.on(
      'topic',
      guard('topic', (e) => this.onTopic(e)),
    );
    c.on(
      'userlist',
      guard('userlist', (e) => this.onUserlist(e)),
    );
  }

  private isSelf(nick: string | undefined | null) {
    return !!nick && lower(nick) === lower(this.nick);
  }

  private channel(name: string): ChannelState {
    const key = lower(name);
    let s = this.channels.get(key);
    if (!s) {
      s = { name: this.configured.get(key) ?? name, members: new Map(), splits: liveNetsplitTracker(), joined: false };
      this.channels.set(key, s);
    }
    return s;
  }

  private privateName(nick: string): string {
    const key = lower(nick);
    let name = this.privateNames.get(key);
    if (!name) {
      name = nick;
      this.privateNames.set(key, name);
    }
    return name;
  }

  private onMessage(kind: 'PRIVMSG' | 'ACTION' | 'NOTICE', e: Pick<MessageEvent, 'nick' | 'target' | 'message' | 'time' | 'from_server'>): void {
    // Server notices (connection banners, *** lines) are not conversation.
    if (e.from_server || !e.nick || !e.target || (kind === 'NOTICE' && (!this.registered || e.nick.includes('.')))) return;
    const at = e.time ?? Date.now();
    const text = stripFormatting(e.message ?? '');
    const self = this.isSelf(e.nick);
    if (isChannelName(e.target)) {
      const s = this.channel(e.target);
      const toNick = kind === 'NOTICE' ? null : addressee(s, text, e.nick);
      this.record(s.name, at, { eventType: kind, nick: e.nick, messageText: text, toNick });
      return;
    }
    // A private conversation is stored under the other party's nick.
    if (!self && !this.isSelf(e.target)) return; // e.g. server-wide $mask broadcasts
    const name = this.privateName(self ? e.target : e.nick);
    this.record(name, at, { eventType: kind, nick: e.nick, messageText: text, target: self ? name : null });
  }

  private onJoin(e: JoinEvent) {
    if (!e.channel || !e.nick) return;
    const at = e.time ?? Date.now();
    const s = this.channel(e.channel);
    const self = this.isSelf(e.nick);
    if (self) {
      s.members.clear();
      s.joined = true;
      this.log.info({ channel: s.name }, 'irc logger: joined');
    }
    s.members.set(lower(e.nick), e.nick);
    const mark = self ? null : s.splits.join(e.nick, at);
    this.record(s.name, at, {
      eventType: mark?.eventType ?? 'JOIN',
      nick: e.nick,
      netsplitGroup: mark?.netsplitGroup ?? null,
      netsplitLeader: mark?.netsplitLeader ?? false,
    });
  }

  private onPart(e: PartEvent) {
    if (!e.channel || !e.nick) return;
    const s = this.channel(e.channel);
    this.record(s.name, e.time ?? Date.now(), { eventType: 'PART', nick: e.nick, messageText: orNull(stripFormatting(e.message ?? '')) });
    s.members.delete(lower(e.nick));
    if (this.isSelf(e.nick)) this.leave(s);
  }

  private onKick(e: KickEvent) {
    if (!e.channel || !e.kicked) return;
    const s = this.channel(e.channel);
    this.record(s.name, e.time ?? Date.now(), {
      eventType: 'KICK',
      nick: e.nick || null,
      toNick: e.kicked,
      messageText: orNull(stripFormatting(e.message ?? '')),
    });
    s.members.delete(lower(e.kicked));
    if (this.isSelf(e.kicked)) {
      this.leave(s);
      const configured = this.configured.get(lower(e.channel));
      if (configured) {
        this.log.warn({ channel: s.name, by: e.nick, reason: e.message }, 'irc logger: kicked; rejoining soon');
        this.later(REJOIN_AFTER_KICK_MS, () => {
          if (this.registered && !s.joined) this.client.join(configured);
        });
      }
    }
  }

  private leave(s: ChannelState) {
    s.joined = false;
    s.members.clear();
    this.log.info({ channel: s.name }, 'irc logger: left channel');
  }

  private onQuit(e: QuitEvent) {
    if (!e.nick || this.isSelf(e.nick)) return;
    const at = e.time ?? Date.now();
    const key = lower(e.nick);
    const reason = orNull(stripFormatting(e.message ?? ''));
    for (const s of this.channels.values()) {
      if (!s.members.has(key)) continue;
      const mark = s.splits.quit(e.nick, reason, at);
      this.record(s.name, at, {
        eventType: mark.eventType,
        nick: e.nick,
        messageText: reason,
        netsplitGroup: mark.netsplitGroup,
        netsplitLeader: mark.netsplitLeader,
      });
      s.members.delete(key);
    }
  }

  private onNick(e: NickEvent) {
    if (!e.nick || !e.new_nick) return;
    const at = e.time ?? Date.now();
    const key = lower(e.nick);
    if (this.isSelf(e.nick)) this.nick = e.new_nick;
    for (const s of this.channels.values()) {
      if (!s.members.has(key)) continue;
      this.record(s.name, at, { eventType: 'NICK', nick: e.nick, toNick: e.new_nick });
      s.members.delete(key);
      s.members.set(lower(e.new_nick), e.new_nick);
    }
  }

  private onMode(e: ModeEvent) {
    if (!e.target || !isChannelName(e.target)) return; // user modes
    const args = (e.raw_params ?? []).filter(Boolean).join(' ');
    const s = this.channel(e.target);
    this.record(s.name, e.time ?? Date.now(), {
      eventType: 'MODE',
      nick: e.nick || null,
      messageText: args ? `${e.raw_modes} ${args}` : e.raw_modes,
      target: orNull(args),
    });
  }

  private onTopic(e: TopicEvent) {
    // Only changes: the topic shown on join (RPL_TOPIC) has no setter.
    if (!e.channel || e.nick === undefined) return;
    const s = this.channel(e.channel);
    this.record(s.name, e.time ?? Date.now(), { eventType: 'TOPIC', nick: e.nick || null, messageText: stripFormatting(e.topic ?? '') });
  }

  private onUserlist(e: UserlistEvent) {
    if (!e.channel) return;
    const s = this.channel(e.channel);
    s.members = new Map(e.users.filter((u) => u.nick).map((u) => [lower(u.nick), u.nick]));
  }

  private later(ms: number, fn: () => void) {
    const t = setTimeout(() => {
      this.timers.delete(t);
      try {
        fn();
      } catch (err) {
        this.log.error({ err }, 'irc logger: timer failed');
      }
    }, ms);
    this.timers.add(t);
  }

  // ---- writing ---------------------------------------------------------------------------------

  private record(channel: string, atMs: number, f: RowFields) {
    // The archive's days are one rule (archive-dates.ts): a server-time tag or a clock outside
    // them would store a row no page can show (or that PostgreSQL refuses).
    if (!isArchiveInstant(atMs)) {
      this.log.warn({ channel, at: atMs }, `irc logger: a ${f.eventType} row dated outside ${ARCHIVE_RANGE_TEXT} was not stored`);
      return;
    }
    const row: NewIrcEvent = {
      eventType: f.eventType,
      occurredAt: utcStamp(atMs),
      // Control characters as the importer removes them (NUL cannot be stored; BEL, ESC, … are shown by no reader).
      nick: f.nick === null ? null : stripControls(f.nick).text,
      messageText: f.messageText == null ? null : stripControls(f.messageText).text,
      target: f.target == null ? null : stripControls(f.target).text,
      toNick: f.toNick == null ? null : stripControls(f.toNick).text,
      netsplitGroup: f.netsplitGroup ?? null,
      netsplitLeader: f.netsplitLeader ?? false,
      // Random per row: live rows have no file line to be idempotent on, but a retried write of
      // a queued row keeps its key and cannot be stored twice.
      lineHash: createHash('sha256')
        .update(`live\n${this.cfg.source}\n${this.cfg.name}\n${lower(channel)}\n${randomUUID()}`)
        .digest(),
    };
    if (this.queue.length >= MAX_QUEUED || this.abandon) {
      this.dropped += 1;
      if (!this.overflowLogged) {
        this.overflowLogged = true;
        this.log.error({ queued: this.queue.length }, 'irc logger: write queue full; dropping new rows until the database catches up');
      }
      return;
    }
    this.queue.push({ channel, row });
    this.kick();
  }

  private kick() {
    if (this.draining || this.abandon) return;
    this.draining = this.drain()
      .catch((err: unknown) => this.log.error({ err }, 'irc logger: writer failed'))
      .finally(() => {
        this.draining = null;
        if (this.queue.length && !this.abandon) this.kick();
      });
  }

  private async drain(): Promise<void> {
    let failures = 0;
    while (this.queue.length && !this.abandon) {
      const batch = this.queue.slice(0, MAX_BATCH);
      try {
        await this.write(batch);
        this.queue.splice(0, batch.length);
        this.written += batch.length;
        if (failures) this.log.info({ rows: batch.length, attempts: failures + 1 }, 'irc logger: database write succeeded after retrying');
        failures = 0;
        this.overflowLogged = false;
      } catch (err) {
        failures += 1;
        this.log.error({ err, rows: batch.length, queued: this.queue.length, attempt: failures }, 'irc logger: database write failed; rows stay queued');
        if (failures >= 3 && (await this.databaseAnswers())) {
          // The database is up, so the batch itself is refused: keep the rows that can be written.
          await this.writeOneByOne(batch);
          this.queue.splice(0, batch.length);
          failures = 0;
          continue;
        }
        // First retry at once (a dropped pooled connection), then back off while the rows wait.
        await this.sleep(failures === 1 ? 200 : backoff(failures - 2, 30_000));
      }
    }
  }

  private async write(batch: PendingRow[]) {
    this.networkId ??= await this.store.ensureNetwork(this.cfg.source, this.cfg.name);
    const byChannel = new Map<string, NewIrcEvent[]>();
    for (const { channel, row } of batch) {
      const rows = byChannel.get(channel);
      if (rows) rows.push(row);
      else byChannel.set(channel, [row]);
    }
    for (const [channel, rows] of byChannel) await this.store.insert(this.networkId, await this.channelId(channel), rows);
  }

  private async writeOneByOne(batch: PendingRow[]) {
    for (const item of batch) {
      try {
        await this.write([item]);
        this.written += 1;
      } catch (err) {
        this.dropped += 1;
        this.log.error({ err, channel: item.channel, eventType: item.row.eventType }, 'irc logger: the database refused a row; dropped');
      }
    }
  }

  private async channelId(name: string): Promise<number> {
    let id = this.channelIds.get(name);
    if (id === undefined) {
      id = await this.store.ensureChannel(this.networkId!, name);
      this.channelIds.set(name, id);
    }
    return id;
  }

  private async databaseAnswers(): Promise<boolean> {
    try {
      await ping(this.store.knex());
      return true;
    } catch {
      return false;
    }
  }

  private sleep(ms: number) {
    return new Promise<void>((resolve) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        resolve();
      }
      this.wake = done;
    }).finally(() => {
      this.wake = null;
    });
  }
}

/** `nick: …` or `nick, …` addressed to someone in the channel (not the sender), as the importer finds it. */
function addressee(s: ChannelState, text: string, sender: string): string | null {
  const m = /^([^\s:,]{1,32})[:,](?:\s|$)/.exec(text);
  if (!m) return null;
  const who = s.members.get(lower(m[1]!));
  return who && lower(who) !== lower(sender) ? who : null;
}
