import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Duplex } from 'node:stream';
import type { ServerResponse } from 'node:http';
import type { Reason } from '@sonar/shared';
import { RETRY_AFTER_SECONDS, unavailableDependency, unavailableMessage } from '../infra/unavailable.js';

/**
 * Errors are values: a documented reason code, a human message and optional per-field details.
 * Each domain plugin installs one error handler that maps reasons to HTTP statuses and to its
 * documented body shape; nothing else in a domain decides a status code.
 */
export class AppError extends Error {
  constructor(
    readonly reason: Reason,
    message: string,
    readonly details: { errors?: Record<string, string[]>; headers?: Record<string, string> } = {},
  ) {
    super(message);
    this.name = 'AppError';
  }
}

export const unauthenticated = (message = 'Authentication required.') => new AppError('unauthenticated', message);
export const forbidden = (message = 'You are not allowed to do this.') => new AppError('forbidden', message);
export const notFound = (message = 'Not found.') => new AppError('not_found', message);
export const validationFailed = (errors: Record<string, string[]>, message?: string) =>
  new AppError('validation_failed', message ?? firstMessage(errors) ?? 'The request is invalid.', { errors });

/**
 * A zod error as the `errors` of validation_failed: messages per dotted path (`a.0.b`), issues of
 * the whole input under `rootKey`. (z.flattenError would fold nested and array paths into their
 * top-level key.)
 */
export function zodFieldErrors(error: { issues: ReadonlyArray<{ path: PropertyKey[]; message: string }> }, rootKey: string): Record<string, string[]> {
  const errors: Record<string, string[]> = {};
  for (const issue of error.issues) (errors[issue.path.map(String).join('.') || rootKey] ??= []).push(issue.message);
  return errors;
}

function firstMessage(errors: Record<string, string[]>): string | undefined {
  for (const [field, messages] of Object.entries(errors)) {
    if (messages[0]) return `${field}: ${messages[0]}`;
  }
  return undefined;
}

/** Status of each reason; a domain overrides entries where its contract differs (DNS: validation is 400). */
export const DEFAULT_STATUS: Record<Reason, number> = {
  unauthenticated: 401,
  invalid_credentials: 401,
  forbidden: 403,
  csrf_invalid: 403,
  account_disabled: 403,
  not_found: 404,
  validation_failed: 422,
  conflict: 409,
  rate_limited: 429,
  internal_error: 500,
  service_unavailable: 503,
  not_acceptable: 406,
  bad_gateway: 502,
  required_paths_missing_or_unreadable: 404,
  missing_query: 422,
  cache_unavailable: 409,
  cname_conflict: 409,
  cache_invalidation_disabled: 403,
  cache_clear_protected: 403,
  // A change was sent to the master DNS server and no answer came; a read-back could not show it applied.
  outcome_unknown: 503,
};

export interface NormalizedError {
  status: number;
  reason: Reason;
  message: string;
  errors?: Record<string, string[]>;
  headers?: Record<string, string>;
}

