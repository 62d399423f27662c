/**
 * Record data in one structured shape, and one presentation renderer for it, so that AXFR answers,
 * query answers, zone-file reads and validated user input all print a record the same way (the
 * API compares and deletes records by their `rdata` string).
 *
 * Presentation conventions: domain names lower-case without the trailing dot ("." for the root);
 * character-strings always quoted with `\"`, `\\` and `\DDD` escapes (as BIND prints them);
 * AAAA in RFC 5952 form; types we do not model print in RFC 3597 generic form `\# len hex`.
 */
import dnsPacket from 'dns-packet';
import { DnsProtocolError } from './errors.js';
import { readName } from './message.js';

// dns-packet's typings omit its per-type RDATA codecs (`record(type)`); we use them to encode what we send.
interface RdataCodec {
  encode(data: unknown): Buffer;
}
const dnsPacketRecord = (dnsPacket as unknown as { record: (type: string) => RdataCodec }).record;

const TYPE_LIST: Array<[string, number]> = [
  ['A', 1],
  ['NS', 2],
  ['CNAME', 5],
  ['SOA', 6],
  ['PTR', 12],
  ['HINFO', 13],
  ['MX', 15],
  ['TXT', 16],
  ['RP', 17],
  ['AFSDB', 18],
  ['SIG', 24],
  ['KEY', 25],
  ['AAAA', 28],
  ['LOC', 29],
  ['SRV', 33],
  ['NAPTR', 35],
  ['KX', 36],
  ['CERT', 37],
  ['DNAME', 39],
  ['OPT', 41],
  ['APL', 42],
  ['DS', 43],
  ['SSHFP', 44],
  ['IPSECKEY', 45],
  ['RRSIG', 46],
  ['NSEC', 47],
  ['DNSKEY', 48],
  ['DHCID', 49],
  ['NSEC3', 50],
  ['NSEC3PARAM', 51],
  ['TLSA', 52],
  ['SMIMEA', 53],
  ['HIP', 55],
  ['CDS', 59],
  ['CDNSKEY', 60],
  ['OPENPGPKEY', 61],
  ['CSYNC', 62],
  ['ZONEMD', 63],
  ['SVCB', 64],
  ['HTTPS', 65],
  ['SPF', 99],
  ['TKEY', 249],
  ['TSIG', 250],
  ['IXFR', 251],
  ['AXFR', 252],
  ['ANY', 255],
  ['URI', 256],
  ['CAA', 257],
];
const TYPE_BY_NAME = new Map(TYPE_LIST);
const NAME_BY_TYPE = new Map(TYPE_LIST.map(([n, v]) => [v, n]));

/** Type mnemonic → number; also accepts RFC 3597 `TYPEnnn`. Undefined when unknown. */
export function typeNumber(type: string): number | undefined {
  const upper = type.toUpperCase();
  const known = TYPE_BY_NAME.get(upper);
  if (known !== undefined) return known;
  const m = /^TYPE(\d{1,5})$/.exec(upper);
  if (m && Number(m[1]) <= 65535) return Number(m[1]);
  return undefined;
}

export function typeName(type: number): string {
  return NAME_BY_TYPE.get(type) ?? `TYPE${type}`;
}

/** A CLASS code's mnemonic (RFC 3597 `CLASSnnn` for the unnamed ones). */
export function classNameOf(klass: number): string {
  return klass === 1 ? 'IN' : klass === 255 ? 'ANY' : klass === 254 ? 'NONE' : `CLASS${klass}`;
}

export type RecordData =
  | { type: 'A'; address: string }
  | { type: 'AAAA'; address: string }
  | { type: 'CNAME' | 'NS' | 'PTR' | 'DNAME'; target: string }
  | { type: 'MX'; preference: number; exchange: string }
  | { type: 'SRV'; priority: number; weight: number; port: number; target: string }
  | { type: 'TXT' | 'SPF'; strings: Buffer[] }
  | { type: 'CAA'; flags: number; tag: string; value: Buffer }
  | { type: 'SOA'; mname: string; rname: string; serial: number; refresh: number; retry: number; expire: number; minimum: number }
  | { type: 'GENERIC'; typeName: string; data: Buffer };

/** Types with a structured model (others are carried as generic bytes). */
export const MODELLED_TYPES = new Set(['A', 'AAAA', 'CNAME', 'NS', 'PTR', 'DNAME', 'MX', 'SRV', 'TXT', 'SPF', 'CAA', 'SOA']);

// ---- rendering ---------------------------------------------------------------------------------

/** A character-string, quoted, escaped as BIND does: `"` and `\` with a backslash, non-printables as \DDD. */
export function quoteCharacterString(bytes: Buffer): string {
  let out = '"';
  for (const b of bytes) {
    if (b === 0x22 || b === 0x5c) out += `\\${String.fromCharCode(b)}`;
    else if (b >= 0x20 && b < 0x7f) out += String.fromCharCode(b);
    else out += `\\${b.toString().padStart(3, '0')}`;
  }
  return `${out}"`;
}

