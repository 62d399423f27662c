/**
 * TSIG (RFC 8945) with HMAC-SHA256 over node:crypto. dns-packet cannot encode or decode TSIG RRs,
 * so the RR is built here and appended to a message dns-packet produced (ARCOUNT patched), and on
 * receipt the TSIG RR is cut from the raw bytes before the MAC is recomputed: the MAC covers the
 * message exactly as it was before signing, with the original ID.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { DnsProtocolError, TSIG_ERROR_CODES, TsigError, type TsigErrorCode } from './errors.js';
import { CLASS_ANY, encodeName, lastRecord, parseMessage, readName, type WireRecord } from './message.js';

export const TYPE_TSIG = 250;
export const HMAC_SHA256 = 'hmac-sha256';
export const DEFAULT_FUDGE = 300;
const MAC_LENGTH = 32;
// RFC 8945 §5.2.2.1: a truncated MAC shorter than max(10, half the hash) must be refused.
const MIN_MAC_LENGTH = 16;
// RFC 8945 §5.3.1: a client must give up after 99 unsigned messages in a row.
const MAX_UNSIGNED_RUN = 99;

export interface TsigKey {
  /** Key name as configured on the server (`key "<name>" {...}`), e.g. "sonar-key". */
  name: string;
  /** Base64 secret (as tsig-keygen prints it) or raw bytes. */
  secret: string | Buffer;
  /** Only hmac-sha256 is implemented. */
  algorithm?: typeof HMAC_SHA256;
}

/** The fields of a TSIG RR (RFC 8945 §4.2), plus where it starts in the message. */
export interface TsigRecord {
  keyName: string;
  algorithm: string;
  timeSigned: number;
  fudge: number;
  mac: Buffer;
  originalId: number;
  error: number;
  otherData: Buffer;
  /** Offset of the TSIG RR in the raw message. */
  start: number;
}

const ERROR_NAMES = Object.fromEntries(Object.entries(TSIG_ERROR_CODES).map(([k, v]) => [v, k])) as Record<number, TsigErrorCode>;

export function secretBytes(key: TsigKey): Buffer {
  if (Buffer.isBuffer(key.secret)) return key.secret;
  const buf = Buffer.from(key.secret, 'base64');
  if (buf.length === 0) throw new TypeError(`TSIG key ${key.name} has an empty or invalid base64 secret`);
  return buf;
}

function checkAlgorithm(key: TsigKey) {
  if (key.algorithm !== undefined && key.algorithm.toLowerCase() !== HMAC_SHA256) {
    throw new TypeError(`TSIG algorithm ${key.algorithm} is not supported (only ${HMAC_SHA256})`);
  }
}

/** Reads a BIND key clause (`key "name" { algorithm hmac-sha256; secret "..."; };`), as tsig-keygen writes it. */
export function parseKeyFile(text: string): TsigKey {
  const m = /key\s+"?([^"\s{]+)"?\s*\{([^}]*)\}/.exec(text);
  if (!m) throw new TypeError('no key clause found');
  const algorithm = /algorithm\s+"?([\w-]+)"?\s*;/.exec(m[2]!)?.[1]?.toLowerCase();
  const secret = /secret\s+"([^"]+)"\s*;/.exec(m[2]!)?.[1];
  if (!secret) throw new TypeError(`key ${m[1]} has no secret`);
  if (algorithm !== HMAC_SHA256) throw new TypeError(`key ${m[1]} uses ${algorithm ?? 'no algorithm'}; only ${HMAC_SHA256} is supported`);
  return { name: m[1]!, secret, algorithm: HMAC_SHA256 };
}

const u16 = (n: number) => {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
};
const u48 = (n: number) => {
  const b = Buffer.alloc(6);
  b.writeUIntBE(n, 0, 6);
  return b;
};

/** "TSIG Variables" (RFC 8945 §4.3.3): key name and algorithm in canonical (lower-case, uncompressed) form. */
function variables(keyName: string, algorithm: string, time: number, fudge: number, error: number, other: Buffer): Buffer {
  return Buffer.concat([
    encodeName(keyName, true),
    u16(CLASS_ANY),
    Buffer.alloc(4), // TTL 0
    encodeName(algorithm, true),
    u48(time),
    u16(fudge),
    u16(error),
    u16(other.length),
    other,
  ]);
}

