import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { errorBodySchema, ircErrorBodySchema, TOKEN_SCOPES, PERMISSIONS } from '@sonar/shared';
import { ZoneRegistry } from '../../coordinator/src/dns/zone-registry.js';
import { DyndnsTokens } from '../../coordinator/src/platform/dyndns/dyndns-token-repository.js';
import { startNamed } from '../support/bind.js';
import { startSpamd } from '../support/spamd.js';
import { createJwtUser, createTestApp } from '../support/harness.js';

/**
 * Property-based fuzz of every operation of /openapi.json, unauthenticated and as an
 * administrator: wrong types, missing and extra fields, huge strings, NUL and other control
 * characters, unicode, bad JSON, wrong content types and odd path parameters. Every answer must be
 * below 500 (429 is fine) and no body may show internals (stack traces, SQL, file paths, error
 * class names). A failing request is shrunk by fast-check and reported with method, URL, headers
 * and body.
 *
 * FUZZ_RUNS: requests per operation and identity (default 40); FUZZ_SEED: replay a run;
 * FUZZ_TIME_LIMIT_MS: time budget of the whole file (default 150 s, split over the properties).
 */
const RUNS = Math.max(1, Number(process.env.FUZZ_RUNS ?? 40));
const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : undefined;
const TIME_LIMIT_MS = Math.max(1000, Number(process.env.FUZZ_TIME_LIMIT_MS ?? 150_000));

// ---- the application under test -------------------------------------------------------------------

const ZONE = 'fuzz.test';
const ns = await startNamed({ zones: [{ name: ZONE, records: [{ name: `www.${ZONE}`, type: 'A', rdata: '10.9.0.1' }] }] });
await chmod(ns.keyFile, 0o644);
const mediaDir = await mkdtemp(path.join(tmpdir(), 'sonar-fuzz-media-'));
// A real spamd behind /api/spam/analyze (without one it answers 503, as it should).
const spamd = await startSpamd();
const t = await createTestApp({
  env: {
    SPAMD_PORT: String(spamd.port),
    SPEECH_MEDIA_DIR: mediaDir,
    SPEECH_UPLOAD_MAX_MB: '4',
    // Rate limits high enough that the fuzz tests the routes rather than the limiter (429 is accepted anyway).
    LOGIN_RATE_LIMIT_PER_MINUTE: '1000000',
    IRC_API_RATE_LIMIT_MAX: '1000000',
    DNS_TIMEOUT_MS: '2000',
    DYNDNS_RATE_LIMIT_PER_MINUTE: '1000000',
  },
});
const statuses = new Map<number, number>();
afterAll(async () => {
  const counts = [...statuses]
    .sort(([a], [b]) => a - b)
    .map(([status, n]) => `${status}×${n}`)
    .join(' ');
  console.log(`fuzz: ${requestNumber} requests over ${operations.length} operations (FUZZ_RUNS=${RUNS}): ${counts}`);
  await t.close();
  await ns.stop();
  await spamd.stop();
  await rm(mediaDir, { recursive: true, force: true });
});

await new ZoneRegistry(t.orm).upsert({ zone: ZONE, file: ns.zoneFile(ZONE), keyFile: ns.keyFile, server: '127.0.0.1', port: ns.port });
const admin = await createJwtUser(t, [...PERMISSIONS], { isAdmin: true, prefix: 'fuzzadmin' });
// Decoy tokens take the small ids the fuzz likes to revoke; the token it uses comes after them.
for (let i = 0; i < 8; i++) await t.accounts.createPersonalToken(admin.id, { name: `decoy${i}`, scopes: ['speech.api'] });
const pat = (await t.accounts.createPersonalToken(admin.id, { name: 'fuzz', scopes: [...TOKEN_SCOPES] })).token;
const dnsKey = (await t.accounts.createDnsApiKey({ name: 'fuzz' })).key;
// The dyndns2 routes take a dynamic-DNS token as the Basic password: one for a host of the fuzz zone.
const dyndnsToken = (await new DyndnsTokens(t.orm).create(admin.id, 'fuzz', [{ hostname: `dyn.${ZONE}`, zone: ZONE }])).secret;

