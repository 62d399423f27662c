/**
 * Reading DNS messages at byte level (RFC 1035 §4). dns-packet encodes our requests, but answers
 * are read here because TSIG verification needs the byte offsets of each RR (to strip the TSIG RR
 * and hash exactly what was signed) and because dns-packet neither escapes odd label bytes nor
 * knows class NONE.
 */
import { DnsProtocolError } from './errors.js';

export const CLASS_IN = 1;
export const CLASS_NONE = 254;
export const CLASS_ANY = 255;

export const OPCODE_QUERY = 0;
export const OPCODE_UPDATE = 5;

export interface Header {
  id: number;
  qr: boolean;
  opcode: number;
  aa: boolean;
  tc: boolean;
  rcode: number;
  qdcount: number;
  ancount: number;
  nscount: number;
  arcount: number;
}

export interface WireQuestion {
  name: string;
  type: number;
  class: number;
}

/** One resource record as found in a message; `start`/`end` delimit it in the raw bytes. */
export interface WireRecord {
  name: string;
  type: number;
  class: number;
  ttl: number;
  rdataOffset: number;
  rdataLength: number;
  start: number;
  end: number;
}

export interface WireMessage {
  raw: Buffer;
  header: Header;
  questions: WireQuestion[];
  answers: WireRecord[];
  authorities: WireRecord[];
  additionals: WireRecord[];
}

export function readHeader(buf: Buffer): Header {
  if (buf.length < 12) throw new DnsProtocolError(`message of ${buf.length} bytes is shorter than a DNS header`);
  const flags = buf.readUInt16BE(2);
  return {
    id: buf.readUInt16BE(0),
    qr: (flags & 0x8000) !== 0,
    opcode: (flags >> 11) & 0xf,
    aa: (flags & 0x0400) !== 0,
    tc: (flags & 0x0200) !== 0,
    rcode: flags & 0xf,
    qdcount: buf.readUInt16BE(4),
    ancount: buf.readUInt16BE(6),
    nscount: buf.readUInt16BE(8),
    arcount: buf.readUInt16BE(10),
  };
}

// Label bytes that must be backslash-escaped in presentation form (as BIND prints them).
const SPECIAL = new Set([0x22, 0x28, 0x29, 0x2e, 0x3b, 0x5c, 0x40, 0x24]);

/** One label in presentation form, lower-cased (names compare case-insensitively; we keep one spelling). */
export function labelToText(label: Buffer): string {
  let out = '';
  for (const raw of label) {
    const b = raw >= 0x41 && raw <= 0x5a ? raw + 0x20 : raw;
    if (SPECIAL.has(b)) out += `\\${String.fromCharCode(b)}`;
    else if (b > 0x20 && b < 0x7f) out += String.fromCharCode(b);
    else out += `\\${b.toString().padStart(3, '0')}`;
  }
  return out;
}

/** Labels → normalised presentation name: lower-case, no trailing dot, root is ".". */
export function labelsToName(labels: Buffer[]): string {
  return labels.length === 0 ? '.' : labels.map(labelToText).join('.');
}

/**
 * Names already read from one message, by the offset of their first label: a name's suffix (the
 * zone's labels, mostly) is read once per message and reused through every compression pointer
 * to it (a 100,000-record transfer reads about as many names as records, nearly all ending in a
 * pointer). Kept per message buffer, so it goes away with the message.
 */
const nameMemo = new WeakMap<Buffer, Map<number, string>>();

/** One label's text: the common case (a-z, 0-9, hyphen, underscore) straight from the bytes. */
function labelText(buf: Buffer, start: number, end: number): string {
  for (let i = start; i < end; i++) {
    const b = buf[i]!;
    if (!((b >= 0x61 && b <= 0x7a) || (b >= 0x30 && b <= 0x39) || b === 0x2d || b === 0x5f)) return labelToText(buf.subarray(start, end));
  }
  return buf.toString('latin1', start, end);
}

/**
 * Reads a possibly compressed name at `offset`. Returns the name and the offset just after it
 * in the original position. Checked by checkName first (pointers only backwards, so loops are
 * impossible), then read without further checks.
 */
export function readName(buf: Buffer, offset: number): { name: string; next: number } {
  const next = checkName(buf, offset);
  let memo = nameMemo.get(buf);
  if (!memo) {
    memo = new Map();
    nameMemo.set(buf, memo);
  }
  const texts: string[] = [];
  const starts: number[] = [];
  let pos = offset;
  let tail: string | undefined;
  for (;;) {
    const len = buf[pos]!;
    if (len === 0) break;
    if ((len & 0xc0) === 0xc0) {
      pos = ((len & 0x3f) << 8) | buf[pos + 1]!;
      // The rest was read before: its text is reused.
      tail = memo.get(pos);
      if (tail !== undefined) break;
      continue;
    }
    starts.push(pos);
    texts.push(labelText(buf, pos + 1, pos + 1 + len));
    pos += 1 + len;
  }
  let name = tail;
  for (let i = texts.length - 1; i >= 0; i--) {
    name = name === undefined ? texts[i]! : `${texts[i]!}.${name}`;
    memo.set(starts[i]!, name);
  }
  return { name: name ?? '.', next };
}

