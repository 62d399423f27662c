/**
 * Rows of dns_record_cache in PostgreSQL's COPY text format, written straight into a byte buffer.
 *
 * A refresh moves every record of a zone (100,000 and more) from the transfer into COPY. Built as
 * strings (a record object, a template string per row, a regular expression per field, and one
 * UTF-8 encoding of the whole text at the end) this was most of the coordinator's CPU time in a
 * refresh, half of it garbage collection. Here each field's characters go into the buffer as they
 * are read, and a record read from a transfer message renders its A address from the message bytes
 * without any string. `record()` (provider zones) and `wire()` (transfers) write the same bytes for
 * the same record; a test compares them.
 *
 * COPY text format (PostgreSQL docs, COPY, "Text Format"): columns separated by tabs, rows ended by
 * a newline; backslash, tab, newline and carriage return in a value are written as \\, \t, \n, \r.
 */
import { readName, RECORD_FIELDS, RT_CLASS, RT_RDATA, RT_RDLENGTH, RT_START, RT_TTL, RT_TYPE } from './wire/message.js';
import { classNameOf, normalizeName, rdataText, typeName, type DnsRecord } from './wire/index.js';
import { zeroRun } from './wire/rdata.js';

/** The columns every row gives, in this order (the COPY statement's column list). */
export const CACHE_COPY_COLUMNS = 'id, zone_id, sort_key, type_rank, name, type, class, ttl, rdata';

const TAB = 0x09;
const NEWLINE = 0x0a;
const BACKSLASH = 0x5c;
const DOT = 0x2e;
const COLON = 0x3a;
const QUOTE = 0x22;
const HEX = Buffer.from('0123456789abcdef', 'latin1');
const MAPPED_PREFIX = Buffer.from('::ffff:', 'latin1');

/**
 * Bytes reserved at the start of each row, enough for everything written without a check of its
 * own: id and zone id (20 + 11), two names of at most 255 characters on the label path, the rank,
 * type and class mnemonics, the TTL, an A address or an MX preference with a name, tabs and the
 * newline. Text of unknown length (escaped names, other record data) makes its own room.
 */
const ROW_ROOM = 1536;

/** The rank that puts a name's SOA, then NS records first in the cache order (typeRank in zone-cache.ts, by type code). */
const rankOfCode = (type: number) => (type === 6 ? 0x30 : type === 2 ? 0x31 : 0x32);

export class CacheRowWriter {
  private buf: Buffer;
  private pos = 0;
  /** `<zone id>\t`, written after each row's id. */
  private readonly prefix: Uint8Array;
  /** Type and class mnemonics by code, as bytes. */
  private readonly typeNames = new Map<number, Uint8Array>();
  private readonly classNames = new Map<number, Uint8Array>();
  rows = 0;
  /** The labels of the name readLabels read last (offsets into its message). */
  private readonly labelStart = new Int32Array(128);
  private readonly labelEnd = new Int32Array(128);
  private labelCount = 0;
  /** Whether the labels read hold an upper-case letter. */
  private labelsUpper = false;
  /** The groups of the IPv6 address being written. */
  private readonly groups = new Uint16Array(8);

  constructor(zoneId: number, initialBytes = 1 << 19) {
    this.buf = Buffer.allocUnsafe(Math.max(initialBytes, 2 * ROW_ROOM));
    this.prefix = Buffer.from(`${Math.trunc(zoneId)}\t`, 'latin1');
  }

  /** Bytes written since the last take(). */
  get size(): number {
    return this.pos;
  }

  /** The rows written so far; the writer goes on in a buffer of its own (no copy). */
  take(): Buffer {
    const out = this.buf.subarray(0, this.pos);
    this.buf = Buffer.allocUnsafe(this.buf.length);
    this.pos = 0;
    return out;
  }

