/**
 * The master-server half of a record write, shared by the single writes (dns-service.ts), the bulk
 * (bulk.ts) and the ACME helpers (acme.ts): validation, the time budget, the pre-check reads, the
 * pre-check rules, and one signed UPDATE with its read-back and cache sync.
 */
import { AppError, validationFailed } from '../http/errors.js';
import {
  DnsConnectionError,
  DnsOutcomeUnknownError,
  DnsRcodeError,
  DnsTimeoutError,
  UpdateNotAppliedError,
  InvalidUpdateError,
  isInZone,
  fieldErrorsToRecord,
  mismatchesIn,
  readBackQuestions,
  noCname,
  normalizeName,
  recordsAt,
  validateRecord,
  type DnsMasterClient,
  type DnsRecord,
  type Prerequisite,
  type UpdateOperation,
  type ValidRecord,
} from './wire/index.js';
import { cnameProblem, type CnameContext } from './cname-rules.js';
import { masterUnavailable, outcomeUnknown, refusedForData } from './master-errors.js';
import type { ZoneCache } from './zone-cache.js';
import type { ZoneRow } from './zone-registry.js';

export function validRecord(
  z: ZoneRow,
  input: { domain?: unknown; type?: unknown; target?: unknown; ttl?: unknown },
  prefix = '',
  forDelete = false,
): ValidRecord {
  const f = (n: string) => `${prefix}${n}`;
  const v = validateRecord(
    { domain: input.domain, type: input.type, target: input.target, ttl: forDelete ? undefined : input.ttl },
    { zone: z.zone, fields: { domain: f('domain'), type: f('type'), target: f('target'), ttl: f('ttl') } },
  );
  if (!v.ok) throw validationFailed(fieldErrorsToRecord(v.errors));
  return v.value;
}

export class MasterWrites {
  constructor(
    private readonly cache: ZoneCache,
    /** DNS_TIMEOUT_MS: the whole master I/O of one write request. */
    private readonly timeoutMs: number,
  ) {}

  /**
   * One write request's master I/O, bounded by DNS_TIMEOUT_MS in total: the pre-checks and the
   * UPDATE must be over by 70 % of it, the rest is kept for the read-back (which is what tells an
   * unanswered UPDATE's outcome) and the cache sync.
   */
  async writer(z: ZoneRow): Promise<Writer> {
    const base = await this.cache.client(z);
    const start = Date.now();
    const total = this.timeoutMs;
    return { early: base.withDeadline(start + Math.floor(total * 0.7)), late: base.withDeadline(start + total) };
  }

  /**
   * What the master has now at each name (every type, one pipelined ANY query per name) and at the
   * in-zone targets of MX/apex NS adds (A and AAAA): the facts the pre-checks decide on.
   */
  async facts(z: ZoneRow, client: DnsMasterClient, names: string[], targets: string[]): Promise<Facts> {
    const uniqueNames = [...new Set(names)];
    const uniqueTargets = [...new Set(targets)];
    const questions = [
      ...uniqueNames.map((name) => ({ name, type: 'ANY' })),
      ...uniqueTargets.flatMap((name) => [
        { name, type: 'A' },
        { name, type: 'AAAA' },
      ]),
    ];
    let answers;
    try {
      answers = await client.queryMany(questions);
    } catch (err) {
      throw masterUnavailable(err, `zone ${z.zone}: the master DNS server could not be asked before the change, so nothing was sent`);
    }
    const at = new Map<string, DnsRecord[]>();
    uniqueNames.forEach((name, i) =>
      at.set(
        name,
        recordsAt(answers[i]!, name, 'ANY').filter((r) => !DNSSEC_TYPES.has(r.type)),
      ),
    );
    const addressed = new Set<string>();
    uniqueTargets.forEach((name, i) => {
      const base = uniqueNames.length + i * 2;
      if ([answers[base]!, answers[base + 1]!].some((a) => a.answers.some((r) => r.name === name && (r.type === 'A' || r.type === 'AAAA'))))
        addressed.add(name);
    });
    return { at: (name) => at.get(name) ?? [], addressed };
  }

