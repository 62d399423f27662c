/**
 * The parts of irc-framework (which ships no types) that the live logger and its tests use. Event
 * payloads list only the fields read here; see the package's docs/events.md for the rest.
 * A test project that imports 'irc-framework' itself lists this file in its tsconfig.json `include`
 * (a hand-written .d.ts is not copied into dist/).
 */
declare module 'irc-framework' {
  export interface ClientOptions {
    host: string;
    port?: number;
    tls?: boolean;
    rejectUnauthorized?: boolean;
    nick: string;
    username?: string;
    /** Real name. */
    gecos?: string;
    /** Server password (PASS); also used for SASL PLAIN when `account` is not given. */
    password?: string;
    /** SASL PLAIN credentials; `{}` turns SASL off even when a server password is set. */
    account?: { account?: string; password?: string };
    encoding?: string;
    version?: string | null;
    enable_echomessage?: boolean;
    auto_reconnect?: boolean;
    auto_reconnect_max_wait?: number;
    auto_reconnect_max_retries?: number;
    ping_interval?: number;
    ping_timeout?: number;
    message_max_length?: number;
  }

  /** Common fields of user-originated events. */
  export interface UserEvent {
    nick: string;
    ident?: string;
    hostname?: string;
    /** Milliseconds since the epoch from the IRCv3 `server-time` tag, when the server sent one. */
    time?: number;
    tags?: Record<string, string>;
  }

  export interface MessageEvent extends UserEvent {
    /** True for messages from the server itself (no nick!user@host prefix). */
    from_server: boolean;
    /** Channel or nick the message was sent to (any STATUSMSG prefix removed). */
    target: string;
    message: string;
    reply(message: string): void;
  }

  export interface JoinEvent extends UserEvent {
    channel: string;
  }

  export interface PartEvent extends UserEvent {
    channel: string;
    message: string;
  }

  export interface KickEvent extends UserEvent {
    channel: string;
    kicked: string;
    message: string;
  }

  export interface QuitEvent extends UserEvent {
    message: string;
  }

  export interface NickEvent extends UserEvent {
    new_nick: string;
  }

  export interface ModeEvent {
    /** Channel or nick the modes apply to. */
    target: string;
    /** Setter's nick, or the server name. */
    nick: string;
    modes: Array<{ mode: string; param: string | null }>;
    raw_modes: string;
    raw_params: string[];
    time?: number;
  }

  /** A TOPIC change carries `nick`; the topic shown on join (RPL_TOPIC) does not. */
  export interface TopicEvent {
    channel: string;
    topic: string;
    nick?: string;
    time?: number;
  }

  export interface UserlistEvent {
    channel: string;
    users: Array<{ nick: string; modes: string[] }>;
  }

  export interface RegisteredEvent {
    nick: string;
  }

  export interface ReconnectingEvent {
    attempt: number;
    max_retries: number;
    wait: number;
  }

  export interface IrcErrorEvent {
    error: string;
    channel?: string;
    nick?: string;
    reason?: string;
  }

  type Listener<E> = (event: E) => void;

  export class Client {
    constructor(options?: Partial<ClientOptions>);
    readonly connected: boolean;
    readonly user: { nick: string };
    readonly options: ClientOptions;
    readonly network: { name?: string; cap: { isEnabled(cap: string): boolean } };
    connect(options?: ClientOptions): void;
    quit(message?: string): void;
    raw(...args: string[]): void;
    join(channel: string, key?: string): void;
    part(channel: string, message?: string): void;
    say(target: string, message: string): void;
    notice(target: string, message: string): void;
    action(target: string, message: string): string[];
    changeNick(nick: string): void;
    setTopic(channel: string, topic: string): void;
    mode(target: string, mode: string, extraArgs?: string | string[]): void;
    caseLower(text: string): string;

    on(event: 'privmsg' | 'notice' | 'action', listener: Listener<MessageEvent>): this;
    on(event: 'join', listener: Listener<JoinEvent>): this;
    on(event: 'part', listener: Listener<PartEvent>): this;
    on(event: 'kick', listener: Listener<KickEvent>): this;
    on(event: 'quit', listener: Listener<QuitEvent>): this;
    on(event: 'nick', listener: Listener<NickEvent>): this;
    on(event: 'mode', listener: Listener<ModeEvent>): this;
    on(event: 'topic', listener: Listener<TopicEvent>): this;
    on(event: 'userlist', listener: Listener<UserlistEvent>): this;
    on(event: 'registered' | 'connected', listener: Listener<RegisteredEvent>): this;
    on(event: 'reconnecting', listener: Listener<ReconnectingEvent>): this;
    on(event: 'irc error', listener: Listener<IrcErrorEvent>): this;
    on(event: 'nick in use', listener: Listener<{ nick: string; reason: string }>): this;
    on(event: 'sasl failed', listener: Listener<{ reason: string; message?: string }>): this;
    /** `close`: the connection ended and no reconnect is scheduled (argument: whether it ended with an error). */
    on(event: 'close', listener: (hadError: boolean) => void): this;
    on(event: 'socket close', listener: (err?: Error | false) => void): this;
    on(event: 'socket error', listener: (err: Error) => void): this;
    on(event: 'connecting' | 'socket connected' | 'ping timeout', listener: () => void): this;
    on(event: string, listener: (...args: any[]) => void): this;
    once(event: string, listener: (...args: any[]) => void): this;
    off(event: string, listener: (...args: any[]) => void): this;
    removeListener(event: string, listener: (...args: any[]) => void): this;
    removeAllListeners(event?: string): this;
  }
}
