import type { FastifyRequest } from 'fastify';
import pino, { type LoggerOptions } from 'pino';

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
  // dyndns2 clients send the token as `pass` (ddclient, inadyn: /nic/update?...&pass=sonar_ddns_…).
  'pass',
  'passwd',
  'session',
  'sid',
]);

/**
 * Words that make any parameter name a credential's, wherever they stand in it (`user[password]`,
 * `X-Auth-Token`, `db.pwd`, `sessionId`): the name is split into words at any non-alphanumeric
 * character and at lower-to-upper case changes.
 */
const SECRET_WORDS = new Set([
  'pass',
  'passwd',
  'password',
  'passphrase',
  'pwd',
  'secret',
  'token',
  'apikey',
  'auth',
  'authorization',
  'credential',
  'credentials',
  'jwt',
  'session',
  'sessionid',
  'sid',
  'csrf',
  'xsrf',
  'signature',
  'otp',
  'privatekey',
]);

/** Two-word credentials: a key qualified as one (`private_key`, `api-key`, `accessKey`), a session or client id. */
const SECRET_WORD_PAIR = /(?:^|_)(?:api|private|secret|access|signing|encryption|client|master)_key(?:_|$)|(?:^|_)session_id(?:_|$)/;

/** The words of a parameter name: `user[Password]` → user, password; `sessionId` → session, id. */
const nameWords = (name: string) =>
  name
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter(Boolean);

/** A credential's name: one of the exact names, or any name holding a credential word or pair. */
function isSecretName(name: string): boolean {
  const lower = name.toLowerCase();
  if (SECRET_QUERY_PARAMS.has(lower) || /[_-]token$/.test(lower)) return true;
  const words = nameWords(name);
  return words.some((w) => SECRET_WORDS.has(w)) || SECRET_WORD_PAIR.test(words.join('_'));
}

/**
 * Credentials by the shape of the value, wherever they stand (a query value under any name, a path
 * segment, a log message): this service's secrets (`sonar_pat_…`, `sonar_dns_…`, `sonar_wrk_…`,
 * `sonar_ddns_…`, and any other `sonar_<kind>_` with a long secret part), JWTs (three base64url
 * parts, the first a JSON header `eyJ…`), the credential after `Bearer ` or `Basic `, and the
 * password of a `//user:password@host` URL.
 */
const SECRET_VALUE =
  /\bsonar_(?:pat|dns|wrk|ddns)_[A-Za-z0-9_-]+|\bsonar_[a-z]+_[A-Za-z0-9_-]{16,}|\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*|(?<=\b(?:Bearer|Basic)(?:\s|%20|\+))[A-Za-z0-9._~+/=-]{8,}|(?<=(?:\/\/|%2[Ff]%2[Ff])[^/@:%\s]{1,64}(?::|%3[Aa]))[^/@%\s]{1,128}(?=@|%40)/g;

/** Text with every credential-shaped value replaced by `[redacted]`. */
export function redactSecrets(text: string): string {
  if (typeof text !== 'string') return text;
  return text.replace(SECRET_VALUE, REDACTED);
}

/**
 * Field names of a log record (a logged body or options object) whose string value is a credential.
 * Narrower than the query names: `code`, `state` or `key` are ordinary fields of log records.
 */
const SECRET_FIELD = /^(?:pass|passwd|password|secret|client_secret|callback_secret|token|apikey|api_key|api-key|jwt|session|sid)$|[_-]token$/i;

/** Strings of a log record's own fields (plain objects and arrays, a few levels deep), credential-shaped values redacted. */
function redactFields(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return redactSecrets(value);
  if (depth > 4 || !value || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v) => redactFields(v, depth + 1));
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    out[k] = SECRET_FIELD.test(k) && typeof v === 'string' ? REDACTED : redactFields(v, depth + 1);
  }
  return out;
}

/**
 * Path of the public transcript page of a share token (`?full` opens the detailed layout). Kept here,
 * with the other paths whose next segment is a bearer secret, for the redaction below; the share
 * routes (speech/shares) take it from here.
 */
export const SHARE_PATH_PREFIX = '/shared/speech/transcript/';

/** Path prefixes whose next segment is a bearer secret (public share links). */
const SECRET_PATH_PREFIXES = [SHARE_PATH_PREFIX];

function decodedName(raw: string): string {
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '));
  } catch {
    return raw;
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
  if (q === -1) return redactSecrets(path);
  const query = url
    .slice(q + 1)
    .split('&')
    .map((part) => {
      const eq = part.indexOf('=');
      const name = eq === -1 ? part : part.slice(0, eq);
      return isSecretName(decodedName(name)) ? `${name}=${REDACTED}` : redactSecrets(part);
    })
    .join('&');
  return `${redactSecrets(path)}?${query}`;
}

/** Headers that carry credentials, as pino redact paths under a few object names. */
const SECRET_HEADERS = ['authorization', 'cookie', '"set-cookie"', '"x-api-key"', '"x-csrf-token"', '"proxy-authorization"'];
const REDACT_PATHS = [
  ...['req.headers', 'headers', 'request.headers', 'res.headers'].flatMap((base) => SECRET_HEADERS.map((h) => `${base}[${h}]`)),
  'password',
  'secret',
  'token',
  'pass',
  '*.password',
  '*.pass',
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
  const out = chain.some(isDatabaseError) ? sanitizeDbFields({ ...serialized }, 0) : { ...serialized };
  for (const f of ['message', 'stack']) if (typeof out[f] === 'string') out[f] = redactSecrets(out[f]);
  return out;
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

/**
 * The message of a log call (`log.info(obj, 'text %s', arg)`): credential-shaped values in the
 * text and in string arguments are redacted before pino formats them.
 */
function logMethod(this: pino.Logger, args: unknown[], method: pino.LogFn): void {
  const clean = args.map((a) => (typeof a === 'string' ? redactSecrets(a) : a));
  method.apply(this, clean as Parameters<pino.LogFn>);
}

type Redacting = Pick<LoggerOptions, 'redact' | 'serializers' | 'formatters' | 'hooks'>;

/** Redaction and serializers for every logger of the coordinator. */
export function redactingLoggerOptions(): Redacting {
  return {
    redact: { paths: REDACT_PATHS, censor: REDACTED },
    serializers: { req: requestSerializer as (req: unknown) => unknown, err: errorSerializer },
    // The fields of every record: credential-shaped strings, and string values under credential names.
    formatters: { log: (obj) => redactFields(obj) as Record<string, unknown> },
    hooks: { logMethod },
  };
}

/** pino options of the service logger at a level. */
export function loggerOptions(level: string): LoggerOptions {
  return { level, ...redactingLoggerOptions() };
}

/** Adds the redaction to caller-supplied logger options (Fastify's `logger`), keeping the rest. */
export function withRedaction<T extends object>(options: T): T & Redacting {
  const ours = redactingLoggerOptions();
  const theirs = options as { redact?: LoggerOptions['redact']; serializers?: LoggerOptions['serializers']; formatters?: LoggerOptions['formatters'] };
  const theirPaths = Array.isArray(theirs.redact) ? theirs.redact : (theirs.redact?.paths ?? []);
  return {
    ...options,
    redact: { paths: [...new Set([...REDACT_PATHS, ...theirPaths])], censor: REDACTED },
    serializers: { ...theirs.serializers, ...ours.serializers },
    formatters: { ...theirs.formatters, log: ours.formatters!.log! },
    hooks: ours.hooks!,
  };
}