  /**
   * The pre-checks of one add (or the add half of an update) against the master's data; null when
   * it may be sent. BIND acknowledges and then ignores data beside a CNAME (RFC 1034 §3.6.2), so
   * those are refused here with the types in the way; it REFUSES an MX or apex NS whose in-zone
   * target has no address, which is the caller's data, so that is a 400 naming the target.
   */
  addProblem(z: ZoneRow, r: ValidRecord, facts: Facts, ctx: AddContext = {}): AppError | null {
    const conflict = cnameProblem(r, facts.at(r.name), ctx);
    if (conflict) return conflict;
    const target = inZoneTarget(z, r);
    if (target && !facts.addressed.has(target) && !ctx.addedAddresses?.has(target)) {
      const what = r.type === 'MX' ? 'an MX' : 'a zone apex NS';
      return validationFailed({
        [ctx.field ?? 'target']: [
          `${target} has no A or AAAA record in zone ${z.zone}; add its address first (the master refuses ${what} whose in-zone target has none)`,
        ],
      });
    }
    return null;
  }

  /**
   * One signed UPDATE, read back, and the touched cache rows made the master's. Unanswered (the
   * connection dropped after sending, or no answer in time): the read-back decides; a change it
   * shows in the zone is a success, anything else is `outcome_unknown`, never "not applied", since
   * a stopped master may still apply what it has received. A change the master acknowledged is a
   * success even when the read-back cannot be done (then `verified: false`).
   */
  async send(
    z: ZoneRow,
    w: Writer,
    ops: UpdateOperation[],
    prereqs: Prerequisite[],
    pairs: Array<{ name: string; type: string }>,
    serialBefore?: Promise<number | null>,
  ): Promise<SendResult> {
    // The cache sync takes the zone row lock while the serial is read and the UPDATE is under way.
    const sync = this.cache.beginSync(z.id);
    try {
      const before = await (serialBefore ?? w.early.soaSerial(z.zone).catch(() => null));
      let result: SendResult = { verified: true };
      let synced = false;
      try {
        await w.early.update(z.zone, ops, prereqs);
        // After an acknowledged UPDATE the cache sync asks the master for the touched pairs and, in
        // the same pipelined exchange, the read-back's questions: one round of queries serves both
        // (the read-back asks on its own when the sync did not ask: no cache, or a failure).
        const readBack = await sync.finish(w.late, z.zone, pairs, before, readBackQuestions(ops));
        synced = true;
        try {
          const mismatches = readBack ? mismatchesIn(ops, readBack) : await w.late.verifyUpdate(ops);
          if (mismatches.length) throw new AppError('conflict', new UpdateNotAppliedError(mismatches).message);
        } catch (err) {
          if (err instanceof AppError) throw err;
          result = {
            verified: false,
            note: `The master acknowledged the change (NOERROR); reading it back failed: ${(err as Error).message}.`,
          };
        }
      } catch (err) {
        if (!(err instanceof DnsOutcomeUnknownError)) throw mapWriteError(err, ops);
        let mismatches;
        try {
          mismatches = await w.late.verifyUpdate(ops);
        } catch (again) {
          throw outcomeUnknown(err, `asking the master again failed too (${(again as Error).message})`);
        }
        if (mismatches.length) throw outcomeUnknown(err, 'a read-back right after does not show the change, but the master may still apply what it received');
        result = { verified: true, note: 'The master did not answer the UPDATE; a read-back shows the change in the zone.' };
      }
      if (!synced) await sync.finish(w.late, z.zone, pairs, before);
      return result;
    } finally {
      await sync.cancel();
    }
  }
}

export interface Writer {
  /** Pre-checks and the UPDATE. */
  early: DnsMasterClient;
  /** Read-back and cache sync. */
  late: DnsMasterClient;
}

export interface Facts {
  /** The master's records at a name (DNSSEC types left out). */
  at: (name: string) => DnsRecord[];
  /** Asked-about targets that have an A or AAAA record. */
  addressed: Set<string>;
}

export interface AddContext extends CnameContext {
  /** Names the same bulk gives an A/AAAA. */
  addedAddresses?: Set<string>;
  /** The field a 400 names. */
  field?: string;
}

