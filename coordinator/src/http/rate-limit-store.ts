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

/** The most client keys the in-process counters remember during an outage; the oldest go first. */
const FALLBACK_KEYS = 20_000;

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
 * A rate-limit store that counts in Redis (shared by every coordinator) and, while Redis cannot
 * answer, in this process. The plugin's own Redis store with `skipOnError` let every request through
 * while Redis was down, the sign-in budget included, so a Redis outage switched off the brake on
 * password guessing. Here each coordinator keeps counting on its own (a client spreading requests
 * over N coordinators gets at most N times the budget) and says so in the log once per outage,
 * and again when Redis counts again. The keys are the plugin's Redis store's, so counts carry on
 * across a plugin upgrade and tests can find them.
 */
export function redisWithFallbackStore(redis: Redis, nameSpace: string, log: FastifyBaseLogger, now: () => number = Date.now): FastifyRateLimitStoreCtor {
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

  class Store implements FastifyRateLimitStore {
    constructor(private readonly prefix: string) {}

    incr(key: string, callback: IncrCallback, timeWindow: number): void {
      const fullKey = this.prefix + key;
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
      const info = (routeOptions as { routeInfo?: { method?: string; url?: string } }).routeInfo ?? {};
      return new Store(`${this.prefix}${String(info.method)}${String(info.url)}-`);
    }
  }

  return class extends Store {
    constructor(_options: FastifyRateLimitOptions) {
      super(nameSpace);
    }
  };
}
