import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Orm } from '../db/orm.js';
import { watchRedis, type OutageLog } from '../infra/redis-watch.js';

/**
 * News that the chat-log archive changed, for the caches of its answers (IrcSearchCache).
 *
 * One per database connection (per `Orm`): every writer of the archive's tables (the event store
 * behind the importer and the live logger, corrections, the alias table, the common-terms
 * refresh) calls `changed()` once its transaction has committed, in its own process, before it
 * answers. That bumps `generation` at once, so a read that starts after the write returns can
 * never get an answer cached before it, and publishes the news on Redis (when a coordinator
 * connected it, see `connect`), where every other coordinator sharing the database bumps its own.
 */
export class IrcArchiveChanges {
  private static readonly byOrm = new WeakMap<Orm, IrcArchiveChanges>();

  /** The archive changes seen through this `Orm` (one instance per `Orm`, so writers need no wiring). */
  static of(orm: Orm): IrcArchiveChanges {
    let changes = IrcArchiveChanges.byOrm.get(orm);
    if (!changes) IrcArchiveChanges.byOrm.set(orm, (changes = new IrcArchiveChanges()));
    return changes;
  }

  /** Counts the changes this process knows of: its own writes, others' from Redis. */
  generation = 0;
  private readonly listeners = new Set<() => void>();
  private readonly links = new Set<{ redis: Redis; channel: string; log: OutageLog }>();
  /** This process's mark on the messages it publishes (its own come back and are left out). */
  private readonly origin = randomUUID();

  /** A write to the archive committed here: bump now, tell the other coordinators. */
  changed(): void {
    this.bump();
    for (const { redis, channel, log } of this.links) {
      redis.publish(channel, this.origin).catch((err: unknown) => log.warn({ err }, 'chat-log change publish failed'));
    }
  }

  /** Calls `fn` on every change (own or another process's); returns the unsubscribe. */
  onChange(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /**
   * Shares changes with the other coordinators over Redis pub/sub on `channel`: publishes this
   * process's, and counts theirs. A subscriber that lost its connection may have missed news, so
   * its reconnection counts as a change too. Returns the disconnect.
   */
  async connect(redis: Redis, channel: string, log: OutageLog): Promise<() => Promise<void>> {
    const subscriber = watchRedis(redis.duplicate(), log, 'irc-archive-changes');
    let subscribed = false;
    subscriber.on('message', (_channel: string, origin: string) => {
      if (origin !== this.origin) this.bump();
    });
    subscriber.on('ready', () => {
      if (subscribed) this.bump();
    });
    await subscriber.subscribe(channel);
    subscribed = true;
    const unlink = this.publishTo(redis, channel, log);
    return async () => {
      unlink();
      await subscriber.quit().catch(() => undefined);
    };
  }

  /** Publishes this process's changes on `channel` (the admin CLI's writers: they keep no cache); returns the unlink. */
  publishTo(redis: Redis, channel: string, log: OutageLog): () => void {
    const link = { redis, channel, log };
    this.links.add(link);
    return () => this.links.delete(link);
  }

  private bump(): void {
    this.generation += 1;
    for (const fn of this.listeners) fn();
  }
}
