/**
 * Typed failures of the master-server client. Each carries a stable `code` so the HTTP layer can
 * map it to a reason/status without parsing messages.
 */

/** RCODE names (RFC 1035, RFC 2136 §2.2, RFC 8945 for the TSIG-related NOTAUTH use). */
export const RCODE_NAMES: Record<number, string> = {
  0: 'NOERROR',
  1: 'FORMERR',
  2: 'SERVFAIL',
  3: 'NXDOMAIN',
  4: 'NOTIMP',
  5: 'REFUSED',
  6: 'YXDOMAIN',
  7: 'YXRRSET',
  8: 'NXRRSET',
  9: 'NOTAUTH',
  10: 'NOTZONE',
};

export function rcodeName(rcode: number): string {
  return RCODE_NAMES[rcode] ?? `RCODE${rcode}`;
}

export class DnsError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'DnsError';
  }
}

/** No answer in time (connect, per message, or the whole exchange). */
export class DnsTimeoutError extends DnsError {
  constructor(message: string) {
    super('TIMEOUT', message);
    this.name = 'DnsTimeoutError';
  }
}

/** The server sent something that is not a valid answer to what we asked (bad framing, wrong id, truncated). */
export class DnsProtocolError extends DnsError {
  constructor(message: string) {
    super('PROTOCOL', message);
    this.name = 'DnsProtocolError';
  }
}

/** The connection failed or closed early (refused, reset, closed mid-transfer). */
export class DnsConnectionError extends DnsError {
  constructor(message: string) {
    super('CONNECTION', message);
    this.name = 'DnsConnectionError';
  }
}

const RCODE_MEANING: Record<string, string> = {
  FORMERR: 'the server could not parse the request',
  SERVFAIL: 'the server failed internally',
  NXDOMAIN: 'a name that must exist does not exist',
  NOTIMP: 'the server does not implement this operation',
  REFUSED:
    'the server refused the request (policy: key not allowed for this zone/name/type, zone not writable or transferable; BIND also refuses an update adding an MX, or an apex NS, whose in-zone target has no address record)',
  YXDOMAIN: 'a name that must not exist exists',
  YXRRSET: 'an RRset that must not exist exists',
  NXRRSET: 'an RRset that must exist does not exist',
  NOTAUTH: 'the server is not authoritative for the zone (or the request is not authorized)',
  NOTZONE: 'a name in the request is not within the zone',
};

/**
 * The server answered with a non-success RCODE. For UPDATE, YXDOMAIN/YXRRSET/NXDOMAIN/NXRRSET
 * mean a prerequisite failed and nothing was changed (RFC 2136 §3.2).
 */
export class DnsRcodeError extends DnsError {
  readonly rcode: number;
  constructor(
    rcode: number,
    readonly operation: string,
    detail?: string,
  ) {
    const name = rcodeName(rcode);
    super(name, `${operation}: ${name}: ${detail ?? RCODE_MEANING[name] ?? 'error'}`);
    this.rcode = rcode;
    this.name = 'DnsRcodeError';
  }

  /** True when an UPDATE prerequisite failed (no change was made). */
  get prerequisiteFailed(): boolean {
    return this.operation === 'UPDATE' && [3, 6, 7, 8].includes(this.rcode);
  }
}

/** TSIG error codes as they travel in the TSIG RR's Error field (RFC 8945 §3, IANA registry). */
export const TSIG_ERROR_CODES = { BADSIG: 16, BADKEY: 17, BADTIME: 18, BADTRUNC: 22 } as const;

export type TsigErrorCode =
  | 'BADSIG' // MAC did not verify (ours rejected by the server, or theirs by us)
  | 'BADKEY' // unknown key / algorithm, or the answer was signed with another key
  | 'BADTIME' // time signed outside the fudge window
  | 'BADTRUNC' // MAC truncated below the allowed length
  | 'UNSIGNED' // a signed request got an unsigned answer (or a stream ended unsigned)
  | 'MALFORMED' // the TSIG RR itself could not be parsed or is misplaced
  | 'OTHER'; // another non-zero TSIG error from the server

/**
 * TSIG failure. `source` tells who detected it: `server` (the server's TSIG RR carried the error,
 * i.e. it rejected our request) or `local` (we rejected the server's signature).
 */
export class TsigError extends DnsError {
  constructor(
    readonly tsigCode: TsigErrorCode,
    readonly source: 'server' | 'local',
    message: string,
    readonly tsigErrorNumber?: number,
  ) {
    super(tsigCode, message);
    this.name = 'TsigError';
  }
}

/** Read-back after an UPDATE that the server acknowledged found the zone not in the expected state. */
export class UpdateNotAppliedError extends DnsError {
  constructor(readonly mismatches: Array<{ name: string; type: string; rdata?: string; problem: string }>) {
    super(
      'NOT_APPLIED',
      `the server acknowledged the update but read-back disagrees: ${mismatches
        .map((m) => `${m.name} ${m.type}${m.rdata ? ` ${m.rdata}` : ''}: ${m.problem}`)
        .join('; ')}`,
    );
    this.name = 'UpdateNotAppliedError';
  }
}

/**
 * An UPDATE was sent but no answer came (the connection dropped, or the wait ran out): the server
 * may have applied it, may apply it later (a stopped server resumes), or may never see it. Only a
 * read-back can tell, and a read-back that does not show it yet proves nothing.
 */
export class DnsOutcomeUnknownError extends DnsError {
  constructor(
    readonly operation: string,
    override readonly cause: DnsConnectionError | DnsTimeoutError,
  ) {
    super('OUTCOME_UNKNOWN', `${operation}: sent, but no answer came (${cause.message})`);
    this.name = 'DnsOutcomeUnknownError';
  }
}
