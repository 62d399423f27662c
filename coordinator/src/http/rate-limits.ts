import type { FastifyInstance } from 'fastify';

/** The budgets that several routes share; each is counted per client address. */
export type SharedBucket = 'login' | 'dns' | 'tokens' | 'admin' | 'dyndns' | 'guestbook' | 'irc';

/**
 * An onRequest hook that counts every route it guards against one budget per client address
 * (`max` requests a minute, in Redis under the coordinator's `rl:` prefix). A route-level
 * `config.rateLimit` would give each route (and each method) its own counter, so two sign-in
 * routes would allow twice the configured attempts; here the key is the bucket name and the
 * address, whatever route the request takes. Over the budget: 429 `rate_limited` with Retry-After,
 * in the error shape of the route's area.
 */
export function sharedRateLimit(app: FastifyInstance, bucket: SharedBucket, max: number) {
  return app.rateLimit({ max, timeWindow: 60_000, keyGenerator: (req) => `${bucket}:${req.ip}` });
}

/**
 * The Redis key under which `sharedRateLimit` counts `bucket` for one client address (the store
 * prefixes each limiter's keys with its route's method and URL, which a shared limiter has not).
 * Tests use it to stretch a counting window instead of racing the clock.
 */
export function sharedBucketKey(redisKeyPrefix: string, bucket: SharedBucket, ip: string): string {
  return `${redisKeyPrefix}rl:undefinedundefined-${bucket}:${ip}`;
}

/** The shared budgets of read-heavy APIs, counted per coordinator between syncs (rate-limit-store.ts `SyncedCounters`). */
const SYNCED_BUCKETS: readonly SharedBucket[] = ['irc', 'dns'];

/**
 * Which counters may be synced instead of counted in Redis on every request: the chat-log, DNS and
 * speech API budgets, and route limits of GET routes. Sign-in, token, admin, guestbook and dyndns budgets and
 * the route limits of every other method stay exact (one Redis round trip per request).
 * `limiter` is the store's route part of the key (`undefinedundefined-` for a shared budget).
 */
export function syncedRateLimit(limiter: string, key: string): boolean {
  if (limiter === 'undefinedundefined-') return SYNCED_BUCKETS.some((bucket) => key.startsWith(`${bucket}:`));
  // The speech API's group (policy.ts SPEECH_RATE_LIMIT): mostly reads and status polls.
  if (limiter === 'group:speech-api-') return true;
  return limiter.startsWith('GET');
}