/** Turns anything thrown in a route into a documented reason (never leaking internals on 5xx). */
export function normalizeError(error: unknown, request: FastifyRequest, statusOverrides: Partial<Record<Reason, number>> = {}): NormalizedError {
  const statusOf = (reason: Reason) => statusOverrides[reason] ?? DEFAULT_STATUS[reason];

  if (error instanceof AppError) {
    return {
      status: statusOf(error.reason),
      reason: error.reason,
      message: error.message,
      ...(error.details.errors ? { errors: error.details.errors } : {}),
      ...(error.details.headers ? { headers: error.details.headers } : {}),
    };
  }

  const fe = error as Partial<FastifyError> & { validation?: Array<{ instancePath?: string; message?: string }> };
  if (Array.isArray(fe.validation)) {
    const errors: Record<string, string[]> = {};
    for (const issue of fe.validation) {
      const field = (issue.instancePath ?? '').replace(/^\//, '').replace(/\//g, '.') || fe.validationContext || 'request';
      (errors[field] ??= []).push(issue.message ?? 'is invalid');
    }
    const e = validationFailed(errors);
    return { status: statusOf('validation_failed'), reason: 'validation_failed', message: e.message, errors };
  }

  // PostgreSQL or Redis down (connection refused or lost, pool timeout, shutdown in progress): the
  // client may retry once the pools reconnect, which they do by themselves.
  const dependency = unavailableDependency(error);
  if (dependency) {
    request.log.warn({ err: error, dependency }, 'backing service unavailable');
    return {
      status: statusOf('service_unavailable'),
      reason: 'service_unavailable',
      message: unavailableMessage(dependency),
      headers: { 'retry-after': String(RETRY_AFTER_SECONDS) },
    };
  }

  if (fe.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    // Fastify's message repeats the whole path; the caller sent it and needs only what is wrong.
    const message = 'A part of the address (a path parameter) is longer than 100 characters.';
    return { status: 414, reason: 'validation_failed', message, errors: { path: ['has a part longer than 100 characters'] } };
  }
  const status = typeof fe.statusCode === 'number' ? fe.statusCode : 500;
  if (status === 429) {
    return { status, reason: 'rate_limited', message: 'Too many requests; slow down and retry later.' };
  }
  if (status === 404) return { status, reason: 'not_found', message: 'Not found.' };
  if (status === 413) {
    // A body over the limit is the caller's invalid request: the area's validation_failed status
    // (400 in the DNS and dyndns areas, 422 elsewhere), one of the statuses every route documents.
    const message = 'The request body is larger than the limit (1 MiB for JSON and form bodies).';
    return { status: statusOf('validation_failed'), reason: 'validation_failed', message, errors: { body: [message] } };
  }
  if (status >= 400 && status < 500) {
    // Fastify's own client errors: malformed JSON, unsupported content type.
    return {
      status: status === 400 ? statusOf('validation_failed') : status,
      reason: 'validation_failed',
      message: fe.message ?? 'The request is invalid.',
      errors: { request: [fe.message ?? 'is invalid'] },
    };
  }
  request.log.error({ err: error }, 'unhandled error');
  return { status: statusOf('internal_error'), reason: 'internal_error', message: 'Internal server error.' };
}

export type ErrorBodyShape = (e: NormalizedError) => unknown;

/** `{ok:false, reason, message, errors?}`: the shape of every area except the chat-log archive. */
export const okReasonBody: ErrorBodyShape = (e) => ({
  ok: false,
  reason: e.reason,
  message: e.message,
  ...(e.errors ? { errors: e.errors } : {}),
});

/** `{success:false, error}`: the chat-log archive's documented shape. */
export const successErrorBody: ErrorBodyShape = (e) => ({ success: false, error: e.message });

/** The chat-log reader's HTML pages (`/irc`, `/irc/…`), not its API (`/irc/api`). */
export function isReaderPage(url: string): boolean {
  return (url === '/irc' || url.startsWith('/irc/') || url.startsWith('/irc?')) && !url.startsWith('/irc/api');
}

/** The documented error shape of a URL: the chat-log archive's under its prefixes, `{ok:false}` elsewhere. */
export function errorShapeOf(url: string): ErrorBodyShape {
  return url.startsWith('/irc/api') || url.startsWith('/api/irclog') ? successErrorBody : okReasonBody;
}

export function sendError(reply: FastifyReply, e: NormalizedError, shape: ErrorBodyShape) {
  if (e.headers) void reply.headers(e.headers);
  return reply.code(e.status).type('application/json; charset=utf-8').serializer(JSON.stringify).send(shape(e));
}

/** Installs the error and not-found handlers of one domain (call inside the domain's plugin). */
export function installDomainErrors(app: FastifyInstance, shape: ErrorBodyShape, statusOverrides: Partial<Record<Reason, number>> = {}) {
  app.setErrorHandler((error, request, reply) => sendError(reply, normalizeError(error, request, statusOverrides), shape));
}

/**
 * The client ended its side of the connection before the body it announced (Content-Length) had
 * arrived, while a route is reading that body: the body ends here for the route (its reader sees
 * it cut short, so an upload answers 422 under errors.media_file) and the connection closes after
 * the route's answer, as Node does for a half-closed client. False when no request is in flight.
 * Node keeps the response of the request in flight on the socket (`_httpMessage`, with `_last` to
 * close after it), which no public API exposes; Node's own handling of this case writes 400 and
 * destroys the socket, so the route never answers.
 */
function endRequestEarly(socket: Duplex): boolean {
  const res = (socket as Duplex & { _httpMessage?: ServerResponse & { _last?: boolean } })._httpMessage;
  if (!res || res.headersSent || res.req.complete) return false;
  res._last = true;
  // Marked complete so that the ended stream's auto-destroy does not count as the client aborting
  // (which would destroy the socket before the answer); the reader still sees the body cut short.
  res.req.complete = true;
  res.req.push(null);
  return true;
}

/**
 * Fastify's clientErrorHandler: errors Node's HTTP parser raises before there is a request (a
 * request line and headers over the header size limit, 16 KiB by default; a malformed request),
 * answered in the documented body of the area the request line names (read from the raw bytes)
 * instead of Fastify's own body.
 */
export function clientErrorHandler(err: Error & { code?: string; rawPacket?: unknown }, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  if (err.code === 'HPE_INVALID_EOF_STATE' && endRequestEarly(socket)) return;
  const [status, label, message] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'Request Header Fields Too Large', 'The request line and headers are too large (more than 16 KiB); shorten the URL or the headers.']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'Request Timeout', 'The request took too long to arrive.']
        : [400, 'Bad Request', 'The request is not valid HTTP.'];
  // Node passes the bytes parsed so far as a Buffer (Fastify's types describe its JSON form).
  const raw = err.rawPacket;
  const head = Buffer.isBuffer(raw) ? raw.subarray(0, 512).toString('latin1') : '';
  const url = /^[A-Z]+ (\S+)/.exec(head)?.[1] ?? '';
  const body = JSON.stringify(errorShapeOf(url)({ status, reason: status === 408 ? 'service_unavailable' : 'validation_failed', message }));
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${label}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}
