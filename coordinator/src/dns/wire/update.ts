/**
 * RFC 2136 UPDATE messages. Sections are reused: question = Zone, answer = Prerequisite,
 * authority = Update. Class NONE/ANY records with empty RDATA carry the meaning (§2.4, §2.5), and
 * dns-packet cannot encode those, so the header and zone are encoded by dns-packet and every
 * prerequisite and update RR is appended here, in the caller's order (the server applies updates
 * in order, so "delete X, add Y" in one message is an atomic replace).
 */
import { randomInt } from 'node:crypto';
import dnsPacket from 'dns-packet';
import { DnsError } from './errors.js';
import { CLASS_ANY, CLASS_IN, CLASS_NONE, OPCODE_UPDATE, encodeName } from './message.js';
import { isInZone, MAX_TTL, normalizeName, parseRdata, validateName, type FieldError } from './names.js';
import { encodeRdata, renderRdata, typeNumber, type RecordData } from './rdata.js';

const TYPE_ANY = 255;

/** Record data given either as presentation text (as the API receives it or AXFR renders it) or parsed. */
export type RdataInput = string | RecordData;

export type UpdateOperation =
  /** Add one RR (class IN). Adding to an existing RRset sets the whole RRset's TTL on BIND. */
  | { op: 'add'; name: string; type: string; ttl: number; rdata: RdataInput }
  /** Delete one RR: class NONE with the RDATA (§2.5.4). */
  | { op: 'delete'; name: string; type: string; rdata: RdataInput }
  /** Delete an RRset: class ANY, the type, empty RDATA (§2.5.2). */
  | { op: 'deleteRRset'; name: string; type: string }
  /** Delete all RRsets at a name: class ANY, type ANY (§2.5.3). SOA/NS at the apex survive. */
  | { op: 'deleteName'; name: string };

export type Prerequisite =
  /** RRset exists, value independent: class ANY, type, empty RDATA. Fails with NXRRSET. */
  | { require: 'rrsetExists'; name: string; type: string }
  /** RRset exists with exactly these RRs: class IN with RDATA (§2.4.2). Fails with NXRRSET. */
  | { require: 'rrsetEquals'; name: string; type: string; rdata: RdataInput[] }
  /** RRset does not exist: class NONE, type, empty RDATA. Fails with YXRRSET. */
  | { require: 'rrsetAbsent'; name: string; type: string }
  /** Name is in use (owns any RR): class ANY, type ANY. Fails with NXDOMAIN. */
  | { require: 'nameInUse'; name: string }
  /** Name is not in use: class NONE, type ANY. Fails with YXDOMAIN. */
  | { require: 'nameNotInUse'; name: string };

/** "The name has no CNAME": an A/AAAA add guarded by this fails with YXRRSET instead of being silently ignored. */
export const noCname = (name: string): Prerequisite => ({ require: 'rrsetAbsent', name, type: 'CNAME' });

/** The operations or prerequisites are invalid; nothing was sent. `errors` name the failing entries. */
export class InvalidUpdateError extends DnsError {
  constructor(readonly errors: FieldError[]) {
    super('INVALID_UPDATE', `invalid update: ${errors.map((e) => `${e.field}: ${e.message}`).join('; ')}`);
    this.name = 'InvalidUpdateError';
  }
}

function rr(name: string, type: number, klass: number, ttl: number, rdata: Buffer): Buffer {
  const fixed = Buffer.alloc(10);
  fixed.writeUInt16BE(type, 0);
  fixed.writeUInt16BE(klass, 2);
  fixed.writeUInt32BE(ttl, 4);
  fixed.writeUInt16BE(rdata.length, 8);
  return Buffer.concat([encodeName(name), fixed, rdata]);
}

/**
 * Parses RDATA for sending. API input is read strictly; text that fails strict rules but is valid
 * BIND presentation (e.g. a name with an underscore read from AXFR) is accepted for deletions, so
 * existing odd records can still be removed.
 */
export function resolveRdata(type: string, rdata: RdataInput, field: string, forDelete: boolean): { data?: RecordData; errors: FieldError[] } {
  if (typeof rdata !== 'string') {
    if (rdata.type !== 'GENERIC' && rdata.type !== type.toUpperCase()) return { errors: [{ field, message: `record data is ${rdata.type}, not ${type}` }] };
    return { data: rdata, errors: [] };
  }
  const strict = parseRdata(type, rdata, { field });
  if (strict.ok) return { data: strict.value, errors: [] };
  if (forDelete) {
    const lenient = parseRdata(type, rdata, { field, lenient: true });
    // Names with escapes (a\.b) cannot go through dns-packet's name encoder; refuse rather than mis-encode.
    if (lenient.ok && !namesOf(lenient.value).some((n) => n.includes('\\'))) return { data: lenient.value, errors: [] };
  }
  return { errors: strict.errors };
}

