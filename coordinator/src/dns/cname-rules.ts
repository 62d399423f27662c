import { AppError } from '../http/errors.js';
import type { DnsRecord, ValidRecord } from './wire/index.js';

/** What a write knows besides the record: the same request's other operations. */
export interface CnameContext {
  /** An update replaces the RRset of its type (a CNAME may replace a CNAME). */
  replacing?: boolean;
  /** Types the same bulk deletes at this name. */
  deletedTypes?: Set<string>;
}

/**
 * The CNAME rules of an add (or the add half of an update) against the records at its name, for
 * the master and provider write paths alike; null when it may be sent. A CNAME cannot coexist with
 * other data (RFC 1034 §3.6.2), and a CNAME add where one exists would replace it: both are 409
 * `cname_conflict` with nothing changed (a bulk may have sent an UPDATE its prerequisite refused).
 */
export function cnameProblem(r: ValidRecord, here: DnsRecord[], ctx: CnameContext = {}): AppError | null {
  const cleared = ctx.deletedTypes ?? new Set<string>();
  const cname = here.find((x) => x.type === 'CNAME');
  if (r.type === 'CNAME') {
    if (cname && !ctx.replacing && !cleared.has('CNAME'))
      return new AppError(
        'cname_conflict',
        `${r.name} already has a CNAME to ${cname.rdata}; a name holds one CNAME only. Use /api/dns/records/update to replace it. Nothing was changed.`,
      );
    const others = [...new Set(here.filter((x) => x.type !== 'CNAME' && !cleared.has(x.type)).map((x) => x.type))];
    if (others.length)
      return new AppError(
        'cname_conflict',
        `${r.name} already has ${others.join(', ')} data; a CNAME cannot coexist with other data at one name (remove it first). Nothing was changed.`,
      );
    return null;
  }
  if (cname && !cleared.has('CNAME'))
    return new AppError(
      'cname_conflict',
      `${r.name} has a CNAME to ${cname.rdata}; a CNAME cannot coexist with other data at one name (here ${r.type}), so remove that CNAME first. Nothing was changed.`,
    );
  return null;
}
