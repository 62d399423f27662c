import type { FastifyBaseLogger } from 'fastify';
import type { FastifyRateLimitOptions, FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import type { Redis } from 'ioredis';

type IncrCallback = (error: Error | null, result?: { current: number; ttl: number }) => void;

/** INCR with the window set on the first hit; answers the count and the window's remaining milliseconds. */
const INCR_SCRIPT = `
local current = redis.call('INCR', KEYS[1])
if current == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return {current, tonumber(ARGV[1])}
end
return {current, redis.call('PTTL', KEYS[1])}
`;

/** INCRBY of a synced counter's requests since the last sync, with the same window rule. */
const INCRBY_SCRIPT = `
local current = redis.call('INCRBY', KEYS[1], ARGV[2])
local ttl = redis.call('PTTL', KEYS[1])
if current == tonumber(ARGV[2]) or ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {current, ttl}
`;

/** The most client keys the in-process counters remember during an outage; the oldest go first. */
const FALLBACK_KEYS = 20_000;

/** The most synced client keys one coordinator holds between syncs; the oldest go first. */
const SYNCED_KEYS = 200_000;

/** How often a coordinator sends its synced counters' new requests to Redis (one pipeline). */
export const RATE_LIMIT_SYNC_MS = 250;

/** Counters of one coordinator, used only while Redis cannot count. */
class InProcessCounters {
  private readonly windows = new Map<string, { count: number; endsAt: number }>();

  constructor(private readonly now: () => number) {}

  incr(key: string, timeWindow: number): { current: number; ttl: number } {
    const now = this.now();
    let w = this.windows.get(key);
    if (!w || w.endsAt <= now) {
      this.windows.delete(key);
      w = { count: 0, endsAt: now + timeWindow };
      if (this.windows.size >= FALLBACK_KEYS) {
        const oldest = this.windows.keys().next();
        if (!oldest.done) this.windows.delete(oldest.value);
      }
      this.windows.set(key, w);
    }
    w.count += 1;
    return { current: w.count, ttl: w.endsAt - now };
  }
}

/**
 * Counters of budgets that need not be exact across coordinators (read routes): each request is
 * counted here and answered at once from the window's count as Redis last reported it plus this
 * coordinator's requests since; every RATE_LIMIT_SYNC_MS the new requests of every key go to Redis in
 * one pipeline (INCRBY), and the totals come back. Within one coordinator the count is exact; a
 * client spreading requests over N coordinators gets at most N × one sync interval's requests
 * beyond the budget. While Redis cannot answer, the counts simply stay here (as the fallback does).
 */
class SyncedCounters {
  private readonly windows = new Map<string, { known: number; pending: number; endsAt: number; window: number }>();
  private timer: NodeJS.Timeout | null = null;
  private syncing = false;

  constructor(
    private readonly redis: Redis,
    private readonly now: () => number,
    private readonly onError: (err: unknown) => void,
    private readonly onSynced: () => void,
  ) {}

  incr(key: string, timeWindow: number): { current: number; ttl: number } {
    const now = this.now();
    let w = this.windows.get(key);
    if (!w || w.endsAt <= now) {
      this.windows.delete(key);
      w = { known: 0, pending: 0, endsAt: now + timeWindow, window: timeWindow };
      if (this.windows.size >= SYNCED_KEYS) {
        const oldest = this.windows.keys().next();
        if (!oldest.done) this.windows.delete(oldest.value);
      }
      this.windows.set(key, w);
    }
    w.pending += 1;
    this.timer ??= setTimeout(() => void this.sync(), RATE_LIMIT_SYNC_MS).unref();
    return { current: w.known + w.pending, ttl: w.endsAt - now };
  }

  private async sync(): Promise<void> {
    this.timer = null;
    if (this.syncing) {
      this.timer = setTimeout(() => void this.sync(), RATE_LIMIT_SYNC_MS).unref();
      return;
    }
    const now = this.now();
    const batch: Array<[key: string, window: { known: number; pending: number; endsAt: number; window: number }, sent: number]> = [];
    for (const [key, w] of this.windows) {
      if (w.pending > 0) batch.push([key, w, w.pending]);
      else if (w.endsAt <= now) this.windows.delete(key);
    }
    if (!batch.length) return;
    // A coordinator shutting down (connection ended on purpose): the counts stay here, unreported.
    if (this.redis.status === 'end') return;
    if (this.redis.status !== 'ready') {
      this.onError(new Error(`Redis connection is ${this.redis.status}`));
      this.timer = setTimeout(() => void this.sync(), RATE_LIMIT_SYNC_MS).unref();
      return;
    }
    this.syncing = true;
    try {
      const pipeline = this.redis.pipeline();
      for (const [key, w, n] of batch) pipeline.eval(INCRBY_SCRIPT, 1, key, String(w.window), String(n));
      const results = (await pipeline.exec()) ?? [];
      const at = this.now();
      batch.forEach(([, w, n], i) => {
        const [err, result] = results[i] ?? [new Error('no reply')];
        if (err) throw err;
        const [current, ttl] = result as [number, number];
        w.pending -= n;
        w.known = current;
        w.endsAt = at + ttl;
        // (A window that ended here while its requests were on their way was replaced by a new one,
        // with requests of its own for the next sync: this answer belongs to the old one only.)
      });
      this.onSynced();
    } catch (err) {
      this.onError(err);
    } finally {
      this.syncing = false;
    }
    if (!this.timer && batch.some(([, w]) => w.pending > 0)) this.timer = setTimeout(() => void this.sync(), RATE_LIMIT_SYNC_MS).unref();
  }
}

/**
 * A rate-limit store that counts in Redis (shared by every coordinator) and, while Redis cannot
 * answer, in this process. The plugin's own Redis store with `skipOnError` let every request through
 * while Redis was down, the sign-in budget included, so a Redis outage switched off the brake on
 * password guessing. Here each coordinator keeps counting on its own (a client spreading requests
 * over N coordinators gets at most N times the budget) and says so in the log once per outage,
 * and again when Redis counts again. The keys are the plugin's Redis store's, so counts carry on
 * across a plugin upgrade and tests can find them.
 */
export function redisWithFallbackStore(
  redis: Redis,
  nameSpace: string,
  log: FastifyBaseLogger,
  opts: {
    now?: () => number;
    /**
     * Whether a limiter's counter may be synced (SyncedCounters) instead of counted in Redis on every
     * request; `prefix` is the limiter's (its route's method and URL, or none for a shared budget),
     * `key` the client's. Default: none (every counter exact).
     */
    synced?: (prefix: string, key: string) => boolean;
  } = {},
): FastifyRateLimitStoreCtor {
  const now = opts.now ?? Date.now;
  const synced = opts.synced ?? (() => false);
  const counters = new InProcessCounters(now);
  let degraded = false;

  const fallBack = (err: unknown) => {
    if (degraded) return;
    degraded = true;
    log.warn({ err }, 'Redis is unavailable: rate limits are counted in this process (per coordinator) until it is back');
  };
  const recovered = () => {
    if (!degraded) return;
    degraded = false;
    log.info('Redis is back: rate limits are counted in Redis again');
  };

  const syncedCounters = new SyncedCounters(redis, now, fallBack, recovered);

  class Store implements FastifyRateLimitStore {
    /** The limiter's part of the key after the namespace (route method and URL); '' for the root store. */
    private readonly limiter: string;

    constructor(private readonly prefix: string) {
      this.limiter = prefix.slice(nameSpace.length);
    }

    incr(key: string, callback: IncrCallback, timeWindow: number): void {
      const fullKey = this.prefix + key;
      if (synced(this.limiter, key)) {
        callback(null, syncedCounters.incr(fullKey, timeWindow));
        return;
      }
      const local = () => callback(null, counters.incr(fullKey, timeWindow));
      // A connection that is not ready would queue the command (or retry it) before failing; do
      // not make every request wait for that.
      if (redis.status !== 'ready') {
        fallBack(new Error(`Redis connection is ${redis.status}`));
        local();
        return;
      }
      redis.eval(INCR_SCRIPT, 1, fullKey, String(timeWindow)).then(
        (result) => {
          recovered();
          const [current, ttl] = result as [number, number];
          callback(null, { current, ttl });
        },
        (err: unknown) => {
          fallBack(err);
          local();
        },
      );
    }

    child(routeOptions: object): FastifyRateLimitStore {
      // The same key layout as the plugin's Redis store (a shared limiter has no route: "undefinedundefined-").
      // The plugin passes its merged parameters with `routeInfo`, which its typings leave out.
      const { routeInfo: info = {}, groupId } = routeOptions as { routeInfo?: { method?: string; url?: string }; groupId?: string };
      // Routes of one group (`config.rateLimit.groupId`) share one counter per client: keyed by the group, not the route.
      if (groupId) return new Store(`${this.prefix}group:${groupId}-`);
      return new Store(`${this.prefix}${String(info.method)}${String(info.url)}-`);
    }
  }

  return class extends Store {
    constructor(_options: FastifyRateLimitOptions) {
      super(nameSpace);
    }
  };
}