function namesOf(d: RecordData): string[] {
  switch (d.type) {
    case 'CNAME':
    case 'NS':
    case 'PTR':
    case 'DNAME':
    case 'SRV':
      return [d.target];
    case 'MX':
      return [d.exchange];
    case 'SOA':
      return [d.mname, d.rname];
    default:
      return [];
  }
}

interface Checked {
  errors: FieldError[];
  name: (value: string, field: string) => string;
  type: (value: string, field: string, allowAny?: boolean) => number;
}

function checker(zone: string): Checked {
  const errors: FieldError[] = [];
  return {
    errors,
    name(value, field) {
      // Owner rules with wildcards; BIND itself accepts more, but this layer writes only what the API allows.
      const v = validateName(value, 'owner', { field });
      if (!v.ok) {
        errors.push(...v.errors);
        return '.';
      }
      if (!isInZone(v.value, zone)) errors.push({ field, message: `${v.value} is not in zone ${zone}` });
      return v.value;
    },
    type(value, field, allowAny = false) {
      const n = typeof value === 'string' ? typeNumber(value) : undefined;
      if (n === undefined || (!allowAny && n === TYPE_ANY) || [41, 249, 250, 251, 252].includes(n)) {
        errors.push({ field, message: `unusable record type ${String(value)}` });
        return 0;
      }
      return n;
    },
  };
}

export interface BuiltUpdate {
  message: Buffer;
  id: number;
}

/** Encodes an UPDATE for `zone` (prerequisites first, then updates in order). Throws InvalidUpdateError. */
export function buildUpdate(zone: string, operations: UpdateOperation[], prerequisites: Prerequisite[] = [], id = randomId()): BuiltUpdate {
  const zoneName = validateName(zone, 'owner', { field: 'zone' });
  if (!zoneName.ok) throw new InvalidUpdateError(zoneName.errors);
  const z = zoneName.value;
  const c = checker(z);
  if (operations.length === 0) c.errors.push({ field: 'operations', message: 'at least one operation is required' });

  const prereqRRs: Buffer[] = [];
  prerequisites.forEach((p, i) => {
    const f = `prerequisites[${i}]`;
    const name = c.name(p.name, `${f}.name`);
    switch (p.require) {
      case 'rrsetExists':
        prereqRRs.push(rr(name, c.type(p.type, `${f}.type`), CLASS_ANY, 0, Buffer.alloc(0)));
        break;
      case 'rrsetAbsent':
        prereqRRs.push(rr(name, c.type(p.type, `${f}.type`), CLASS_NONE, 0, Buffer.alloc(0)));
        break;
      case 'rrsetEquals': {
        const type = c.type(p.type, `${f}.type`);
        if (p.rdata.length === 0) c.errors.push({ field: `${f}.rdata`, message: 'at least one record is required' });
        p.rdata.forEach((r, j) => {
          const d = resolveRdata(p.type, r, `${f}.rdata[${j}]`, true);
          c.errors.push(...d.errors);
          if (d.data) prereqRRs.push(rr(name, type, CLASS_IN, 0, encodeRdata(d.data)));
        });
        break;
      }
      case 'nameInUse':
        prereqRRs.push(rr(name, TYPE_ANY, CLASS_ANY, 0, Buffer.alloc(0)));
        break;
      case 'nameNotInUse':
        prereqRRs.push(rr(name, TYPE_ANY, CLASS_NONE, 0, Buffer.alloc(0)));
        break;
      default:
        c.errors.push({ field: f, message: `unknown prerequisite ${String((p as { require: unknown }).require)}` });
    }
  });

  const updateRRs: Buffer[] = [];
  operations.forEach((o, i) => {
    const f = `operations[${i}]`;
    const name = c.name(o.name, `${f}.name`);
    switch (o.op) {
      case 'add': {
        const type = c.type(o.type, `${f}.type`);
        if (!Number.isInteger(o.ttl) || o.ttl < 0 || o.ttl > MAX_TTL) c.errors.push({ field: `${f}.ttl`, message: `must be an integer 0..${MAX_TTL}` });
        const d = resolveRdata(o.type, o.rdata, `${f}.rdata`, false);
        c.errors.push(...d.errors);
        if (d.data && type) updateRRs.push(rr(name, type, CLASS_IN, o.ttl, encodeRdata(d.data)));
        break;
      }
      case 'delete': {
        const type = c.type(o.type, `${f}.type`);
        const d = resolveRdata(o.type, o.rdata, `${f}.rdata`, true);
        c.errors.push(...d.errors);
        if (d.data && type) updateRRs.push(rr(name, type, CLASS_NONE, 0, encodeRdata(d.data)));
        break;
      }
      case 'deleteRRset':
        updateRRs.push(rr(name, c.type(o.type, `${f}.type`), CLASS_ANY, 0, Buffer.alloc(0)));
        break;
      case 'deleteName':
        updateRRs.push(rr(name, TYPE_ANY, CLASS_ANY, 0, Buffer.alloc(0)));
        break;
      default:
        c.errors.push({ field: f, message: `unknown operation ${String((o as { op: unknown }).op)}` });
    }
  });
  if (c.errors.length) throw new InvalidUpdateError(c.errors);

  const head = dnsPacket.encode({ type: 'query', id, flags: OPCODE_UPDATE << 11, questions: [{ name: z, type: 'SOA', class: 'IN' }] });
  const message = Buffer.concat([head, ...prereqRRs, ...updateRRs]);
  message.writeUInt16BE(prereqRRs.length, 6); // PRCOUNT (ANCOUNT)
  message.writeUInt16BE(updateRRs.length, 8); // UPCOUNT (NSCOUNT)
  // Leave room for the TSIG RR (~ 100 bytes) within the 65535-byte TCP frame.
  if (message.length > 65000)
    throw new InvalidUpdateError([{ field: 'operations', message: `update of ${message.length} bytes is too large for one message` }]);
  return { message, id };
}