interface JsonSchema {
  type?: string | string[];
  enum?: unknown[];
  const?: unknown;
  properties?: Record<string, JsonSchema>;
  items?: JsonSchema;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  pattern?: string;
  format?: string;
  required?: string[];
}
interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header' | 'cookie';
  schema?: JsonSchema;
}
interface Operation {
  method: string;
  path: string;
  parameters: Parameter[];
  content: Record<string, JsonSchema>;
  security: string[];
}

interface OpenApiSpec {
  paths: Record<
    string,
    Record<
      string,
      { parameters?: Parameter[]; requestBody?: { content?: Record<string, { schema?: JsonSchema }> }; security?: Array<Record<string, string[]>> }
    >
  >;
}
const spec = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json<OpenApiSpec>();
const operations: Operation[] = Object.entries(spec.paths).flatMap(([p, ops]) =>
  Object.entries(ops).map(([method, op]) => ({
    method: method.toUpperCase(),
    path: p,
    parameters: op.parameters ?? [],
    content: Object.fromEntries(Object.entries(op.requestBody?.content ?? {}).map(([type, c]) => [type, c.schema ?? {}])),
    security: (op.security ?? []).flatMap((s) => Object.keys(s)),
  })),
);

// ---- generators -----------------------------------------------------------------------------------

const HUGE = 300_000;
const oddStrings = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\u0000'.repeat(8),
  '\u0001\u0008\u001f\u007f',
  '\t\n\r',
  '\u001b[31mred',
  '\r\nX-Injected: 1',
  '💥',
  'ünïcødé',
  'Ω≈ç√',
  '日本語',
  '\u202eevil',
  '\u200b',
  '\ufeff',
  '\ud800',
  '\udfff',
  '\uffff',
  'e\u0301',
  "'; drop table users; --",
  '" or 1=1 --',
  '%00',
  '%',
  '%ZZ',
  '../../etc/passwd',
  '<script>x</script>',
  '${jndi:ldap://x}',
  '-1',
  '0',
  '1',
  '2147483648',
  '-2147483649',
  '1e309',
  '1.5',
  'NaN',
  'Infinity',
  'null',
  'true',
  '[]',
  '{}',
  '__proto__',
  'constructor',
  `www.${ZONE}`,
  ZONE,
  `_acme-challenge.${ZONE}`,
  '*.' + ZONE,
  'A',
  'TXT',
  'CNAME',
  '10.9.0.2',
  '::1',
  '"txt"',
  'http://127.0.0.1:1/a.mp3',
  'production',
  'sandbox',
  'small',
  'en',
  '2024-01-01',
  '2024-02-30 25:61:61',
  '2024-01-01 00:00:00',
];
const nastyString: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...oddStrings) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary-ascii', maxLength: 40 }) },
  { weight: 1, arbitrary: fc.tuple(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 })).map(([a, b]) => `${a}\u0000${b}`) },
  { weight: 1, arbitrary: fc.constantFrom('x', 'ü', '\u0000', 'a.').map((s) => s.repeat(Math.ceil(HUGE / s.length))) },
  { weight: 1, arbitrary: fc.integer().map(String) },
);
const anyJson: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: nastyString },
  { weight: 2, arbitrary: fc.oneof(fc.integer(), fc.double(), fc.constantFrom(-1, 0, 2 ** 31, 2 ** 53 + 1, -0, 1e308, 0.5)) },
  { weight: 1, arbitrary: fc.boolean() },
  { weight: 1, arbitrary: fc.constant(null) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) },
  { weight: 1, arbitrary: fc.array(nastyString, { maxLength: 3 }) },
  { weight: 1, arbitrary: fc.dictionary(nastyString, nastyString, { maxKeys: 3 }) },
);

/** Values shaped by the schema most of the time, anything at all otherwise. */
function valueOf(schema: JsonSchema | undefined, depth = 0): fc.Arbitrary<unknown> {
  if (!schema || depth > 4) return anyJson;
  return fc.oneof({ weight: 3, arbitrary: conforming(schema, depth) }, { weight: 1, arbitrary: anyJson });
}