export interface SendResult {
  /** The change was read back from the master. */
  verified: boolean;
  note?: string;
}

const DNSSEC_TYPES = new Set(['RRSIG', 'NSEC', 'NSEC3', 'NSEC3PARAM', 'DNSKEY', 'CDS', 'CDNSKEY', 'TYPE65534']);

/** The in-zone target an MX, or an NS at the zone apex, points at (BIND refuses the add when it has no address), else null. */
export function inZoneTarget(z: ZoneRow, r: ValidRecord): string | null {
  let target: string | null = null;
  if (r.data.type === 'MX') target = r.data.exchange;
  else if (r.data.type === 'NS' && r.name === z.zone) target = r.data.target;
  if (!target) return null;
  const t = normalizeName(target);
  return t !== '' && isInZone(t, z.zone) ? t : null;
}

export interface RrsetTtl {
  ttl: number;
  /** Empty, or a sentence saying the add changed the TTL of the records already in the RRset. */
  note: string;
}

/**
 * The TTL an add sends (RFC 2181 §5.2: an RRset has one TTL, and the master applies an add's TTL to
 * the whole RRset): the explicit one, else the RRset's existing TTL, else `defaultTtl` (a new RRset).
 */
export function rrsetTtl(r: Pick<ValidRecord, 'name' | 'type' | 'ttl'>, at: DnsRecord[], defaultTtl: number): RrsetTtl {
  const existing = at.filter((a) => a.type === r.type);
  const had = existing[0]?.ttl;
  const ttl = r.ttl ?? had ?? defaultTtl;
  if (had === undefined || had === ttl) return { ttl, note: '' };
  return {
    ttl,
    note: ` An RRset has one TTL (RFC 2181): the ${existing.length} record(s) already in ${r.name} ${r.type} now have TTL ${ttl} too (was ${had}).`,
  };
}

/** A bulk result's note about the RRset's TTL, when the add changed it. */
export function okNote(t: RrsetTtl | undefined): { message?: string } {
  return t?.note ? { message: t.note.trim() } : {};
}

/** Prerequisites that make the master refuse (instead of silently ignore) an add that raced a conflicting one. */
export function addPrereqs(r: ValidRecord): Prerequisite[] {
  return r.type === 'CNAME' ? [{ require: 'nameNotInUse', name: r.name }] : [noCname(r.name)];
}

/** A failure that concerns one operation (the bulk then tries each on its own), not an unreachable master or an unknown outcome. */
export function isPerOperation(err: unknown): boolean {
  if (err instanceof AppError) return err.reason !== 'outcome_unknown' && !(err.reason === 'service_unavailable' && err.details.headers !== undefined);
  return err instanceof DnsRcodeError || err instanceof UpdateNotAppliedError || err instanceof InvalidUpdateError;
}

/** Master answers → documented reasons. */
export function mapWriteError(err: unknown, ops: UpdateOperation[]): AppError {
  if (err instanceof AppError) return err;
  if (err instanceof InvalidUpdateError) return validationFailed(fieldErrorsToRecord(err.errors));
  if (err instanceof DnsRcodeError && err.prerequisiteFailed) {
    const add = ops.find((o) => o.op === 'add');
    if ((err.code === 'YXRRSET' || err.code === 'YXDOMAIN') && add)
      return new AppError(
        'cname_conflict',
        add.type === 'CNAME'
          ? `${add.name} got other data concurrently; a CNAME cannot coexist with it. Nothing was changed.`
          : `${add.name} has a CNAME (added concurrently); remove that CNAME first. Nothing was changed.`,
      );
    return new AppError('conflict', `The zone changed concurrently: ${err.message}. Nothing was changed.`);
  }
  if (err instanceof UpdateNotAppliedError) return new AppError('conflict', err.message);
  const dataRefused = refusedForData(err, ops);
  if (dataRefused) return validationFailed({ domain: [dataRefused] });
  if (err instanceof DnsConnectionError || err instanceof DnsTimeoutError)
    return masterUnavailable(err, 'The master DNS server could not be reached, so the change was not sent');
  return masterUnavailable(err, 'The master DNS server refused the change');
}