export function ipv4ToText(bytes: Buffer): string {
  return `${bytes[0]}.${bytes[1]}.${bytes[2]}.${bytes[3]}`;
}

/** RFC 5952: lower-case hex, longest run (≥ 2) of zero groups as "::", IPv4-mapped in dotted form. */
export function ipv6ToText(bytes: Buffer): string {
  return ipv6At(bytes, 0);
}

/**
 * The groups RFC 5952 writes as "::" in an address of 8 groups: the first longest run of two or
 * more zero groups; start -1 when there is none.
 */
export function zeroRun(groups: ArrayLike<number>): { start: number; length: number } {
  let start = -1;
  let length = 0;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > length && j - i >= 2) {
      start = i;
      length = j - i;
    }
    i = j;
  }
  return { start, length };
}

/** ipv6ToText of the 16 bytes at `at` in `buf` (no buffer view made). */
function ipv6At(buf: Buffer, at: number): string {
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(buf.readUInt16BE(at + i));
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return `::ffff:${buf[at + 12]}.${buf[at + 13]}.${buf[at + 14]}.${buf[at + 15]}`;
  }
  const { start: bestStart, length: bestLen } = zeroRun(groups);
  const hex = (gs: number[]) => gs.map((g) => g.toString(16)).join(':');
  if (bestStart < 0) return hex(groups);
  return `${hex(groups.slice(0, bestStart))}::${hex(groups.slice(bestStart + bestLen))}`;
}

export function renderRdata(data: RecordData): string {
  switch (data.type) {
    case 'A':
    case 'AAAA':
      return data.address;
    case 'CNAME':
    case 'NS':
    case 'PTR':
    case 'DNAME':
      return data.target;
    case 'MX':
      return `${data.preference} ${data.exchange}`;
    case 'SRV':
      return `${data.priority} ${data.weight} ${data.port} ${data.target}`;
    case 'TXT':
    case 'SPF':
      return data.strings.map(quoteCharacterString).join(' ');
    case 'CAA':
      return `${data.flags} ${data.tag} ${quoteCharacterString(data.value)}`;
    case 'SOA':
      return `${data.mname} ${data.rname} ${data.serial} ${data.refresh} ${data.retry} ${data.expire} ${data.minimum}`;
    case 'GENERIC':
      return data.data.length === 0 ? '\\# 0' : `\\# ${data.data.length} ${data.data.toString('hex')}`;
  }
}

/** quoteCharacterString of bytes [start, end) of `buf`; printable runs without `"` or `\` are sliced as they are. */
function quoteBytesAt(buf: Buffer, start: number, end: number): string {
  for (let i = start; i < end; i++) {
    const b = buf[i]!;
    if (b < 0x20 || b >= 0x7f || b === 0x22 || b === 0x5c) return quoteCharacterString(buf.subarray(start, end));
  }
  return `"${buf.toString('latin1', start, end)}"`;
}

/**
 * The presentation text of one record's RDATA, what renderRdata(decodeRdata(…)) gives, straight
 * from the message bytes for the types zones are mostly made of (A, AAAA, CNAME, NS, PTR, MX, TXT),
 * without the intermediate objects, closures and buffer views: a 100,000-record transfer renders
 * that many, and their garbage was a good part of its time. Anything unusual (other types, a
 * length that does not fit) goes the long way, which also raises the errors.
 */
export function rdataText(type: number, msg: Buffer, offset: number, length: number): string {
  const end = offset + length;
  switch (type) {
    case 1: // A
      if (length === 4) return `${msg[offset]}.${msg[offset + 1]}.${msg[offset + 2]}.${msg[offset + 3]}`;
      break;
    case 28: // AAAA
      if (length === 16) return ipv6At(msg, offset);
      break;
    case 2: // NS
    case 5: // CNAME
    case 12: {
      // PTR
      const r = readName(msg, offset);
      if (r.next === end) return r.name;
      break;
    }
    case 15: {
      // MX
      if (length < 3) break;
      const r = readName(msg, offset + 2);
      if (r.next === end) return `${msg.readUInt16BE(offset)} ${r.name}`;
      break;
    }
    case 16: {
      // TXT
      let out = '';
      let p = offset;
      while (p < end) {
        const n = msg[p]!;
        if (p + 1 + n > end) return renderRdata(decodeRdata(type, msg, offset, length));
        out += p === offset ? quoteBytesAt(msg, p + 1, p + 1 + n) : ` ${quoteBytesAt(msg, p + 1, p + 1 + n)}`;
        p += 1 + n;
      }
      return out;
    }
  }
  return renderRdata(decodeRdata(type, msg, offset, length));
}

/** Joins the character-strings of a TXT presentation (`"a" "b"`) back into one value. */
export function txtValue(data: RecordData): string {
  if (data.type !== 'TXT' && data.type !== 'SPF') throw new TypeError(`not a TXT record: ${data.type}`);
  return Buffer.concat(data.strings).toString('utf8');
}

// ---- wire → structure --------------------------------------------------------------------------