function conforming(s: JsonSchema, depth: number): fc.Arbitrary<unknown> {
  if (s.enum?.length) return fc.constantFrom(...s.enum);
  if (s.const !== undefined) return fc.constant(s.const);
  const alts = s.anyOf ?? s.oneOf ?? s.allOf;
  if (alts?.length) return fc.oneof(...alts.map((a) => conforming(a, depth + 1)));
  const types = Array.isArray(s.type) ? s.type : s.type ? [s.type] : [];
  if (!types.length) return anyJson;
  return fc.oneof(
    ...types.map((type): fc.Arbitrary<unknown> => {
      switch (type) {
        case 'string':
          return fc.oneof(fc.string({ maxLength: Math.min(s.maxLength ?? 30, 30) }), nastyString);
        case 'integer':
        case 'number': {
          const min = Math.max(s.minimum ?? -(2 ** 31), -(2 ** 31));
          const max = Math.min(s.maximum ?? 2 ** 31, 2 ** 31);
          return fc.oneof(fc.integer({ min, max: Math.max(min, max) }), fc.constantFrom(min - 1, max + 1, 0.5, -1, 1, 2, 3));
        }
        case 'boolean':
          return fc.boolean();
        case 'null':
          return fc.constant(null);
        case 'array':
          return fc.array(valueOf(s.items, depth + 1), { maxLength: 4 });
        case 'object':
          return objectOf(s, depth);
        default:
          return anyJson;
      }
    }),
  );
}

/** A value the schema accepts (as far as a JSON schema says; zod refinements are not in it). */
function valid(s: JsonSchema | undefined, depth = 0): fc.Arbitrary<unknown> {
  if (!s || depth > 4) return fc.constant('x');
  if (s.enum?.length) return fc.constantFrom(...s.enum);
  if (s.const !== undefined) return fc.constant(s.const);
  const alts = s.anyOf ?? s.oneOf ?? s.allOf;
  if (alts?.length) return valid(alts[0], depth + 1);
  const type = Array.isArray(s.type) ? s.type.find((x) => x !== 'null') : s.type;
  switch (type) {
    case 'string': {
      if (s.pattern) {
        try {
          return fc.stringMatching(new RegExp(s.pattern)).filter((v) => v.length <= (s.maxLength ?? 1000));
        } catch {
          /* not a JavaScript pattern: fall through */
        }
      }
      if (s.format === 'uri') return fc.constant('http://127.0.0.1:1/fuzz.mp3');
      const minLength = Math.max(s.minLength ?? 0, 1);
      return fc.string({ unit: 'grapheme-ascii', minLength, maxLength: Math.max(minLength, Math.min(s.maxLength ?? 12, 12)) }).map((v) => v.trim() || 'x');
    }
    case 'integer':
    case 'number':
      return fc.integer({ min: Math.max(s.minimum ?? 0, -(2 ** 31)), max: Math.min(s.maximum ?? 1000, 2 ** 31) });
    case 'boolean':
      return fc.boolean();
    case 'array':
      return fc.array(valid(s.items, depth + 1), { minLength: s.minItems ?? 0, maxLength: Math.max(s.minItems ?? 0, 2) });
    case 'object': {
      const props = Object.fromEntries(Object.entries(s.properties ?? {}).map(([k, v]) => [k, valid(v, depth + 1)]));
      return fc.record(props, { requiredKeys: (s.required ?? []).filter((k) => k in props) });
    }
    default:
      return fc.constant('x');
  }
}

/** What replaces one valid field: a NUL or other control character inside text, or anything odd. */
const mutant: fc.Arbitrary<unknown> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc
      .tuple(
        fc.string({ unit: 'grapheme-ascii', maxLength: 6 }),
        fc.constantFrom('\u0000', '\u0001', '\u001b', '\u007f', '\u0000\u0000'),
        fc.string({ unit: 'grapheme-ascii', maxLength: 6 }),
      )
      .map(([a, c, b]) => `${a}${c}${b}`),
  },
  { weight: 3, arbitrary: anyJson },
  { weight: 1, arbitrary: fc.constant(undefined) }, // the field goes missing
);

/** A valid object with exactly one field replaced, removed or added. */
function mutatedObject(s: JsonSchema): fc.Arbitrary<Record<string, unknown>> {
  const keys = Object.keys(s.properties ?? {});
  return fc
    .tuple(
      valid({ ...s, type: 'object' }) as fc.Arbitrary<Record<string, unknown>>,
      keys.length ? fc.oneof(fc.constantFrom(...keys), nastyString) : nastyString,
      mutant,
    )
    .map(([base, key, value]) => {
      // Without the key, or with it set to the mutant value.
      const out = Object.fromEntries(Object.entries(base).filter(([k]) => k !== key));
      if (value !== undefined) out[key] = value;
      return out;
    });
}

