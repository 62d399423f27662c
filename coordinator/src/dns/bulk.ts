/**
 * POST /api/dns/bulk: 1..100 operations in ONE UPDATE message per zone (atomic on the master). The
 * pre-checks are one pipelined batch of queries per zone; operations that fail them are reported
 * and left out. When the master refuses the combined message (an RCODE) or its read-back disagrees,
 * each remaining operation is sent on its own so every result says what happened to it. A master
 * that cannot be reached, or an unanswered message, fails the whole request (503), never a
 * per-operation guess.
 */
import { AppError, validationFailed } from '../http/errors.js';
import { fieldErrorsToRecord, validateRecord, type FieldError, type Prerequisite, type UpdateOperation, type ValidRecord } from './wire/index.js';
import { addPrereqs, inZoneTarget, isPerOperation, mapWriteError, okNote, rrsetTtl, type MasterWrites, type RrsetTtl, type Writer } from './master-writes.js';
import type { ProviderZones } from './providers/provider-zones.js';
import type { ZoneRegistry, ZoneRow } from './zone-registry.js';

export interface WriteOp {
  action: 'ADD' | 'DELETE';
  domain: unknown;
  type: unknown;
  target: unknown;
  ttl?: unknown;
}

export interface OpResult {
  index: number;
  action: 'ADD' | 'DELETE';
  domain: string;
  type: string;
  target: string;
  ok: boolean;
  reason?: string;
  message?: string;
}

/** What the bulk needs of the DNS service. */
export interface BulkContext {
  zones: ZoneRegistry;
  providers: ProviderZones;
  writes: MasterWrites;
  /** DnsService.bind: a provider zone gets its binding, a local zone must have readable paths. */
  bind(z: ZoneRow): Promise<ZoneRow>;
  defaultTtl: number;
}

type ValidOp = { i: number; action: 'ADD' | 'DELETE'; r: ValidRecord; z: ZoneRow };

export async function bulkWrite(ctx: BulkContext, operations: WriteOp[], allowedZone: (z: ZoneRow) => void) {
  const { valid, zones } = await validOperations(ctx, operations, allowedZone);
  const results: OpResult[] = operations.map((_, i) => {
    const v = valid.find((x) => x.i === i)!;
    return { index: i, action: v.action, domain: v.r.name, type: v.r.type, target: v.r.rdata, ok: false };
  });
  let messages = 0;
  for (const z of zones) {
    const mine = valid.filter((v) => v.z.id === z.id);
    messages += z.provider ? await ctx.providers.bulk(z, mine, results, ctx.defaultTtl) : await masterBulk(ctx, z, mine, results);
  }
  const failed = results.filter((r) => !r.ok).length;
  return {
    ok: failed === 0,
    message:
      failed === 0 ? `${results.length} operation(s) applied.` : `${results.length - failed} of ${results.length} operation(s) applied; ${failed} failed.`,
    results,
    operation_count: results.length,
    update_messages: messages,
  };
}

/** Every operation validated against its zone (all errors in one 400), and each zone checked by `allowedZone` and bound. */
async function validOperations(ctx: BulkContext, operations: WriteOp[], allowedZone: (z: ZoneRow) => void) {
  const errors: FieldError[] = [];
  const valid: ValidOp[] = [];
  await ctx.providers.directory.importLegacy(); // zones of the older provider config are registered on first use
  const zoneOf = await ctx.zones.zonesFor(operations.map((op) => (typeof op.domain === 'string' ? op.domain : '')));
  for (const [i, op] of operations.entries()) {
    const z = zoneOf[i];
    if (!z) {
      errors.push({ field: `operations.${i}.domain`, message: 'is not inside any managed zone' });
      continue;
    }
    const v = validateRecord(
      { domain: op.domain, type: op.type, target: op.target, ttl: op.action === 'ADD' ? op.ttl : undefined },
      {
        zone: z.zone,
        fields: { domain: `operations.${i}.domain`, type: `operations.${i}.type`, target: `operations.${i}.target`, ttl: `operations.${i}.ttl` },
      },
    );
    if (!v.ok) errors.push(...v.errors);
    else valid.push({ i, action: op.action, r: v.value, z });
  }
  if (errors.length) throw validationFailed(fieldErrorsToRecord(errors));
  const zones = new Map(valid.map((v) => [v.z.id, v.z]));
  for (const z of zones.values()) {
    allowedZone(z);
    zones.set(z.id, await ctx.bind(z));
  }
  return { valid, zones: [...zones.values()] };
}