/**
 * Encodes a validated, unescaped name (no "\" escapes; see names.ts) uncompressed. With
 * `canonical` the labels are lower-cased, as TSIG's digest requires (RFC 8945 §4.3.3).
 */
export function encodeName(name: string, canonical = false): Buffer {
  const trimmed = name.endsWith('.') ? name.slice(0, -1) : name;
  if (trimmed === '') return Buffer.from([0]);
  const parts: Buffer[] = [];
  for (const label of trimmed.split('.')) {
    const bytes = Buffer.from(canonical ? label.toLowerCase() : label, 'utf8');
    if (bytes.length === 0 || bytes.length > 63) throw new DnsProtocolError(`cannot encode label "${label}" of ${bytes.length} octets`);
    parts.push(Buffer.from([bytes.length]), bytes);
  }
  parts.push(Buffer.from([0]));
  const out = Buffer.concat(parts);
  if (out.length > 255) throw new DnsProtocolError(`name ${name} is longer than 255 octets`);
  return out;
}

function readRecord(buf: Buffer, offset: number): WireRecord {
  const { name, next } = readName(buf, offset);
  if (next + 10 > buf.length) throw new DnsProtocolError('record header runs past the end of the message');
  const rdataLength = buf.readUInt16BE(next + 8);
  const rdataOffset = next + 10;
  if (rdataOffset + rdataLength > buf.length) throw new DnsProtocolError('RDATA runs past the end of the message');
  return {
    name,
    type: buf.readUInt16BE(next),
    class: buf.readUInt16BE(next + 2),
    ttl: buf.readUInt32BE(next + 4),
    rdataOffset,
    rdataLength,
    start: offset,
    end: rdataOffset + rdataLength,
  };
}

/** The offset just after the name at `offset`, without reading it (pointers are not followed: a pointer ends a name). */
function skipName(buf: Buffer, offset: number): number {
  let pos = offset;
  for (;;) {
    if (pos >= buf.length) throw new DnsProtocolError('name runs past the end of the message');
    const len = buf[pos]!;
    if (len === 0) return pos + 1;
    const kind = len & 0xc0;
    if (kind === 0xc0) {
      if (pos + 1 >= buf.length) throw new DnsProtocolError('truncated compression pointer');
      return pos + 2;
    }
    if (kind !== 0) throw new DnsProtocolError(`unsupported label type 0x${len.toString(16)}`);
    pos += 1 + len;
  }
}

/**
 * The last record of a message (where a TSIG record must be), found by skipping over the others
 * without reading their names or data; null when the message has no records. The records before
 * it are read (and checked) by parseMessage after TSIG verification.
 */
export function lastRecord(
  raw: Buffer,
  /** Where the last record starts, when a walk of the message (scanAnswers) already found it. */
  start?: number,
): { header: Header; record: WireRecord; section: 'answer' | 'authority' | 'additional' } | null {
  const header = readHeader(raw);
  const total = header.ancount + header.nscount + header.arcount;
  if (total === 0) return null;
  let pos = start ?? 12;
  if (start === undefined) {
    for (let i = 0; i < header.qdcount; i++) {
      pos = skipName(raw, pos) + 4;
      if (pos > raw.length) throw new DnsProtocolError('question runs past the end of the message');
    }
    for (let i = 0; i < total - 1; i++) {
      const next = skipName(raw, pos);
      if (next + 10 > raw.length) throw new DnsProtocolError('record header runs past the end of the message');
      pos = next + 10 + raw.readUInt16BE(next + 8);
      if (pos > raw.length) throw new DnsProtocolError('RDATA runs past the end of the message');
    }
  }
  const record = readRecord(raw, pos);
  if (record.end !== raw.length) throw new DnsProtocolError(`${raw.length - record.end} bytes of trailing garbage after the last record`);
  const section = header.arcount > 0 ? 'additional' : header.nscount > 0 ? 'authority' : 'answer';
  return { header, record, section };
}

/**
 * The offset just after the name at `offset` (where it starts), after checking the whole name:
 * label types, pointers only backwards, labels inside the message, at most 255 octets. readName
 * checks through this; a transfer's records are checked with it alone (scanAnswers).
 */
