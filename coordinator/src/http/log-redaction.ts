import type { FastifyRequest } from 'fastify';
import pino, { type LoggerOptions } from 'pino';
import { SHARE_PATH_PREFIX } from '../speech/shares/share-links.js';

/**
 * What the logs must never carry: credentials that arrive in URLs and headers (personal tokens and
 * DNS keys are accepted as `?apikey=`/`?api_key=`, X-Api-Key, Authorization and the session
 * cookie), share tokens in share links, and the values that query errors inline into their SQL
 * (token hashes, callback secrets, share tokens). Every logger of the coordinator (Fastify's and
 * the service's pino) is built from {@link loggerOptions}.
 */
export const REDACTED = '[redacted]';

/** Query parameters whose value is a credential (compared case-insensitively). */
const SECRET_QUERY_PARAMS = new Set([
  '_csrf',
  'apikey',
  'api_key',
  'api-key',
  'key',
  'token',
  'access_token',
  'refresh_token',
  'id_token',
  'auth',
  'jwt',
  'password',
  'secret',
  'client_secret',
  'callback_secret',
  'signature',
  'sig',
  'code',
  // OAuth: the assistant connector's sign-in callback (/admin/assistant/callback).
  'state',
  'session_state',
  'code_verifier',
  'client_info',
]);

/** Path prefixes whose next segment is a bearer secret (public share links). */
const SECRET_PATH_PREFIXES = [SHARE_PATH_PREFIX];

function decodedName(raw: string): string {
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' ')).toLowerCase();
  } catch {
    return raw.toLowerCase();
  }
}

/** The URL with credential query values and share tokens replaced by `[redacted]`. */
export function redactUrl(url: string): string {
  if (typeof url !== 'string') return url;
  const q = url.indexOf('?');
  let path = q === -1 ? url : url.slice(0, q);
  for (const prefix of SECRET_PATH_PREFIXES) {
    if (path.startsWith(prefix) && path.length > prefix.length) {
      const rest = path.slice(prefix.length);
      const slash = rest.indexOf('/');
      path = `${prefix}${REDACTED}${slash === -1 ? '' : rest.slice(slash)}`;
    }
  }
  if (q === -1) return path;
  const query = url
    .slice(q + 1)
    .split('&')
    .map((part) => {
      const eq = part.indexOf('=');
      const name = eq === -1 ? part : part.slice(0, eq);
      return SECRET_QUERY_PARAMS.has(decodedName(name)) ? `${name}=${REDACTED}` : part;
    })
    .join('&');
  return `${path}?${query}`;
}

/** Headers that carry credentials, as pino redact paths under a few object names. */
const SECRET_HEADERS = ['authorization', 'cookie', '"set-cookie"', '"x-api-key"', '"x-csrf-token"', '"proxy-authorization"'];
const REDACT_PATHS = [
  ...['req.headers', 'headers', 'request.headers', 'res.headers'].flatMap((base) => SECRET_HEADERS.map((h) => `${base}[${h}]`)),
  'password',
  'secret',
  'token',
  '*.password',
];

/**
 * SQL with its string literals replaced by `?`: MikroORM inlines the parameters of every statement
 * (so the SQL of a failed query carries token hashes and secrets), and knex prefixes that SQL to
 * the error message. The statement's shape stays readable; the values are gone.
 */
export function stripSqlValues(text: string): string {
  if (typeof text !== 'string') return text;
  return text
    .replace(/\b[eE]'(?:[^'\\]|\\.|'')*'/g, '?')
    .replace(/'(?:[^']|'')*'/g, '?')
    .replace(/\$([A-Za-z_]\w*)?\$[\s\S]*?\$\1\$/g, '?');
}