/** Every declared field optional (so missing fields are covered), plus unknown extra fields. */
function objectOf(s: JsonSchema, depth: number): fc.Arbitrary<Record<string, unknown>> {
  const props = Object.fromEntries(Object.entries(s.properties ?? {}).map(([k, v]) => [k, valueOf(v, depth + 1)]));
  return fc
    .tuple(fc.record(props, { requiredKeys: [] }), fc.option(fc.dictionary(nastyString, anyJson, { maxKeys: 2 }), { nil: undefined }))
    .map(([known, extra]) => ({ ...(extra ?? {}), ...known }));
}

/** Lone surrogates as U+FFFD (what a browser sends; encodeURIComponent throws on them). */
const wellFormed = (s: string) => s.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd');
const encodeURIComponentSafe = (s: string) => encodeURIComponent(wellFormed(s));

const oddPathSegments = [
  'a%00b',
  '%00',
  '-1',
  '0',
  '1',
  '2',
  '3',
  '2147483647',
  '2147483648',
  '99999999999999999999',
  '1.5',
  '1e3',
  'NaN',
  '%20',
  '%ZZ',
  '%',
  '%C3%BC',
  '%F0%9F%92%A5',
  '%FF%FE',
  '%E2%80%AE',
  '..',
  '%2e%2e',
  '%2F',
  'a%2Fb',
  '%0A',
  '%7F',
  'x'.repeat(3000),
  '9'.repeat(400),
  ZONE,
  'FUZZ.TEST.',
  `www.${ZONE}`,
  'example.org',
  'abc_DEF-123',
];
const pathSegment: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...oddPathSegments) },
  { weight: 2, arbitrary: nastyString.map(encodeURIComponentSafe) },
  { weight: 1, arbitrary: fc.integer({ min: -5, max: 20 }).map(String) },
);

const queryValue = (schema: JsonSchema | undefined) =>
  fc.oneof(
    { weight: 3, arbitrary: valueOf(schema).map((v) => (typeof v === 'string' ? v : (JSON.stringify(v) ?? ''))) },
    { weight: 2, arbitrary: nastyString },
    { weight: 1, arbitrary: fc.array(nastyString, { minLength: 2, maxLength: 3 }) }, // a repeated parameter
  );

const rawQueries = ['%00=%00', 'a=%ZZ', '&&&=', '=', 'q=%E0%A4%A', 'limit=1&limit=2', '__proto__[x]=1', 'source=%00', `zone=${'%00'.repeat(50)}`];

interface Built {
  method: string;
  url: string;
  headers: Record<string, string>;
  payload?: string | Buffer;
  identity: 'anonymous' | 'admin';
}

type BodyChoice = { kind: 'none' } | { kind: 'raw'; contentType?: string; payload: string | Buffer };

