/**
 * Reads and writes of provider zones (DnsService hands them over once a zone has a ProviderBinding):
 * the refresh streams the provider's record pages into the row cache; writes keep the request
 * contract of the master path: the same validation (done by DnsService), the same CNAME pre-checks
 * on the provider's current records, one provider call per change, a read-back from the provider
 * that must show the change (else 409 conflict), and the touched cache rows replaced by that
 * read-back. A call that got no answer is decided by the read-back (`outcome_unknown` when it
 * cannot show the change), as on the master path.
 */
import { AppError } from '../../http/errors.js';
import { RETRY_AFTER_SECONDS } from '../../infra/unavailable.js';
import { cnameProblem } from '../cname-rules.js';
import type { DnsRecord, ValidRecord } from '../wire/index.js';
import type { CacheState } from '../cache-repository.js';
import type { ZoneCache } from '../zone-cache.js';
import type { ZoneRow } from '../zone-registry.js';
import { CloudflareError, payloadOf, providerFailure, rowOf, type CfRecord, type CloudflareClient } from './cloudflare.js';
import type { ProviderDirectory } from './directory.js';
import { PROVIDERS, type ProviderBinding } from './types.js';

interface Entry {
  cf: CfRecord;
  row: DnsRecord;
}

interface Ctx {
  z: ZoneRow;
  b: ProviderBinding;
  id: string;
  cf: CloudflareClient;
  fail: (err: unknown, field?: string) => AppError;
}

export interface ProviderSent {
  verified: boolean;
  note?: string;
}

/** `provider`, `provider_label` of a provider zone's read responses (nothing for a local zone). */
export function providerFields(z: ZoneRow) {
  return z.provider ? { provider: z.provider.provider, provider_label: z.provider.label } : {};
}

/** The `method` of a live provider read: the upper-cased provider name. */
export const providerMethod = (b: ProviderBinding) => PROVIDERS[b.provider].method;

const entries = (records: CfRecord[]): Entry[] =>
  records.flatMap((cf) => {
    const row = rowOf(cf);
    return row ? [{ cf, row }] : [];
  });
const has = (es: Entry[], r: { type: string; rdata: string }) => es.some((e) => e.row.type === r.type && e.row.rdata === r.rdata);

export class ProviderZones {
  constructor(
    readonly directory: ProviderDirectory,
    private readonly cache: ZoneCache,
  ) {}

  private async ctx(z: ZoneRow): Promise<Ctx> {
    const b = z.provider!;
    if (!b.ready || !b.providerZoneId)
      throw new AppError(
        'service_unavailable',
        `zone ${z.zone} is served by ${b.label} (${b.source === 'detected' ? 'its name servers are ' + b.label + "'s" : b.source}), but the provider path cannot be used: ${b.problem ?? 'no zone id'}`,
      );
    const cf = await this.directory.clientFor({ tokenRef: b.tokenRef, zone: z.zone });
    return { z, b, id: b.providerZoneId, cf, fail: (err, field) => providerFailure(err, { zone: z.zone, tokenRef: b.tokenRef, ...(field ? { field } : {}) }) };
  }

  /** The refresh of a provider zone: every record page, streamed into the row cache (serial 0: the API has no SOA serial). */
  async refresh(z: ZoneRow): Promise<CacheState> {
    const c = await this.ctx(z);
    return this.cache
      .replaceByTransfer(z.id, async (rows) => {
        await c.cf.listRecords(c.id, {}, (page) => rows.records(entries(page).map((e) => e.row)));
        return { serial: 0 };
      })
      .catch((err: unknown) => {
        throw c.fail(err);
      });
  }

  /** The provider's records at each name (pre-checks: a failure here means nothing was sent). */
  private async at(c: Ctx, names: string[]): Promise<Map<string, Entry[]>> {
    const out = new Map<string, Entry[]>();
    const unique = [...new Set(names)];
    try {
      for (let i = 0; i < unique.length; i += 8)
        await Promise.all(unique.slice(i, i + 8).map(async (n) => out.set(n, entries(await c.cf.listRecords(c.id, { name: n })))));
    } catch (err) {
      const e = c.fail(err);
      throw new AppError(e.reason, `${e.message}. The records could not be read before the change, so nothing was sent.`, e.details);
    }
    return out;
  }