  /** A record in presentation form (provider zones, and the reference for `wire`). */
  record(r: DnsRecord): void {
    this.start();
    this.sortKey(normalizeName(r.name));
    this.byte(TAB);
    this.byte(r.type === 'SOA' ? 0x30 : r.type === 'NS' ? 0x31 : 0x32);
    this.byte(TAB);
    this.text(r.name);
    this.byte(TAB);
    this.text(r.type);
    this.byte(TAB);
    this.text(r.class);
    this.byte(TAB);
    this.uint(r.ttl);
    this.byte(TAB);
    this.text(r.rdata);
    this.byte(NEWLINE);
  }

  /**
   * Record `i` of a transfer message's RecordTable (wire/message.ts), written from the message
   * bytes: names label by label, an A address digit by digit, other data through rdataText (the
   * renderer every answer uses).
   */
  wire(msg: Buffer, f: Uint32Array, i: number): void {
    const o = i * RECORD_FIELDS;
    const type = f[o + RT_TYPE]!;
    const owner = f[o + RT_START]!;
    this.start();
    // The owner straight from its labels; a name with characters that presentation form escapes
    // (rare; and sortKey splits at an escaped dot too) is written from its text instead.
    if (this.readLabels(msg, owner)) {
      this.labels(msg, true);
      this.byte(TAB);
      this.byte(rankOfCode(type));
      this.byte(TAB);
      this.labels(msg, false);
    } else {
      const name = readName(msg, owner).name;
      this.sortKey(name);
      this.byte(TAB);
      this.byte(rankOfCode(type));
      this.byte(TAB);
      this.text(name);
    }
    this.byte(TAB);
    this.bytes(this.mnemonic(this.typeNames, type, typeName));
    this.byte(TAB);
    this.bytes(this.mnemonic(this.classNames, f[o + RT_CLASS]!, classNameOf));
    this.byte(TAB);
    this.uint(f[o + RT_TTL]!);
    this.byte(TAB);
    this.rdata(msg, type, f[o + RT_RDATA]!, f[o + RT_RDLENGTH]!);
    this.byte(NEWLINE);
  }

  /** RDATA as rdataText renders it: A, AAAA, TXT/SPF and names (NS, CNAME, PTR, MX) from the bytes; the rest through rdataText. */
  private rdata(msg: Buffer, type: number, at: number, length: number): void {
    const end = at + length;
    switch (type) {
      case 1: // A
        if (length !== 4) break;
        this.uint(msg[at]!);
        this.byte(DOT);
        this.uint(msg[at + 1]!);
        this.byte(DOT);
        this.uint(msg[at + 2]!);
        this.byte(DOT);
        this.uint(msg[at + 3]!);
        return;
      case 2: // NS
      case 5: // CNAME
      case 12: // PTR
        if (this.readLabels(msg, at) === end) {
          this.labels(msg, false);
          return;
        }
        break;
      case 15: // MX
        if (length >= 3 && this.readLabels(msg, at + 2) === end) {
          this.uint(msg.readUInt16BE(at));
          this.byte(0x20);
          this.labels(msg, false);
          return;
        }
        break;
      case 16: // TXT
      case 99: // SPF
        if (this.characterStrings(msg, at, end)) return;
        break;
      case 28: // AAAA
        if (length === 16) {
          this.ipv6(msg, at);
          return;
        }
        break;
    }
    this.text(rdataText(type, msg, at, length));
  }

  /**
   * An IPv6 address as rdataText writes it (RFC 5952: lower-case hex without leading zeros, the
   * first longest run of two or more zero groups as "::", an IPv4-mapped address dotted), within
   * the row's reserved room.
   */
  private ipv6(msg: Buffer, at: number): void {
    const g = this.groups;
    for (let i = 0; i < 8; i++) g[i] = (msg[at + 2 * i]! << 8) | msg[at + 2 * i + 1]!;
    if (g[0] === 0 && g[1] === 0 && g[2] === 0 && g[3] === 0 && g[4] === 0 && g[5] === 0xffff) {
      this.bytes(MAPPED_PREFIX);
      for (let i = 12; i < 16; i++) {
        if (i > 12) this.byte(DOT);
        this.uint(msg[at + i]!);
      }
      return;
    }
    const { start: runStart, length: runLength } = zeroRun(g);
    for (let i = 0; i < 8; i++) {
      if (i === runStart) {
        this.byte(COLON);
        this.byte(COLON);
        i += runLength - 1;
        continue;
      }
      if (i > 0 && i !== runStart + runLength) this.byte(COLON);
      this.hex(g[i]!);
    }
  }

