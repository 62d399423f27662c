import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { watchRedis, type OutageLog } from '../infra/redis-watch.js';

/**
 * Credential lookups reused for a short time (AUTH_CACHE_SECONDS), so that a busy client's requests
 * do not each cost a PostgreSQL round trip for the same user or key.
 *
 * Revocation: every change to users, their permissions or DNS API keys made through an
 * `AccountService` in this process (HTTP admin routes, the CLI's in-process calls, tests) calls
 * `credentialsChanged()`, which empties every cache in the process at once and, where the process
 * linked Redis (`connectCredentialChanges`: every coordinator; `publishCredentialChangesTo`: the
 * admin CLI), tells the other coordinators over Redis pub/sub, which empty theirs as the message
 * arrives (a round trip through Redis). A change Redis did not carry (SQL by hand, a CLI without
 * REDIS_URL, a message lost in a Redis outage) applies when the entry is older than the cache's
 * time, so within AUTH_CACHE_SECONDS; a subscriber that reconnects empties its caches too, since it
 * may have missed news.
 */
let generation = 0;
const links = new Set<{ redis: Redis; channel: string; log: OutageLog }>();
/** This process's mark on the messages it publishes (its own come back and are left out). */
const origin = randomUUID();

/** A user, a permission or a key changed: every credential cache of this process forgets what it holds, and so do the other coordinators'. */
export function credentialsChanged(): void {
  generation++;
  for (const { redis, channel, log } of links) {
    redis.publish(channel, origin).catch((err: unknown) => log.warn({ err }, 'credential change publish failed'));
  }
}

/** Publishes this process's credential changes on `channel` (the admin CLI: it keeps no cache); returns the unlink. */
export function publishCredentialChangesTo(redis: Redis, channel: string, log: OutageLog): () => void {
  const link = { redis, channel, log };
  links.add(link);
  return () => links.delete(link);
}

/**
 * Shares credential changes with the other coordinators over Redis pub/sub on `channel`: publishes
 * this process's and empties the caches on theirs. Returns the disconnect.
 */
export async function connectCredentialChanges(redis: Redis, channel: string, log: OutageLog): Promise<() => Promise<void>> {
  const subscriber = watchRedis(redis.duplicate(), log, 'credential-changes');
  let subscribed = false;
  subscriber.on('message', (_channel: string, from: string) => {
    if (from !== origin) generation++;
  });
  subscriber.on('ready', () => {
    if (subscribed) generation++;
  });
  await subscriber.subscribe(channel);
  subscribed = true;
  const unlink = publishCredentialChangesTo(redis, channel, log);
  return async () => {
    unlink();
    await subscriber.quit().catch(() => undefined);
  };
}

/** The most entries one cache holds; the oldest go first. */
const MAX_ENTRIES = 10_000;

export class CredentialCache<K, V> {
  private readonly entries = new Map<K, { value: V; at: number; generation: number }>();

  /**
   * @param ttlMs how long an entry is used (0: never cached)
   * @param keep whether a loaded value may be kept (unknown keys are not: they would only fill the cache)
   */
  constructor(
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
    private readonly keep: (value: V) => boolean = () => true,
  ) {}

  async get(key: K, load: () => Promise<V>): Promise<V> {
    if (this.ttlMs <= 0) return load();
    const now = this.now();
    const hit = this.entries.get(key);
    if (hit && hit.generation === generation && now - hit.at < this.ttlMs) return hit.value;
    const seen = generation;
    const value = await load();
    // A change while it loaded: what was read may be older than the change, so it is not kept.
    if (seen === generation && this.keep(value)) {
      this.entries.delete(key);
      if (this.entries.size >= MAX_ENTRIES) {
        const oldest = this.entries.keys().next();
        if (!oldest.done) this.entries.delete(oldest.value);
      }
      // Aged from before the read began: never trusted for longer than the time it promises.
      this.entries.set(key, { value, at: now, generation: seen });
    } else if (hit) this.entries.delete(key);
    return value;
  }
}
