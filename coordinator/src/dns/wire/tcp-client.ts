/**
 * DNS over TCP to the master server (RFC 1035 §4.2.2: each message framed by a 2-byte length;
 * RFC 7766). TCP for everything, not only AXFR: UPDATE and read-back answers can exceed a UDP
 * datagram, and one code path keeps TSIG handling uniform. Every signed request's answer is
 * verified, every message of a zone transfer included.
 */
import { connect, type Socket } from 'node:net';
import dnsPacket from 'dns-packet';
import {
  DnsConnectionError,
  DnsError,
  DnsOutcomeUnknownError,
  DnsProtocolError,
  DnsRcodeError,
  DnsTimeoutError,
  TsigError,
  UpdateNotAppliedError,
  rcodeName,
} from './errors.js';
import {
  OPCODE_QUERY,
  OPCODE_UPDATE,
  parseMessage,
  readName,
  RECORD_FIELDS,
  RT_CLASS,
  RT_RDATA,
  RT_RDLENGTH,
  RT_START,
  RT_TTL,
  RT_TYPE,
  scanAnswers,
  type RecordTable,
  type WireMessage,
  type WireRecord,
} from './message.js';
import { normalizeName } from './names.js';
import { classNameOf, decodeRdata, rdataText, typeName, typeNumber } from './rdata.js';
import { nowSeconds, signMessage, TsigVerifier, type TsigKey } from './tsig.js';
import { buildUpdate, expectations, randomId, type Prerequisite, type UpdateOperation } from './update.js';

/** One record as the API shows it (a `zoneData` row). */
export interface DnsRecord {
  /** Owner name, lower-case, no trailing dot. */
  name: string;
  ttl: number;
  /** "IN" for everything this API handles. */
  class: string;
  type: string;
  /** Presentation form, see rdata.ts for the conventions. */
  rdata: string;
}

export interface ServerOptions {
  /** Master server address (IP or host name). */
  server: string;
  /** Defaults to 53. */
  port?: number;
  /** TSIG key; without it requests go unsigned and answers are not verified. */
  key?: TsigKey;
  /** Connect timeout, ms (default 5000). */
  connectTimeoutMs?: number;
  /** Longest wait for any one message, ms (default 10000). */
  timeoutMs?: number;
  /** Whole zone transfer limit, ms (default 300000). */
  transferTimeoutMs?: number;
  /** Clock in seconds, used to sign and to check answers' time (tests skew it). */
  now?: () => number;
  /**
   * Absolute time (ms since the epoch) by which every exchange must be over: each connect and
   * each wait is cut to what is left, so one API request's master I/O has one bound in total.
   */
  deadline?: number;
}

const DEFAULTS = { port: 53, connectTimeoutMs: 5000, timeoutMs: 10_000, transferTimeoutMs: 300_000, now: nowSeconds };

/** A TCP connection that yields whole DNS messages. */
class FramedConnection {
  private buffer: Buffer = Buffer.alloc(0);
  private frames: Buffer[] = [];
  private waiter: { resolve: (b: Buffer) => void; reject: (e: Error) => void } | null = null;
  private failure: Error | null = null;

  private constructor(
    private readonly socket: Socket,
    private readonly where: string,
  ) {
    socket.on('data', (chunk: Buffer) => {
      this.buffer = this.buffer.length ? Buffer.concat([this.buffer, chunk]) : chunk;
      while (this.buffer.length >= 2) {
        const len = this.buffer.readUInt16BE(0);
        if (this.buffer.length < 2 + len) break;
        // A view, not a copy: each read of the socket comes in a buffer of its own.
        this.frames.push(this.buffer.subarray(2, 2 + len));
        this.buffer = this.buffer.subarray(2 + len);
      }
      this.deliver();
    });
    socket.on('error', (err) => this.fail(new DnsConnectionError(`${where}: ${err.message}`)));
    socket.on('close', () => this.fail(new DnsConnectionError(`${where}: connection closed by the server`)));
  }