/** "TSIG Timers" used by the later messages of a multi-message answer (RFC 8945 §5.3.1). */
function timers(time: number, fudge: number): Buffer {
  return Buffer.concat([u48(time), u16(fudge)]);
}

/** A prior or request MAC enters the digest with its 2-byte length (RFC 8945 §4.3.1). */
function macWithLength(mac: Buffer): Buffer {
  return Buffer.concat([u16(mac.length), mac]);
}

function hmac(key: TsigKey, parts: Buffer[]): Buffer {
  const h = createHmac('sha256', secretBytes(key));
  for (const p of parts) h.update(p);
  return h.digest();
}

function tsigRR(keyName: string, t: Omit<TsigRecord, 'keyName' | 'start'>): Buffer {
  const rdata = Buffer.concat([
    encodeName(t.algorithm),
    u48(t.timeSigned),
    u16(t.fudge),
    u16(t.mac.length),
    t.mac,
    u16(t.originalId),
    u16(t.error),
    u16(t.otherData.length),
    t.otherData,
  ]);
  const fixed = Buffer.alloc(10);
  fixed.writeUInt16BE(TYPE_TSIG, 0);
  fixed.writeUInt16BE(CLASS_ANY, 2);
  fixed.writeUInt32BE(0, 4);
  fixed.writeUInt16BE(rdata.length, 8);
  return Buffer.concat([encodeName(keyName), fixed, rdata]);
}

function appendRR(message: Buffer, rr: Buffer): Buffer {
  const out = Buffer.concat([message, rr]);
  out.writeUInt16BE(message.readUInt16BE(10) + 1, 10);
  return out;
}

export const nowSeconds = () => Math.floor(Date.now() / 1000);

export interface SignOptions {
  /** Seconds since the epoch; defaults to now. */
  timeSigned?: number;
  fudge?: number;
  /** Responder side: the MAC of the request being answered (first message of an answer). */
  requestMac?: Buffer;
  /**
   * Responder side, later message of a multi-message answer: the MAC of the previous signed
   * message and the unsigned messages sent since, which this signature also covers.
   */
  continuation?: { priorMac: Buffer; unsigned: Buffer[] };
  /** TSIG error to report (responder side); 0 normally. */
  error?: number;
  otherData?: Buffer;
}

/**
 * Signs a complete DNS message (as encoded, TSIG not yet present) and returns it with the TSIG RR
 * appended. Requests use no options; the rest exist so tests can play a signing server.
 */
export function signMessage(message: Buffer, key: TsigKey, opts: SignOptions = {}): { message: Buffer; mac: Buffer; timeSigned: number } {
  checkAlgorithm(key);
  if (message.length < 12) throw new DnsProtocolError('cannot sign a message shorter than a header');
  const timeSigned = opts.timeSigned ?? nowSeconds();
  const fudge = opts.fudge ?? DEFAULT_FUDGE;
  const error = opts.error ?? 0;
  const otherData = opts.otherData ?? Buffer.alloc(0);
  const parts: Buffer[] = [];
  if (opts.continuation) {
    parts.push(macWithLength(opts.continuation.priorMac), ...opts.continuation.unsigned, message, timers(timeSigned, fudge));
  } else {
    if (opts.requestMac) parts.push(macWithLength(opts.requestMac));
    parts.push(message, variables(key.name, HMAC_SHA256, timeSigned, fudge, error, otherData));
  }
  const mac = hmac(key, parts);
  const rr = tsigRR(key.name, { algorithm: HMAC_SHA256, timeSigned, fudge, mac, originalId: message.readUInt16BE(0), error, otherData });
  return { message: appendRR(message, rr), mac, timeSigned };
}

/** Appends an unsigned TSIG RR carrying only an error (how servers answer BADKEY/BADSIG). For tests. */
export function appendTsigError(message: Buffer, keyName: string, error: number, timeSigned = nowSeconds()): Buffer {
  return appendRR(
    message,
    tsigRR(keyName, {
      algorithm: HMAC_SHA256,
      timeSigned,
      fudge: DEFAULT_FUDGE,
      mac: Buffer.alloc(0),
      originalId: message.readUInt16BE(0),
      error,
      otherData: Buffer.alloc(0),
    }),
  );
}