/** Message IDs from the CSPRNG (RFC 5452 spirit; cheap, and nothing to gain from predictability). */
export function randomId(): number {
  return randomInt(0x10000);
}

// ---- read-back expectations ----------------------------------------------------------------

/** What must hold at one name/type after the update, in canonical rdata strings. */
export interface Expectation {
  name: string;
  type: string;
  present: string[];
  absent: string[];
  /** True after an RRset/name delete: records other than `present` must not exist. */
  exhaustive: boolean;
}

/**
 * Folds the operations in order into the final state they should leave. BIND acknowledges some
 * updates it ignores (a CNAME added beside other data, data added beside a CNAME; RFC 2136
 * §3.4.2.2), so a read-back against this is the only proof a write took effect.
 * Names deleted with `deleteName` get a `type: 'ANY'` expectation listing the types added after.
 */
export function expectations(operations: UpdateOperation[]): Expectation[] {
  const byKey = new Map<string, { name: string; type: string; present: Set<string>; absent: Set<string>; exhaustive: boolean }>();
  // Once a name is deleted whole, whatever is added there later must be all there is.
  const cleared = new Set<string>();
  const get = (name: string, type: string) => {
    const key = `${name}|${type}`;
    let e = byKey.get(key);
    if (!e) byKey.set(key, (e = { name, type, present: new Set(), absent: new Set(), exhaustive: cleared.has(name) }));
    return e;
  };
  const canonical = (type: string, rdata: RdataInput, forDelete: boolean) => {
    const d = resolveRdata(type, rdata, 'rdata', forDelete);
    if (!d.data) throw new InvalidUpdateError(d.errors);
    return renderRdata(d.data);
  };
  for (const o of operations) {
    const name = normalizeName(o.name);
    switch (o.op) {
      case 'add': {
        const e = get(name, o.type.toUpperCase());
        const r = canonical(o.type, o.rdata, false);
        e.present.add(r);
        e.absent.delete(r);
        const any = byKey.get(`${name}|ANY`);
        if (any) any.present.add(o.type.toUpperCase());
        break;
      }
      case 'delete': {
        const e = get(name, o.type.toUpperCase());
        const r = canonical(o.type, o.rdata, true);
        e.absent.add(r);
        e.present.delete(r);
        break;
      }
      case 'deleteRRset': {
        const e = get(name, o.type.toUpperCase());
        e.present.clear();
        e.absent.clear();
        e.exhaustive = true;
        break;
      }
      case 'deleteName': {
        for (const e of byKey.values()) {
          if (e.name !== name) continue;
          e.present.clear();
          e.absent.clear();
          e.exhaustive = true;
        }
        get(name, 'ANY').exhaustive = true;
        cleared.add(name);
        break;
      }
    }
  }
  return [...byKey.values()].map((e) => ({ name: e.name, type: e.type, present: [...e.present], absent: [...e.absent], exhaustive: e.exhaustive }));
}