/** One local zone's share of the bulk; returns the number of UPDATE messages sent. */
async function masterBulk(ctx: BulkContext, z: ZoneRow, mine: ValidOp[], results: OpResult[]): Promise<number> {
  let messages = 0;
  const w = await ctx.writes.writer(z);
  const deletedTypes = new Map<string, Set<string>>();
  for (const v of mine) if (v.action === 'DELETE') (deletedTypes.get(v.r.name) ?? deletedTypes.set(v.r.name, new Set()).get(v.r.name)!).add(v.r.type);
  const addedAddresses = new Set(mine.filter((v) => v.action === 'ADD' && (v.r.type === 'A' || v.r.type === 'AAAA')).map((v) => v.r.name));
  const adds = mine.filter((v) => v.action === 'ADD');
  // The serial before the change (for the cache sync) is read while the pre-check reads run.
  const serialBefore = w.early.soaSerial(z.zone).catch(() => null);
  // An RRset has one TTL (RFC 2181 §5.2): each add takes the TTL its RRset ends up with, so the
  // RRsets the adds join are read first (the existing TTL, or the explicit one an add gives).
  const ttls = await bulkTtls(ctx, z, w, adds);
  const toOp = (v: ValidOp): UpdateOperation =>
    v.action === 'ADD'
      ? { op: 'add', name: v.r.name, type: v.r.type, ttl: ttls.get(v.i)!.ttl, rdata: v.r.data }
      : { op: 'delete', name: v.r.name, type: v.r.type, rdata: v.r.data };
  const prereqOf = (v: ValidOp): Prerequisite[] => (v.action === 'ADD' && !deletedTypes.has(v.r.name) ? addPrereqs(v.r) : []);
  const targets = adds.map((v) => inZoneTarget(z, v.r)).filter((t): t is string => t !== null);
  // The pre-checks against the master's data: the in-zone targets' addresses, and with
  // `names` what each added name holds now (for the CNAME rules).
  const preCheck = async (names: boolean) => {
    const facts = await ctx.writes.facts(z, w.early, names ? adds.map((v) => v.r.name) : [], targets);
    const sendable: ValidOp[] = [];
    for (const v of mine) {
      if (v.action === 'ADD') {
        const problem = ctx.writes.addProblem(z, v.r, facts, {
          deletedTypes: deletedTypes.get(v.r.name),
          addedAddresses,
          field: `operations.${v.i}.target`,
        });
        if (problem) {
          Object.assign(results[v.i]!, { ok: false, reason: problem.reason, message: problem.message });
          continue;
        }
      }
      sendable.push(v);
    }
    return sendable;
  };
  const sendAll = async (list: ValidOp[]) => {
    messages++;
    await ctx.writes.send(
      z,
      w,
      list.map(toOp),
      list.flatMap(prereqOf),
      list.map((v) => ({ name: v.r.name, type: v.r.type })),
      serialBefore,
    );
    for (const v of list) Object.assign(results[v.i]!, { ok: true }, okNote(ttls.get(v.i)));
  };
  // Every add carries its CNAME rule as an UPDATE prerequisite, so when each add has one (no
  // add at a name the same bulk deletes from), the message goes out without reading what the
  // names hold: a conflict fails the whole message with nothing changed, and only then are
  // those pre-checks read to say which operations are in the way. Only the addresses of
  // in-zone MX / apex NS targets are read first (the master would refuse the whole message).
  const optimistic = adds.every((v) => !deletedTypes.has(v.r.name));
  let sendable = optimistic && !targets.length ? mine : await preCheck(!optimistic);
  if (!sendable.length) return messages;
  try {
    try {
      await sendAll(sendable);
    } catch (err) {
      // A failed prerequisite (or a read-back showing an add ignored): the pre-checks say which.
      // Anything else the master refused goes one operation at a time below.
      if (!optimistic || !(err instanceof AppError && (err.reason === 'cname_conflict' || err.reason === 'conflict'))) throw err;
      sendable = await preCheck(true);
      if (!sendable.length) return messages;
      await sendAll(sendable);
    }
  } catch (err) {
    if (!isPerOperation(err)) throw err;
    messages += await oneByOne(ctx, z, sendable, toOp, prereqOf, ttls, results);
  }
  return messages;
}

/** The combined message was refused as a whole: each operation on its own, each with a budget of its own. */
async function oneByOne(
  ctx: BulkContext,
  z: ZoneRow,
  sendable: ValidOp[],
  toOp: (v: ValidOp) => UpdateOperation,
  prereqOf: (v: ValidOp) => Prerequisite[],
  ttls: Map<number, RrsetTtl>,
  results: OpResult[],
): Promise<number> {
  let messages = 0;
  for (const v of sendable) {
    try {
      messages++;
      await ctx.writes.send(z, await ctx.writes.writer(z), [toOp(v)], prereqOf(v), [{ name: v.r.name, type: v.r.type }]);
      Object.assign(results[v.i]!, { ok: true }, okNote(ttls.get(v.i)));
    } catch (e) {
      if (!isPerOperation(e)) throw e;
      const a = e instanceof AppError ? e : mapWriteError(e, [toOp(v)]);
      Object.assign(results[v.i]!, { ok: false, reason: a.reason, message: a.message });
    }
  }
  return messages;
}

/**
 * The TTL of each bulk add (by operation index): the explicit `ttl`, else the one another add of
 * the same bulk gives that RRset, else the RRset's TTL on the master, else DNS_DEFAULT_TTL (a new
 * RRset). One pipelined query per added name; with a note where an explicit TTL changes an
 * existing RRset's.
 */
async function bulkTtls(ctx: BulkContext, z: ZoneRow, w: Writer, adds: Array<{ i: number; r: ValidRecord }>): Promise<Map<number, RrsetTtl>> {
  const out = new Map<number, RrsetTtl>();
  if (!adds.length) return out;
  const facts = await ctx.writes.facts(
    z,
    w.early,
    adds.map((v) => v.r.name),
    [],
  );
  const given = new Map<string, number>();
  for (const v of adds) if (v.r.ttl !== undefined) given.set(`${v.r.name} ${v.r.type}`, v.r.ttl);
  for (const v of adds) {
    const explicit = v.r.ttl ?? given.get(`${v.r.name} ${v.r.type}`);
    out.set(v.i, rrsetTtl({ ...v.r, ttl: explicit }, facts.at(v.r.name), ctx.defaultTtl));
  }
  return out;
}
