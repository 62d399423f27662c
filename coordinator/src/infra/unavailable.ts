import { ConnectionException } from '@mikro-orm/core';

/**
 * Recognizes failures that mean "a backing service is down right now" (PostgreSQL or Redis), as
 * opposed to bugs. Callers answer those with 503 + Retry-After (HTTP) or UNAVAILABLE (gRPC) so
 * clients retry; the pools and clients reconnect by themselves once the service is back.
 */
export type UnavailableDependency = 'database' | 'redis';

/** Seconds a client should wait before retrying a request refused because of an outage. */
export const RETRY_AFTER_SECONDS = 5;

// Socket-level failures of a connection (pg reports these raw; AggregateError when several
// addresses were tried).
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH']);
// PostgreSQL SQLSTATEs besides class 08 (connection exception): admin/crash shutdown, cannot
// connect now (starting up or shutting down), too many connections.
// 57014: a statement cancelled at statement_timeout (DATABASE_WAIT_TIMEOUT_MS).
const PG_UNAVAILABLE_STATES = new Set(['57P01', '57P02', '57P03', '53300', '57014']);
// pg and knex report a lost or unobtainable connection by message only.
const DB_MESSAGES = [
  /^Connection terminated/, // pg: "… unexpectedly", "… due to connection timeout"
  /is not queryable/, // pg: a client that already failed or was closed
  /Timeout acquiring a connection/, // knex/tarn pool
  /Query read timeout$/, // pg: no answer within query_timeout (a frozen server); MikroORM prefixes the SQL
  /^timeout expired$/, // pg: a new connection not ready within connectionTimeoutMillis (a frozen server)
];
// Redis replies that mean "not serving now" (loading a dataset, failover in progress).
const REDIS_REPLIES = /^(LOADING|MASTERDOWN|TRYAGAIN|CLUSTERDOWN|READONLY|BUSY) /;

function classifyOne(err: Record<string, unknown>): UnavailableDependency | null {
  const name = typeof err.name === 'string' ? err.name : '';
  const message = typeof err.message === 'string' ? err.message : '';
  const code = typeof err.code === 'string' ? err.code : '';

  // ioredis: a command given up after maxRetriesPerRequest reconnects, or flushed on close.
  if (name === 'MaxRetriesPerRequestError' || message === 'Connection is closed.' || message.startsWith("Stream isn't writeable")) return 'redis';
  if (name === 'ReplyError' && REDIS_REPLIES.test(message)) return 'redis';

  if (err instanceof ConnectionException || name === 'KnexTimeoutError') return 'database';
  if (/^(08[0-9A-Z]{3})$/.test(code) || PG_UNAVAILABLE_STATES.has(code)) return 'database';
  if (SOCKET_CODES.has(code)) return 'database';
  // MikroORM's DriverException copies the driver error's properties (code included) but not its
  // name, so knex's timeout and pg's lost connections are recognized by their message.
  if (DB_MESSAGES.some((re) => re.test(message))) return 'database';
  return null;
}

/** Which backing service an error says is unavailable, or null for any other error. */
export function unavailableDependency(error: unknown): UnavailableDependency | null {
  const seen = new Set<unknown>();
  const queue: unknown[] = [error];
  while (queue.length && seen.size < 16) {
    const err = queue.shift();
    if (!err || typeof err !== 'object' || seen.has(err)) continue;
    seen.add(err);
    const found = classifyOne(err as Record<string, unknown>);
    if (found) return found;
    const { cause, errors } = err as { cause?: unknown; errors?: unknown };
    if (cause) queue.push(cause);
    if (Array.isArray(errors)) queue.push(...(errors as unknown[]));
  }
  return null;
}

export function unavailableMessage(dep: UnavailableDependency): string {
  return dep === 'database'
    ? 'The database is temporarily unavailable; retry shortly.'
    : 'The queue and cache store is temporarily unavailable; retry shortly.';
}