  static open(host: string, port: number, timeoutMs: number): Promise<FramedConnection> {
    const where = `${host}:${port}`;
    return new Promise((resolve, reject) => {
      const socket = connect({ host, port });
      socket.setNoDelay(true);
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new DnsTimeoutError(`${where}: no TCP connection within ${timeoutMs} ms`));
      }, timeoutMs);
      socket.once('connect', () => {
        clearTimeout(timer);
        socket.removeAllListeners('error');
        resolve(new FramedConnection(socket, where));
      });
      socket.once('error', (err) => {
        clearTimeout(timer);
        reject(new DnsConnectionError(`${where}: ${err.message}`));
      });
    });
  }

  send(message: Buffer) {
    this.sendAll([message]);
  }

  /** Several messages in one write (pipelined queries leave in as few segments as they fit). */
  sendAll(messages: Buffer[]) {
    const parts: Buffer[] = [];
    for (const message of messages) {
      if (message.length > 65535) throw new DnsProtocolError(`message of ${message.length} bytes does not fit a TCP frame`);
      const len = Buffer.alloc(2);
      len.writeUInt16BE(message.length);
      parts.push(len, message);
    }
    this.socket.write(Buffer.concat(parts));
  }

  read(timeoutMs: number): Promise<Buffer> {
    const ready = this.frames.shift();
    if (ready) return Promise.resolve(ready);
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiter = null;
        reject(new DnsTimeoutError(`${this.where}: no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiter = {
        resolve: (b) => {
          clearTimeout(timer);
          resolve(b);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      };
    });
  }

  close() {
    this.socket.destroy();
  }

  private deliver() {
    if (this.waiter && this.frames.length) {
      const w = this.waiter;
      this.waiter = null;
      w.resolve(this.frames.shift()!);
    }
  }

  private fail(err: Error) {
    if (this.failure) return;
    this.failure = err;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = null;
      w.reject(err);
    }
  }
}

function settings(opts: ServerOptions) {
  return { ...DEFAULTS, ...Object.fromEntries(Object.entries(opts).filter(([, v]) => v !== undefined)) } as Required<
    Omit<ServerOptions, 'key' | 'deadline'>
  > & {
    key?: TsigKey;
    deadline?: number;
  };
}

/** `ms`, cut to what is left before the deadline; a timeout when nothing is left. */
function within(s: { deadline?: number }, ms: number, operation: string): number {
  if (s.deadline === undefined) return ms;
  const left = s.deadline - Date.now();
  if (left <= 0) throw new DnsTimeoutError(`${operation}: the request's time for the master is spent`);
  return Math.min(ms, left);
}

/** Encodes a QUERY with dns-packet; the QTYPE is patched in so RFC 3597 `TYPEnnn` works too. */
function buildQuery(name: string, type: string, id: number): Buffer {
  const qtype = typeNumber(type);
  if (qtype === undefined) throw new DnsError('INVALID_QUERY', `unknown record type ${type}`);
  const msg = dnsPacket.encode({ type: 'query', id, flags: 0, questions: [{ name: normalizeName(name), type: 'A', class: 'IN' }] });
  msg.writeUInt16BE(qtype, msg.length - 4);
  return msg;
}

/** A record in presentation form: the mnemonics, and the data as rdataText renders it from `msg`. */
function recordOf(msg: Buffer, name: string, type: number, klass: number, ttl: number, rdataOffset: number, rdataLength: number): DnsRecord {
  return { name, ttl, class: classNameOf(klass), type: typeName(type), rdata: rdataText(type, msg, rdataOffset, rdataLength) };
}

function toRecord(msg: WireMessage, rr: WireRecord): DnsRecord {
  return recordOf(msg.raw, rr.name, rr.type, rr.class, rr.ttl, rr.rdataOffset, rr.rdataLength);
}

/** Record `i` of a RecordTable as a DnsRecord. */
function tableRecord(msg: Buffer, f: Uint32Array, i: number): DnsRecord {
  const o = i * RECORD_FIELDS;
  return recordOf(msg, readName(msg, f[o + RT_START]!).name, f[o + RT_TYPE]!, f[o + RT_CLASS]!, f[o + RT_TTL]!, f[o + RT_RDATA]!, f[o + RT_RDLENGTH]!);
}

/** The request as sent (TSIG-signed when a key is set) and the verifier of the answers it expects. */
function signRequest(request: Buffer, s: ReturnType<typeof settings>): { toSend: Buffer; verifier: TsigVerifier | null } {
  if (!s.key) return { toSend: request, verifier: null };
  const signed = signMessage(request, s.key, { timeSigned: s.now() });
  return { toSend: signed.message, verifier: new TsigVerifier(s.key, signed.mac, { now: s.now }) };
}

/** Signs (when keyed), sends, and reads one answer; checks id/QR/opcode, TSIG, then the RCODE. */
async function exchange(request: Buffer, opts: ServerOptions, operation: string, opcode: number, okRcodes: number[] = [0]): Promise<WireMessage> {
  const s = settings(opts);
  const id = request.readUInt16BE(0);
  const { toSend, verifier } = signRequest(request, s);
  const conn = await FramedConnection.open(s.server, s.port, within(s, s.connectTimeoutMs, operation));
  try {
    conn.send(toSend);
    let raw: Buffer;
    try {
      raw = await conn.read(within(s, s.timeoutMs, operation));
    } catch (err) {
      // A change that was sent and not answered may or may not have happened.
      if (opcode === OPCODE_UPDATE && (err instanceof DnsConnectionError || err instanceof DnsTimeoutError)) throw new DnsOutcomeUnknownError(operation, err);
      throw err;
    }
    return checkAnswer(raw, { id, opcode, verifier, operation, okRcodes, last: true });
  } finally {
    conn.close();
  }
}

/**
 * One answer message: header sanity, then TSIG, then RCODE. An error RCODE that arrives unsigned
 * (a server may refuse before it looks at the key) is still reported as that RCODE, since it is
 * a failure either way; a success must be signed.
 */
function checkAnswer(raw: Buffer, check: AnswerCheck): WireMessage {
  return parseMessage(verifiedBody(raw, check));
}

/** What an answer message is checked against. */
interface AnswerCheck {
  id: number;
  opcode: number;
  verifier: TsigVerifier | null;
  operation: string;
  okRcodes: number[];
  /** The last message of the answer (its TSIG must close the signed stream). */
  last: boolean;
}

/**
 * checkAnswer's checks; returns the message as signed (without its TSIG record), not yet parsed.
 * `scanned`: a transfer's message, already walked by scanAnswers: where its last record starts,
 * and `raw` itself is returned.
 */
function verifiedBody(raw: Buffer, { id, opcode, verifier, operation, okRcodes, last }: AnswerCheck, scanned?: RecordTable): Buffer {
  if (raw.length < 12) throw new DnsProtocolError(`${operation}: answer of ${raw.length} bytes`);
  const rawId = raw.readUInt16BE(0);
  const flags = raw.readUInt16BE(2);
  if (rawId !== id) throw new DnsProtocolError(`${operation}: answer id ${rawId} does not match request id ${id}`);
  if (!(flags & 0x8000)) throw new DnsProtocolError(`${operation}: message is not a response`);
  if (((flags >> 11) & 0xf) !== opcode) throw new DnsProtocolError(`${operation}: answer has opcode ${(flags >> 11) & 0xf}, expected ${opcode}`);
  if (flags & 0x0200) throw new DnsProtocolError(`${operation}: answer is truncated (TC) over TCP`);
  const rcode = flags & 0xf;
  let body = raw;
  if (verifier) {
    try {
      body = verifier.verify(raw, scanned ? { lastStart: scanned.lastStart, body: false } : {}).message;
      if (last) verifier.finish();
    } catch (err) {
      if (err instanceof TsigError && err.tsigCode === 'UNSIGNED' && !okRcodes.includes(rcode)) {
        throw new DnsRcodeError(rcode, operation, `unsigned answer ${rcodeName(rcode)}`);
      }
      throw err;
    }
  }
  if (!okRcodes.includes(rcode)) throw new DnsRcodeError(rcode, operation);
  return body;
}

// ---- operations ----------------------------------------------------------------------------

export interface QueryResult {
  rcode: 'NOERROR' | 'NXDOMAIN';
  authoritative: boolean;
  answers: DnsRecord[];
  authorities: DnsRecord[];
}

/** An authoritative read of one name/type from the master (read-back verification). NXDOMAIN is an answer, not an error. */
export async function query(name: string, type: string, opts: ServerOptions): Promise<QueryResult> {
  const msg = await exchange(buildQuery(name, type, randomId()), opts, `QUERY ${normalizeName(name)} ${type}`, OPCODE_QUERY, [0, 3]);
  return {
    rcode: msg.header.rcode === 3 ? 'NXDOMAIN' : 'NOERROR',
    authoritative: msg.header.aa,
    answers: msg.answers.map((rr) => toRecord(msg, rr)),
    authorities: msg.authorities.map((rr) => toRecord(msg, rr)),
  };
}

/**
 * Several authoritative reads, pipelined over a TCP connection (RFC 7766 §6.2.1.1: all queries are
 * written at once, answers may come in any order and are matched by message id), or a few for a
 * long list. Answers come back in the order of `questions`.
 */
export async function queryMany(questions: Array<{ name: string; type: string }>, opts: ServerOptions): Promise<QueryResult[]> {
  if (questions.length === 0) return [];
  // BIND answers the queries of one TCP connection one after another, on one of its threads; a
  // long list goes over a few connections at once so that its other threads answer too.
  if (questions.length > QUESTIONS_PER_CONNECTION) {
    const lanes = Math.min(MAX_QUERY_CONNECTIONS, Math.ceil(questions.length / QUESTIONS_PER_CONNECTION));
    const size = Math.ceil(questions.length / lanes);
    const parts = await Promise.all(Array.from({ length: lanes }, (_, i) => queryOneConnection(questions.slice(i * size, (i + 1) * size), opts)));
    return parts.flat();
  }
  return queryOneConnection(questions, opts);
}

/** queryMany's lists longer than this use several connections (at most MAX_QUERY_CONNECTIONS). */
const QUESTIONS_PER_CONNECTION = 25;
const MAX_QUERY_CONNECTIONS = 4;

/** The questions pipelined over one TCP connection, answers in question order. */
async function queryOneConnection(questions: Array<{ name: string; type: string }>, opts: ServerOptions): Promise<QueryResult[]> {
  const s = settings(opts);
  const operation = `QUERY ×${questions.length}`;
  const ids = new Set<number>();
  const pending = new Map<number, { index: number; verifier: TsigVerifier | null; operation: string }>();
  const frames: Buffer[] = [];
  questions.forEach((q, index) => {
    if (ids.size >= 0xffff) throw new DnsError('INVALID_QUERY', 'too many questions for one connection');
    let id = randomId();
    while (ids.has(id)) id = randomId();
    ids.add(id);
    const { toSend, verifier } = signRequest(buildQuery(q.name, q.type, id), s);
    pending.set(id, { index, verifier, operation: `QUERY ${normalizeName(q.name)} ${q.type}` });
    frames.push(toSend);
  });
  const out: QueryResult[] = new Array<QueryResult>(questions.length);
  const conn = await FramedConnection.open(s.server, s.port, within(s, s.connectTimeoutMs, operation));
  try {
    conn.sendAll(frames);
    while (pending.size) {
      const raw = await conn.read(within(s, s.timeoutMs, operation));
      const id = raw.length >= 2 ? raw.readUInt16BE(0) : -1;
      const p = pending.get(id);
      if (!p) throw new DnsProtocolError(`${operation}: answer id ${id} matches no open question`);
      pending.delete(id);
      const msg = checkAnswer(raw, { id, opcode: OPCODE_QUERY, verifier: p.verifier, operation: p.operation, okRcodes: [0, 3], last: true });
      out[p.index] = {
        rcode: msg.header.rcode === 3 ? 'NXDOMAIN' : 'NOERROR',
        authoritative: msg.header.aa,
        answers: msg.answers.map((rr) => toRecord(msg, rr)),
        authorities: msg.authorities.map((rr) => toRecord(msg, rr)),
      };
    }
  } finally {
    conn.close();
  }
  return out;
}

/** The zone's SOA serial as the master serves it now (a signed SOA query). */
export async function soaSerial(zone: string, opts: ServerOptions): Promise<number> {
  const z = normalizeName(zone);
  const msg = await exchange(buildQuery(z, 'SOA', randomId()), opts, `SOA ${z}`, OPCODE_QUERY, [0]);
  if (!msg.header.aa) throw new DnsError('NOT_AUTHORITATIVE', `SOA ${z}: the server is not authoritative for the zone`);
  const soa = msg.answers.find((rr) => rr.type === 6 && rr.name === z);
  if (!soa) throw new DnsError('NO_SOA', `SOA ${z}: the answer holds no SOA for the zone (is ${z} a zone apex?)`);
  const data = decodeRdata(soa.type, msg.raw, soa.rdataOffset, soa.rdataLength);
  if (data.type !== 'SOA') throw new DnsProtocolError('SOA answer did not decode as SOA');
  return data.serial;
}

export interface AxfrResult {
  /**
   * Every record of the zone, SOA first, without the closing SOA; empty when `onRecords` took
   * them as they came (a large zone's records are then not held until the end).
   */
  records: DnsRecord[];
  /** How many records the transfer carried (without the closing SOA). */
  count: number;
  serial: number;
  /** Messages the transfer took, and how many carried a verified TSIG. */
  messages: number;
  signedMessages: number;
}

export interface AxfrOptions extends ServerOptions {
  /** Called with each message's records as they arrive (large zones). */
  onRecords?: (records: DnsRecord[]) => void;
  /**
   * Instead of `onRecords`: each message's first `count` records as a RecordTable's fields
   * (message.ts), with the message they point into: no record objects or text are made (the zone
   * cache writes its rows from the bytes).
   */
  onWire?: (msg: Buffer, records: Uint32Array, count: number) => void;
}

/**
 * Full zone transfer over TCP: reads messages until the SOA comes round again, verifying the TSIG
 * chain on every message (unsigned intermediate messages allowed as RFC 8945 §5.3.1 permits).
 */
export async function axfr(zone: string, opts: AxfrOptions): Promise<AxfrResult> {
  const s = settings(opts);
  const z = normalizeName(zone);
  const operation = `AXFR ${z}`;
  const id = randomId();
  const request = buildQuery(z, 'AXFR', id);
  const { toSend, verifier } = signRequest(request, s);
  const deadline = Date.now() + s.transferTimeoutMs;
  const conn = await FramedConnection.open(s.server, s.port, within(s, s.connectTimeoutMs, operation));
  const records: DnsRecord[] = [];
  let count = 0;
  let serial: number | null = null;
  let messages = 0;
  try {
    conn.send(toSend);
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) throw new DnsTimeoutError(`${operation}: transfer took longer than ${s.transferTimeoutMs} ms`);
      let raw: Buffer;
      try {
        raw = await conn.read(within(s, Math.min(s.timeoutMs, left), operation));
      } catch (err) {
        if (err instanceof DnsConnectionError) throw new DnsConnectionError(`${operation}: connection ended before the closing SOA (${count} records read)`);
        throw err;
      }
      messages++;
      // One walk of the message: its answers' table, which also says where the TSIG record starts.
      // Records are read from the message as received (the TSIG record after them is not read).
      const table = scanAnswers(raw);
      const body = verifiedBody(raw, { id, opcode: OPCODE_QUERY, verifier, operation, okRcodes: [0], last: false }, table);
      const f = table.fields;
      // The records of this message that belong to the zone: all but a closing SOA.
      let end = table.count;
      for (let i = 0; i < table.count; i++) {
        const o = i * RECORD_FIELDS;
        if (end < table.count) throw new DnsProtocolError(`${operation}: records after the closing SOA`);
        const isSoa = f[o + RT_TYPE] === 6 && readName(body, f[o + RT_START]!).name === z;
        if (serial === null) {
          if (!isSoa) throw new DnsProtocolError(`${operation}: transfer does not start with the zone's SOA`);
          const soa = decodeRdata(6, body, f[o + RT_RDATA]!, f[o + RT_RDLENGTH]!);
          serial = soa.type === 'SOA' ? soa.serial : 0;
        } else if (isSoa) {
          end = i;
        }
      }
      if (table.count === 0) throw new DnsProtocolError(`${operation}: message ${messages} carries no records`);
      count += end;
      if (opts.onWire) opts.onWire(body, f, end);
      else {
        const batch: DnsRecord[] = [];
        for (let i = 0; i < end; i++) batch.push(tableRecord(body, f, i));
        if (opts.onRecords) opts.onRecords(batch);
        else for (const r of batch) records.push(r);
      }
      const done = end < table.count;
      if (done) break;
    }
    verifier?.finish();
  } finally {
    conn.close();
  }
  return { records, count, serial: serial ?? 0, messages, signedMessages: verifier?.signedMessages ?? 0 };
}

