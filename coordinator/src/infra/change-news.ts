import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { watchRedis, type OutageLog } from './redis-watch.js';

/**
 * "Something changed" news for the caches of one kind of data, in this process and in every other
 * process sharing the database (the coordinators, the admin CLI).
 *
 * A writer calls `changed()` once its transaction has committed, in its own process, before it
 * answers: `generation` moves at once (so a read that starts after the write returns never takes
 * an answer cached before it), and the news goes out on Redis pub/sub to the processes linked with
 * `connect` (which count it as their own change) and `publishTo` (which only send). A subscriber
 * that reconnects counts a change too: it may have missed news. A change Redis did not carry (SQL
 * by hand, a process without Redis, a message lost in an outage) reaches the caches only through
 * their own time limits.
 */
export class ChangeNews {
  /** Counts the changes this process knows of: its own, other processes', and reconnections. */
  generation = 0;
  private readonly listeners = new Set<() => void>();
  private readonly links = new Set<{ redis: Redis; channel: string; log: OutageLog }>();
  /** This process's mark on the messages it publishes (its own come back and are left out). */
  private readonly origin = randomUUID();

  /** @param name the Redis subscriber's name in outage logs */
  constructor(private readonly name: string) {}

  /** A change committed here: count it now and tell the linked processes. */
  changed(): void {
    this.bump();
    for (const { redis, channel, log } of this.links) {
      redis.publish(channel, this.origin).catch((err: unknown) => log.warn({ err }, `${this.name} publish failed`));
    }
  }

  /** Calls `fn` on every change (this process's or another's); returns the unsubscribe. */
  onChange(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Shares changes over Redis pub/sub on `channel`: publishes this process's and counts the others'. Returns the disconnect. */
  async connect(redis: Redis, channel: string, log: OutageLog): Promise<() => Promise<void>> {
    const subscriber = watchRedis(redis.duplicate(), log, this.name);
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

  /** Publishes this process's changes on `channel` (a process that keeps no cache, such as the admin CLI); returns the unlink. */
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
