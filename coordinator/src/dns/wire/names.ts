/**
 * Validation before anything is encoded: names, TTLs and record data as the API receives them.
 * Errors are values (`{field, message}` lists) so the HTTP layer can answer 400 validation_failed
 * naming the failing field; nothing here throws on bad input.
 *
 * The same parsers read BIND's own presentation output (zone-file.ts, dig output in tests) in
 * `lenient` mode, where escaped names and any label characters are accepted as they are.
 */
import { isIPv4, isIPv6 } from 'node:net';
import { labelsToName } from './message.js';
import { ipv6ToText, renderRdata, type RecordData } from './rdata.js';

export interface FieldError {
  field: string;
  message: string;
}

export type Validation<T> = { ok: true; value: T } | { ok: false; errors: FieldError[] };

const ok = <T>(value: T): Validation<T> => ({ ok: true, value });
const fail = <T>(field: string, message: string): Validation<T> => ({ ok: false, errors: [{ field, message }] });

/** `{field: [messages]}` as AppError/validationFailed takes it. */
export function fieldErrorsToRecord(errors: FieldError[]): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const e of errors) (out[e.field] ??= []).push(e.message);
  return out;
}

// ---- names ---------------------------------------------------------------------------------

/** One spelling per name: trimmed, lower-case, no trailing dot; the root stays ".". */
export function normalizeName(name: string): string {
  const t = name.trim().toLowerCase();
  if (t === '.' || t === '') return t;
  return t.endsWith('.') ? t.slice(0, -1) : t;
}

/** True when `name` is the zone apex or below it (label-wise, so "badexample.org" is not in "example.org"). */
export function isInZone(name: string, zone: string): boolean {
  const n = normalizeName(name);
  const z = normalizeName(zone);
  if (z === '.') return true;
  return n === z || n.endsWith(`.${z}`);
}

/**
 * - `owner`: owner names; letters, digits, hyphen and underscore (`_acme-challenge`, `_sip._tcp`),
 *   a leftmost `*` label for wildcards.
 * - `hostname`: names that must resolve to addresses (NS, MX exchange, SRV target): letters, digits
 *   and inner hyphens only (RFC 952/1123).
 * - `target`: other names in record data (CNAME/PTR targets); owner rules without the wildcard.
 */
export type NameKind = 'owner' | 'hostname' | 'target';