function bodyOf(op: Operation): fc.Arbitrary<BodyChoice> {
  const schemas = Object.entries(op.content);
  const main = schemas.find(([type]) => type === 'application/json')?.[1] ?? schemas[0]?.[1];
  const json = (v: unknown, contentType = 'application/json') => ({ kind: 'raw' as const, contentType, payload: JSON.stringify(v) ?? 'null' });
  const form = (v: unknown) => {
    const params = new URLSearchParams();
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      for (const [k, x] of Object.entries(v)) params.append(wellFormed(k), wellFormed(typeof x === 'string' ? x : (JSON.stringify(x) ?? '')));
    }
    return { kind: 'raw' as const, contentType: 'application/x-www-form-urlencoded', payload: params.toString() };
  };
  const multipart = (v: unknown) => {
    const boundary = '----sonarfuzzboundary';
    const parts = v && typeof v === 'object' && !Array.isArray(v) ? Object.entries(v) : [];
    const text = parts
      .map(
        ([k, x]) =>
          `--${boundary}\r\nContent-Disposition: form-data; name="${k.replace(/["\r\n]/g, '')}"\r\n\r\n${typeof x === 'string' ? x : JSON.stringify(x)}\r\n`,
      )
      .join('');
    const file = `--${boundary}\r\nContent-Disposition: form-data; name="media_file"; filename="f\u0000.mp3"\r\nContent-Type: audio/mpeg\r\n\r\nnot audio\r\n`;
    return { kind: 'raw' as const, contentType: `multipart/form-data; boundary=${boundary}`, payload: Buffer.from(`${text}${file}--${boundary}--\r\n`) };
  };
  const broken: fc.Arbitrary<BodyChoice> = fc.oneof(
    fc.constantFrom<BodyChoice>(
      { kind: 'raw', contentType: 'application/json', payload: '{nope' },
      { kind: 'raw', contentType: 'application/json', payload: '{"a":' },
      { kind: 'raw', contentType: 'application/json', payload: '' },
      { kind: 'raw', contentType: 'application/json', payload: '{"username":"a\u0000b","name":"\u0000"}' },
      { kind: 'raw', contentType: 'application/json', payload: '['.repeat(10_000) },
      { kind: 'raw', contentType: 'application/json', payload: `{"a":"${'x'.repeat(2_000_000)}"}` },
      { kind: 'raw', contentType: 'application/json', payload: Buffer.from([0xff, 0xfe, 0x00, 0x7b]) },
      { kind: 'raw', contentType: 'application/json; charset=latin1', payload: '{}' },
      { kind: 'raw', contentType: 'text/plain', payload: 'hello' },
      { kind: 'raw', contentType: 'application/xml', payload: '<a/>' },
      { kind: 'raw', contentType: 'multipart/form-data', payload: 'no boundary' },
      { kind: 'raw', contentType: 'multipart/form-data; boundary=x', payload: '--x\r\ngarbage' },
      { kind: 'raw', contentType: 'application/x-www-form-urlencoded', payload: '%00=%00&a=%ZZ&&' },
      { kind: 'raw', contentType: 'application/offset+octet-stream', payload: Buffer.from('abc') },
      { kind: 'raw', contentType: '\u0000', payload: '{}' },
      { kind: 'raw', payload: '{"no":"content type"}' },
    ),
    nastyString.map((s): BodyChoice => ({ kind: 'raw', contentType: 'application/json', payload: s })),
  );
  const shaped = fc.oneof({ weight: 1, arbitrary: valueOf(main) }, { weight: main?.type === 'object' ? 2 : 0, arbitrary: mutatedObject(main ?? {}) });
  return fc.oneof(
    { weight: main ? 6 : 1, arbitrary: shaped.map((v) => json(v)) },
    { weight: schemas.some(([type]) => type.includes('urlencoded')) ? 2 : 1, arbitrary: shaped.map(form) },
    { weight: schemas.some(([type]) => type.includes('multipart')) ? 2 : 0, arbitrary: shaped.map(multipart) },
    { weight: 2, arbitrary: broken },
    { weight: main ? 1 : 3, arbitrary: fc.constant<BodyChoice>({ kind: 'none' }) },
  );
}

const extraHeaders: fc.Arbitrary<Record<string, string>> = fc.record(
  {
    'tus-resumable': fc.constantFrom('1.0.0', '0.2.2', '', 'x'),
    'upload-length': fc.oneof(fc.constantFrom('0', '1', '-1', '1e3', '99999999999999999999', 'abc'), fc.integer({ min: 0, max: 10_000 }).map(String)),
    'upload-offset': fc.constantFrom('0', '1', '-1', 'x'),
    'upload-metadata': fc.oneof(
      fc.constantFrom('filename ZnVienouLm1wMw==', 'filename', 'filename AAAA', 'a b c d', '%00', ''),
      nastyString.map((s) => `filename ${Buffer.from(s).toString('base64')},filetype ${Buffer.from(s).toString('base64')}`),
    ),
    'x-csrf-token': fc.constantFrom('forged', ''),
    'accept-language': fc.constantFrom('xx', '*', 'de-DE;q=0.5'),
  },
  { requiredKeys: [] },
);

/** Bogus credentials an anonymous caller may send. */
const bogusAuth: fc.Arbitrary<Record<string, string>> = fc.oneof(
  fc.constant({}),
  fc.constantFrom<Record<string, string>>(
    { authorization: 'Bearer garbage' },
    { authorization: 'Bearer sonar_pat_doesnotexist' },
    { authorization: 'Basic Zm9vOmJhcg==' },
    { authorization: `Basic ${Buffer.from('x:sonar_ddns_doesnotexist').toString('base64')}` },
    { authorization: 'Bearer ' + 'a'.repeat(5000) },
    { authorization: 'Bearer a.b.c' },
    { 'x-api-key': 'sonar_dns_wrong' },
    { cookie: 'sonar_session=forged' },
    { cookie: 'sonar_session=%00' },
  ),
);