export interface UpdateOptions extends ServerOptions {
  /**
   * Read the changed names back after NOERROR and throw UpdateNotAppliedError when the zone is
   * not as the operations say (BIND acknowledges, then ignores, CNAME-conflicting adds).
   */
  verify?: boolean;
}

export interface UpdateResult {
  rcode: 'NOERROR';
  id: number;
  verified: boolean;
}

/**
 * Sends one signed UPDATE with all operations (atomic on the server). Resolves on NOERROR; a
 * failed prerequisite or refusal throws DnsRcodeError (code YXDOMAIN, YXRRSET, NXDOMAIN, NXRRSET,
 * NOTAUTH, NOTZONE, REFUSED, SERVFAIL, …); bad input throws InvalidUpdateError before sending.
 */
export async function update(zone: string, operations: UpdateOperation[], prerequisites: Prerequisite[], opts: UpdateOptions): Promise<UpdateResult> {
  const { message, id } = buildUpdate(zone, operations, prerequisites);
  await exchange(message, opts, 'UPDATE', OPCODE_UPDATE, [0]);
  if (opts.verify) {
    const mismatches = await verifyUpdate(operations, opts);
    if (mismatches.length) throw new UpdateNotAppliedError(mismatches);
  }
  return { rcode: 'NOERROR', id, verified: opts.verify === true };
}