  /** A 16-bit group in lower-case hex without leading zeros. */
  private hex(n: number): void {
    for (let shift = n >= 0x1000 ? 12 : n >= 0x100 ? 8 : n >= 0x10 ? 4 : 0; shift >= 0; shift -= 4) this.byte(HEX[(n >> shift) & 15]!);
  }

  /**
   * TXT/SPF data as rdataText writes it (each character-string quoted, `"` and `\` escaped with a
   * backslash, other bytes outside printable ASCII as \DDD, separated by spaces), with COPY's
   * doubling of each backslash. False, with nothing written, when the strings do not fill the data
   * exactly (rdataText then says what is wrong).
   */
  private characterStrings(msg: Buffer, at: number, end: number): boolean {
    if (at >= end) return false;
    let p = at;
    while (p < end) p += 1 + msg[p]!;
    if (p !== end) return false;
    // At most 5 bytes for a data byte (\\DDD), 3 for a string's length byte (quotes, space).
    this.room(5 * (end - at) + ROW_ROOM);
    const buf = this.buf;
    let pos = this.pos;
    for (p = at; p < end;) {
      const stop = p + 1 + msg[p]!;
      if (p > at) buf[pos++] = 0x20;
      buf[pos++] = QUOTE;
      for (let i = p + 1; i < stop; i++) {
        const b = msg[i]!;
        if (b === QUOTE || b === BACKSLASH) {
          buf[pos++] = BACKSLASH;
          buf[pos++] = BACKSLASH;
          if (b === BACKSLASH) buf[pos++] = BACKSLASH;
          buf[pos++] = b;
        } else if (b >= 0x20 && b < 0x7f) buf[pos++] = b;
        else {
          buf[pos++] = BACKSLASH;
          buf[pos++] = BACKSLASH;
          buf[pos++] = 0x30 + ((b / 100) | 0);
          buf[pos++] = 0x30 + (((b / 10) | 0) % 10);
          buf[pos++] = 0x30 + (b % 10);
        }
      }
      buf[pos++] = QUOTE;
      p = stop;
    }
    this.pos = pos;
    return true;
  }

  /**
   * Reads the labels of the (already validated) name at `at`, following compression pointers, into
   * labelStart/labelEnd. Returns the offset just after the name where it starts, or 0 when a label
   * holds a byte other than a letter, digit, hyphen or underscore (presentation form would escape it).
   */
  private readLabels(msg: Buffer, at: number): number {
    let n = 0;
    let next = 0;
    let upper = false;
    for (;;) {
      const len = msg[at]!;
      if (len === 0) {
        if (next === 0) next = at + 1;
        break;
      }
      if ((len & 0xc0) === 0xc0) {
        if (next === 0) next = at + 2;
        at = ((len & 0x3f) << 8) | msg[at + 1]!;
        continue;
      }
      const end = at + 1 + len;
      for (let i = at + 1; i < end; i++) {
        const b = msg[i]!;
        if (b >= 0x61 && b <= 0x7a) continue;
        if (b >= 0x41 && b <= 0x5a) upper = true;
        else if (!((b >= 0x30 && b <= 0x39) || b === 0x2d || b === 0x5f)) return 0;
      }
      this.labelStart[n] = at + 1;
      this.labelEnd[n] = end;
      n++;
      at = end;
    }
    this.labelCount = n;
    this.labelsUpper = upper;
    return next;
  }

