/**
 * Live chat-log logger: a bot per configured network that joins the configured channels and
 * writes every event as it happens through IrcEventStore, with the same row conventions as the
 * file importer (parsers/types.ts): PRIVMSG/ACTION/NOTICE nick=sender; JOIN/PART/QUIT with the
 * reason; NICK old→toNick; KICK op→toNick with the reason; MODE '+o nick' with its arguments in
 * `target`; TOPIC changes; NETSPLIT/NETMERGE bursts. QUIT and NICK arrive without a channel: the
 * bot keeps each channel's member list (NAMES, joins, parts, kicks, quits, nick changes) and
 * writes one row per channel the user was in. Private messages go to a "channel" named after the
 * other nick; the bot's own rows there carry `target` = that nick.
 *
 * Writes are queued per network and never throw into the IRC client's handlers: a failed write is
 * logged, retried at once, then retried with backoff while the rows stay queued (bounded).
 * Reconnects use irc-framework's auto-reconnect (exponential backoff, capped); where it gives up
 * (the first connection failed, or a connection dropped within seconds of registering) the logger
 * schedules the next attempt itself, with the same backoff. Channels are joined again on every
 * registration.
 */
import { lower, NetworkLogger, type IrcLiveLoggerOptions, type IrcNetworkStatus } from './live/network-logger.js';

export * from './live/config.js';
export * from './live/netsplit-tracker.js';
export type { IrcLiveLoggerOptions, IrcNetworkStatus, LiveEventStore } from './live/network-logger.js';

/**
 * Logs the configured networks' channels into the chat-log archive until stopped. `start()`
 * resolves once the archive rows for the networks exist and the connections are under way
 * (joining happens in the background, with reconnects); `stop()` sends QUIT and waits for the
 * queued rows to be written.
 */
export class IrcLiveLogger {
  private readonly networks: NetworkLogger[];
  private started = false;
  private stopping: Promise<void> | null = null;

  constructor(private readonly opts: IrcLiveLoggerOptions) {
    this.networks = opts.config.networks.map((n) => new NetworkLogger(n, opts.store, opts.logger));
  }

  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    for (const n of this.networks) await n.prepare();
    for (const n of this.networks) n.connect();
  }

  stop(): Promise<void> {
    this.stopping ??= Promise.all(this.networks.map((n) => n.stop(this.opts.config.quitMessage, this.opts.flushTimeoutMs ?? 10_000))).then(() => undefined);
    return this.stopping;
  }

  status(): IrcNetworkStatus[] {
    return this.networks.map((n) => n.status());
  }

  /** Resolves true once every network's queued rows are written (false after `timeoutMs`). */
  async flush(timeoutMs = 10_000): Promise<boolean> {
    return (await Promise.all(this.networks.map((n) => n.flush(timeoutMs)))).every(Boolean);
  }

  /** The bot says something (to a channel or a nick); logged as its own row. */
  say(network: string, target: string, text: string): void {
    this.network(network).send('PRIVMSG', target, text);
  }

  action(network: string, target: string, text: string): void {
    this.network(network).send('ACTION', target, text);
  }

  notice(network: string, target: string, text: string): void {
    this.network(network).send('NOTICE', target, text);
  }

  private network(name: string): NetworkLogger {
    const n = this.networks.find((x) => lower(x.cfg.name) === lower(name));
    if (!n) throw new Error(`no network "${name}" in the logger configuration`);
    return n;
  }
}