  /**
   * One provider write. Without an answer after it may have been sent, a read-back decides:
   * applied (a note says so) or `outcome_unknown`.
   */
  private async write(c: Ctx, what: string, send: () => Promise<unknown>, applied: () => Promise<boolean>, field?: string): Promise<string | undefined> {
    try {
      await send();
      return undefined;
    } catch (err) {
      if (!(err instanceof CloudflareError && err.status === 0 && err.maybeSent)) throw c.fail(err, field);
      const unknown = (why: string) =>
        new AppError(
          'outcome_unknown',
          `Outcome unknown: ${what} was sent to ${c.b.label}, which did not answer (${err.message}); ${why}. Read the records before sending it again.`,
          { headers: { 'retry-after': String(RETRY_AFTER_SECONDS) } },
        );
      let ok: boolean;
      try {
        ok = await applied();
      } catch (again) {
        throw unknown(`asking again failed too (${(again as Error).message})`);
      }
      if (!ok) throw unknown('a read-back right after does not show the change');
      return `${c.b.label} did not answer ${what}; a read-back shows the change.`;
    }
  }

  private async typeAt(c: Ctx, name: string, type: string): Promise<Entry[]> {
    return entries(await c.cf.listRecords(c.id, { name, type }));
  }

  /**
   * The read-back: each touched pair from the provider; `check` says what is wrong (→ 409 after the
   * cache took what the provider has). A read-back that cannot be done: verified false, cache stale.
   */
  private async verify(
    c: Ctx,
    pairs: Array<{ name: string; type: string }>,
    check: (at: (name: string, type: string) => Entry[]) => string | null,
    note?: string,
  ): Promise<ProviderSent> {
    const got = new Map<string, Entry[]>();
    try {
      for (const p of pairs) got.set(`${p.name}|${p.type}`, await this.typeAt(c, p.name, p.type));
    } catch (err) {
      await this.cache.markStale(c.z.id);
      return { verified: false, note: `${note ? `${note} ` : ''}${c.b.label} accepted the change; reading it back failed: ${(err as Error).message}.` };
    }
    await this.cache.replacePairs(
      c.z.id,
      pairs,
      [...got.values()].flat().map((e) => e.row),
    );
    const problem = check((name, type) => got.get(`${name}|${type}`) ?? []);
    if (problem) throw new AppError('conflict', `${c.b.label} accepted the change, but reading it back shows otherwise: ${problem}.`);
    return { verified: true, ...(note ? { note } : {}) };
  }

  async add(z: ZoneRow, r: ValidRecord, ttl: number): Promise<ProviderSent> {
    const c = await this.ctx(z);
    const here = (await this.at(c, [r.name])).get(r.name) ?? [];
    const problem = cnameProblem(
      r,
      here.map((e) => e.row),
    );
    if (problem) throw problem;
    const note = has(here, r)
      ? undefined
      : await this.write(
          c,
          `the add of ${r.name} ${r.type}`,
          () => c.cf.createRecord(c.id, payloadOf(r, ttl)),
          async () => has(await this.typeAt(c, r.name, r.type), r),
        );
    return this.verify(c, [r], (at) => (has(at(r.name, r.type), r) ? null : `${r.name} ${r.type} ${r.rdata} is not there`), note);
  }

  async delete(z: ZoneRow, r: ValidRecord): Promise<ProviderSent> {
    const c = await this.ctx(z);
    const found = ((await this.at(c, [r.name])).get(r.name) ?? []).find((e) => e.row.type === r.type && e.row.rdata === r.rdata);
    if (!found) throw new AppError('not_found', `${r.name} ${r.type} ${r.rdata} does not exist.`);
    const note = await this.write(
      c,
      `the delete of ${r.name} ${r.type}`,
      () => c.cf.deleteRecord(c.id, found.cf.id),
      async () => !has(await this.typeAt(c, r.name, r.type), r),
    );
    return this.verify(c, [r], (at) => (has(at(r.name, r.type), r) ? `${r.name} ${r.type} ${r.rdata} is still there` : null), note);
  }