export interface Mismatch {
  name: string;
  type: string;
  rdata?: string;
  problem: string;
}

/**
 * The records of one name/type in a query's answer. An NS RRset below the zone apex is a
 * delegation: the master answers it as a referral, in the authority section (not authoritative),
 * so there it is read from that section.
 */
export function recordsAt(res: QueryResult, name: string, type: string): DnsRecord[] {
  const here = res.answers.filter((r) => r.name === name && (type === 'ANY' || r.type === type));
  if (here.length || (type !== 'NS' && type !== 'ANY') || res.authoritative) return here;
  return res.authorities.filter((r) => r.name === name && r.type === 'NS');
}

/** Reads back every name/type the operations touch and lists where the zone differs from what they should have left. */
export async function verifyUpdate(operations: UpdateOperation[], opts: ServerOptions): Promise<Mismatch[]> {
  return mismatchesIn(operations, await queryMany(readBackQuestions(operations), opts));
}

/** The questions a read-back of these operations asks, in the order mismatchesIn wants their answers. */
export function readBackQuestions(operations: UpdateOperation[]): Array<{ name: string; type: string }> {
  return expectations(operations).map((e) => ({ name: e.name, type: e.type }));
}

/** Where the zone (the answers to readBackQuestions, in order) differs from what the operations should have left. */
export function mismatchesIn(operations: UpdateOperation[], answers: QueryResult[]): Mismatch[] {
  const out: Mismatch[] = [];
  const wanted = expectations(operations);
  wanted.forEach((e, i) => {
    const res = answers[i]!;
    const here = res.answers.filter((r) => r.name === e.name);
    if (e.type === 'ANY') {
      // Zone apex SOA/NS cannot be deleted by UPDATE; anything else left must have been re-added.
      const apex = here.some((r) => r.type === 'SOA');
      for (const r of here) {
        if (e.present.includes(r.type) || (apex && (r.type === 'SOA' || r.type === 'NS'))) continue;
        out.push({ name: e.name, type: r.type, rdata: r.rdata, problem: 'still present after the name was deleted' });
      }
      return;
    }
    const have = new Set(recordsAt(res, e.name, e.type).map((r) => r.rdata));
    for (const r of e.present) {
      if (!have.has(r)) {
        const cname = here.find((x) => x.type === 'CNAME' && e.type !== 'CNAME');
        out.push({
          name: e.name,
          type: e.type,
          rdata: r,
          problem: cname
            ? `not present: the name has a CNAME (${cname.rdata}) and the server ignored the add`
            : 'not present after an acknowledged add (ignored by the server, e.g. CNAME beside other data)',
        });
      }
    }
    for (const r of e.absent) if (have.has(r)) out.push({ name: e.name, type: e.type, rdata: r, problem: 'still present after an acknowledged delete' });
    if (e.exhaustive) {
      for (const r of have)
        if (!e.present.includes(r) && !e.absent.includes(r))
          out.push({ name: e.name, type: e.type, rdata: r, problem: 'still present after its RRset was deleted' });
    }
  });
  return out;
}

