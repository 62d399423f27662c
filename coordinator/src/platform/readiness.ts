import type { Redis } from 'ioredis';
import type { Orm } from '../db/orm.js';

/**
 * Readiness: whether this coordinator can serve what depends on PostgreSQL and Redis now. Each is
 * asked once (MikroORM's connection check, a Redis PING) and given at most `timeoutMs`: a frozen
 * server counts as down, not as a hanging probe.
 */
export interface Readiness {
  postgres: 'ok' | 'unavailable';
  redis: 'ok' | 'unavailable';
}

function within<T>(p: Promise<T>, timeoutMs: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

export async function readiness(orm: Orm, redis: Redis, timeoutMs: number): Promise<Readiness> {
  const [pg, ping] = await Promise.all([
    within(
      orm.checkConnection().then(
        (r) => r.ok,
        () => false,
      ),
      timeoutMs,
    ),
    // A client that is not connected answers at once (no offline queue wait).
    redis.status === 'ready'
      ? within(
          redis.ping().then(
            (r) => r === 'PONG',
            () => false,
          ),
          timeoutMs,
        )
      : Promise.resolve(false),
  ]);
  return { postgres: pg === true ? 'ok' : 'unavailable', redis: ping === true ? 'ok' : 'unavailable' };
}