const OWNER_LABEL = /^[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?$/;
const HOST_LABEL = /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/;

export interface NameOptions {
  field?: string;
  allowRoot?: boolean;
}

/** A field the request left out (JSON null counts as left out). */
const absent = (v: unknown) => v === undefined || v === null;

/** Validates and normalises a name. Presentation length ≤ 253 characters, wire ≤ 255 octets, labels 1–63. */
export function validateName(input: unknown, kind: NameKind, opts: NameOptions = {}): Validation<string> {
  const field = opts.field ?? 'domain';
  if (typeof input !== 'string') return fail(field, absent(input) ? 'is required' : 'must be a string');
  const raw = input.trim();
  if (raw === '') return fail(field, 'is required');
  if (/[^\x21-\x7e]/.test(raw)) return fail(field, 'must be ASCII without spaces (use the punycode form of internationalised names)');
  if (raw.includes('\\')) return fail(field, 'must not contain backslash escapes');
  const name = normalizeName(raw);
  if (name === '.') return opts.allowRoot ? ok('.') : fail(field, 'must not be the root name');
  if (name.length > 253) return fail(field, `is ${name.length} characters long; a name has at most 253`);
  const labels = name.split('.');
  let wire = 1;
  for (const [i, label] of labels.entries()) {
    if (label.length === 0) return fail(field, 'has an empty label (two dots in a row or a leading dot)');
    if (label.length > 63) return fail(field, `label "${label.slice(0, 20)}…" is ${label.length} octets; a label has at most 63`);
    wire += label.length + 1;
    if (label === '*') {
      if (kind !== 'owner') return fail(field, 'must not contain a wildcard');
      if (i !== 0) return fail(field, 'may contain "*" only as the leftmost label');
      continue;
    }
    if (label.includes('*')) return fail(field, '"*" must be a whole label (the leftmost one)');
    const re = kind === 'hostname' ? HOST_LABEL : OWNER_LABEL;
    if (!re.test(label)) {
      return fail(
        field,
        kind === 'hostname'
          ? `label "${label}" is not a valid host name label (letters, digits, inner hyphens)`
          : `label "${label}" may hold only letters, digits, "-" and "_", and must not start or end with "-"`,
      );
    }
  }
  if (wire > 255) return fail(field, `is ${wire} octets in wire form; a name has at most 255`);
  return ok(name);
}

// ---- TTL -----------------------------------------------------------------------------------

export const MAX_TTL = 2147483647; // RFC 2181 §8

export function validateTtl(input: unknown, field = 'ttl'): Validation<number> {
  const n = typeof input === 'string' && /^\d{1,10}$/.test(input.trim()) ? Number(input.trim()) : input;
  if (typeof n !== 'number' || !Number.isInteger(n)) return fail(field, 'must be an integer number of seconds');
  if (n < 0 || n > MAX_TTL) return fail(field, `must be between 0 and ${MAX_TTL}`);
  return ok(n);
}

// ---- presentation tokens -------------------------------------------------------------------

interface Token {
  bytes: Buffer;
  quoted: boolean;
  text: string;
}

/** Splits presentation RDATA into tokens: quoted strings or whitespace-separated words, with `\X` and `\DDD` escapes. */
export function tokenize(input: string): Validation<Token[]> {
  const tokens: Token[] = [];
  const src = Buffer.from(input, 'utf8');
  let i = 0;
  while (i < src.length) {
    const c = src[i]!;
    if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) {
      i++;
      continue;
    }
    const quoted = c === 0x22;
    const start = i;
    if (quoted) i++;
    const out: number[] = [];
    let closed = !quoted;
    while (i < src.length) {
      const b = src[i]!;
      if (quoted && b === 0x22) {
        closed = true;
        i++;
        break;
      }
      if (!quoted && (b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d)) break;
      if (!quoted && b === 0x22) return fail('target', 'has a quote inside an unquoted word');
      if (b === 0x5c) {
        const d = src.subarray(i + 1, i + 4).toString('latin1');
        if (/^\d{3}$/.test(d)) {
          const v = Number(d);
          if (v > 255) return fail('target', `escape \\${d} is above 255`);
          out.push(v);
          i += 4;
          continue;
        }
        if (i + 1 >= src.length) return fail('target', 'ends with a lone backslash');
        out.push(src[i + 1]!);
        i += 2;
        continue;
      }
      out.push(b);
      i++;
    }
    if (!closed) return fail('target', 'has an unterminated quoted string');
    tokens.push({ bytes: Buffer.from(out), quoted, text: src.subarray(start, i).toString('utf8') });
  }
  return ok(tokens);
}

/** A presentation name with escapes (as BIND prints it) → normalised name. Relative names are taken as absolute. */
export function parsePresentationName(token: Token): Validation<string> {
  if (!token.quoted && token.text === '.') return ok('.');
  // Split on unescaped dots: walk the original text, since escaped dots are part of a label.
  const labels: Buffer[] = [];
  let cur: number[] = [];
  const src = Buffer.from(token.text, 'utf8');
  for (let i = 0; i < src.length; i++) {
    const b = src[i]!;
    if (b === 0x5c) {
      const d = src.subarray(i + 1, i + 4).toString('latin1');
      if (/^\d{3}$/.test(d)) {
        cur.push(Number(d) & 0xff);
        i += 3;
      } else if (i + 1 < src.length) {
        cur.push(src[++i]!);
      }
      continue;
    }
    if (b === 0x2e) {
      if (cur.length === 0) return fail('target', `name "${token.text}" has an empty label`);
      labels.push(Buffer.from(cur));
      cur = [];
      continue;
    }
    cur.push(b);
  }
  if (cur.length) labels.push(Buffer.from(cur));
  if (labels.some((l) => l.length > 63)) return fail('target', `name "${token.text}" has a label over 63 octets`);
  if (labels.reduce((n, l) => n + l.length + 1, 1) > 255) return fail('target', `name "${token.text}" is over 255 octets`);
  return ok(labelsToName(labels));
}