/** PostgreSQL's messages name some offending values (`invalid input syntax for type uuid: "value"`). */
function stripPgMessage(text: string): string {
  return stripSqlValues(text).replace(/((?:for type|for enum)\s+[\w ."]+?): "(?:[^"]|"")*"/g, '$1: ?');
}

/** Its details name the values of rows and keys (`Key (x)=(value) already exists`, `Failing row contains (…)`). */
function stripPgDetail(text: string): string {
  return stripPgMessage(text)
    .replace(/\)=\([\s\S]*\)/, ')=(?)')
    .replace(/contains \([\s\S]*\)/, 'contains (?)');
}

type Loose = Record<string, unknown>;

/** A database error of pg, knex or MikroORM (they carry the SQLSTATE, the statement or both). */
function isDatabaseError(err: Loose): boolean {
  return (
    typeof err.severity === 'string' ||
    typeof err.sqlState === 'string' ||
    typeof err.sql === 'string' ||
    typeof err.routine === 'string' ||
    (typeof err.code === 'string' && /^[0-9A-Z]{5}$/.test(err.code) && /Exception$|DatabaseError|^error$/.test(String(err.name)))
  );
}

const VALUE_FIELDS = ['detail', 'where', 'internalQuery', 'hint'];
const SQL_FIELDS = ['sql', 'query'];
const DROP_FIELDS = ['params', 'parameters', 'bindings', 'values'];

function sanitizeDbFields(out: Loose, depth: number): Loose {
  if (typeof out.message === 'string') out.message = stripPgMessage(out.message);
  if (typeof out.stack === 'string') out.stack = stripPgMessage(out.stack);
  for (const f of SQL_FIELDS) if (typeof out[f] === 'string') out[f] = stripSqlValues(out[f]);
  for (const f of VALUE_FIELDS) if (typeof out[f] === 'string') out[f] = stripPgDetail(out[f]);
  for (const f of DROP_FIELDS) if (f in out) out[f] = REDACTED;
  for (const f of ['cause', 'previous']) {
    const inner = out[f];
    if (inner && typeof inner === 'object' && depth < 4) out[f] = sanitizeDbFields({ ...(inner as Loose) }, depth + 1);
  }
  return out;
}

/** pino's error serializer, with the values of database errors removed (see stripSqlValues). */
export function errorSerializer(err: unknown): unknown {
  if (!err || typeof err !== 'object') return err;
  const serialized = pino.stdSerializers.err(err as Error) as unknown as Loose;
  const chain = [err as Loose, (err as Loose).cause, (err as Loose).previous].filter((e): e is Loose => !!e && typeof e === 'object');
  return chain.some(isDatabaseError) ? sanitizeDbFields({ ...serialized }, 0) : serialized;
}

/** Fastify's request serializer (same fields) with the URL's credentials redacted. */
export function requestSerializer(req: FastifyRequest) {
  return {
    method: req.method,
    url: redactUrl(req.url),
    version: req.headers?.['accept-version'],
    host: req.host,
    remoteAddress: req.ip,
    remotePort: req.socket?.remotePort,
  };
}

/** Redaction and serializers for every logger of the coordinator. */
export function redactingLoggerOptions(): Pick<LoggerOptions, 'redact' | 'serializers'> {
  return {
    redact: { paths: REDACT_PATHS, censor: REDACTED },
    serializers: { req: requestSerializer as (req: unknown) => unknown, err: errorSerializer },
  };
}

/** pino options of the service logger at a level. */
export function loggerOptions(level: string): LoggerOptions {
  return { level, ...redactingLoggerOptions() };
}

/** Adds the redaction to caller-supplied logger options (Fastify's `logger`), keeping the rest. */
export function withRedaction<T extends object>(options: T): T & Pick<LoggerOptions, 'redact' | 'serializers'> {
  const ours = redactingLoggerOptions();
  const theirs = options as { redact?: LoggerOptions['redact']; serializers?: LoggerOptions['serializers'] };
  const theirPaths = Array.isArray(theirs.redact) ? theirs.redact : (theirs.redact?.paths ?? []);
  return {
    ...options,
    redact: { paths: [...new Set([...REDACT_PATHS, ...theirPaths])], censor: REDACTED },
    serializers: { ...theirs.serializers, ...ours.serializers },
  };
}
