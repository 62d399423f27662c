import { AppError } from '../http/errors.js';
import { RETRY_AFTER_SECONDS } from '../infra/unavailable.js';
import { DnsConnectionError, DnsError, DnsOutcomeUnknownError, DnsRcodeError, DnsTimeoutError, type UpdateOperation } from './wire/index.js';

/**
 * Failures of the master DNS server as documented reasons. A master that cannot be reached (the
 * connection is refused, reset or closed early, or no answer comes in time) is a 503
 * service_unavailable with Retry-After: the request was fine and may be sent again once the master
 * is back. A master that answers but refuses (RCODE, TSIG, malformed answer) is a 503 without
 * Retry-After, since sending the same request again will not help. A change that was sent and
 * never answered is `outcome_unknown` (see DnsService.send), never "not applied".
 */
export function isMasterUnreachable(err: unknown): boolean {
  return err instanceof DnsConnectionError || err instanceof DnsTimeoutError || err instanceof DnsOutcomeUnknownError;
}

const retry = { 'retry-after': String(RETRY_AFTER_SECONDS) };

export function masterUnavailable(err: unknown, context: string): AppError {
  if (err instanceof AppError) return err;
  const message = `${context}: ${(err as Error)?.message ?? String(err)}`;
  return isMasterUnreachable(err) ? new AppError('service_unavailable', message, { headers: retry }) : new AppError('service_unavailable', message);
}

/** 503 outcome_unknown: the change was sent, no answer came, and a read-back could not show it applied. */
export function outcomeUnknown(err: DnsOutcomeUnknownError, what: string): AppError {
  return new AppError(
    'outcome_unknown',
    `Outcome unknown: the change was sent to the master DNS server, which did not answer (${err.cause.message}); ${what}. Read the records before sending the change again.`,
    { headers: retry },
  );
}

/**
 * For the DNS API's error handler: a master-client failure that no service method mapped becomes
 * the 503 above; anything else is unchanged.
 */
export function mapMasterFailure(error: unknown): unknown {
  return error instanceof DnsError ? masterUnavailable(error, 'The master DNS server could not be reached') : error;
}

/** A host-name label as named's check-names reads it: letters and digits, inner hyphens. */
const HOST_LABEL = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/i;
/** Types whose owner name named's check-names requires to be a host name (a leading `*` label allowed). */
const HOST_OWNER_TYPES = new Set(['A', 'AAAA', 'MX']);
const isHostOwner = (name: string) => name.split('.').every((label, i) => HOST_LABEL.test(label) || (i === 0 && label === '*'));

/**
 * A REFUSED that the request's own data explains: named's `check-names` (on by default for a
 * primary zone) refuses an A, AAAA or MX record whose owner is not a host name (`bad_name`), after
 * our pre-checks let it through (those names are fine for TXT, SRV and the like). The message for
 * a 400 naming `domain`, or null when the refusal is not explained by the data (a key without
 * rights, a zone that is not writable: still the master's 503).
 */
export function refusedForData(err: unknown, ops: readonly UpdateOperation[]): string | null {
  if (!(err instanceof DnsRcodeError) || err.code !== 'REFUSED') return null;
  const bad = ops.find((o): o is Extract<UpdateOperation, { op: 'add' }> => o.op === 'add' && HOST_OWNER_TYPES.has(o.type) && !isHostOwner(o.name));
  return bad
    ? `${bad.name} is not a host name (each label letters, digits and inner hyphens): the master DNS server refuses ${bad.type} records at it (named's check-names). Use a host name, or a type such as TXT or SRV that allows this owner.`
    : null;
}
