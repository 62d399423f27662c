/**
 * Documented error reason codes. Every error a route returns carries one of these;
 * each domain maps them to an HTTP status in a single place (see coordinator/src/http/errors.ts).
 */
export const COMMON_REASONS = [
  'unauthenticated',
  'forbidden',
  'not_found',
  'validation_failed',
  'csrf_invalid',
  'rate_limited',
  'conflict',
  'internal_error',
  'service_unavailable',
  /** The request asks for something this route does not answer (e.g. a browser navigation to a JSON-only route). */
  'not_acceptable',
  /** An upstream the route had to ask answered unusably or could not be reached. */
  'bad_gateway',
] as const;

/** DNS API reasons (validation answers 400 there, not 422). */
export const DNS_REASONS = [
  'unauthenticated',
  'forbidden',
  'required_paths_missing_or_unreadable',
  'missing_query',
  'cache_unavailable',
  'cname_conflict',
  'cache_invalidation_disabled',
  'cache_clear_protected',
  'validation_failed',
  'outcome_unknown',
] as const;

export const ACCOUNT_REASONS = ['invalid_credentials', 'account_disabled'] as const;

export type Reason = (typeof COMMON_REASONS)[number] | (typeof DNS_REASONS)[number] | (typeof ACCOUNT_REASONS)[number];