/**
 * Finds the TSIG RR (it must be the last additional record) and returns it with the message as
 * it was before signing: TSIG cut off, ARCOUNT decremented, ID set back to the original ID.
 */
export function extractTsig(raw: Buffer, lastStart?: number): { tsig: TsigRecord; head: Buffer; rest: Buffer } | null {
  // The common case, a TSIG record last in the additional section, without reading the other
  // records (parseMessage reads them once, after verification; a transfer's scan has found the
  // last one already); anything else the whole way.
  const last = lastRecord(raw, lastStart);
  let rr: WireRecord;
  let arcount: number;
  if (last?.record.type === TYPE_TSIG && last.section === 'additional') {
    rr = last.record;
    arcount = last.header.arcount;
  } else {
    const msg = parseMessage(raw);
    const all = [...msg.answers, ...msg.authorities, ...msg.additionals];
    const idx = all.findIndex((r) => r.type === TYPE_TSIG);
    if (idx < 0) return null;
    rr = all[idx]!;
    if (rr !== msg.additionals[msg.additionals.length - 1]) {
      throw new TsigError('MALFORMED', 'local', 'TSIG record is not the last record of the additional section');
    }
    arcount = msg.header.arcount;
  }
  if (rr.class !== CLASS_ANY || rr.ttl !== 0) throw new TsigError('MALFORMED', 'local', 'TSIG record must have class ANY and TTL 0');
  let p = rr.rdataOffset;
  const end = rr.rdataOffset + rr.rdataLength;
  try {
    const alg = readName(raw, p);
    p = alg.next;
    if (p + 10 > end) throw new Error('short');
    const timeSigned = raw.readUIntBE(p, 6);
    const fudge = raw.readUInt16BE(p + 6);
    const macSize = raw.readUInt16BE(p + 8);
    p += 10;
    if (p + macSize + 6 > end) throw new Error('short');
    const mac = Buffer.from(raw.subarray(p, p + macSize));
    p += macSize;
    const originalId = raw.readUInt16BE(p);
    const error = raw.readUInt16BE(p + 2);
    const otherLen = raw.readUInt16BE(p + 4);
    p += 6;
    if (p + otherLen !== end) throw new Error('length mismatch');
    const otherData = Buffer.from(raw.subarray(p, p + otherLen));
    // The message before signing is this header and the bytes up to the TSIG record (no copy of those).
    const head = Buffer.from(raw.subarray(0, 12));
    head.writeUInt16BE(originalId, 0);
    head.writeUInt16BE(arcount - 1, 10);
    return {
      tsig: { keyName: rr.name, algorithm: alg.name, timeSigned, fudge, mac, originalId, error, otherData, start: rr.start },
      head,
      rest: raw.subarray(12, rr.start),
    };
  } catch (err) {
    if (err instanceof TsigError) throw err;
    throw new TsigError('MALFORMED', 'local', `TSIG record RDATA could not be parsed (${(err as Error).message})`);
  }
}

function serverError(t: TsigRecord): TsigError {
  const name = ERROR_NAMES[t.error];
  const explain: Record<string, string> = {
    BADSIG: 'the server could not verify our signature (wrong secret for this key name?)',
    BADKEY: `the server does not know key "${t.keyName}" with ${t.algorithm}`,
    BADTIME: `the server's clock and ours differ by more than the fudge (server time ${
      t.otherData.length === 6 ? t.otherData.readUIntBE(0, 6) : t.timeSigned
    }, ours ${nowSeconds()})`,
    BADTRUNC: 'the server refused our truncated MAC',
  };
  return new TsigError(name ?? 'OTHER', 'server', `TSIG ${name ?? `error ${t.error}`}: ${explain[name ?? ''] ?? 'rejected by the server'}`, t.error);
}

export interface VerifierOptions {
  /** Clock in seconds; tests inject one. */
  now?: () => number;
}

/**
 * Verifies the TSIG of each message of one answer, in order: a single response, or every message
 * of a TCP zone transfer. After the first message each signature covers the prior MAC, the
 * unsigned messages since, and this message with only the TSIG timers (RFC 8945 §5.3.1).
 */