  /**
   * The labels read, lower-cased and joined by dots: in order (the name), or last first (its sort
   * key). The root is ".". Within the row's reserved room (a name is at most 255 bytes).
   */
  private labels(msg: Buffer, reversed: boolean): void {
    const buf = this.buf;
    const starts = this.labelStart;
    const ends = this.labelEnd;
    const upper = this.labelsUpper;
    let pos = this.pos;
    const n = this.labelCount;
    if (n === 0) buf[pos++] = DOT;
    for (let j = 0; j < n; j++) {
      const k = reversed ? n - 1 - j : j;
      if (j > 0) buf[pos++] = DOT;
      const end = ends[k]!;
      // Most names are lower case already: then a plain copy.
      if (upper)
        for (let i = starts[k]!; i < end; i++) {
          const b = msg[i]!;
          buf[pos++] = b >= 0x41 && b <= 0x5a ? b + 0x20 : b;
        }
      else for (let i = starts[k]!; i < end; i++) buf[pos++] = msg[i]!;
    }
    this.pos = pos;
  }

  private mnemonic(cache: Map<number, Uint8Array>, code: number, name: (code: number) => string): Uint8Array {
    let bytes = cache.get(code);
    if (bytes === undefined) cache.set(code, (bytes = Buffer.from(name(code), 'latin1')));
    return bytes;
  }

  /** A row's id, -1, -2, … in the order written (see CACHE_COPY_COLUMNS), then the zone id; reserves the row's room. */
  private start(): void {
    this.rows++;
    this.room(ROW_ROOM);
    this.byte(0x2d);
    this.uint(this.rows);
    this.byte(TAB);
    this.bytes(this.prefix);
  }

  /** Room for `n` more bytes. */
  private room(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + n + ROW_ROOM));
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }

  /** One byte, within the row's reserved room. */
  private byte(b: number): void {
    this.buf[this.pos++] = b;
  }

  /** Short ASCII bytes without COPY specials (mnemonics, the zone id), within the row's reserved room. */
  private bytes(b: Uint8Array): void {
    const buf = this.buf;
    let pos = this.pos;
    for (let i = 0; i < b.length; i++) buf[pos++] = b[i]!;
    this.pos = pos;
  }

  /** A non-negative integer below 2^32 (TTL, address octet, id) in decimal, within the row's reserved room. */
  private uint(n: number): void {
    let digits = 1;
    for (let x = n; x >= 10; x = (x / 10) >>> 0) digits++;
    let p = this.pos + digits;
    this.pos = p;
    const buf = this.buf;
    do {
      const q = (n / 10) >>> 0;
      buf[--p] = 0x30 + n - q * 10;
      n = q;
    } while (n > 0);
  }

  /** `s[from, to)` as one COPY value's characters: escaped, UTF-8. Makes its own room. */
  private text(s: string, from = 0, to = s.length): void {
    // Each character takes at most 2 bytes here (an escape); others go through the UTF-8 path.
    this.room(2 * (to - from) + ROW_ROOM);
    const buf = this.buf;
    let pos = this.pos;
    for (let i = from; i < to; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x80) {
        this.pos = pos;
        this.utf8(s.slice(i, to));
        return;
      }
      if (c === BACKSLASH || c === TAB || c === NEWLINE || c === 0x0d) {
        buf[pos++] = BACKSLASH;
        buf[pos++] = c === BACKSLASH ? BACKSLASH : c === TAB ? 0x74 : c === NEWLINE ? 0x6e : 0x72;
      } else buf[pos++] = c;
    }
    this.pos = pos;
  }

  /** The rest of a value that holds non-ASCII characters (text from a provider's API). Makes its own room. */
  private utf8(s: string): void {
    const escaped = s.replace(/[\\\t\n\r]/g, (c) => (c === '\\' ? '\\\\' : c === '\t' ? '\\t' : c === '\n' ? '\\n' : '\\r'));
    this.room(Buffer.byteLength(escaped) + ROW_ROOM);
    this.pos += this.buf.write(escaped, this.pos, 'utf8');
  }

  /**
   * sortKey() of zone-cache.ts for a normalised name, written as it is computed: the labels in
   * reverse order ("www.example.org" → "org.example.www").
   */
  private sortKey(name: string): void {
    let end = name.length;
    for (let i = end - 1; i >= 0; i--) {
      if (name.charCodeAt(i) !== DOT) continue;
      this.text(name, i + 1, end);
      this.byte(DOT);
      end = i;
    }
    this.text(name, 0, end);
  }
}