function credentialsOf(op: Operation): Record<string, string> {
  if (op.path.startsWith('/api/dns/')) return { 'x-api-key': dnsKey };
  if (op.security.includes('personalToken')) return { authorization: `Bearer ${pat}` };
  if (op.security.includes('dyndnsBasic')) return { authorization: `Basic ${Buffer.from(`fuzz:${dyndnsToken}`).toString('base64')}` };
  return admin.auth;
}

function requestOf(op: Operation, identity: Built['identity']): fc.Arbitrary<Built> {
  const pathParams = op.parameters.filter((p) => p.in === 'path');
  const queryParams = op.parameters.filter((p) => p.in === 'query');
  return fc
    .record({
      segments: fc.record(Object.fromEntries(pathParams.map((p) => [p.name, pathSegment]))),
      query: fc.oneof(
        fc.record(Object.fromEntries(queryParams.map((p) => [p.name, queryValue(p.schema)])), { requiredKeys: [] }),
        mutatedObject({ type: 'object', properties: Object.fromEntries(queryParams.map((p) => [p.name, p.schema ?? {}])) }).map((q) =>
          Object.fromEntries(Object.entries(q).map(([k, v]) => [k, typeof v === 'string' ? v : (JSON.stringify(v) ?? '')])),
        ),
      ),
      extraQuery: fc.option(
        fc.oneof(
          fc.constantFrom(...rawQueries),
          fc.tuple(nastyString, nastyString).map(([k, v]) => `${encodeURIComponentSafe(k)}=${encodeURIComponentSafe(v)}`),
        ),
        { nil: undefined },
      ),
      body: bodyOf(op),
      headers: extraHeaders,
      auth: identity === 'admin' ? fc.constant(credentialsOf(op)) : bogusAuth,
    })
    .map(({ segments, query, extraQuery, body, headers, auth }): Built => {
      const p = op.path.replace(/\{([^}]+)\}/g, (_, name: string) => (segments as Record<string, string>)[name] ?? 'x');
      const qs: string[] = [];
      for (const [k, v] of Object.entries(query as Record<string, string | string[] | undefined>)) {
        for (const one of ([] as Array<string | undefined>).concat(v))
          if (one !== undefined) qs.push(`${encodeURIComponentSafe(k)}=${encodeURIComponentSafe(one)}`);
      }
      if (extraQuery) qs.push(extraQuery);
      const h: Record<string, string> = { ...headers, ...auth };
      if (body.kind === 'raw' && body.contentType !== undefined) h['content-type'] = body.contentType;
      return {
        method: op.method,
        url: qs.length ? `${p}?${qs.join('&')}` : p,
        headers: h,
        ...(body.kind === 'raw' ? { payload: body.payload } : {}),
        identity,
      };
    });
}

// ---- the property -----------------------------------------------------------------------------------

const clip = (s: string, n = 300) => (s.length > n ? `${JSON.stringify(s.slice(0, n)).slice(0, -1)}…" (${s.length} chars)` : JSON.stringify(s));

function describeRequest(r: Built): string {
  const body = r.payload === undefined ? '(none)' : clip(typeof r.payload === 'string' ? r.payload : r.payload.toString('latin1'));
  return `${r.method} ${clip(r.url, 500)} as ${r.identity}\n  headers: ${clip(JSON.stringify(r.headers), 500)}\n  body: ${body}`;
}