/** Decodes RDATA found at `offset` in a whole message (names inside may be compressed pointers into it). */
export function decodeRdata(type: number, msg: Buffer, offset: number, length: number): RecordData {
  const end = offset + length;
  const rd = msg.subarray(offset, end);
  const name = (at: number) => {
    const r = readName(msg, at);
    if (r.next > end) throw new DnsProtocolError(`name in ${typeName(type)} RDATA runs past its RDLENGTH`);
    return r;
  };
  const need = (n: number) => {
    if (length < n) throw new DnsProtocolError(`${typeName(type)} RDATA of ${length} bytes is too short`);
  };
  const exact = (used: number) => {
    if (used !== end) throw new DnsProtocolError(`${typeName(type)} RDATA length ${length} does not match its content`);
  };
  switch (typeName(type)) {
    case 'A':
      if (length !== 4) throw new DnsProtocolError(`A RDATA must be 4 bytes, got ${length}`);
      return { type: 'A', address: ipv4ToText(rd) };
    case 'AAAA':
      if (length !== 16) throw new DnsProtocolError(`AAAA RDATA must be 16 bytes, got ${length}`);
      return { type: 'AAAA', address: ipv6ToText(rd) };
    case 'CNAME':
    case 'NS':
    case 'PTR':
    case 'DNAME': {
      const r = name(offset);
      exact(r.next);
      return { type: typeName(type) as 'CNAME', target: r.name };
    }
    case 'MX': {
      need(3);
      const r = name(offset + 2);
      exact(r.next);
      return { type: 'MX', preference: rd.readUInt16BE(0), exchange: r.name };
    }
    case 'SRV': {
      need(7);
      const r = name(offset + 6);
      exact(r.next);
      return { type: 'SRV', priority: rd.readUInt16BE(0), weight: rd.readUInt16BE(2), port: rd.readUInt16BE(4), target: r.name };
    }
    case 'TXT':
    case 'SPF': {
      const strings: Buffer[] = [];
      let p = 0;
      while (p < length) {
        const n = rd[p]!;
        if (p + 1 + n > length) throw new DnsProtocolError('TXT character-string runs past RDLENGTH');
        strings.push(Buffer.from(rd.subarray(p + 1, p + 1 + n)));
        p += 1 + n;
      }
      return { type: typeName(type) as 'TXT', strings };
    }
    case 'CAA': {
      need(2);
      const tagLen = rd[1]!;
      if (2 + tagLen > length) throw new DnsProtocolError('CAA tag runs past RDLENGTH');
      return {
        type: 'CAA',
        flags: rd[0]!,
        tag: rd
          .subarray(2, 2 + tagLen)
          .toString('latin1')
          .toLowerCase(),
        value: Buffer.from(rd.subarray(2 + tagLen)),
      };
    }
    case 'SOA': {
      const m = name(offset);
      const r = name(m.next);
      if (r.next + 20 !== end) throw new DnsProtocolError('SOA RDATA length does not match its content');
      const at = r.next;
      return {
        type: 'SOA',
        mname: m.name,
        rname: r.name,
        serial: msg.readUInt32BE(at),
        refresh: msg.readUInt32BE(at + 4),
        retry: msg.readUInt32BE(at + 8),
        expire: msg.readUInt32BE(at + 12),
        minimum: msg.readUInt32BE(at + 16),
      };
    }
    default:
      return { type: 'GENERIC', typeName: typeName(type), data: Buffer.from(rd) };
  }
}

// ---- structure → wire (what we send) -----------------------------------------------------------

/** RDATA bytes (without RDLENGTH) for a record we send, encoded by dns-packet's codecs. */
export function encodeRdata(data: RecordData): Buffer {
  let withLength: Buffer;
  switch (data.type) {
    case 'A':
    case 'AAAA':
      withLength = dnsPacketRecord(data.type).encode(data.address);
      break;
    case 'CNAME':
    case 'NS':
    case 'PTR':
    case 'DNAME':
      withLength = dnsPacketRecord(data.type).encode(data.target);
      break;
    case 'MX':
      withLength = dnsPacketRecord('MX').encode({ preference: data.preference, exchange: data.exchange });
      break;
    case 'SRV':
      withLength = dnsPacketRecord('SRV').encode({ priority: data.priority, weight: data.weight, port: data.port, target: data.target });
      break;
    case 'TXT':
    case 'SPF':
      withLength = dnsPacketRecord('TXT').encode(data.strings.map((s) => Buffer.from(s)));
      break;
    case 'CAA':
      withLength = dnsPacketRecord('CAA').encode({ flags: data.flags, tag: data.tag, value: data.value.toString('utf8') });
      break;
    case 'SOA':
      withLength = dnsPacketRecord('SOA').encode({
        mname: data.mname,
        rname: data.rname,
        serial: data.serial,
        refresh: data.refresh,
        retry: data.retry,
        expire: data.expire,
        minimum: data.minimum,
      });
      break;
    case 'GENERIC':
      return Buffer.from(data.data);
  }
  const out = withLength.subarray(2);
  if (withLength.readUInt16BE(0) !== out.length) throw new Error(`dns-packet encoded ${data.type} with a wrong RDLENGTH`);
  return out;
}
