/** The zone cache's order: canonical DNS order with the apex first (the order of index dns_record_cache_order). */
import { normalizeName, type DnsRecord } from './wire/index.js';

/** The ordering key of a cached row (the columns of index dns_record_cache_order after zone_id). */
export type RowKey = [sortKey: string, typeRank: number, type: string, rdata: string, id: string];

/**
 * Owner labels reversed: canonical DNS order with the apex first. Its own inverse: the sort key of
 * a sort key is the name. (A loop, not split/reverse/join: a refresh computes 100,000 of them.)
 */
export function sortKey(name: string): string {
  const n = normalizeName(name);
  let end = n.length;
  let out = '';
  for (let i = end - 1; i >= 0; i--) {
    if (n.charCodeAt(i) !== 46) continue;
    out += `${n.slice(i + 1, end)}.`;
    end = i;
  }
  return out + n.slice(0, end);
}
export const typeRank = (type: string) => (type === 'SOA' ? 0 : type === 'NS' ? 1 : 2);

export function compareRecords(a: DnsRecord, b: DnsRecord): number {
  const k = (r: DnsRecord) => [sortKey(r.name), typeRank(r.type), r.type, r.rdata] as const;
  const x = k(a);
  const y = k(b);
  for (let i = 0; i < x.length; i++) {
    if (x[i]! < y[i]!) return -1;
    if (x[i]! > y[i]!) return 1;
  }
  return 0;
}