/** Patterns of internals that must never reach a client (bounded repetitions: bodies may echo 300 kB inputs). */
const INTERNALS: Array<[string, RegExp]> = [
  ['stack trace', /\bat (?:async )?[\w$.<>[\] ]{0,200}\(?(?:file:\/\/|node:|\/)[^\s)]{0,300}:\d+:\d+\)?/],
  ['error class', /\b(?:TypeError|ReferenceError|RangeError|SyntaxError|EvalError|AggregateError|DriverException|KnexTimeoutError|ValidationError|ZodError)\b/],
  [
    'SQL',
    /\b(?:syntax error at or near|invalid byte sequence for encoding|invalid input syntax for|violates (?:not-null|unique|foreign key|check) constraint|relation "[^"]*" does not exist|column "[^"]*" does not exist|SQLSTATE|pg_catalog)\b/i,
  ],
  ['SQL statement', /\b(?:select\s[^"]{1,200}?\sfrom|insert\s+into|delete\s+from|update\s+\w{1,64}\s+set)\s/i],
  ['file path', /(?:\/(?:home|root|work|usr|opt|srv|app|proc)\/[\w.-]{1,100}|node_modules|file:\/\/|\b[\w-]{1,100}\.(?:ts|js|mjs|cjs):\d+)/],
];

function internalsIn(body: string, request: string): string | null {
  // Zone file and key paths are part of the DNS zone list (documented); the fuzz media directory is ours.
  const text = body.split(ns.dir).join('<bind-dir>').split(mediaDir).join('<media-dir>');
  for (const [what, re] of INTERNALS) {
    const m = re.exec(text);
    // Text the request itself sent (echoed in a validation message) is not a leak.
    if (m && !request.includes(m[0])) return `${what}: ${clip(m[0], 120)}`;
  }
  return null;
}

function shapeProblem(r: Built, status: number, body: string, contentType: string): string | null {
  if (status < 400 || status === 429 || r.method === 'HEAD' || !contentType.includes('json')) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return 'error body is not JSON';
  }
  const irc = /^\/(?:irc\/api|api\/irclog)\//.test(r.url);
  const ok = (irc ? ircErrorBodySchema : errorBodySchema).safeParse(parsed).success;
  return ok ? null : `error body is not the documented ${irc ? '{success:false, error}' : '{ok:false, reason, message}'} shape`;
}

/**
 * Each request from its own loopback address: the per-client rate limits (fixed in code for the
 * speech routes) would otherwise answer most of the run with 429 before validation is reached.
 */
let requestNumber = 0;
const nextAddress = () => {
  const n = ++requestNumber;
  return `127.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255 || 1}`;
};

async function check(r: Built): Promise<void> {
  const res = await t.app.inject({
    method: r.method as 'GET',
    url: r.url,
    headers: r.headers,
    remoteAddress: nextAddress(),
    ...(r.payload !== undefined ? { payload: r.payload } : {}),
  });
  statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
  const contentType = String(res.headers['content-type'] ?? '');
  const requestText = `${decodeSafe(r.url)}\n${r.url}\n${JSON.stringify(r.headers)}\n${typeof r.payload === 'string' ? r.payload : (r.payload?.toString('latin1') ?? '')}`;
  const problems = [
    res.statusCode >= 500 ? `status ${res.statusCode}` : null,
    internalsIn(res.body, requestText),
    shapeProblem(r, res.statusCode, res.body, contentType),
  ].filter(Boolean);
  if (problems.length) {
    throw new Error(`${problems.join('; ')}\n${describeRequest(r)}\n  → ${res.statusCode} ${contentType}: ${clip(res.body, 600)}`);
  }
}

function decodeSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** Shown in fast-check's counterexample line: short, with huge strings clipped. */
function withToString(r: Built): Built {
  return Object.assign(r, { [fc.toStringMethod]: () => describeRequest(r) });
}

const identities = ['anonymous', 'admin'] as const;
const properties = operations.length * identities.length;
// At least 2 s each: fast-check fails a property interrupted before its first run, and one slow
// first request on a loaded machine (a cold chat-log query took 1.1 s) must not read as a defect.
const perPropertyMs = Math.max(2000, Math.floor(TIME_LIMIT_MS / properties));

describe('fuzz: every operation of /openapi.json answers below 500 without internals', () => {
  it('covers the whole document', () => {
    expect(operations.length).toBeGreaterThanOrEqual(40);
  });

  for (const identity of identities) {
    describe(identity, () => {
      for (const op of operations) {
        it(
          `${op.method} ${op.path}`,
          async () => {
            await fc.assert(fc.asyncProperty(requestOf(op, identity).map(withToString), check), {
              numRuns: RUNS,
              ...(SEED !== undefined ? { seed: SEED } : {}),
              interruptAfterTimeLimit: perPropertyMs,
            });
          },
          perPropertyMs * 4 + 30_000,
        );
      }
    });
  }
});

describe('control characters are refused at validation, naming the field', () => {
  const send = (method: 'GET' | 'POST' | 'DELETE' | 'HEAD', url: string, payload?: object, headers: Record<string, string> = {}) =>
    t.app.inject({ method, url, headers: { ...admin.auth, ...headers }, remoteAddress: '127.255.0.1', ...(payload ? { payload } : {}) });

  it('chat-log search terms (422, {success:false, error})', async () => {
    for (const field of ['q', 'nick', 'recipient', 'include_terms', 'exclude_terms']) {
      for (const prefix of ['/irc/api', '/api/irclog']) {
        const res = await t.app.inject({ method: 'GET', url: `${prefix}/logs?${field}=a%00b` });
        expect(res.statusCode, `${prefix} ${field}`).toBe(422);
        expect(res.json()).toEqual({ success: false, error: expect.stringContaining(field) });
      }
    }
    const alias = await send('POST', '/irc/api/admin/aliases', { network: 'net\u0000', nick: 'a', alias: 'b' });
    expect(alias.statusCode).toBe(422);
    expect(alias.json()).toEqual({ success: false, error: expect.stringContaining('network') });
  });

  it('sign-in and token names (422 with errors.<field>)', async () => {
    const login = await t.app.inject({ method: 'POST', url: '/api/account/login', payload: { username: 'a\u0000b', password: 'x' } });
    expect(login.statusCode).toBe(422);
    expect(login.json()).toMatchObject({ ok: false, reason: 'validation_failed', errors: { username: [expect.stringContaining('control characters')] } });
    const token = await send('POST', '/api/account/tokens', { name: 'ci\u0001', scopes: ['speech.api'] });
    expect(token.statusCode).toBe(422);
    expect(token.json().errors).toHaveProperty('name');
  });

  it('speech submissions: label refuses line breaks, the note allows them but not NUL', async () => {
    const label = await send('POST', '/api/speech/jobs', { source_url: 'http://127.0.0.1:1/a.mp3', source_label: 'a\nb' });
    expect(label.statusCode).toBe(422);
    expect(label.json().errors).toHaveProperty('source_label');
    const note = await send('POST', '/api/speech/jobs', { source_url: 'http://127.0.0.1:1/a.mp3', source_note: 'line 1\nline 2\u0000' });
    expect(note.statusCode).toBe(422);
    expect(note.json().errors).toHaveProperty('source_note');
    expect(note.json().errors.source_note[0]).toMatch(/other than tab and line breaks/);
  });

  it('DNS path parameters and bodies (400, the DNS API’s validation status)', async () => {
    for (const url of [`/api/dns/zones/a%00b`, `/api/dns/zones/a%00b/cache`, `/api/dns/zones/a%00b/axfr`, `/api/dns/zones/${ZONE}/search?q=a%00b`]) {
      const res = await send('GET', url, undefined, { 'x-api-key': dnsKey });
      expect(res.statusCode, url).toBe(400);
      expect(res.json()).toMatchObject({ ok: false, reason: 'validation_failed' });
    }
    const acme = await send('POST', '/api/dns/acme/present', { domain: `www.${ZONE}`, challenge: 'tok\u0000en' }, { 'x-api-key': dnsKey });
    expect(acme.statusCode).toBe(400);
    expect(acme.json().errors).toHaveProperty('challenge');
  });

  it('malformed URLs and over-long path parameters get the area’s documented body', async () => {
    const irc = await t.app.inject({ method: 'GET', url: '/irc/api/networks/%FF%FE/channels' });
    expect(irc.statusCode).toBe(422);
    expect(irc.json()).toEqual({ success: false, error: expect.any(String) });
    const long = await t.app.inject({ method: 'GET', url: `/api/speech/jobs/${'9'.repeat(400)}`, headers: admin.auth });
    expect(long.statusCode).toBe(414);
    expect(long.json()).toMatchObject({ ok: false, reason: 'validation_failed' });
  });

  it('tus requests with a control character in a header (422, not a 500 from the tus server)', async () => {
    const res = await send('HEAD', '/api/speech/uploads/abc', undefined, { 'tus-resumable': '1.0.0', 'upload-metadata': 'filename \u0000' });
    expect(res.statusCode).toBe(422);
    const post = await send('POST', '/api/speech/uploads', undefined, {
      'tus-resumable': '1.0.0',
      'upload-length': '10',
      'upload-metadata': 'filename \u0001',
    });
    expect(post.statusCode).toBe(422);
    expect(post.json()).toMatchObject({ ok: false, reason: 'validation_failed', errors: { 'upload-metadata': [expect.any(String)] } });
  });
});
