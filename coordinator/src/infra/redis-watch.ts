import type { Redis } from 'ioredis';
import { unavailableDependency } from './unavailable.js';

/** The part of a pino (or Fastify) logger used here. */
export interface OutageLog {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/**
 * Gives an ioredis client (the shared one or a duplicate: duplicates do not inherit listeners) an
 * 'error' listener, so an outage is logged instead of ending up as an unhandled 'error' event, and
 * logs it once per outage (ioredis reports every failed reconnect attempt) plus the recovery.
 * ioredis reconnects by itself and re-subscribes its channels.
 */
export function watchRedis<T extends Redis>(client: T, log: OutageLog, name: string): T {
  let down = false;
  client.on('error', (err: Error) => {
    if (down) return;
    down = true;
    log.warn({ err, redis: name }, 'Redis connection lost; reconnecting');
  });
  client.on('ready', () => {
    if (!down) return;
    down = false;
    log.info({ redis: name }, 'Redis connection restored');
  });
  return client;
}

/**
 * 'error' listener for a BullMQ Queue or Worker: connection failures are already logged by
 * watchRedis on the client (once per outage), anything else is logged as an error.
 */
export function logQueueErrors(emitter: { on(event: 'error', fn: (err: Error) => void): unknown }, log: OutageLog, what: string) {
  emitter.on('error', (err: Error) => {
    if (unavailableDependency(err)) return;
    log.error({ err, queue: what }, 'queue error');
  });
}

/**
 * Makes `client.publish` never reject: a publish that fails during an outage (the event is lost
 * for other coordinators; local listeners got it) is logged at warn, once until publishing works
 * again. For clients handed to libraries that publish without handling the promise.
 */
export function safePublish<T extends Redis>(client: T, log: OutageLog, what: string): T {
  const publish = client.publish.bind<(channel: string | Buffer, message: string | Buffer) => Promise<number>>(client);
  let failing = false;
  const guarded = (channel: string | Buffer, message: string | Buffer) =>
    publish(channel, message).then(
      (n) => {
        failing = false;
        return n;
      },
      (err: unknown) => {
        if (!failing) log.warn({ err, what }, 'Redis publish failed; event not fanned out to other coordinators');
        failing = true;
        return 0;
      },
    );
  client.publish = guarded;
  return client;
}