export class TsigVerifier {
  private priorMac: Buffer;
  private pendingUnsigned: Buffer[] = [];
  private first = true;
  messages = 0;
  signedMessages = 0;

  constructor(
    private readonly key: TsigKey,
    requestMac: Buffer,
    private readonly opts: VerifierOptions = {},
  ) {
    checkAlgorithm(key);
    this.priorMac = requestMac;
  }

  /**
   * Throws TsigError; returns the message with its TSIG removed (or as is, if it was an allowed
   * unsigned one). `lastStart`: where the last record starts, when the caller's walk of the
   * message found it; `body: false`: the caller reads the records of `raw` itself, so `message`
   * is `raw` as received (no copy is made).
   */
  verify(raw: Buffer, opts: { lastStart?: number; body?: boolean } = {}): { message: Buffer; signed: boolean; tsig: TsigRecord | null } {
    this.messages++;
    const found = extractTsig(raw, opts.lastStart);
    if (!found) {
      if (this.first) throw new TsigError('UNSIGNED', 'local', 'the answer to a signed request carries no TSIG signature');
      this.pendingUnsigned.push(raw);
      if (this.pendingUnsigned.length > MAX_UNSIGNED_RUN) {
        throw new TsigError('UNSIGNED', 'local', `more than ${MAX_UNSIGNED_RUN} unsigned messages in a row`);
      }
      return { message: raw, signed: false, tsig: null };
    }
    const { tsig, head, rest } = found;
    if (normalise(tsig.keyName) !== normalise(this.key.name)) {
      throw new TsigError('BADKEY', 'local', `answer is signed with key "${tsig.keyName}", not "${this.key.name}"`);
    }
    if (normalise(tsig.algorithm) !== HMAC_SHA256) {
      throw new TsigError('BADKEY', 'local', `answer is signed with ${tsig.algorithm}, not ${HMAC_SHA256}`);
    }
    if (tsig.error !== 0) throw serverError(tsig);
    if (tsig.mac.length === 0) throw new TsigError('UNSIGNED', 'local', 'TSIG record carries no MAC');
    if (tsig.mac.length < MIN_MAC_LENGTH || tsig.mac.length > MAC_LENGTH) {
      throw new TsigError('BADTRUNC', 'local', `MAC of ${tsig.mac.length} bytes (allowed ${MIN_MAC_LENGTH}..${MAC_LENGTH})`);
    }
    const parts = this.first
      ? [macWithLength(this.priorMac), head, rest, variables(tsig.keyName, tsig.algorithm, tsig.timeSigned, tsig.fudge, tsig.error, tsig.otherData)]
      : [macWithLength(this.priorMac), ...this.pendingUnsigned, head, rest, timers(tsig.timeSigned, tsig.fudge)];
    const expected = hmac(this.key, parts).subarray(0, tsig.mac.length);
    if (!timingSafeEqual(expected, tsig.mac)) {
      throw new TsigError('BADSIG', 'local', `TSIG MAC of message ${this.messages} does not verify`);
    }
    // Time is checked only after the MAC, so a forged time cannot be told apart from a forged MAC.
    const now = (this.opts.now ?? nowSeconds)();
    if (Math.abs(now - tsig.timeSigned) > tsig.fudge) {
      throw new TsigError('BADTIME', 'local', `answer signed at ${tsig.timeSigned}, now ${now}: outside the fudge of ${tsig.fudge}s`);
    }
    this.priorMac = tsig.mac;
    this.pendingUnsigned = [];
    this.first = false;
    this.signedMessages++;
    return { message: opts.body === false ? raw : Buffer.concat([head, rest]), signed: true, tsig };
  }

  /** The last message of an answer must be signed (RFC 8945 §5.3.1). */
  finish(): void {
    if (this.first) throw new TsigError('UNSIGNED', 'local', 'no signed message was received');
    if (this.pendingUnsigned.length) {
      throw new TsigError('UNSIGNED', 'local', `the answer ended with ${this.pendingUnsigned.length} unsigned message(s)`);
    }
  }
}

function normalise(name: string): string {
  const n = name.toLowerCase();
  return n.endsWith('.') ? n.slice(0, -1) : n;
}
