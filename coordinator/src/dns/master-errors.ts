import { AppError } from '../http/errors.js';
import { RETRY_AFTER_SECONDS } from '../infra/unavailable.js';
import { DnsConnectionError, DnsError, DnsOutcomeUnknownError, DnsTimeoutError } from './wire/index.js';

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