// ---- record data ---------------------------------------------------------------------------

/** Types the write API accepts. */
export const WRITABLE_TYPES = ['A', 'AAAA', 'CNAME', 'NS', 'TXT', 'MX', 'SRV', 'CAA', 'PTR'] as const;
export type WritableType = (typeof WRITABLE_TYPES)[number];

export interface RdataOptions {
  field?: string;
  /** Read BIND's presentation output: escaped names allowed, no host-name rules, no TXT splitting of raw text. */
  lenient?: boolean;
}

const IPV4 = /^(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?:\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

/** 16 bytes of an IPv6 address in any textual form isIPv6 accepts (no zone index). */
export function ipv6ToBytes(text: string): Buffer | null {
  if (!isIPv6(text) || text.includes('%')) return null;
  let s = text.toLowerCase();
  const tail: number[] = [];
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (v4) {
    if (!isIPv4(v4[1]!)) return null;
    const p = v4[1]!.split('.').map(Number);
    tail.push((p[0]! << 8) | p[1]!, (p[2]! << 8) | p[3]!);
    s = s.slice(0, -v4[1]!.length);
    if (s.endsWith(':') && !s.endsWith('::')) s = s.slice(0, -1);
  }
  const [head, rest] = s.includes('::') ? s.split('::') : [s, undefined];
  const parse = (part: string | undefined) =>
    part
      ? part
          .split(':')
          .filter((x) => x !== '')
          .map((h) => parseInt(h, 16))
      : [];
  const left = parse(head);
  const right = [...parse(rest), ...tail];
  const fill = 8 - left.length - right.length;
  if (fill < 0 || (rest === undefined && fill !== 0)) return null;
  const groups = [...left, ...new Array<number>(rest === undefined ? 0 : fill).fill(0), ...right];
  if (groups.length !== 8) return null;
  const buf = Buffer.alloc(16);
  groups.forEach((g, i) => buf.writeUInt16BE(g, i * 2));
  return buf;
}

function uint(token: Token | undefined, max: number, what: string, field: string): Validation<number> {
  if (!token || token.quoted || !/^\d+$/.test(token.text)) return fail(field, `${what} must be an integer`);
  const n = Number(token.text);
  if (n > max) return fail(field, `${what} must be between 0 and ${max}`);
  return ok(n);
}

/** Splits bytes into character-strings of ≤ 255 octets, preferring not to cut inside a UTF-8 sequence. */
export function splitCharacterStrings(bytes: Buffer): Buffer[] {
  const out: Buffer[] = [];
  let pos = 0;
  while (bytes.length - pos > 255) {
    let cut = pos + 255;
    // A continuation byte (10xxxxxx) at the cut means we would split a character; back off up to 3.
    for (let back = 0; back < 3 && (bytes[cut]! & 0xc0) === 0x80; back++) cut--;
    out.push(bytes.subarray(pos, cut));
    pos = cut;
  }
  out.push(bytes.subarray(pos));
  return out;
}

/**
 * Parses record data of `type` from presentation text into the structured shape.
 *
 * Strict mode (API input): names follow `validateName` rules; a TXT value that does not start with
 * `"` is taken as raw text and split into ≤ 255-byte character-strings; quoted TXT strings longer
 * than 255 bytes are split too; MX/SRV `.` means "no service".
 */
export function parseRdata(type: string, text: unknown, opts: RdataOptions = {}): Validation<RecordData> {
  const field = opts.field ?? 'target';
  const lenient = opts.lenient ?? false;
  if (typeof text !== 'string') return fail(field, absent(text) ? 'is required' : 'must be a string');
  const t = type.toUpperCase();

  if (!lenient && (t === 'TXT' || t === 'SPF') && !text.trimStart().startsWith('"')) {
    if (text.length === 0) return fail(field, 'is required');
    return txtData(t, splitCharacterStrings(Buffer.from(text, 'utf8')), field);
  }

  const tk = tokenize(text);
  if (!tk.ok) return { ok: false, errors: tk.errors.map((e) => ({ ...e, field })) };
  const tokens = tk.value;
  if (tokens.length === 0) return fail(field, 'is required');
  const count = (n: number, shape: string): Validation<null> =>
    tokens.length === n ? ok(null) : fail(field, `must have the form "${shape}" (${n} part${n > 1 ? 's' : ''}, got ${tokens.length})`);
  const name = (token: Token, kind: NameKind, allowRoot: boolean): Validation<string> => {
    if (lenient) {
      const r = parsePresentationName(token);
      return r.ok ? r : { ok: false, errors: r.errors.map((e) => ({ ...e, field })) };
    }
    if (token.quoted) return fail(field, 'names must not be quoted');
    return validateName(token.text, kind, { field, allowRoot });
  };

  switch (t) {
    case 'A': {
      const c = count(1, 'IPv4 address');
      if (!c.ok) return c;
      if (!IPV4.test(tokens[0]!.text)) return fail(field, `"${tokens[0]!.text}" is not an IPv4 address (dotted quad, no leading zeros)`);
      return ok({ type: 'A', address: tokens[0]!.text });
    }
    case 'AAAA': {
      const c = count(1, 'IPv6 address');
      if (!c.ok) return c;
      const bytes = ipv6ToBytes(tokens[0]!.text);
      if (!bytes) return fail(field, `"${tokens[0]!.text}" is not an IPv6 address`);
      return ok({ type: 'AAAA', address: ipv6ToText(bytes) });
    }
    case 'CNAME':
    case 'PTR':
    case 'DNAME':
    case 'NS': {
      const c = count(1, 'domain name');
      if (!c.ok) return c;
      const n = name(tokens[0]!, t === 'NS' ? 'hostname' : 'target', false);
      return n.ok ? ok({ type: t, target: n.value }) : n;
    }
    case 'MX': {
      const c = count(2, 'preference exchange');
      if (!c.ok) return c;
      const pref = uint(tokens[0], 65535, 'preference', field);
      if (!pref.ok) return pref;
      const ex = name(tokens[1]!, 'hostname', true);
      return ex.ok ? ok({ type: 'MX', preference: pref.value, exchange: ex.value }) : ex;
    }
    case 'SRV': {
      const c = count(4, 'priority weight port target');
      if (!c.ok) return c;
      const priority = uint(tokens[0], 65535, 'priority', field);
      if (!priority.ok) return priority;
      const weight = uint(tokens[1], 65535, 'weight', field);
      if (!weight.ok) return weight;
      const port = uint(tokens[2], 65535, 'port', field);
      if (!port.ok) return port;
      const target = name(tokens[3]!, 'hostname', true);
      if (!target.ok) return target;
      return ok({ type: 'SRV', priority: priority.value, weight: weight.value, port: port.value, target: target.value });
    }
    case 'TXT':
    case 'SPF': {
      const strings = tokens.flatMap((tok) => (lenient ? [tok.bytes] : splitCharacterStrings(tok.bytes)));
      if (strings.some((s) => s.length > 255)) return fail(field, 'has a character-string longer than 255 bytes');
      return txtData(t, strings, field);
    }
    case 'CAA': {
      const c = count(3, 'flags tag "value"');
      if (!c.ok) return c;
      const flags = uint(tokens[0], 255, 'flags', field);
      if (!flags.ok) return flags;
      const tag = tokens[1]!;
      if (tag.quoted || !/^[A-Za-z0-9]{1,15}$/.test(tag.text)) return fail(field, 'CAA tag must be 1–15 letters or digits (issue, issuewild, iodef)');
      const value = tokens[2]!.bytes;
      if (!lenient && /[^\x20-\x7e]/.test(value.toString('latin1'))) return fail(field, 'CAA value must be printable ASCII');
      if (2 + tag.text.length + value.length > 65535) return fail(field, 'CAA value is too long');
      return ok({ type: 'CAA', flags: flags.value, tag: tag.text.toLowerCase(), value });
    }
    case 'SOA': {
      const c = count(7, 'mname rname serial refresh retry expire minimum');
      if (!c.ok) return c;
      const m = name(tokens[0]!, 'hostname', true);
      if (!m.ok) return m;
      const r = name(tokens[1]!, 'target', true);
      if (!r.ok) return r;
      const nums: number[] = [];
      for (const [i, what] of ['serial', 'refresh', 'retry', 'expire', 'minimum'].entries()) {
        const v = uint(tokens[2 + i], 0xffffffff, what, field);
        if (!v.ok) return v;
        nums.push(v.value);
      }
      const [serial, refresh, retry, expire, minimum] = nums as [number, number, number, number, number];
      return ok({ type: 'SOA', mname: m.value, rname: r.value, serial, refresh, retry, expire, minimum });
    }
    default:
      return fail('type', `record type ${type} is not supported`);
  }
}

function txtData(type: 'TXT' | 'SPF', strings: Buffer[], field: string): Validation<RecordData> {
  const rdlength = strings.reduce((n, s) => n + s.length + 1, 0);
  if (rdlength > 65535) return fail(field, `is ${rdlength} bytes of record data; a record holds at most 65535`);
  return ok({ type, strings });
}

// ---- whole record --------------------------------------------------------------------------

export interface RecordInput {
  domain?: unknown;
  type?: unknown;
  target?: unknown;
  ttl?: unknown;
}

export interface ValidRecord {
  /** Normalised owner name. */
  name: string;
  type: WritableType;
  /** Undefined when no TTL was given and none is required. */
  ttl: number | undefined;
  data: RecordData;
  /** Canonical presentation of `data`, the same string AXFR/query answers render. */
  rdata: string;
}

export interface RecordOptions {
  /** When set, the owner must be at or below this zone. */
  zone?: string;
  requireTtl?: boolean;
  /** Field names in errors (defaults: domain, type, target, ttl). */
  fields?: Partial<Record<'domain' | 'type' | 'target' | 'ttl', string>>;
}

/** Validates one write payload (`domain`, `type`, `target`, `ttl`), collecting every failing field. */
export function validateRecord(input: RecordInput, opts: RecordOptions = {}): Validation<ValidRecord> {
  const f = { domain: 'domain', type: 'type', target: 'target', ttl: 'ttl', ...opts.fields };
  const errors: FieldError[] = [];

  const name = validateName(input.domain, 'owner', { field: f.domain });
  if (!name.ok) errors.push(...name.errors);
  else if (opts.zone !== undefined && !isInZone(name.value, opts.zone)) {
    errors.push({ field: f.domain, message: `${name.value} is not in zone ${normalizeName(opts.zone)}` });
  }

  let type: WritableType | undefined;
  if (typeof input.type !== 'string') errors.push({ field: f.type, message: absent(input.type) ? 'is required' : 'must be a string' });
  else if (input.type.trim() === '') errors.push({ field: f.type, message: 'is required' });
  else {
    const upper = input.type.trim().toUpperCase();
    if ((WRITABLE_TYPES as readonly string[]).includes(upper)) type = upper as WritableType;
    else errors.push({ field: f.type, message: `must be one of ${WRITABLE_TYPES.join(', ')}` });
  }

  let ttl: number | undefined;
  if (input.ttl === undefined || input.ttl === null) {
    if (opts.requireTtl) errors.push({ field: f.ttl, message: 'is required' });
  } else {
    const v = validateTtl(input.ttl, f.ttl);
    if (v.ok) ttl = v.value;
    else errors.push(...v.errors);
  }

  let data: RecordData | undefined;
  if (type) {
    const r = parseRdata(type, input.target, { field: f.target });
    if (r.ok) data = r.value;
    else errors.push(...r.errors);
  }

  if (name.ok && type === 'CNAME') {
    if (opts.zone !== undefined && normalizeName(opts.zone) === name.value) {
      errors.push({ field: f.domain, message: 'a CNAME cannot be placed at the zone apex (it would sit beside SOA and NS)' });
    }
    if (data?.type === 'CNAME' && data.target === name.value) errors.push({ field: f.target, message: 'a CNAME must not point at itself' });
  }

  if (errors.length || !name.ok || !type || !data) return { ok: false, errors };
  return { ok: true, value: { name: name.value, type, ttl, data, rdata: renderRdata(data) } };
}