  /** Replaces `old` (one value) or the whole RRset of next's type; the TTL kept when none is given. */
  async update(z: ZoneRow, next: ValidRecord, old: ValidRecord | undefined, defaultTtl: number): Promise<ProviderSent & { ttl: number }> {
    const c = await this.ctx(z);
    const here = (await this.at(c, [next.name])).get(next.name) ?? [];
    const problem = cnameProblem(
      next,
      here.map((e) => e.row),
      { replacing: true },
    );
    if (problem) throw problem;
    const current = here.filter((e) => e.row.type === next.type);
    const ttl = next.ttl ?? current[0]?.row.ttl ?? defaultTtl;
    // Without a ttl the record keeps its own, Cloudflare's "automatic" (1) included.
    const sendTtl = next.ttl ?? current[0]?.cf.ttl ?? defaultTtl;
    let replaced: Entry[];
    if (old) {
      const o = current.find((e) => e.row.rdata === old.rdata);
      if (!o) throw new AppError('not_found', `${old.name} ${old.type} ${old.rdata} does not exist.`);
      replaced = [o];
    } else replaced = current;
    const [keep, ...drop] = replaced;
    // The new value already there as another record: the replaced one only goes away.
    const twin = current.find((e) => e.row.rdata === next.rdata && e !== keep);
    const notes: string[] = [];
    const check = async () => {
      const now = await this.typeAt(c, next.name, next.type);
      return has(now, next) && !replaced.some((e) => e.row.rdata !== next.rdata && has(now, e.row));
    };
    const what = `the update of ${next.name} ${next.type}`;
    if (keep && !twin) {
      const n = await this.write(c, what, () => c.cf.patchRecord(c.id, keep.cf.id, payloadOf(next, sendTtl)), check, 'new_target');
      if (n) notes.push(n);
    } else if (!keep && !twin) {
      const n = await this.write(c, what, () => c.cf.createRecord(c.id, payloadOf(next, sendTtl)), check, 'new_target');
      if (n) notes.push(n);
    } else if (keep) drop.unshift(keep);
    for (const d of drop) {
      if (d.row.rdata === next.rdata) continue;
      const n = await this.write(c, what, () => c.cf.deleteRecord(c.id, d.cf.id), check);
      if (n) notes.push(n);
    }
    const sent = await this.verify(
      c,
      [next],
      (at) => {
        const now = at(next.name, next.type);
        if (!has(now, next)) return `${next.name} ${next.type} ${next.rdata} is not there`;
        const left = replaced.find((e) => e.row.rdata !== next.rdata && has(now, e.row));
        return left ? `${next.name} ${next.type} ${left.row.rdata} is still there` : null;
      },
      notes.join(' ') || undefined,
    );
    return { ...sent, ttl };
  }