/** The same operations bound to one server, for the HTTP layer to hold per zone/config. */
export class DnsMasterClient {
  constructor(readonly opts: ServerOptions) {}
  axfr(zone: string, onRecords?: (records: DnsRecord[]) => void) {
    return axfr(zone, { ...this.opts, onRecords });
  }

  /** A transfer whose records are handed over as parsed (AxfrOptions.onWire). */
  axfrWire(zone: string, onWire: (msg: Buffer, records: Uint32Array, count: number) => void) {
    return axfr(zone, { ...this.opts, onWire });
  }
  soaSerial(zone: string) {
    return soaSerial(zone, this.opts);
  }
  query(name: string, type: string) {
    return query(name, type, this.opts);
  }
  queryMany(questions: Array<{ name: string; type: string }>) {
    return queryMany(questions, this.opts);
  }
  /** The same server with every exchange bounded by `deadline` (ms since the epoch). */
  withDeadline(deadline: number) {
    return new DnsMasterClient({ ...this.opts, deadline });
  }
  update(zone: string, operations: UpdateOperation[], prerequisites: Prerequisite[] = [], options: { verify?: boolean } = {}) {
    return update(zone, operations, prerequisites, { ...this.opts, ...options });
  }
  verifyUpdate(operations: UpdateOperation[]) {
    return verifyUpdate(operations, this.opts);
  }
}