export function checkName(buf: Buffer, offset: number): number {
  let pos = offset;
  let next = -1;
  let wireLength = 1;
  let lowestJump = offset;
  for (;;) {
    if (pos >= buf.length) throw new DnsProtocolError('name runs past the end of the message');
    const len = buf[pos]!;
    if (len === 0) return next < 0 ? pos + 1 : next;
    const kind = len & 0xc0;
    if (kind === 0xc0) {
      if (pos + 1 >= buf.length) throw new DnsProtocolError('truncated compression pointer');
      const target = ((len & 0x3f) << 8) | buf[pos + 1]!;
      if (target >= lowestJump) throw new DnsProtocolError('compression pointer does not point backwards');
      if (next < 0) next = pos + 2;
      lowestJump = target;
      pos = target;
      continue;
    }
    if (kind !== 0) throw new DnsProtocolError(`unsupported label type 0x${len.toString(16)}`);
    if (pos + 1 + len > buf.length) throw new DnsProtocolError('label runs past the end of the message');
    wireLength += len + 1;
    if (wireLength > 255) throw new DnsProtocolError('name longer than 255 octets');
    pos += 1 + len;
  }
}

/** Fields of one record in a RecordTable's `fields`, RECORD_FIELDS per record. */
export const RT_START = 0;
export const RT_TYPE = 1;
export const RT_CLASS = 2;
export const RT_TTL = 3;
export const RT_RDATA = 4;
export const RT_RDLENGTH = 5;
export const RECORD_FIELDS = 6;

/** The answer records of a message as numbers: owner offset, type, class, TTL, RDATA offset and length. */
export interface RecordTable {
  count: number;
  fields: Uint32Array;
  /** Where the message's last record (of any section) starts; -1 when it has none. */
  lastStart: number;
}

/**
 * The answer section as a RecordTable, every section checked as parseMessage checks it, but no
 * name read as text and no object made per record: a zone transfer's hundred thousand records
 * are read this way (the owner's text, where needed, is readName(raw, fields[RT_START])).
 */
export function scanAnswers(raw: Buffer): RecordTable {
  const header = readHeader(raw);
  let pos = 12;
  for (let i = 0; i < header.qdcount; i++) {
    const next = checkName(raw, pos);
    if (next + 4 > raw.length) throw new DnsProtocolError('question runs past the end of the message');
    pos = next + 4;
  }
  const fields = new Uint32Array(header.ancount * RECORD_FIELDS);
  const total = header.ancount + header.nscount + header.arcount;
  let lastStart = -1;
  for (let i = 0; i < total; i++) {
    lastStart = pos;
    const next = checkName(raw, pos);
    if (next + 10 > raw.length) throw new DnsProtocolError('record header runs past the end of the message');
    const rdataLength = raw.readUInt16BE(next + 8);
    const rdataOffset = next + 10;
    if (rdataOffset + rdataLength > raw.length) throw new DnsProtocolError('RDATA runs past the end of the message');
    if (i < header.ancount) {
      const f = i * RECORD_FIELDS;
      fields[f + RT_START] = pos;
      fields[f + RT_TYPE] = raw.readUInt16BE(next);
      fields[f + RT_CLASS] = raw.readUInt16BE(next + 2);
      fields[f + RT_TTL] = raw.readUInt32BE(next + 4);
      fields[f + RT_RDATA] = rdataOffset;
      fields[f + RT_RDLENGTH] = rdataLength;
    }
    pos = rdataOffset + rdataLength;
  }
  if (pos !== raw.length) throw new DnsProtocolError(`${raw.length - pos} bytes of trailing garbage after the last record`);
  return { count: header.ancount, fields, lastStart };
}

/** Parses the header and walks every section; RDATA stays in place (see rdata.ts to decode it). */
export function parseMessage(raw: Buffer): WireMessage {
  const header = readHeader(raw);
  let pos = 12;
  const questions: WireQuestion[] = [];
  for (let i = 0; i < header.qdcount; i++) {
    const { name, next } = readName(raw, pos);
    if (next + 4 > raw.length) throw new DnsProtocolError('question runs past the end of the message');
    questions.push({ name, type: raw.readUInt16BE(next), class: raw.readUInt16BE(next + 2) });
    pos = next + 4;
  }
  const section = (count: number) => {
    const out: WireRecord[] = [];
    for (let i = 0; i < count; i++) {
      const rr = readRecord(raw, pos);
      out.push(rr);
      pos = rr.end;
    }
    return out;
  };
  const answers = section(header.ancount);
  const authorities = section(header.nscount);
  const additionals = section(header.arcount);
  if (pos !== raw.length) throw new DnsProtocolError(`${raw.length - pos} bytes of trailing garbage after the last record`);
  return { raw, header, questions, answers, authorities, additionals };
}