  /**
   * Bulk on a provider zone: the pre-checks on one read of every named owner, then one provider
   * call per operation in order (the API has no atomic batch), each failure reported on its
   * operation; then one read-back of every touched pair. A provider that cannot be reached stops
   * the request with a 503 that says how many operations were applied before.
   */
  async bulk(
    z: ZoneRow,
    ops: Array<{ i: number; action: 'ADD' | 'DELETE'; r: ValidRecord }>,
    results: Array<{ ok: boolean; reason?: string; message?: string }>,
    defaultTtl: number,
  ): Promise<number> {
    const c = await this.ctx(z);
    const facts = await this.at(
      c,
      ops.map((o) => o.r.name),
    );
    const deletedTypes = new Map<string, Set<string>>();
    for (const o of ops) if (o.action === 'DELETE') (deletedTypes.get(o.r.name) ?? deletedTypes.set(o.r.name, new Set()).get(o.r.name)!).add(o.r.type);
    const done: typeof ops = [];
    let calls = 0;
    const set = (i: number, v: { ok: boolean; reason?: string; message?: string }) => Object.assign(results[i]!, v);
    for (const o of ops) {
      const here = facts.get(o.r.name) ?? [];
      try {
        if (o.action === 'ADD') {
          const problem = cnameProblem(
            o.r,
            here.map((e) => e.row),
            { deletedTypes: deletedTypes.get(o.r.name) },
          );
          if (problem) throw problem;
          if (!has(here, o.r)) {
            calls++;
            await this.write(
              c,
              `the add of ${o.r.name} ${o.r.type}`,
              () => c.cf.createRecord(c.id, payloadOf(o.r, o.r.ttl ?? defaultTtl)),
              async () => has(await this.typeAt(c, o.r.name, o.r.type), o.r),
              `operations.${o.i}.target`,
            );
          }
        } else {
          const found = here.find((e) => e.row.type === o.r.type && e.row.rdata === o.r.rdata);
          if (!found) throw new AppError('not_found', `${o.r.name} ${o.r.type} ${o.r.rdata} does not exist.`);
          calls++;
          await this.write(
            c,
            `the delete of ${o.r.name} ${o.r.type}`,
            () => c.cf.deleteRecord(c.id, found.cf.id),
            async () => !has(await this.typeAt(c, o.r.name, o.r.type), o.r),
          );
        }
        set(o.i, { ok: true });
        done.push(o);
      } catch (err) {
        const e = err instanceof AppError ? err : c.fail(err);
        if (e.reason === 'service_unavailable' || e.reason === 'outcome_unknown') {
          await this.verify(
            c,
            done.map((d) => d.r),
            () => null,
          ).catch(() => undefined);
          throw new AppError(
            e.reason,
            `${e.message}. Bulk stopped at operation ${o.i}: ${done.length} operation(s) before it were applied (${done.map((d) => d.i).join(', ') || 'none'}); the rest were not sent.`,
            e.details,
          );
        }
        set(o.i, { ok: false, reason: e.reason, message: e.message });
      }
    }
    if (done.length) {
      try {
        await this.verify(
          c,
          done.map((d) => d.r),
          (at) => {
            for (const d of done) {
              const there = has(at(d.r.name, d.r.type), d.r);
              // A later DELETE of the same value in this bulk makes an earlier ADD's absence right.
              const last = [...done].reverse().find((x) => x.r.name === d.r.name && x.r.type === d.r.type && x.r.rdata === d.r.rdata)!;
              if (last === d && there !== (d.action === 'ADD'))
                set(d.i, { ok: false, reason: 'conflict', message: `${c.b.label} accepted it, but reading it back shows otherwise.` });
            }
            return null;
          },
        );
      } catch {
        // verify() reports read-back problems per operation above; nothing to add.
      }
    }
    return calls;
  }

  /** The TXT rows at an ACME owner (cleanup-stale). */
  async txtAt(z: ZoneRow, owner: string): Promise<DnsRecord[]> {
    const c = await this.ctx(z);
    return ((await this.at(c, [owner])).get(owner) ?? []).filter((e) => e.row.type === 'TXT').map((e) => e.row);
  }

  /** Deletes these TXT values at an ACME owner (cleanup-stale), each with its own call. */
  async deleteTxt(z: ZoneRow, owner: string, rdatas: string[]): Promise<ProviderSent> {
    const c = await this.ctx(z);
    const here = ((await this.at(c, [owner])).get(owner) ?? []).filter((e) => e.row.type === 'TXT' && rdatas.includes(e.row.rdata));
    for (const e of here)
      await this.write(
        c,
        `the delete of ${owner} TXT`,
        () => c.cf.deleteRecord(c.id, e.cf.id),
        async () => !has(await this.typeAt(c, owner, 'TXT'), e.row),
      );
    return this.verify(c, [{ name: owner, type: 'TXT' }], (at) => {
      const left = at(owner, 'TXT').filter((r) => rdatas.includes(r.row.rdata));
      return left.length ? `${left.length} value(s) are still there` : null;
    });
  }
}
