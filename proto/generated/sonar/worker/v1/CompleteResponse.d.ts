// Original file: worker.proto

import type { ClaimResponse as _sonar_worker_v1_ClaimResponse, ClaimResponse__Output as _sonar_worker_v1_ClaimResponse__Output } from '../../../sonar/worker/v1/ClaimResponse.js';

export interface CompleteResponse {
  /**
   * True when this attempt had already been completed with the same outcome.
   */
  'duplicate'?: (boolean);
  /**
   * The job's status afterwards.
   */
  'status'?: (string);
  /**
   * Contract 4, with claim_next: the claim made after the completion (has_job false when nothing
   * was found or looked for, or when the claim could not be made: an unknown session, a database
   * error; the worker then calls Claim, a long poll, which reports the cause). Absent when claim_next was not asked for
   * (or the coordinator predates contract 4): call Claim. A next job whose answer is lost is
   * recovered like any claimed job whose worker never heard of it: its lease expires.
   */
  'next'?: (_sonar_worker_v1_ClaimResponse | null);
}

export interface CompleteResponse__Output {
  /**
   * True when this attempt had already been completed with the same outcome.
   */
  'duplicate': (boolean);
  /**
   * The job's status afterwards.
   */
  'status': (string);
  /**
   * Contract 4, with claim_next: the claim made after the completion (has_job false when nothing
   * was found or looked for, or when the claim could not be made: an unknown session, a database
   * error; the worker then calls Claim, a long poll, which reports the cause). Absent when claim_next was not asked for
   * (or the coordinator predates contract 4): call Claim. A next job whose answer is lost is
   * recovered like any claimed job whose worker never heard of it: its lease expires.
   */
  'next': (_sonar_worker_v1_ClaimResponse__Output | null);
}
