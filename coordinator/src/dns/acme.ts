/**
 * The ACME DNS-01 helpers (POST /api/dns/acme/{present,cleanup,cleanup-stale} and the CLI's
 * dns:acme:cleanup-stale): one TXT value at `_acme-challenge.<domain>` published or removed, on the
 * master (a signed UPDATE) or at the zone's provider.
 */
import { normalizeName, type UpdateOperation } from './wire/index.js';
import { addPrereqs, isPerOperation, validRecord, type MasterWrites, type SendResult } from './master-writes.js';
import type { ProviderZones } from './providers/provider-zones.js';
import type { ZoneCache } from './zone-cache.js';
import type { ZoneRow } from './zone-registry.js';

export const ACME_PREFIX = '_acme-challenge.';

/** `example.com`, `*.example.com`, `_acme-challenge.example.com.` → `_acme-challenge.example.com`. */
export function acmeOwner(domain: string): string {
  let d = normalizeName(domain);
  if (d.startsWith('*.')) d = d.slice(2);
  return d.startsWith(ACME_PREFIX) ? d : `${ACME_PREFIX}${d}`;
}

/** A challenge value as one TXT character-string. */
export const txtOf = (value: string) => `"${value.replace(/[\\"]/g, (c) => `\\${c}`)}"`;

/** What the ACME helpers need of the DNS service. */
export interface AcmeContext {
  writes: MasterWrites;
  providers: ProviderZones;
  cache: ZoneCache;
  /** DNS_ACME_TTL: the TTL of a challenge published without one. */
  acmeTtl: number;
}

export async function acmePresent(ctx: AcmeContext, domain: string, value: string, ttl: number | undefined, z: ZoneRow) {
  const owner = acmeOwner(domain);
  const t = ttl ?? ctx.acmeTtl;
  const r = validRecord(z, { domain: owner, type: 'TXT', target: txtOf(value), ttl: t });
  let sent: SendResult;
  if (z.provider) sent = await ctx.providers.add(z, r, t);
  else {
    const w = await ctx.writes.writer(z);
    const problem = ctx.writes.addProblem(z, r, await ctx.writes.facts(z, w.early, [owner], []));
    if (problem) throw problem;
    sent = await ctx.writes.send(z, w, [{ op: 'add', name: owner, type: 'TXT', ttl: t, rdata: r.data }], addPrereqs(r), [{ name: owner, type: 'TXT' }]);
  }
  return {
    ok: true as const,
    message: `Challenge published at ${owner}.${sent.note ? ` ${sent.note}` : ''}`,
    owner,
    fqdn: `${owner}.`,
    zone: z.zone,
    value,
    challenge: value,
    ttl: t,
    verified: sent.verified,
  };
}

export async function acmeCleanup(ctx: AcmeContext, domain: string, value: string, z: ZoneRow) {
  const owner = acmeOwner(domain);
  const r = validRecord(z, { domain: owner, type: 'TXT', target: txtOf(value) }, '', true);
  let present: boolean;
  let sent: SendResult | null = null;
  if (z.provider) {
    present = (await ctx.providers.txtAt(z, owner)).some((a) => a.rdata === r.rdata);
    if (present) sent = await ctx.providers.delete(z, r);
  } else {
    const w = await ctx.writes.writer(z);
    present = (await ctx.writes.facts(z, w.early, [owner], [])).at(owner).some((a) => a.type === 'TXT' && a.rdata === r.rdata);
    if (present) sent = await ctx.writes.send(z, w, [{ op: 'delete', name: owner, type: 'TXT', rdata: r.data }], [], [{ name: owner, type: 'TXT' }]);
  }
  return {
    ok: true as const,
    message: present ? `Challenge removed from ${owner}.${sent?.note ? ` ${sent.note}` : ''}` : `No such challenge at ${owner}; nothing to remove.`,
    owner,
    fqdn: `${owner}.`,
    zone: z.zone,
    value,
    challenge: value,
    removed: present,
    verified: sent?.verified ?? true,
  };
}

/** Removes every `_acme-challenge` TXT value at the owner except `keep`. */
export async function acmeCleanupStale(ctx: AcmeContext, domain: string, opts: { keep?: string[]; dryRun?: boolean; refreshZoneCache?: boolean }, z: ZoneRow) {
  const owner = acmeOwner(domain);
  const w = z.provider ? null : await ctx.writes.writer(z);
  const keepRdata = new Set((opts.keep ?? []).map((k) => txtOf(k)));
  const rows = w ? (await ctx.writes.facts(z, w.early, [owner], [])).at(owner).filter((a) => a.type === 'TXT') : await ctx.providers.txtAt(z, owner);
  const value = (rdata: string) => rdata.replace(/^"|"$/g, '').replace(/\\(.)/g, '$1');
  const removed = rows.filter((r) => !keepRdata.has(r.rdata)).map((r) => value(r.rdata));
  const kept = rows.filter((r) => keepRdata.has(r.rdata)).map((r) => value(r.rdata));
  const errors: string[] = [];
  const dryRun = opts.dryRun === true;
  if (!dryRun && removed.length) {
    try {
      const ops = rows.filter((r) => !keepRdata.has(r.rdata)).map((r): UpdateOperation => ({ op: 'delete', name: owner, type: 'TXT', rdata: r.rdata }));
      if (w) await ctx.writes.send(z, w, ops, [], [{ name: owner, type: 'TXT' }]);
      else
        await ctx.providers.deleteTxt(
          z,
          owner,
          rows.filter((r) => !keepRdata.has(r.rdata)).map((r) => r.rdata),
        );
    } catch (err) {
      // Unreachable or unanswered: the request fails as a whole (503), it is not a per-value error.
      if (!isPerOperation(err)) throw err;
      errors.push((err as Error).message);
    }
  }
  if (!dryRun && opts.refreshZoneCache) {
    try {
      if (z.provider) await ctx.providers.refresh(z);
      else await ctx.cache.refresh(z);
    } catch (err) {
      errors.push(`cache refresh: ${(err as Error).message}`);
    }
  }
  return {
    ok: errors.length === 0,
    owner,
    zone: z.zone,
    dry_run: dryRun,
    removed: errors.length && !dryRun ? [] : removed,
    removed_count: errors.length && !dryRun ? 0 : removed.length,
    kept,
    errors,
  };
}
